"""Building service components from data folders, and the store-backed knowledge base."""

from __future__ import annotations

import pytest

from medrank.records import Concept
from medrank.service.backends import KBInfo, KnowledgeBase, StoreBackend
from medrank.service.build import Builder
from medrank.service.settings import ServiceSettings


def _data(tmp_path):
    folder = tmp_path / "data" / "chip2019-procedures"
    folder.mkdir(parents=True)
    (folder / "kb.tsv").write_text("85.4\t乳腺切除术\n85.41\t乳腺切除术\n81.54\t膝关节置换术\n51.22\t胆囊切除术", encoding="utf-8")
    return tmp_path / "data"


def test_builder_builds_then_loads_kb(tmp_path, tiny_encoder, monkeypatch):
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    settings = ServiceSettings(state_dir=tmp_path / "state", data_root=_data(tmp_path), models_dir=tmp_path / "runs",
                               kbs=("procedures",))
    b = Builder(settings, show_progress=False, encoders={"zh": tiny_encoder})
    kb = b.knowledge_base("procedures")
    assert kb.info.method == "hybrid" and not kb.info.trained and len(kb) == 3
    assert kb.search(["乳腺切除"], 1)[0][0].codes == ("85.4", "85.41")
    manifest = KnowledgeBase.read_manifest(tmp_path / "state" / "kbs" / "procedures")
    assert manifest is not None and manifest["backend"] == "index"
    # second start: loaded, not rebuilt (the concept file is not read again)
    (tmp_path / "data" / "chip2019-procedures" / "kb.tsv").unlink()
    again = Builder(settings, show_progress=False, encoders={"zh": tiny_encoder}).knowledge_base("procedures")
    assert again.search(["乳腺切除"], 1)[0][0].id == "乳腺切除术"
    # a different method changes the fingerprint → rebuild (which now fails loudly: the data is gone)
    settings.kb_methods["procedures"] = "bm25"
    with pytest.raises(FileNotFoundError):
        Builder(settings, show_progress=False, encoders={"zh": tiny_encoder}).knowledge_base("procedures")


def test_store_spec_per_kb(tmp_path):
    b = Builder(ServiceSettings(state_dir=tmp_path, store="embedded:"), show_progress=False)
    assert b.store_spec("hpo") == f"embedded:{tmp_path / 'store' / 'hpo'}"
    b.settings.store = "postgresql://u@127.0.0.1:5432/db?collection=svc&sslmode=disable"
    spec = b.store_spec("chip-cdn")
    assert "collection=svc_chip_cdn" in spec and "sslmode=disable" in spec
    b.settings.store = "mysql://x"
    with pytest.raises(ValueError, match="--store"):
        b.store_spec("hpo")


def test_store_backed_kb(tmp_path, tiny_encoder):
    store_mod = pytest.importorskip("medrank.store")
    concepts = [Concept("HP:1", "headache", ("head pain",)), Concept("HP:2", "fever"), Concept("HP:3", "cough")]
    store = store_mod.open_store(f"embedded:{tmp_path / 'store'}", dim=tiny_encoder.dim, language="en")
    assert StoreBackend.ingest(store, concepts, tiny_encoder, batch_size=2, show_progress=False) == 4
    info = KBInfo("tiny", "en", "test", "1", "test")
    kb = KnowledgeBase(info, concepts, StoreBackend(store, tiny_encoder))
    hits = kb.search(["head pain", "fever"], 2)
    assert hits[0][0].id == "HP:1" and hits[1][0].id == "HP:2"
    assert len({h.id for h in hits[0]}) == len(hits[0])  # collapsed to concepts
    kb.save(tmp_path / "kb")
    again = KnowledgeBase.load(tmp_path / "kb", tiny_encoder, store)
    assert again.describe()["backend"] == "store" and again.search(["cough"], 1)[0][0].id == "HP:3"
    store.close()


def test_serve_command_rejects_bad_options(tmp_path):
    from typer.testing import CliRunner

    from medrank.cli import app

    res = CliRunner().invoke(app, ["serve", "--model", "bogus=/x", "--state", str(tmp_path)])
    assert res.exit_code == 2 and "unknown pipeline" in res.output
    res = CliRunner().invoke(app, ["serve", "--model", "no-equals", "--state", str(tmp_path)])
    assert res.exit_code == 2 and "NAME=PATH" in res.output
    res = CliRunner().invoke(app, ["serve", "--build-only", "--kb", "nope", "--pipelines", "symptoms", "--state", str(tmp_path)])
    assert res.exit_code == 2 and "unknown knowledge base" in res.output
    bad = tmp_path / "signs.json"
    bad.write_text('{"format": "medrank-urgent-signs", "messages": {}}', encoding="utf-8")
    for path, said in ((bad, "no crisis message"), (tmp_path / "missing.json", "not found")):
        res = CliRunner().invoke(app, ["serve", "--build-only", "--urgent-signs", str(path), "--state", str(tmp_path)])
        said_out = " ".join(res.output.split())  # rich wraps long lines
        assert res.exit_code == 2 and "--urgent-signs" in said_out and said in said_out


