"""The mine → train → re-mine loop end to end on a tiny CHIP-CDN-format fixture and a tiny BERT."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from medrank.encoders import TransformerEncoder
from medrank.pipelines.symptom.config import SymptomConfig
from medrank.pipelines.symptom.task import MiningCallback, SymptomTask, with_knowledge_base_queries
from medrank.pipelines.symptom.training import make_trainer, train_symptom
from medrank.training import Callback
from tests.conftest import make_tiny_bert

TERMS = ["头痛", "头晕", "高血压", "糖尿病", "心肌梗死", "乳腺癌", "膝关节炎", "咳嗽", "发热", "胸痛", "背痛", "心肌炎"]
RECORDS = [
    ("头痛", "头痛"),
    ("头痛头晕", "头痛##头晕"),
    ("头晕", "头晕"),
    ("高血压病", "高血压"),
    ("高血压糖尿病", "高血压##糖尿病"),
    ("糖尿病", "糖尿病"),
    ("急性心肌梗死", "心肌梗死"),
    ("心梗", "心肌梗死"),
    ("乳腺癌", "乳腺癌"),
    ("右乳腺癌", "乳腺癌"),
    ("膝关节炎", "膝关节炎"),
    ("左膝关节炎", "膝关节炎"),
    ("咳嗽发热", "咳嗽##发热"),
    ("发热", "发热"),
    ("咳嗽", "咳嗽"),
    ("胸痛", "胸痛"),
    ("背痛", "背痛"),
    ("胸背痛", "胸痛##背痛"),
    ("心肌炎", "心肌炎"),
    ("病毒性心肌炎", "心肌炎"),
]


@pytest.fixture
def tiny_root(tmp_path):
    """A data root with a CHIP-CDN-format dataset and a saved tiny encoder."""
    root = tmp_path / "data"
    folder = root / "chip-cdn"
    folder.mkdir(parents=True)
    with open(folder / "icd10_beijing_v601.tsv", "w", encoding="utf-8") as fh:
        fh.write("code\tname\n")
        for i, t in enumerate(TERMS):
            fh.write(f"X{i:02d}.000\t{t}\n")
    with open(folder / "train.jsonl", "w", encoding="utf-8") as fh:
        for _ in range(2):  # 40 records, 20 distinct texts
            for text, gold in RECORDS:
                fh.write(json.dumps({"text": text + ("" if _ == 0 else "病"), "normalized_result": gold}, ensure_ascii=False) + "\n")
    model, tok = make_tiny_bert(seed=0, layers=2)
    TransformerEncoder(model, tok, pooling="mean", query_prompt="", passage_prompt="").save(tmp_path / "tiny-model")
    return tmp_path


def config(tmp, **over) -> SymptomConfig:
    cfg = dict(
        name="tiny-bi-hardnce",
        dataset="chip-cdn",
        encoder=str(tmp / "tiny-model"),
        max_length=16,
        loss="bi-hardnce",
        miner="hd-sampling",
        efn=True,
        n_hard_queries=2,
        n_hard_terms=2,
        pool=6,
        batch_size=4,
        lr=1e-3,
        epochs=2,
        max_steps_per_epoch=4,
        train_layers=1,
        eval_candidates=["gold", "vocab"],
        data_root=str(tmp / "data"),
        cache_dir=str(tmp / "cache"),
        show_progress=False,
        seed=3,
    )
    cfg.update(over)
    return SymptomConfig.from_dict(cfg)


def test_config_validation():
    with pytest.raises(ValueError, match="unknown symptom config"):
        SymptomConfig.from_dict({"lossy": "x"})
    with pytest.raises(ValueError, match="needs a miner"):
        SymptomConfig.from_dict({"loss": "bi-hardnce", "miner": "none", "efn": False})
    with pytest.raises(ValueError, match="efn only applies"):
        SymptomConfig.from_dict({"loss": "bi-nce", "miner": "none", "efn": True})
    cfg = SymptomConfig.from_dict({"loss": "bi-nce", "miner": "none", "efn": False})
    assert not cfg.uses_term_negatives and not cfg.uses_query_negatives
    cfg = SymptomConfig.from_dict({"loss": "nce-backward", "miner": "topk", "efn": False})
    assert cfg.uses_query_negatives and not cfg.uses_term_negatives
    with pytest.raises(ValueError, match="extra_queries must be a list"):
        SymptomConfig.from_dict({"dataset": "hpo-layperson", "extra_queries": "synonyms"})
    with pytest.raises(ValueError, match="extra_queries must be among"):
        SymptomConfig.from_dict({"dataset": "hpo-layperson", "extra_queries": ["names"]})
    with pytest.raises(ValueError, match="only applies to dataset 'hpo-layperson'"):
        SymptomConfig.from_dict({"dataset": "chip-cdn", "extra_queries": ["synonyms"]})


def test_knowledge_base_queries_are_only_of_training_terms():
    from medrank.records import Concept, ConceptDataset, Qrels, Query

    vocabulary = (
        Concept("HP:1", "Epistaxis", ("Nose bleed", "Nosebleed"), (), {"definition": "Bleeding from the nose. More."}),
        Concept("HP:2", "Bradycardia", ("Slow heart rate",), (), {"definition": "A slow heart rate."}),
    )
    train = ConceptDataset("t", (Query("q1", "nosebleed", {"term": "HP:1"}),), Qrels({"q1": {"HP:1": 1}}), vocabulary)
    out = with_knowledge_base_queries(train, vocabulary, ["synonyms", "definitions"])
    added = [(q.text, sorted(out.qrels.relevant(q.id))) for q in out.queries[1:]]
    # "Nosebleed" repeats the training query (case aside); HP:2 has no training query, so none of its texts
    assert added == [("Nose bleed", ["HP:1"]), ("Bleeding from the nose", ["HP:1"])]
    assert out.qrels.relevant("q1") == {"HP:1"} and out.vocabulary == vocabulary
    only_synonyms = with_knowledge_base_queries(train, vocabulary, ["synonyms"])
    assert [q.text for q in only_synonyms.queries] == ["nosebleed", "Nose bleed"]


def test_bi_hardnce_run_end_to_end(tiny_root, monkeypatch):
    out = tiny_root / "run"
    summary = train_symptom(config(tiny_root), out, resume=True)
    hist = json.loads((out / "history.json").read_text())
    assert [h["epoch"] for h in hist] == [0, 1, 2]
    assert all("ndcg@5" in h and "recall@5" in h for h in hist)
    assert all("efn_beta" in h and "mining_seconds" in h for h in hist[1:])  # beta logged per epoch
    efn = json.loads((out / "efn.json").read_text())
    assert [r["epoch"] for r in efn] == [1, 2] and efn[1]["alpha"] > efn[0]["alpha"]
    assert set(summary["results"]) == {"gold", "vocab"}
    assert (out / "curve.png").stat().st_size > 1000
    # checkpoints hold only the trainable top block, as safetensors
    ckpt = sorted((out / "checkpoints").glob("epoch-*"))[-1]
    keys = load_file(str(ckpt / "model.safetensors"))
    assert keys and all(k.startswith("encoder.top_layers.") for k in keys)
    # the saved encoder + index answer through the core `medrank evaluate --index` protocol
    from medrank.cli import app

    runner = CliRunner()
    res = runner.invoke(
        app,
        ["--data", str(tiny_root / "data"), "evaluate", "--dataset", "chip-cdn", "--split", "valid", "--index", str(out / "index-gold")],
    )
    assert res.exit_code == 0, res.output
    ndcg = float(res.output.split("ndcg@5=")[1].split()[0])
    assert ndcg == pytest.approx(summary["results"]["gold"]["metrics"]["ndcg@5"], abs=1e-3)
    # training fitted the set decision on the validation texts: medrank detect decides sets by default
    assert (out / "sets-vocab.json").exists() and summary["results"]["vocab"]["sets"]["file"] == "sets-vocab.json"
    # ... reading the memory of the training side (never of the validation texts it is fitted on)
    from medrank.pipelines.symptom.sets import MEMORY_FEATURES, SetCalibration, SetDetector

    memory = json.loads((out / "sets-memory.json").read_text())
    assert memory["n_texts"] == summary["train_queries"]
    assert set(MEMORY_FEATURES) <= set(SetCalibration.load(out / "sets-vocab.json").features)
    assert SetDetector.from_run(out, "vocab").memory is not None
    res = runner.invoke(app, ["detect", "--model", str(out), "--json", "头痛", "高血压"])
    assert res.exit_code == 0, res.output
    assert [set(row) for row in json.loads(res.stdout)] == [{"query", "terms", "alternatives"}] * 2
    # text in another language than the run's is reported, not detected (exit 1), unless --language says to
    res = runner.invoke(app, ["detect", "--model", str(out), "--json", "J'ai mal à la tête depuis deux jours", "头痛",
                              "headache and fever"])
    assert res.exit_code == 1, res.output
    rows = json.loads(res.stdout)
    assert "reads as French" in rows[0]["error"] and "terms" in rows[1] and "this model reads Chinese" in rows[2]["error"]
    res = runner.invoke(app, ["detect", "--model", str(out), "--ranking", "J'ai mal à la tête depuis deux jours"])
    assert res.exit_code == 1 and "not detected" in res.output
    res = runner.invoke(app, ["detect", "--model", str(out), "--language", "zh", "--json", "headache and fever"])
    assert res.exit_code == 0 and "terms" in json.loads(res.stdout)[0]
    # --ranking: top-5 terms, and thresholding with beta
    res = runner.invoke(app, ["detect", "--model", str(out), "--ranking", "--json", "头痛", "高血压"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 2 and len(rows[0]["results"]) == 5
    res = runner.invoke(app, ["detect", "--model", str(out), "--beta", "2.0", "--json", "头痛"])
    assert json.loads(res.stdout)[0]["results"] == []
    res = runner.invoke(
        app, ["--data", str(tiny_root / "data"), "detect", "--model", str(out), "--alpha", "0.01", "--json", "头痛"]
    )
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)[0]["results"]) >= 1  # precision 1 % is met by any threshold
    res = runner.invoke(app, ["detect", "--model", str(tiny_root), "头痛"])
    assert res.exit_code == 2 and "not a trained symptom run" in res.output


def test_interrupted_run_resumes_to_the_same_weights(tiny_root):
    full_out, cut_out = tiny_root / "full", tiny_root / "cut"
    cfg = config(tiny_root, epochs=2, max_steps_per_epoch=2, eval_candidates=["gold"], save_model=False)
    train_symptom(cfg, full_out, resume=False)

    class Interrupt(Callback):
        def on_epoch_end(self, trainer, epoch, metrics):
            trainer.stop_training = epoch == 1

    task = SymptomTask(cfg, cut_out)
    trainer = make_trainer(task, cfg, cut_out)
    trainer.callbacks.append(Interrupt())
    trainer.fit()
    assert trainer.state.epoch == 1
    train_symptom(cfg, cut_out, resume=True)
    a = load_file(str(full_out / "checkpoints" / "epoch-2" / "model.safetensors"))
    b = load_file(str(cut_out / "checkpoints" / "epoch-2" / "model.safetensors"))
    for k in a:
        torch.testing.assert_close(a[k], b[k])
    ha = json.loads((full_out / "history.json").read_text())
    hb = json.loads((cut_out / "history.json").read_text())
    assert [h["efn_beta"] for h in ha[1:]] == [h["efn_beta"] for h in hb[1:]]
    with pytest.raises(ValueError, match="different config"):
        train_symptom(config(tiny_root, epochs=4, max_steps_per_epoch=2, eval_candidates=["gold"]), cut_out, resume=True)


@pytest.mark.parametrize(
    "over",
    [
        dict(loss="nce-forward", miner="none", efn=False),
        dict(loss="nce-backward", miner="topk", efn=False),
        dict(loss="bi-nce", miner="higher-than-true", efn=True),
        dict(loss="triplet", miner="random", efn=False, n_hard_terms=1),
        dict(loss="contrastive", miner="hd-sampling", efn=True, n_hard_terms=1),
        dict(loss="sentbert", miner="random", efn=False, n_hard_terms=1),
    ],
)
def test_every_loss_and_miner_trains(tiny_root, over):
    cfg = config(tiny_root, epochs=1, max_steps_per_epoch=2, eval_candidates=["gold"], save_model=False, **over)
    task = SymptomTask(cfg, tiny_root / "r")
    trainer = make_trainer(task, cfg, tiny_root / "r")
    assert any(isinstance(c, MiningCallback) for c in trainer.callbacks)
    state = trainer.fit()
    assert state.global_step == 2 and np.isfinite(state.history[-1]["train_loss"])
    task.prepare_epoch(2)
    for batch in task.epoch_batches:
        q = batch["pairs"][:, 0]
        if "neg_terms" in batch:  # no negative is ever a gold term of its query
            for qi, negs, ok in zip(q, batch["neg_terms"], batch["neg_terms_valid"], strict=True):
                assert not set(negs[ok].tolist()) & set(task.pairs.gold[qi].tolist())
        if "neg_queries" in batch:
            for ti, negs, ok in zip(batch["pairs"][:, 1], batch["neg_queries"], batch["neg_queries_valid"], strict=True):
                assert not set(negs[ok].tolist()) & set(task.queries_of_term[ti].tolist())


def test_cross_encoder_baseline_runs(tiny_root):
    cfg = config(
        tiny_root, loss="cross-encoder", miner="random", efn=False, n_hard_terms=1, epochs=1,
        max_steps_per_epoch=2, eval_candidates=["gold"], rerank_depth=5,
    )
    summary = train_symptom(cfg, tiny_root / "ce", resume=False)
    assert "ndcg@5" in summary["results"]["gold"]["metrics"]
    assert summary["results"]["gold"]["first_stage"]["metrics"]["recall@5"] >= 0


def test_detect_answers_from_the_runs_own_index_when_none_is_named(tmp_path):
    from medrank.pipelines.symptom.artefacts import DETECTOR_MARKER, default_candidates

    def run(indexes):
        folder = tmp_path / "-".join(indexes or ["none"])
        folder.mkdir()
        (folder / DETECTOR_MARKER).write_text(json.dumps({"candidates": {n: f"index-{n}" for n in indexes}}))
        return folder

    assert default_candidates(run(["gold", "vocab"])) == "gold"
    assert default_candidates(run(["hpo", "vocab"])) == "hpo"  # an HPO run has no gold index
    assert default_candidates(run(["vocab"])) == "vocab"
    assert default_candidates(tmp_path / "not-a-run") == "gold"  # loading it then says what it is
