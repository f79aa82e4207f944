"""Answer passage retrieval (CDV): sentences, losses, protocol, training, index, CLI — tiny models, no downloads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from medrank.data.medquad import corpus_from_documents, load_medquad_documents
from medrank.pipelines.passages.losses import ListwiseSoftmaxLoss, PseudoHuberLoss
from medrank.pipelines.passages.protocol import build_candidates, fuse, rerank, score_run
from medrank.pipelines.passages.text import build_sentence_table, split_sentences
from medrank.records import Document, Passage
from tests.test_medquad import make_medquad_root, write_doc


@pytest.fixture
def medquad_root(tmp_path: Path) -> Path:
    return make_medquad_root(tmp_path)


# -- sentences ------------------------------------------------------------------------------------------


def test_split_sentences_lists_and_long_sentences() -> None:
    s = split_sentences("What is it? It is rare. Signs include - Fever - Cough (dry)")
    assert s == [("What is it?", False), ("It is rare.", False), ("Signs include", False), ("Fever", True),
                 ("Cough (dry)", True)]
    long = " ".join(f"w{i}" for i in range(10))
    assert [t for t, _ in split_sentences(long, max_tokens=4)] == ["w0 w1 w2 w3", "w4 w5 w6 w7", "w8 w9"]
    with pytest.raises(ValueError):
        split_sentences("x", max_tokens=0)


def test_sentence_table_offsets_and_flags() -> None:
    docs = [
        Document("d1", "A", (Passage("p1", "One. Two.", "d1", 0, "information"), Passage("p2", "Three.", "d1", 1, "symptoms"))),
        Document("d2", "B", (Passage("p3", "Four - five", "d2", 0, "treatment"),)),
    ]
    t = build_sentence_table(docs)
    assert t.texts == ["One.", "Two.", "Three.", "Four", "five"]
    assert t.passage_offsets.tolist() == [0, 2, 3, 5]
    assert t.doc_offsets.tolist() == [0, 3, 5] and t.doc_passage_offsets.tolist() == [0, 2, 3]
    assert t.sentence_passage.tolist() == [0, 0, 1, 2, 2]
    # doc_begin, doc_end, par_begin, par_end, list_item
    assert t.flags.tolist() == [
        [1, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 1, 1, 1, 0], [1, 0, 1, 0, 0], [0, 1, 0, 1, 1],
    ]


# -- losses (hand-computed) -----------------------------------------------------------------------------


def test_pseudo_huber_hand_computed() -> None:
    pred = torch.tensor([[0.0, 0.0]])
    target = torch.tensor([[1.0, 3.0]])
    # δ = 1: (sqrt(2) − 1) + (sqrt(10) − 1)
    assert PseudoHuberLoss(1.0)(pred, target).item() == pytest.approx(math.sqrt(2) - 1 + math.sqrt(10) - 1, rel=1e-6)
    # δ = 2: 4·(sqrt(1.25) − 1) + 4·(sqrt(3.25) − 1)
    expected = 4 * (math.sqrt(1.25) - 1) + 4 * (math.sqrt(3.25) - 1)
    assert PseudoHuberLoss(2.0)(pred, target).item() == pytest.approx(expected, rel=1e-6)
    # masked mean over positions: the second (masked) position contributes nothing
    p = torch.zeros(1, 2, 2)
    t = torch.tensor([[[1.0, 3.0], [100.0, 100.0]]])
    m = torch.tensor([[1.0, 0.0]])
    assert PseudoHuberLoss(1.0)(p, t, m).item() == pytest.approx(math.sqrt(2) - 1 + math.sqrt(10) - 1, rel=1e-6)
    # small errors ≈ ½ e², large ≈ δ|e|
    assert PseudoHuberLoss(1.0)(torch.zeros(1, 1), torch.full((1, 1), 1e-3)).item() == pytest.approx(0.5e-6, rel=1e-3)
    with pytest.raises(ValueError):
        PseudoHuberLoss(0.0)
    with pytest.raises(ValueError):
        PseudoHuberLoss()(torch.zeros(2), torch.zeros(3))


def test_listwise_softmax_hand_computed() -> None:
    loss = ListwiseSoftmaxLoss()(torch.tensor([[2.0, 0.0, 0.0]]))
    assert loss.item() == pytest.approx(math.log(1 + 2 * math.exp(-2)), rel=1e-6)
    assert ListwiseSoftmaxLoss(2.0)(torch.tensor([[2.0, 0.0]])).item() == pytest.approx(math.log(1 + math.exp(-1)), rel=1e-6)
    with pytest.raises(ValueError):
        ListwiseSoftmaxLoss()(torch.zeros(3))


# -- protocol -------------------------------------------------------------------------------------------


def _corpus(n_docs: int = 12):
    words = ["fever", "cough", "rash", "pain", "nausea", "itch"]
    docs = []
    for i in range(n_docs):
        e = f"disease{i}"
        passages = tuple(
            Passage(f"d{i}-{j}", f"{e} {a} " + " ".join(words[(i + j + k) % 6] for k in range(5)), f"d{i}", j, a,
                    {"queryable": True})
            for j, a in enumerate(["information", "symptoms", "treatment"])
        )
        docs.append(Document(f"d{i}", e, passages, {"entity": e}))
    return corpus_from_documents(docs, "toy")


def test_candidates_insert_true_answers_over_lowest_false_and_shuffle() -> None:
    corpus = _corpus()
    cands = build_candidates(corpus, k=5, seed=1)
    again = build_candidates(corpus, k=5, seed=1)
    assert cands == again
    for q in corpus.queries:
        c = cands[q.id]
        assert len(c) == 5 and len(set(c)) == 5
        assert corpus.qrels.relevant(q.id) <= set(c)
    # the insertion overwrites the bottom of the BM25 list: with k=1 the candidate is the answer itself
    assert all(cands1 == sorted(corpus.qrels.relevant(q)) for q, cands1 in build_candidates(corpus, k=1).items())
    # shuffled: the positive is not always at the BM25 top position
    positions = [cands[q.id].index(next(iter(corpus.qrels.relevant(q.id)))) for q in corpus.queries]
    assert len(set(positions)) > 1


def test_rerank_fuse_and_metrics() -> None:
    corpus = _corpus(3)
    cands = {q.id: sorted(corpus.qrels.relevant(q.id)) + ["x1", "x2"] for q in corpus.queries}
    perfect = {q: np.array([1.0, 0.0, 0.0]) for q in cands}
    worst = {q: np.array([0.0, 1.0, 0.5]) for q in cands}
    assert score_run(corpus, rerank(perfect, cands))["R@1"] == 1.0
    m = score_run(corpus, rerank(worst, cands))
    assert m["R@1"] == 0.0 and m["MAP"] == pytest.approx(1 / 3, abs=1e-4)
    fused = fuse([(perfect, 0.9), (worst, 0.1)])
    assert score_run(corpus, rerank(fused, cands))["R@1"] == 1.0


# -- GloVe, label space, model --------------------------------------------------------------------------


def test_glove_average_and_label_space(tiny_encoder) -> None:
    from medrank.pipelines.passages.features import GloVe
    from medrank.pipelines.passages.model import LabelSpace

    g = GloVe(["fever", "cough"], np.array([[1.0, 0.0], [0.0, 2.0]], dtype=np.float32))
    out = g.encode(["Fever cough", "unknown"], normalize=False)
    assert out.tolist() == [[0.5, 1.0], [0.0, 0.0]]
    assert np.allclose(np.linalg.norm(g.encode(["fever cough"]), axis=1), 1.0)
    sample = tiny_encoder.encode([f"fever {w}" for w in ["cough", "rash", "pain", "nausea", "itch", "asthma"]] * 3)
    space = LabelSpace.fit(tiny_encoder, sample, dim=4)
    assert space.dim == 4
    space.add_entities([("Asthma", ("asthma attack",))])
    space.add_aspects(["symptoms", "treatment"])
    v = space.entity_vector("  asthma ")
    assert np.allclose(v, space.entities["asthma attack"]) and np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    assert space.entity_vector("stroke").shape == (4,)  # unseen: embedded from the mention
    assert np.allclose(space.aspect_vector("Symptoms"), space.aspects["symptoms"])


def test_cdv_model_shapes_and_padding_invariance() -> None:
    from medrank.pipelines.passages.model import CDVModel

    torch.manual_seed(0)
    model = CDVModel(6, lstm_hidden=8, discourse_dim=5, entity_dim=3, aspect_dim=4).eval()
    x = torch.randn(2, 7, 6)
    z, e, a = model(x, torch.tensor([7, 4]))
    assert z.shape == (2, 7, 5) and e.shape == (2, 7, 3) and a.shape == (2, 7, 4)
    _, e_alone, _ = model(x[1:, :4], torch.tensor([4]))
    assert torch.allclose(e[1, :4], e_alone[0], atol=1e-6)  # padding does not leak into real sentences
    feats = np.random.default_rng(0).normal(size=(11, 6)).astype(np.float32)
    ent, asp = model.encode_documents(feats, np.array([0, 7, 11]), batch_docs=1)
    assert ent.shape == (11, 3) and np.allclose(ent[7:], model(torch.from_numpy(feats[None, 7:]), torch.tensor([4]))[1][0].detach().numpy(), atol=1e-6)


# -- end to end: train, index, ask, evaluate ------------------------------------------------------------


@pytest.fixture
def tiny_encoder_dir(tmp_path: Path, tiny_encoder) -> Path:
    path = tmp_path / "tiny-encoder"
    tiny_encoder.save(path)
    return path


def _grow(root: Path) -> None:
    """Six more small documents, so a document split has both sides."""
    gard = root / "medquad" / "2_GARD_QA"
    for i, name in enumerate(["Diabetes", "Stroke", "Anemia", "Hypertension", "Kidney stones", "Liver cancer"]):
        write_doc(gard, f"00001{i:02d}", name, [
            ("information", f"{name} is a disease. It affects the body."),
            ("symptoms", f"Signs of {name.lower()} include fever - cough - pain"),
            ("treatment", f"{name} treatment uses drugs. Surgery may help."),
        ])


def test_train_index_ask_and_evaluate(medquad_root: Path, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from medrank.pipelines.passages.cdv import TrainedCDV, train_cdv
    from medrank.pipelines.passages.evaluation import evaluate_systems
    from medrank.pipelines.passages.index import CDVIndex, plot_score_curve

    _grow(medquad_root)
    cfg = {
        "task": "cdv", "data_root": str(medquad_root), "encoder": str(tiny_encoder_dir), "use_glove": False,
        "feature_cache": str(tmp_path / "features"), "lstm_hidden": 8, "discourse_dim": 8, "label_dim": 4,
        "epochs": 2, "batch_docs": 2, "valid_fraction": 0.3, "max_sentences": 4,
    }
    run = tmp_path / "run"
    summary = train_cdv(cfg, run, resume=False)
    assert summary["best_epoch"] in (1, 2) and set(summary["valid"]) >= {"R@1", "R@10", "MAP"}
    assert (run / "model" / "cdv.safetensors").exists() and (run / "model" / "label_space.safetensors").exists()
    history = json.loads((run / "history.json").read_text())
    assert [h["epoch"] for h in history] == [0, 1, 2]
    # the feature cache is reused: a second featurizer over the same texts encodes nothing new
    cdv = TrainedCDV(run)
    assert len(cdv.featurizer.store._keys) > 0

    docs = load_medquad_documents(medquad_root)
    index = cdv.build_index(docs, show_progress=False)
    assert index.n_sentences == len(build_sentence_table(docs)) and len(index) == sum(len(d.passages) for d in docs)
    ranking = index.search("Asthma", "symptoms", k=3)
    assert len(ranking) == 3 and list(ranking.scores) == sorted(ranking.scores, reverse=True)
    # passage score = mean of its sentence scores
    q = index.query_vector("Asthma", "symptoms")
    with pytest.raises(ValueError, match="aspect must be a non-empty string"):
        index.search("Asthma", " ")
    with pytest.raises(ValueError, match="query 1: entity must be a non-empty string"):
        index.query_vectors(["Asthma", ""], ["symptoms", "causes"])
    curve = index.score_curve("Asthma", "symptoms", "GARD_0000003")
    for pid, _label, a, b, score in curve["passages"]:
        assert score == pytest.approx(float(np.mean(curve["scores"][a:b])), abs=1e-5)
        assert index.score_candidates(q, [pid])[0] == pytest.approx(score, abs=1e-5)
    plot_score_curve(curve, tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 1000

    index.save(tmp_path / "index")
    loaded = CDVIndex.load(tmp_path / "index")
    again = loaded.search("Asthma", "symptoms", k=3)
    assert again.ids == ranking.ids and np.allclose(again.scores, ranking.scores, atol=1e-6)

    # CLI: index-passages + ask (JSON and table with a plot)
    from medrank.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["--data", str(medquad_root), "index-passages", "--model", str(run), "--out", str(tmp_path / "cli-index")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["ask", "--index", str(tmp_path / "cli-index"), "--entity", "IgA nephropathy",
                              "--aspect", "symptoms", "-k", "2", "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert len(payload["results"]) == 2 and "sentence_scores" in payload["results"][0]
    res = runner.invoke(app, ["ask", "--index", str(tmp_path / "cli-index"), "--entity", "Asthma", "--aspect", "signs",
                              "--plot", str(tmp_path / "ask.png")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ask.png").stat().st_size > 1000
    res = runner.invoke(app, ["ask", "--index", str(tmp_path / "nope"), "--entity", "a", "--aspect", "b"])
    assert res.exit_code == 2

    # evaluation of CDV and the lexical baselines on the documents as a corpus
    corpus = corpus_from_documents(docs, "toy")
    out = evaluate_systems(corpus, ["bm25", "tfidf", "cdv"], cdv_run=run, k=8, show_progress=False)
    assert set(out["systems"]) == {"BM25", "TF-IDF", "CDV"}
    assert set(out["full_corpus"]) == {"BM25", "TF-IDF", "CDV"}
    for m in out["systems"].values():
        assert 0.0 <= m["R@1"] <= m["R@10"] <= 1.0


def test_neural_baselines_train_and_score(medquad_root: Path, tmp_path: Path, monkeypatch) -> None:
    from medrank.pipelines.passages import neural
    from medrank.pipelines.passages.features import GloVe
    from medrank.pipelines.passages.neural import load_neural_ranker, train_neural
    from medrank.pipelines.passages.protocol import evaluate_reranker

    _grow(medquad_root)
    words = ["fever", "cough", "pain", "disease", "symptoms", "treatment", "information", "drugs", "asthma"]
    tiny = GloVe(words, np.random.default_rng(0).normal(size=(len(words), 6)).astype(np.float32))
    monkeypatch.setattr(neural, "_knrm_vocabulary", lambda corpus, limit: (words, tiny.vectors))
    corpus = corpus_from_documents(load_medquad_documents(medquad_root), "toy")
    cands = build_candidates(corpus, k=6)
    for kind in ("dssm", "knrm"):
        cfg = {"model": kind, "data_root": str(medquad_root), "epochs": 1, "queries_per_batch": 4, "group_size": 3,
               "buckets": 512, "valid_fraction": 0.3}
        summary = train_neural(cfg, tmp_path / kind, resume=False)
        assert summary["steps"] > 0
        ranker = load_neural_ranker(tmp_path / kind, corpus)
        res = evaluate_reranker(ranker, corpus, cands)
        assert 0.0 <= res["metrics"]["MAP"] <= 1.0


def test_cross_encoder_scoring_with_tiny_model(medquad_root: Path, tmp_path: Path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    from medrank.pipelines.passages.cross_encoder import CrossEncoderRanker, CrossEncoderScorer
    from medrank.pipelines.passages.protocol import evaluate_reranker
    from tests.conftest import make_tiny_bert

    _, tok = make_tiny_bert()
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(vocab_size=tok.vocab_size, hidden_size=16, num_hidden_layers=1,
                                                     num_attention_heads=2, intermediate_size=32, num_labels=1,
                                                     max_position_embeddings=64)).eval()
    scorer = CrossEncoderScorer(model, tok, max_length=32)
    s = scorer.score_pairs(["fever ; symptoms"] * 3, ["fever cough", "rash", "pain pain pain"], batch_size=2)
    with torch.inference_mode():
        direct = scorer.logits(scorer.features(["fever ; symptoms"], ["rash"]))
    assert s.shape == (3,) and s[1] == pytest.approx(float(direct[0]), abs=1e-5)
    corpus = corpus_from_documents(load_medquad_documents(medquad_root), "toy")
    res = evaluate_reranker(CrossEncoderRanker(scorer, corpus), corpus, build_candidates(corpus, k=4))
    assert set(res["metrics"]) >= {"R@1", "R@10", "MAP"}


def test_glove_label_space_run_reloads_consistently(medquad_root: Path, tiny_encoder_dir: Path, tmp_path: Path) -> None:
    """IDF-GloVe label space + label features: a reloaded run scores validation exactly as during training."""
    from medrank.data.medquad import load_medquad
    from medrank.pipelines.passages.baselines import CDVRanker
    from medrank.pipelines.passages.cdv import TrainedCDV, train_cdv
    from medrank.pipelines.passages.features import GloVeLabelEncoder
    from medrank.pipelines.passages.protocol import evaluate_reranker

    _grow(medquad_root)
    cfg = {
        "task": "cdv", "data_root": str(medquad_root), "encoder": str(tiny_encoder_dir), "use_minilm": False,
        "label_encoder": "glove", "label_features": True, "feature_cache": str(tmp_path / "features"),
        "lstm_hidden": 8, "discourse_dim": 8, "epochs": 1, "batch_docs": 2, "valid_fraction": 0.3,
    }
    summary = train_cdv(cfg, tmp_path / "run", resume=False)
    cdv = TrainedCDV(tmp_path / "run")
    assert isinstance(cdv.space.encoder, GloVeLabelEncoder) and cdv.featurizer.extra_encoder is cdv.space.encoder
    assert cdv.featurizer.dim == cdv.model.config["input_dim"] == 50 + 50 + 5
    valid = load_medquad("valid", medquad_root, valid_fraction=0.3)
    index = cdv.build_index(list(valid.documents), show_progress=False)
    cands = build_candidates(valid, seed=13)
    assert evaluate_reranker(CDVRanker(index), valid, cands)["metrics"]["MAP"] == pytest.approx(summary["valid"]["MAP"], abs=1e-6)
    enc = cdv.space.encoder
    assert enc.idf["fever"] < enc.default_idf  # corpus words weigh less than unseen ones


def test_cascade_reorders_only_the_first_stage_top() -> None:
    from medrank.pipelines.passages.evaluation import cascade

    cands = {"q": ["a", "b", "c", "d"]}
    first = {"q": np.array([4.0, 3.0, 2.0, 1.0])}
    tops = {"q": ["a", "b"]}
    second = {"q": np.array([-5.0, 5.0])}  # the second stage prefers b
    run = rerank(cascade(first, tops, second, cands, weight=0.0), cands)
    assert run["q"].ids == ("b", "a", "c", "d")
    run = rerank(cascade(first, tops, second, cands, weight=1.0), cands)
    assert run["q"].ids == ("a", "b", "c", "d")


# -- CDV index scoring (hand-computed) ------------------------------------------------------------------


def _hand_index(entity_weight: float = 0.5):
    """Six sentences in three passages (2 + 1 + 3) with known (cos entity, cos aspect) per sentence.

    The query entity vector is [1, 0] and the query aspect vector [0, 1], so a sentence stored as
    ``[ce, sqrt(1 - ce²), sqrt(1 - ca²), ca]`` has cos(entity) = ce and cos(aspect) = ca.
    """
    from medrank.pipelines.passages.index import CDVIndex
    from medrank.pipelines.passages.model import LabelSpace
    from medrank.pipelines.passages.text import SentenceTable

    cos = [(1.0, 0.0), (0.0, 0.6), (0.6, 0.8), (0.8, 0.0), (0.0, 1.0), (0.0, 0.0)]
    vectors = np.array([[ce, math.sqrt(1 - ce * ce), math.sqrt(1 - ca * ca), ca] for ce, ca in cos], dtype=np.float32)
    table = SentenceTable(
        texts=[f"s{i}" for i in range(6)], flags=np.zeros((6, 5), dtype=np.float32),
        passage_ids=["p0", "p1", "p2"], passage_offsets=np.array([0, 2, 3, 6]),
        doc_ids=["d0", "d1"], doc_offsets=np.array([0, 3, 6]), doc_passage_offsets=np.array([0, 2, 3]),
    )
    passages = [{"id": "p0", "doc_id": "d0", "label": "a", "text": ""}, {"id": "p1", "doc_id": "d0", "label": "b", "text": ""},
                {"id": "p2", "doc_id": "d1", "label": "c", "text": ""}]
    documents = [{"id": "d0", "title": "D0", "entity": "asthma"}, {"id": "d1", "title": "D1", "entity": "asthma"}]
    space = LabelSpace(None, np.zeros(2, np.float32), np.eye(2, dtype=np.float32),
                       entities={"asthma": np.array([1.0, 0.0], np.float32)},
                       aspects={"symptoms": np.array([0.0, 1.0], np.float32)})
    return CDVIndex(vectors, table, passages, documents, space, entity_weight=entity_weight), cos


def test_passage_score_is_the_mean_of_its_sentence_scores() -> None:
    index, cos = _hand_index()
    # w = 0.5: sentence scores 0.5, 0.3 | 0.7 | 0.4, 0.5, 0.0 → passage means 0.4 | 0.7 | 0.3
    # (a max over sentences would give 0.5 | 0.7 | 0.5)
    sentence = [0.5 * ce + 0.5 * ca for ce, ca in cos]
    q = index.query_vector("asthma", "symptoms")
    np.testing.assert_allclose(index.sentence_scores(q), sentence, atol=1e-6)
    ranking = index.search("Asthma", "symptoms", k=3)
    assert ranking.ids == ("p1", "p0", "p2")
    np.testing.assert_allclose(ranking.scores, [0.7, 0.4, 0.3], atol=1e-6)
    np.testing.assert_allclose(index.passage_scores(q), [0.4, 0.7, 0.3], atol=1e-6)
    np.testing.assert_allclose(index.passage_scores(q, via_centroids=True), [0.4, 0.7, 0.3], atol=1e-6)
    np.testing.assert_allclose(index.score_candidates(q, ["p1", "p0", "p2"]), ranking.scores, atol=1e-6)
    curve = index.score_curve("asthma", "symptoms", "d1")
    assert curve["passages"][0][4] == pytest.approx(0.3, abs=1e-6)


def test_entity_weight_weighs_the_entity_cosine() -> None:
    # score = w·cos(entity) + (1 − w)·cos(aspect); w = 0.8:
    # sentences 0.8, 0.12 | 0.64 | 0.64, 0.2, 0.0 → passages 0.46 | 0.64 | 0.28
    expected = {"p0": 0.46, "p1": 0.64, "p2": 0.28}
    index, _ = _hand_index(entity_weight=0.8)
    np.testing.assert_allclose(index.query_vector("asthma", "symptoms"), [0.8, 0.0, 0.0, 0.2], atol=1e-7)
    ranking = index.search("asthma", "symptoms", k=3)
    assert ranking.ids == ("p1", "p0", "p2")
    np.testing.assert_allclose(ranking.scores, [expected[p] for p in ranking.ids], atol=1e-6)
    # the same weight passed per call to an index built with the default 0.5, and the batch form
    plain, _ = _hand_index()
    np.testing.assert_allclose(plain.search("asthma", "symptoms", k=3, entity_weight=0.8).scores, ranking.scores, atol=1e-6)
    qs = plain.query_vectors(["asthma", "asthma"], ["symptoms", "symptoms"], entity_weight=0.8)
    np.testing.assert_allclose(qs, [[0.8, 0.0, 0.0, 0.2]] * 2, atol=1e-7)
    # w = 0.2 puts the weight on the aspect: 0.2, 0.48 | 0.76 | 0.16, 0.8, 0.0 → 0.34 | 0.76 | 0.32
    np.testing.assert_allclose(plain.passage_scores(plain.query_vector("asthma", "symptoms", 0.2)), [0.34, 0.76, 0.32], atol=1e-6)
