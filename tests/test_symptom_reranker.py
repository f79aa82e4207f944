"""The symptom term re-ranker: groups, sampling, re-ordering, wrapping a search, saving and loading."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from medrank.pipelines.symptom.reranker import META_FILE, META_FORMAT, TERM_TEXT, TermReranker, term_text
from medrank.pipelines.symptom.reranker_training import (
    RerankerSettings,
    TrainingGroup,
    reranked_accuracy,
    sample_group,
    training_groups,
)
from medrank.records import Concept
from tests.conftest import make_tiny_bert


class TableScorer:
    """Scores a pair by a table keyed on the term text (unknown texts 0); records what it was asked."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[list[str], list[str]]] = []

    def score_pairs(self, queries, texts):
        self.calls.append((list(queries), list(texts)))
        return np.array([self.table.get(t, 0.0) for t in texts], dtype=np.float32)


CONCEPTS = {
    "HP:1": Concept("HP:1", "Rhinorrhea", meta={"definition": "Discharge of mucus from the nose. More text here."}),
    "HP:2": Concept("HP:2", "Epistaxis"),
    "HP:3": Concept("HP:3", "Night gasping", meta={"definition": "Waking up at night gasping for breath"}),
}


def test_a_term_is_written_as_its_name_and_first_definition_sentence() -> None:
    assert term_text(CONCEPTS["HP:1"]) == "Rhinorrhea: Discharge of mucus from the nose"
    assert term_text(CONCEPTS["HP:2"]) == "Epistaxis"


def test_rerank_orders_the_top_depth_by_the_cross_encoder_and_keeps_the_rest_below() -> None:
    scorer = TableScorer({"Epistaxis": 2.0, "Rhinorrhea: Discharge of mucus from the nose": 5.0})
    reranker = TermReranker(scorer, CONCEPTS, depth=2)
    hits = [[("HP:2", 0.9), ("HP:1", 0.8), ("HP:3", 0.7)]]
    out = reranker.rerank(["runny nose"], hits)
    assert [c for c, _ in out[0]] == ["HP:1", "HP:2", "HP:3"]
    # re-ranked scores are the logits; below the depth, the first stage's order under the lowest logit
    assert out[0][0][1] == 5.0 and out[0][1][1] == 2.0 and out[0][2][1] == 1.0
    # only the top depth were scored, each with the query
    assert scorer.calls == [(["runny nose", "runny nose"], ["Epistaxis", "Rhinorrhea: Discharge of mucus from the nose"])]


def test_rerank_takes_one_hit_list_per_query_and_empty_lists() -> None:
    reranker = TermReranker(TableScorer({}), CONCEPTS, depth=3)
    assert reranker.rerank(["a", "b"], [[], [("HP:9", 1.0)]]) == [[], [("HP:9", 0.0)]]  # an unknown id reads as itself
    with pytest.raises(ValueError, match="2 queries but 1 hit lists"):
        reranker.rerank(["a", "b"], [[]])
    with pytest.raises(ValueError, match="depth"):
        TermReranker(TableScorer({}), CONCEPTS, depth=0)


def test_training_groups_keep_gold_out_of_the_negatives() -> None:
    groups = training_groups(["runny nose"], [{"HP:1"}], [["HP:1", "HP:2", "HP:3", "HP:4"]],
                             lambda t: ["HP:1", "HP:5"], negatives_from=2)
    assert groups == [TrainingGroup("runny nose", "HP:1", ("HP:2", "HP:3"), ("HP:5",))]