def test_batching_encoder_coalesces_concurrent_calls(tiny_encoder):
    import threading

    import numpy as np

    from medrank.service.batching import BatchingEncoder

    texts = [f"fever cough {'headache ' * i}" for i in range(16)]
    direct = tiny_encoder.encode(texts, kind="query")
    enc = BatchingEncoder(tiny_encoder, max_batch=32, max_wait_s=0.2)
    out: dict[int, np.ndarray] = {}
    barrier = threading.Barrier(len(texts))

    def call(i: int) -> None:
        barrier.wait()
        out[i] = enc.encode([texts[i]], kind="query")[0]

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    got = np.stack([out[i] for i in range(len(texts))])
    assert np.allclose(got, direct, atol=1e-5)  # same vectors as one direct call (padding does not change them)
    assert enc.stats["texts"] == 16 and enc.stats["batches"] < 16
    assert enc.encode("fever", kind="passage").shape == (tiny_encoder.dim,)
    assert enc.encode(texts * 3, kind="query").shape == (48, tiny_encoder.dim)  # large call: straight through
    assert enc.spec() == tiny_encoder.spec() and enc.dim == tiny_encoder.dim


def test_batching_encoder_propagates_errors(tiny_encoder):
    from medrank.service.batching import BatchingEncoder

    class Broken(type(tiny_encoder)):
        def _encode(self, *args, **kwargs):
            raise RuntimeError("model exploded")

    broken = Broken(tiny_encoder.model, tiny_encoder.tokenizer, pooling="mean", name="broken")
    with pytest.raises(RuntimeError, match="exploded"):
        BatchingEncoder(broken).encode(["fever"], kind="query")


def test_default_and_explicit_data_root_fingerprint_alike(tmp_path, monkeypatch):
    from medrank.config import data_root

    monkeypatch.delenv("MEDRANK_DATA", raising=False)
    implicit = Builder(ServiceSettings(state_dir=tmp_path), show_progress=False)
    explicit = Builder(ServiceSettings(state_dir=tmp_path, data_root=data_root()), show_progress=False)
    assert implicit.data_key == explicit.data_key == str(data_root())


def test_encoder_backend_setting_is_checked(tmp_path, monkeypatch):
    import pytest

    with pytest.raises(ValueError, match="backend must be"):
        ServiceSettings(state_dir=tmp_path, backend="gpu")
    monkeypatch.setenv("MEDRANK_BACKEND", "onnx-int8")
    assert ServiceSettings(state_dir=tmp_path).backend == "onnx-int8"
    monkeypatch.delenv("MEDRANK_BACKEND")
    assert ServiceSettings(state_dir=tmp_path).backend == "torch"  # plain settings (tests) never export models


def _dxy(tmp_path):
    folder = tmp_path / "data" / "dxy-dialog"
    folder.mkdir(parents=True)
    base = [("宝宝发烧两天，有点咳嗽", ["发烧", "咳嗽"], ["发烧", "咳嗽"]), ("一直流鼻涕，咳嗽", ["鼻涕", "咳嗽"], ["流涕", "咳嗽"]),
            ("孩子不发烧，流鼻涕", ["鼻涕"], ["流涕"]), ("发烧，流鼻涕", ["发烧", "鼻涕"], ["发烧", "流涕"]),
            ("咳嗽三天，没有发烧", ["咳嗽"], ["咳嗽"]), ("昨晚发烧，今天咳嗽", ["发烧", "咳嗽"], ["发烧", "咳嗽"])] * 2
    records = [{"consult_id": str(i), "self_repo": t, "dialog": [t],
                "goal": {"origin_inform_slots": o, "explicit_inform_slots": {n: True for n in e}}}
               for i, (t, o, e) in enumerate(base)]
    (folder / "dxy_dialog_data_dialog_v2.txt").write_text(f"train@{records!r}", encoding="utf-8")
    (folder / "symptoms_dxy.txt").write_text("发烧\n咳嗽\n流涕\n", encoding="utf-8")
    return tmp_path / "data"


