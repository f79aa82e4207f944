"""End to end on tiny fixture datasets: word2vec, training (+ transfer), save/load, CLI, retrieval, pair generation."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from medrank.data.questions import QuestionPair
from medrank.pipelines.similar.config import resolve_config
from medrank.pipelines.similar.evaluation import pair_metrics
from medrank.pipelines.similar.experiment import run_experiment
from medrank.pipelines.similar.matchers import CrossEncoderMatcher, NeuralMatcher, load_matcher
from medrank.pipelines.similar.pairs import PairGenerationConfig, generate_pairs
from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher
from medrank.pipelines.similar.text import (
    QuestionTokenizer,
    TokenizerSpec,
    Vocabulary,
    Word2VecConfig,
    train_word2vec,
)

DISEASES = ["糖尿病", "高血压", "乳腺癌", "肝炎", "艾滋病", "冠心病", "哮喘", "胃炎"]
ASPECTS = [("怎么治疗", "的治疗方法"), ("有什么症状", "的症状有哪些"), ("吃什么好", "饮食注意什么"), ("能治好吗", "可以根治吗")]


def fixture_pairs(seed: int = 0) -> list[dict]:
    """Paraphrase positives (same disease + aspect) and negatives (another disease or aspect)."""
    rng = random.Random(seed)
    recs, n = [], 0
    for d in DISEASES:
        for a, (form1, form2) in enumerate(ASPECTS):
            for k in range(3):
                q = f"{d}{form1}" + ("？" * k)
                n += 1
                recs.append({"id": str(n), "text1": q, "text2": f"{d}{form2}" + ("呢" * k), "label": "1", "category": "x"})
                other = rng.choice([x for x in DISEASES if x != d])
                n += 1
                recs.append({"id": str(n), "text1": q, "text2": f"{other}{ASPECTS[(a + 1) % 4][1]}" + ("吧" * k), "label": "0", "category": "x"})
    return recs


@pytest.fixture(autouse=True)
def one_thread():
    # tiny models: one thread is fastest, and avoids oversubscribing a shared machine
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def data_root(tmp_path, monkeypatch):
    root = tmp_path / "data"
    (root / "chip-sts").mkdir(parents=True)
    (root / "chip-sts" / "CHIP-STS_train.json").write_text(json.dumps(fixture_pairs(), ensure_ascii=False), encoding="utf-8")
    (root / "kuake-qqr").mkdir()
    kuake = [{"id": f"s{i}", "query1": f"{d}怎么办", "query2": f"{d}如何处理", "label": "2"} for i, d in enumerate(DISEASES)]
    (root / "kuake-qqr" / "KUAKE-QQR_train.json").write_text(json.dumps(kuake, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setenv("MEDRANK_DATA", str(root))
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    return root


TINY = {"dim": 16, "layers": 1, "heads": 2, "ff_dim": 16, "hidden": 8, "dropout": 0.0}


def tiny_config(model="stmt", **over):
    cfg = {
        "dataset": "chip-sts", "model": model, "word2vec": {"dim": 16, "epochs": 2},
        "arch": {k: v for k, v in TINY.items() if k != "dim"},
        "train": {"epochs": 2, "batch_size": 16, "lr": 0.01, "time_budget_minutes": 5},
    }
    cfg.update(over)
    return cfg


def test_tokenizer_modes():
    zh = QuestionTokenizer(language="zh")
    assert zh("糖尿病HbA1c高") == ["糖", "尿", "病", "hba1c", "高"]
    assert "糖尿病" in QuestionTokenizer(language="zh", zh_mode="jieba")("糖尿病怎么治疗")
    assert QuestionTokenizer(language="en")("What's HbA1c?") == ["what's", "hba1c", "?"]
    with pytest.raises(ValueError, match="language"):
        TokenizerSpec(language="fr")


def test_word2vec_is_deterministic_and_cbow(tmp_path):
    corpus = [list("糖尿病怎么治疗"), list("高血压怎么治疗"), list("糖尿病吃什么")] * 5
    cfg = Word2VecConfig(dim=8, epochs=3, seed=3)
    v1, m1 = train_word2vec(corpus, cfg)
    v2, m2 = train_word2vec(corpus, cfg)
    assert v1.tokens == v2.tokens and np.array_equal(m1, m2)
    assert v1.tokens[:2] == ["[PAD]", "[UNK]"] and m1.shape == (len(v1), 8)
    assert not m1[0].any() and np.allclose(m1[1], m1[2:].mean(0))
    assert v1.encode(["糖", "?"]) == [v1.index["糖"], 1]
    assert v1.encode([]) == [1]
    v1.save(tmp_path / "v.json")
    assert Vocabulary.load(tmp_path / "v.json").tokens == v1.tokens


def test_pair_metrics_groups_by_first_question():
    pairs = [QuestionPair("a", "q1", "c1", 1), QuestionPair("b", "q1", "c2", 0), QuestionPair("c", "q2", "c3", 0),
             QuestionPair("d", "q3", "c4", 1, grade=2)]
    m = pair_metrics(pairs, [0.4, 0.9, 0.2, 0.7])
    assert m["accuracy"] == 0.5 and m["precision"] == 0.5 and m["recall"] == 0.5 and m["f1"] == 0.5
    # q1: relevant item at rank 2 -> 1/log2(3); q2 has no relevant item (skipped); q3 -> 1
    assert m["ndcg@3"] == pytest.approx((1 / np.log2(3) + 1) / 2)
    assert m["ndcg_groups"] == 2 and m["ndcg_groups_with_2plus_candidates"] == 1
    with pytest.raises(ValueError, match="scores"):
        pair_metrics(pairs, [0.1])


def test_config_validation():
    with pytest.raises(ValueError, match="unknown config keys"):
        resolve_config({"datset": "chip-sts"})
    with pytest.raises(ValueError, match="unknown keys"):
        resolve_config({"train": {"epoch": 3}})
    with pytest.raises(ValueError, match="model must be"):
        resolve_config({"model": "bert"})
    with pytest.raises(ValueError, match="transfer pre-training needs a neural encoder"):
        resolve_config({"model": "lr-tfidf", "transfer": {"enabled": True}})
    cfg = resolve_config({"dataset": "medical-question-pairs"})
    assert cfg["transfer"]["datasets"] == ["rqe"] and cfg["cross_encoder"]["model"] == "minilm"


def test_train_stmt_with_transfer_save_load_and_resume(data_root, tmp_path):
    out = tmp_path / "run"
    cfg = tiny_config(transfer={"enabled": True, "epochs": 2, "batch_size": 8, "lr": 0.01})
    summary = run_experiment(cfg, out, resume=True, show_progress=False)
    assert summary["transfer"]["groups"] >= 2 and summary["transfer"]["loss"] == "am-softmax"
    assert (out / "pretrain" / "encoder.safetensors").exists()
    assert summary["history"][0]["epoch"] == 0 and summary["best_epoch"] in (1, 2)
    assert set(summary["valid"]) >= {"accuracy", "precision", "recall", "f1", "ndcg@3"}
    matcher = load_matcher(out)
    assert isinstance(matcher, NeuralMatcher) and matcher.name == "stmt + transfer (am-softmax)"
    pairs = [("糖尿病怎么治疗", "糖尿病的治疗方法"), ("糖尿病怎么治疗", "哮喘的症状有哪些")]
    scores = matcher.score(pairs)
    assert scores.shape == (2,) and ((scores >= 0) & (scores <= 1)).all()
    # re-running with resume continues from the last checkpoint: same model, no new epochs
    again = run_experiment(cfg, out, resume=True, show_progress=False)
    assert again["transfer"].get("resumed") and again["epochs_run"] == summary["epochs_run"]
    assert np.allclose(load_matcher(out).score(pairs), scores, atol=1e-6)


@pytest.mark.parametrize("model", ["stmt-self", "stmt-inter", "bilstm", "transformer", "esim", "lr-tfidf", "lr-w2v"])
def test_every_model_trains_and_reloads(data_root, tmp_path, model):
    out = tmp_path / model
    summary = run_experiment(tiny_config(model, train={"epochs": 1, "batch_size": 16, "lr": 0.01}), out, show_progress=False)
    assert summary["n_valid_pairs"] > 0 and 0 <= summary["valid"]["f1"] <= 1
    matcher = load_matcher(out / "matcher")
    texts = [("高血压怎么治疗", "高血压的治疗方法")]
    assert matcher.score(texts).shape == (1,)


def test_model_learns_the_fixture(data_root, tmp_path):
    summary = run_experiment(tiny_config("lr-tfidf", train={"epochs": 15, "batch_size": 8, "lr": 0.05, "patience": 0}),
                             tmp_path / "lr", show_progress=False)
    assert summary["valid"]["accuracy"] > 0.8


def test_cross_encoder_matcher_roundtrip(tmp_path):
    from conftest import make_tiny_bert

    model, tok = make_tiny_bert()
    folder = tmp_path / "tiny-bert"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    torch.manual_seed(0)
    matcher = CrossEncoderMatcher(folder, max_length=16)
    pairs = [("fever cough", "cough fever"), ("头痛", "糖尿病")]
    scores = matcher.score(pairs)
    matcher.save(tmp_path / "ce")
    back = load_matcher(tmp_path / "ce")
    assert np.allclose(back.score(pairs), scores, atol=1e-6)
    assert back.name == f"cross-encoder ({folder})"


def test_searcher_recalls_and_reranks(data_root, tmp_path):
    run_experiment(tiny_config(train={"epochs": 1, "batch_size": 16, "lr": 0.01}), tmp_path / "r", show_progress=False)
    matcher = load_matcher(tmp_path / "r")
    corpus = [f"{d}{a}" for d in DISEASES for a, _ in ASPECTS]
    searcher = SimilarQuestionSearcher.build(corpus, matcher, language="zh", recall_k=5)
    results = searcher.search("糖尿病怎么治疗才好", k=3)
    assert 1 <= len(results) <= 3
    assert all(r.match_score is not None for r in results)
    assert [r.match_score for r in results] == sorted((r.match_score for r in results), reverse=True)
    searcher.save(tmp_path / "idx")
    loaded = SimilarQuestionSearcher.load(tmp_path / "idx", matcher, recall_k=5)
    assert [r.id for r in loaded.search("糖尿病怎么治疗才好", k=3)] == [r.id for r in results]
    bm25_only = SimilarQuestionSearcher.build(corpus, None, language="zh").search("糖尿病怎么治疗", k=2)
    assert bm25_only[0].text == "糖尿病怎么治疗" and bm25_only[0].match_score is None
    with pytest.raises(ValueError, match="non-empty"):
        searcher.search(" ")


def test_generate_pairs_thresholds(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    corpus = [f"{d}{a}" for d in DISEASES for a, _ in ASPECTS] + [f"{d}{b}" for d in DISEASES for _, b in ASPECTS]
    cfg = PairGenerationConfig(top_k=10, positive=(0.6, 1.0), negative=(0.0, 0.3), negatives_per_positive=3)
    pairs, stats = generate_pairs(corpus, "zh", cfg, word2vec=Word2VecConfig(dim=8, epochs=2), show_progress=False)
    assert stats["positives"] > 0 and stats["pairs"] == len(pairs)
    assert stats["negatives"] == min(stats["negative_candidates"], round(3 * stats["positives"]))
    for p in pairs:
        s = p.meta["score"]
        assert (0.6 <= s < 1.0) if p.label else (s <= 0.3)
        assert p.meta["score"] == pytest.approx((p.meta["bm25_norm"] + p.meta["cosine"]) / 2, abs=1e-3)
        assert p.text1 != p.text2
    assert len({frozenset((p.text1, p.text2)) for p in pairs}) == len(pairs)
    with pytest.raises(ValueError, match="negative range"):
        PairGenerationConfig(positive=(0.5, 1.0), negative=(0.0, 0.6))


def test_cli_train_evaluate_similar_make_pairs(data_root, tmp_path):
    from medrank.cli import app

    runner = CliRunner()
    cfg_path = tmp_path / "stmt.json"
    cfg_path.write_text(json.dumps({"task": "similar", **tiny_config(train={"epochs": 1, "batch_size": 16})}), encoding="utf-8")
    run = tmp_path / "runs" / "stmt"
    res = runner.invoke(app, ["--threads", "1", "train", str(cfg_path), "--out", str(run)])
    assert res.exit_code == 0, res.output
    assert (run / "matcher" / "matcher.json").exists()

    report = tmp_path / "report.json"
    res = runner.invoke(app, ["evaluate", "--dataset", "chip-sts", "--model", str(tmp_path / "runs"), "--report", str(report)])
    assert res.exit_code == 0, res.output
    payload = json.loads(report.read_text(encoding="utf-8"))
    assert payload["split"] == "valid" and "stmt" in payload["systems"]
    assert set(payload["systems"]["stmt"]) == {"accuracy", "precision", "recall", "f1", "ndcg@3"}
    assert "ndcg@3" in report.with_suffix(".md").read_text(encoding="utf-8")

    test_file = tmp_path / "dev.json"
    test_file.write_text(json.dumps(fixture_pairs(seed=5)[:10], ensure_ascii=False), encoding="utf-8")
    res = runner.invoke(app, ["evaluate", "--dataset", "chip-sts", "--model", str(run), "--test", str(test_file)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["evaluate", "--dataset", "chip-sts"])
    assert res.exit_code == 2 and "--model is required" in res.output

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"{d}{a}" for d in DISEASES for a, _ in ASPECTS), encoding="utf-8")
    res = runner.invoke(app, ["similar", "糖尿病怎么治疗", "--model", str(run), "--corpus", str(corpus), "-k", "2", "--json"])
    assert res.exit_code == 0, res.output
    results = json.loads(res.output)[0]["results"]
    assert len(results) == 2 and results[0]["match_score"] is not None

    res = runner.invoke(app, ["similar", "糖尿病怎么治疗", "--model", str(run), "--dataset", "chip-sts", "-k", "1"])
    assert res.exit_code == 0, res.output
    # a question in another language than the matcher's is reported, not searched (exit 1), unless --language says to
    french, english = "J'ai de la fièvre depuis trois jours", "how is diabetes treated"
    res = runner.invoke(app, ["similar", french, "糖尿病怎么治疗", english, "--model", str(run), "--corpus", str(corpus), "--json"])
    assert res.exit_code == 1, res.output
    rows = json.loads(res.output)
    assert "reads as French" in rows[0]["error"] and rows[1]["results"] and "this model reads Chinese" in rows[2]["error"]
    res = runner.invoke(app, ["similar", french, "--model", str(run), "--corpus", str(corpus)])
    assert res.exit_code == 1 and "not searched" in res.output
    res = runner.invoke(app, ["similar", english, "--model", str(run), "--corpus", str(corpus), "--language", "zh", "--json"])
    assert res.exit_code == 0 and "results" in json.loads(res.output)[0]

    out = tmp_path / "gen.jsonl"
    res = runner.invoke(app, ["make-pairs", str(corpus), "--out", str(out), "--positive-min", "0.6", "--negative-max", "0.3"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert lines and {"text1", "text2", "label", "score"} <= set(lines[0])
    res = runner.invoke(app, ["make-pairs", "--out", str(out)])
    assert res.exit_code == 2


def test_dense_and_hybrid_recall(tiny_encoder):
    corpus = ["fever cough", "chest pain", "headache nausea", "breast cancer", "kidney liver"]
    for recall in ("dense", "hybrid"):
        searcher = SimilarQuestionSearcher.build(corpus, None, language="en", recall=recall, encoder=tiny_encoder)
        hits = searcher.search("fever cough", k=2)
        assert len(hits) == 2 and hits[0].match_score is None
    with pytest.raises(ValueError, match="needs an encoder"):
        SimilarQuestionSearcher.build(corpus, None, language="en", recall="dense")


def test_corpus_helpers(tmp_path, monkeypatch):
    from medrank.pipelines.similar.corpus import guess_language, read_question_file
    from medrank.pipelines.similar.retrieval import cached_searcher

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    txt = tmp_path / "q.txt"
    txt.write_text("头痛怎么办\n\n  头痛怎么办 \n发热咳嗽\n", encoding="utf-8")
    assert read_question_file(txt) == ["头痛怎么办", "发热咳嗽"]
    jl = tmp_path / "q.jsonl"
    jl.write_text('{"question": "Is it flu?"}\n"Is it a cold?"\n', encoding="utf-8")
    assert read_question_file(jl) == ["Is it flu?", "Is it a cold?"]
    assert guess_language(["头痛怎么办"]) == "zh" and guess_language(["Is it flu?"]) == "en"
    first = cached_searcher(["头痛怎么办", "发热咳嗽"], "zh", None)
    assert list((tmp_path / "cache" / "indexes").iterdir())
    again = cached_searcher(["头痛怎么办", "发热咳嗽"], "zh", None)
    assert [r.text for r in again.search("头痛", k=1)] == [r.text for r in first.search("头痛", k=1)] == ["头痛怎么办"]


def test_early_stopping_stays_stopped_when_a_finished_run_is_resumed():
    from medrank.pipelines.similar.training import EarlyStopping

    class FakeTrainer:
        stop_training = False

    stopper = EarlyStopping("f1", patience=1)
    trainer = FakeTrainer()
    stopper.on_epoch_end(trainer, 1, {"f1": 0.7})
    stopper.on_epoch_end(trainer, 2, {"f1": 0.6})
    assert trainer.stop_training
    restored, again = EarlyStopping("f1", patience=1), FakeTrainer()
    restored.load_state_dict(stopper.state_dict())
    restored.on_train_begin(again)
    assert again.stop_training  # re-running the finished run trains no further epoch