def test_sample_group_puts_gold_first_and_fills_from_siblings_then_the_vocabulary() -> None:
    rng = random.Random(0)
    group = TrainingGroup("runny nose", "HP:1", ("HP:2", "HP:3"), ("HP:5",))
    for _ in range(20):
        drawn = sample_group(group, 5, 1.0, ["HP:1", "HP:2", "HP:3", "HP:5", "HP:6", "HP:7", "HP:8"], rng)
        assert drawn[0] == "HP:1" and len(drawn) == 5 and len(set(drawn)) == 5
        assert {"HP:2", "HP:3", "HP:5"} <= set(drawn)  # the pool and, with share 1, the sibling
    # with a full pool and share 1, the sibling takes the last place
    drawn = sample_group(TrainingGroup("x", "HP:1", ("HP:2", "HP:3"), ("HP:5",)), 3, 1.0, ["HP:9"], rng)
    assert drawn[0] == "HP:1" and drawn[2] == "HP:5"
    drawn = sample_group(TrainingGroup("x", "HP:1", ("HP:2", "HP:3"), ("HP:5",)), 3, 0.0, ["HP:9"], rng)
    assert set(drawn[1:]) == {"HP:2", "HP:3"}


def test_reranked_accuracy_against_hand_counts() -> None:
    scorer = TableScorer({"Epistaxis": 1.0, "Rhinorrhea: Discharge of mucus from the nose": 2.0})
    reranker = TermReranker(scorer, CONCEPTS, depth=2)
    hits = [[("HP:2", 0.9), ("HP:1", 0.8)], [("HP:2", 0.9), ("HP:3", 0.5)]]
    got = reranked_accuracy(reranker, ["runny nose", "nose bleed"], [{"HP:1"}, {"HP:2"}], hits)
    # re-ranked: HP:1 (2.0) over HP:2 (1.0) for the first, HP:2 (1.0) over HP:3 (0.0) for the second: both right;
    # first stage: HP:2 first for both: 1 of 2 right, and both golds within the top 5
    assert got["acc@1"] == 1.0 and got["first_stage_acc@1"] == 0.5 and got["first_stage_acc@5"] == 1.0


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="group"):
        RerankerSettings(group=1)
    with pytest.raises(ValueError, match="sibling_share"):
        RerankerSettings(sibling_share=2.0)
    with pytest.raises(ValueError, match="unknown re-ranker settings"):
        RerankerSettings.from_dict({"dept": 3})