def test_the_dxy_knowledge_base_is_decided_by_the_self_report_model(tmp_path, monkeypatch):
    from medrank.service.adapters import SymptomService

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    settings = ServiceSettings(state_dir=tmp_path / "state", data_root=_dxy(tmp_path), models_dir=tmp_path / "runs",
                               kbs=("dxy",))
    b = Builder(settings, show_progress=False)
    kb = b.knowledge_base("dxy")
    assert kb.info.language == "zh" and kb.info.trained and kb.info.method == "self-report" and len(kb) == 3
    assert kb.describe()["backend"] == "self-report-model"
    ranked = kb.search(["宝宝发烧，流鼻涕"], 3)[0]
    assert {h.id for h in ranked[:2]} == {"发烧", "流涕"} and ranked[0].score >= ranked[1].score >= ranked[2].score
    detector = b.set_detector(kb)
    service = SymptomService({"dxy": kb}, set_detectors={"dxy": detector})
    out = service.detect("宝宝发烧，流鼻涕", kb="dxy", k=2)
    assert out["kb"] == "dxy" and out["trained"] and {t["name"] for t in out["terms"]} == {"发烧", "流涕"}
    assert {t["name"]: t["span"] for t in out["terms"]} == {"发烧": [2, 4], "流涕": [6, 8]}  # the words written
    assert [t["name"] for t in out["alternatives"]] == ["咳嗽"] and len(out["results"]) == 2
    # the ranking shown as results is the decided set's own: the model reads the text once per request
    calls = []
    probabilities = detector.probabilities
    monkeypatch.setattr(detector, "probabilities", lambda texts: calls.append(len(texts)) or probabilities(texts))
    again = service.detect("宝宝发烧，流鼻涕", kb="dxy", k=2)
    assert calls == [1] and again["results"] == out["results"]
    assert [r["id"] for r in out["results"]] == [t["name"] for t in out["terms"]]  # most probable first


def test_zero_shot_english_similar_questions_turn_dense_once_encoded(tmp_path, tiny_encoder, monkeypatch):
    """The "similar-questions:vectors" step: every English question encoded once, saved beside the BM25 index, and
    the encoder's whole-corpus search swapped in for its re-ranking of BM25's top 20; a trained matcher is left alone."""
    from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher
    from medrank.pipelines.similar.zero_shot import EncoderCosineMatcher
    from medrank.service.adapters import SimilarSearcher, SimilarService

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    settings = ServiceSettings(api_token=None, state_dir=tmp_path / "state", models_dir=tmp_path / "runs")
    b = Builder(settings, show_progress=False, encoders={"en": tiny_encoder, "zh": tiny_encoder})
    texts = ["what causes headache", "how to treat fever", "is cough contagious", "what causes a fever"]
    answers = {"how to treat fever": {"answer": "Rest and fluids.", "url": "https://example.org"}}
    zero = SimilarSearcher(SimilarQuestionSearcher.build(texts, EncoderCosineMatcher(tiny_encoder), "en"),
                           "tiny cosine re-ranking BM25 top-20 (zero-shot)", False, "BM25 top-20", "test", answers)
    trained = SimilarSearcher(SimilarQuestionSearcher.build(["头痛怎么办"], None, "zh"), "stmt", True, "BM25 top-20", "t")
    # a language whose encoder was not loaded when its similar questions were built: BM25's order until this step
    interim = SimilarSearcher(SimilarQuestionSearcher.build(["头痛怎么办", "发热吃什么药"], None, "zh"),
                              "BM25 only until the encoder's re-ranking is ready (zero-shot)", False, "BM25 top-20", "t")
    svc = SimilarService({"en": zero, "zh": trained})
    (tmp_path / "state" / "similar-en").mkdir(parents=True)
    b.similar_question_vectors(svc)
    dense = svc.searchers["en"]
    assert dense.model.startswith("tiny dense search over every question") and not dense.trained
    assert dense.searcher.matcher is None and dense.answers is answers and svc.searchers["zh"] is trained
    got = svc.search("what causes headache", k=4)
    assert got["results"][0]["text"] == "what causes headache"  # its own vector first
    assert {r["text"] for r in got["results"]} == set(texts)  # the whole corpus is searched, not BM25's recall
    assert next(r for r in got["results"] if r["text"] == "how to treat fever")["answer"] == "Rest and fluids."
    # a later start reads the saved vectors (the same data, encoder and version)
    saved = b._saved_question_vectors(tmp_path / "state" / "similar-en", "en")
    assert saved is not None and saved.shape == (4, tiny_encoder.dim)
    b.similar_question_vectors(svc)  # already dense: nothing to do
    assert svc.searchers["en"] is dense
    svc.searchers = {**svc.searchers, "zh": interim}
    b.similar_question_vectors(svc)
    upgraded = svc.searchers["zh"]
    assert upgraded.model.startswith("tiny cosine re-ranking BM25 top-20") and upgraded.searcher.matcher is not None
    assert interim.searcher.matcher is None  # the searcher requests may still be reading is left as it was
    assert all(r["match_score"] is not None for r in svc.search("头痛", k=2)["results"])
    assert svc.searchers["en"] is dense