def test_a_saved_reranker_loads_and_scores_like_the_model_it_saved(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    from medrank.models.pair_classifier import PairScorer

    _, tok = make_tiny_bert()
    cfg = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=64, num_labels=1)
    model = BertForSequenceClassification(cfg).eval()
    folder = TermReranker.folder(tmp_path / "run")
    model.save_pretrained(str(folder / "model"))
    tok.save_pretrained(str(folder / "model"))
    assert not TermReranker.exists(tmp_path / "run")
    with pytest.raises(FileNotFoundError, match="no trained re-ranker"):
        TermReranker.load(tmp_path / "run", CONCEPTS)
    meta = {"format": META_FORMAT, "term_text": TERM_TEXT, "max_length": 32, "depth": 2}
    (folder / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    loaded = TermReranker.load(tmp_path / "run", CONCEPTS)
    assert loaded.depth == 2 and loaded.info["backend"] == "torch"
    hits = [[("HP:1", 0.9), ("HP:2", 0.8)]]
    expected = PairScorer(model, tok, 32).score_pairs(["fever", "fever"], [loaded.text("HP:1"), loaded.text("HP:2")])
    got = dict(loaded.rerank(["fever"], hits)[0])
    assert np.allclose([got["HP:1"], got["HP:2"]], expected, atol=1e-5)
    (folder / META_FILE).write_text(json.dumps({**meta, "term_text": "name only"}), encoding="utf-8")
    with pytest.raises(ValueError, match="train it again"):
        TermReranker.load(tmp_path / "run", CONCEPTS)


def test_a_set_detector_reranks_the_hits_of_each_span_and_not_of_the_whole_text() -> None:
    from medrank.pipelines.symptom.sets import BASE_FEATURES, SetCalibration, SetDetector

    concepts = {"A": Concept("A", "Rhinitis"), "B": Concept("B", "Rhinorrhea"), "C": Concept("C", "Sore throat")}

    def search(texts, k):
        # the first stage puts the wrong term first for "runny nose"
        table = {"runny nose": ["A", "B"], "sore throat": ["C", "A"]}
        return [[(cid, 0.9 - 0.1 * r) for r, cid in enumerate(table.get(t, ["A", "B", "C"])[:k])] for t in texts]

    scorer = TableScorer({"Rhinorrhea": 4.0, "Rhinitis": -1.0, "Sore throat": 3.0})
    n = len(BASE_FEATURES)
    weights = [2.0 if f == "span_top1" else 0.0 for f in BASE_FEATURES]
    cal = SetCalibration([0.0] * n, [1.0] * n, weights, -1.0, threshold=0.5)
    names = {cid: c.name for cid, c in concepts.items()}
    text = "runny nose and a sore throat"
    plain = SetDetector(search, names, language="en", calibration=cal).detect(text)
    reranked = SetDetector(search, names, language="en", calibration=cal,
                           reranker=TermReranker(scorer, concepts, depth=2)).detect(text)
    assert {t.name for t in plain.terms} == {"Rhinitis", "Sore throat"}
    assert {t.name for t in reranked.terms} == {"Rhinorrhea", "Sore throat"}
    assert sorted(q for q, _ in [(q, t) for call in scorer.calls for q, t in zip(*call, strict=True)]) == \
        ["runny nose", "runny nose", "sore throat", "sore throat"]  # the spans only, never the whole text
    assert list(reranked.ranking) == search([text], 10)[0]
    with pytest.raises(ValueError, match="k must be at least"):
        SetDetector(search, names, language="en", reranker=TermReranker(scorer, concepts, depth=20))


def test_the_first_stage_weight_blends_scores_and_is_chosen_on_validation() -> None:
    from medrank.pipelines.symptom.reranker_training import choose_first_stage_weight

    # the cross-encoder prefers the wrong term by a little, the first stage the right one by a lot
    scorer = TableScorer({"Epistaxis": 1.0, "Rhinorrhea: Discharge of mucus from the nose": 0.5})
    hits = [[("HP:1", 0.9), ("HP:2", 0.5)]]
    alone = TermReranker(scorer, CONCEPTS, depth=2).rerank(["runny nose"], hits)[0]
    assert alone[0][0] == "HP:2"
    blended = TermReranker(scorer, CONCEPTS, depth=2, first_stage_weight=5.0).rerank(["runny nose"], hits)[0]
    assert blended == [("HP:1", 0.5 + 5.0 * 0.9), ("HP:2", 1.0 + 5.0 * 0.5)]
    w = choose_first_stage_weight(TermReranker(scorer, CONCEPTS, depth=2), ["runny nose"], [{"HP:1"}], hits,
                                  weights=(0.0, 1.0, 2.0, 4.0))
    assert w == 2.0  # 0.5 + 2 * 0.9 = 2.3 > 1.0 + 2 * 0.5 = 2.0; with 1.0: 1.4 < 1.5
    with pytest.raises(ValueError, match="first_stage_weight"):
        TermReranker(scorer, CONCEPTS, first_stage_weight=-1.0)


def test_training_says_what_first_stage_it_needs(tmp_path: Path) -> None:
    from medrank.pipelines.symptom.reranker_training import train_term_reranker

    with pytest.raises(ValueError, match="needs first_stage"):
        train_term_reranker({"task": "symptom-reranker"}, tmp_path / "out")
    with pytest.raises(FileNotFoundError, match="not a finished symptom run"):
        train_term_reranker({"first_stage": str(tmp_path / "nothing")}, tmp_path / "out")
    run = tmp_path / "cdn"
    (run / "index-vocab").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "symptom", "name": "cdn", "dataset": "chip-cdn"}), encoding="utf-8")
    with pytest.raises(ValueError, match="hpo-layperson runs"):
        train_term_reranker({"first_stage": str(run)}, tmp_path / "out")
    (run / "config.json").write_text(json.dumps({"task": "symptom", "name": "hpo", "dataset": "hpo-layperson"}),
                                     encoding="utf-8")
    with pytest.raises(ValueError, match="unknown re-ranker settings"):
        train_term_reranker({"first_stage": str(run), "dept": 5}, tmp_path / "out")
