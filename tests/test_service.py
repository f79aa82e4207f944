"""The HTTP API on tiny random-weight encoders and tiny knowledge bases (no data, no downloads)."""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np
import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from medrank.index import BM25Index, DenseIndex, HybridIndex  # noqa: E402
from medrank.pipelines.history.question_bank import FIRST_STAGE, NextQuestionRanker, QuestionBank  # noqa: E402
from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher  # noqa: E402
from medrank.records import Concept  # noqa: E402
from medrank.service.adapters import (  # noqa: E402
    BM25PassageService,
    NextQuestionService,
    NormalizeService,
    Services,
    SimilarSearcher,
    SimilarService,
    SymptomService,
)
from medrank.service.app import _printable, create_app  # noqa: E402
from medrank.service.backends import KBInfo, KnowledgeBase  # noqa: E402
from medrank.service.settings import ServiceSettings  # noqa: E402

SECRET = "headache fever zebra-7731"


def _next_questions(*args, **kwargs) -> NextQuestionService:
    return NextQuestionService(NextQuestionRanker(*args, **kwargs))


def _kb(name: str, language: str, concepts: list[Concept], encoder) -> KnowledgeBase:
    return KnowledgeBase.build_index(KBInfo(name, language, "test", "1", "test", model="tiny zero-shot"), concepts, encoder)


@pytest.fixture(scope="module")
def tiny_services() -> Services:
    """Built once per module (a few seconds on a busy machine); tests get a shallow copy they may modify."""
    from conftest import make_tiny_bert

    from medrank.encoders import TransformerEncoder

    model, tok = make_tiny_bert()
    return _build_services(TransformerEncoder(model, tok, pooling="mean", name="tiny"))


@pytest.fixture
def services(tiny_services) -> Services:
    return dataclasses.replace(tiny_services)


def _build_services(tiny_encoder) -> Services:
    en = [Concept("HP:1", "headache", ("head pain",)), Concept("HP:2", "fever"), Concept("HP:3", "cough"),
          Concept("HP:4", "chest pain"), Concept("HP:5", "nausea", ("vomiting",)), Concept("HP:6", "rash")]
    zh = [Concept("头痛", "头痛", (), (), {"codes": ("R51",)}), Concept("发热", "发热", (), (), {"codes": ("R50",)}),
          Concept("咳嗽", "咳嗽", (), (), {"codes": ("R05",)})]
    procedures = [Concept("乳腺切除术", "乳腺切除术", (), ("85.41",), {"codes": ("85.4", "85.41")}),
                  Concept("膝关节置换术", "膝关节置换术", (), (), {"codes": ("81.54",)})]
    passages = [
        {"id": "d1-p1", "doc_id": "d1", "title": "Asthma", "label": "symptoms",
         "text": "Asthma causes cough. Chest pain can occur. Fever is rare."},
        {"id": "d1-p2", "doc_id": "d1", "title": "Asthma", "label": "treatment", "text": "Inhalers help. Rest helps."},
        {"id": "d2-p1", "doc_id": "d2", "title": "Diabetes", "label": "symptoms", "text": "Fatigue and thirst are common."},
    ]
    bank_texts = ["Do you have a fever?", "Is the headache worse in the morning?", "Any chest pain?", "Do you cough at night?"]
    bank_ids = [f"en-q{i}" for i in range(len(bank_texts))]
    bank_index = HybridIndex([BM25Index(language="en"), DenseIndex(tiny_encoder)], method="rrf").build(bank_ids, bank_texts)
    similar_en = SimilarQuestionSearcher.build(["what causes headache", "how to treat fever", "is cough contagious"], None, "en")
    similar_zh = SimilarQuestionSearcher.build(["头痛怎么办", "发热吃什么药", "咳嗽会传染吗"], None, "zh")
    return Services(
        symptoms=SymptomService({"tiny-en": _kb("tiny-en", "en", en, tiny_encoder), "tiny-zh": _kb("tiny-zh", "zh", zh, tiny_encoder)},
                                {"en": "tiny-en", "zh": "tiny-zh"}),
        normalize=NormalizeService(_kb("procedures", "zh", procedures, tiny_encoder)),
        passages=BM25PassageService.build(passages, tiny_encoder, "test"),
        next_questions=_next_questions({"en": QuestionBank("en", bank_ids, bank_texts, bank_index, "hybrid", "test")},
                                           {"en": tiny_encoder}),
        similar=SimilarService({"en": SimilarSearcher(similar_en, "BM25 only", False, "BM25 top-20", "test",
                                                      {"what causes headache": {"answer": "Tension, mostly.", "url": "https://example.org/h"},
                                                       "how to treat fever": {"answer": "Rest.", "url": "javascript:alert(1)"}}),
                                "zh": SimilarSearcher(similar_zh, "BM25 only", False, "BM25 top-20", "test")}),
    )


def _client(services: Services, **settings) -> TestClient:
    return TestClient(create_app(ServiceSettings(api_token=None, **settings), services))


def test_a_deployment_can_lower_k_below_the_schema_maximum(services):
    c = _client(services, max_k=2)
    assert c.post("/normalize", json={"mention": "乳腺切除", "k": 2}).status_code == 200
    for path, body in [("/normalize", {"mention": "乳腺切除", "k": 3}),
                       ("/passages", {"entity": "asthma", "aspect": "symptoms", "k": 3}),
                       ("/symptoms", {"query": "headache", "k": 3})]:
        r = c.post(path, json=body)
        assert r.status_code == 422, path
        assert r.json()["errors"][0]["loc"] == ["body", "k"] and "larger than 2" in r.json()["errors"][0]["msg"]


def test_passages_text_length_limit(services):
    r = _client(services, max_text_chars=10).post("/passages", json={"entity": "a" * 11, "aspect": "symptoms"})
    assert r.status_code == 422 and "longer than 10" in r.json()["errors"][0]["msg"]


def test_impossible_service_limits_are_refused(monkeypatch):
    for bad in ({"max_concurrency": 0}, {"max_concurrency": -1}, {"request_timeout_s": 0},
                {"request_timeout_s": float("nan")}, {"max_k": 0}):
        with pytest.raises(ValueError, match="must be"):
            ServiceSettings(**bad)
    monkeypatch.setenv("MEDRANK_REQUEST_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="MEDRANK_REQUEST_TIMEOUT must be a number of seconds, got 'soon'"):
        ServiceSettings()
    monkeypatch.setenv("MEDRANK_REQUEST_TIMEOUT", "7")
    assert ServiceSettings().request_timeout_s == 7.0


def test_serve_refuses_impossible_options_before_building(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from medrank.cli import app

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path))
    for args in (["--max-concurrency", "0"], ["--port", "70000"], ["--timeout", "-1"]):
        res = CliRunner().invoke(app, ["serve", "--build-only", *args])
        assert res.exit_code == 2, (args, res.output)
    assert not (tmp_path / "service").exists()  # nothing was built


def test_store_dsn_is_logged_without_its_password():
    from medrank.service.build import redact_dsn

    assert redact_dsn("postgresql://bob:s3cr%40t@db:5432/kb?collection=a") == "postgresql://bob:***@db:5432/kb"
    assert redact_dsn("postgresql://bob@db/kb") == "postgresql://bob@db/kb"
    assert redact_dsn("embedded:/tmp/store") == "embedded:/tmp/store"
    from medrank.service.build import dsn_without_password

    # what the knowledge bases' manifests (files on disk) keep of the spec: everything but the password
    assert dsn_without_password("postgresql://bob:s3cr%40t@db:5432/kb?collection=a") == "postgresql://bob@db:5432/kb?collection=a"


def test_text_in_no_served_language_is_404_unless_forced(services):
    c = _client(services)
    r = c.post("/symptoms", json={"query": "У меня болит голова"})
    assert r.status_code == 404 and "English and Chinese" in r.json()["detail"] and "Russian" in r.json()["detail"]
    french = c.post("/symptoms", json={"query": "J'ai mal à la tête et je me sens malade"})
    assert french.status_code == 404 and "reads as French" in french.json()["detail"]
    # typed, so a page can say it in its own words; other 404s keep the status's type
    assert french.json()["errors"][0]["type"] == "unsupported_language"
    assert french.json()["errors"][0]["ctx"] == {"read_as": "French"}
    assert c.post("/symptoms", json={"query": "headache", "kb": "nope"}).json()["errors"][0]["type"] == "not_found"
    for path, body in [("/similar-questions", {"question": "J'ai de la fièvre depuis trois jours"}),
                       ("/next-questions", {"dialogue": [{"speaker": "patient", "text": "j'ai de la fièvre depuis trois jours"}]})]:
        r = c.post(path, json=body)
        assert r.status_code == 404 and "French" in r.json()["detail"], path
    japanese = c.post("/symptoms", json={"query": "頭がひどく痛くて吐き気がします"})  # Han characters, but Japanese
    assert japanese.status_code == 404 and "Japanese" in japanese.json()["detail"]
    no_letters = c.post("/similar-questions", json={"question": "😀😀"})
    assert no_letters.status_code == 404 and no_letters.json()["errors"][0]["ctx"] == {"read_as": ""}
    assert c.post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": "38.5"}]}).status_code == 404
    assert c.post("/symptoms", json={"query": "У меня болит голова", "language": "en"}).status_code == 200


def test_symptoms_endpoint(services):
    c = _client(services)
    r = c.post("/symptoms", json={"query": "bad headache and fever", "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["language"] == "en" and body["kb"] == "tiny-en" and body["model"] == "tiny zero-shot"
    assert body["trained"] is False and len(body["results"]) == 3
    assert {"id", "name", "score", "codes"} <= set(body["results"][0])
    zh = c.post("/symptoms", json={"query": "头痛发热"}).json()
    assert zh["language"] == "zh" and zh["kb"] == "tiny-zh" and zh["results"][0]["codes"]
    # an English text against a Chinese knowledge base is refused with a way out, not answered with Chinese neighbours
    crossed = c.post("/symptoms", json={"query": "fever", "kb": "tiny-zh"})
    assert crossed.status_code == 404 and "language='zh'" in crossed.json()["detail"]
    assert "holds Chinese terms and the text reads as English" in crossed.json()["detail"]  # words a person reads
    assert crossed.json()["errors"][0]["type"] == "knowledge_base_language"
    assert crossed.json()["errors"][0]["ctx"] == {"kb_reads": "Chinese", "text_reads": "English"}
    assert c.post("/symptoms", json={"query": "fever", "kb": "tiny-zh", "language": "zh"}).json()["kb"] == "tiny-zh"
    assert c.post("/symptoms", json={"query": "fever", "kb": "nope"}).status_code == 404


def test_normalize_refuses_text_without_chinese_characters(services):
    c = _client(services)
    for mention in ("hello world", "😀😀", "12345", "удаление желчного пузыря"):
        r = c.post("/normalize", json={"mention": mention})
        assert r.status_code == 404 and "Chinese" in r.json()["detail"], mention


def test_normalize_reads_a_procedure_abbreviation_of_its_data_written_alone(services):
    c = _client(services)
    assert c.post("/normalize", json={"mention": "TURP"}).status_code == 404  # the tiny service knows none
    services.normalize = NormalizeService(services.normalize.kb, abbreviations=frozenset({"TURP", "PICC"}))
    c = _client(services)
    for mention in ("TURP", "ｔｕｒｐ", "PICC+"):
        r = c.post("/normalize", json={"mention": mention, "k": 2})
        assert r.status_code == 200 and len(r.json()["results"]) == 2, mention
    for mention in ("hello", "TURP please", "12345"):  # a word that is no abbreviation: refused as before
        assert c.post("/normalize", json={"mention": mention}).status_code == 404, mention


def test_zero_shot_normalize_reports_a_calibrated_confidence(services):
    from medrank.service.calibration import TopHitCalibrator

    kb = services.normalize.kb
    names = ["乳腺切除术", "膝关节置换术"]
    texts = ["乳腺切除", "左乳腺切除术", "膝关节置换", "右膝关节置换术", "乳房切除", "膝置换", "乳腺", "关节"] * 5
    gold = [{"乳腺切除术"} if "乳" in t else {"膝关节置换术"} for t in texts]
    gold[::7] = [{"other"}] * len(gold[::7])  # some top hits wrong, so both classes are seen

    def rank(batch):
        return [([h.id for h in hits], [h.score for h in hits]) for hits in kb.search(batch, 2)]

    cal = TopHitCalibrator.fit(rank, texts, gold, "test", sample=40)
    assert cal.fitted_on == 40 and 0 < cal.top1_accuracy < 1 and set(names) <= set(kb.concepts)
    services.normalize = NormalizeService(kb, cal)
    body = _client(services).post("/normalize", json={"mention": "乳腺切除", "k": 1}).json()
    assert 0.0 <= body["confidence"] <= 1.0 and body["low_confidence"] == (body["confidence"] < 0.5)
    assert body["predicted"] == [body["results"][0]["name"]] and len(body["results"]) == 1
    assert TopHitCalibrator.from_dict(cal.to_dict()) == cal
    with pytest.raises(ValueError, match="a calibration of 2 features"):  # one saved by an earlier version
        TopHitCalibrator.from_dict({**cal.to_dict(), "weights": [1.0, 1.0], "mean": [0, 0], "scale": [1, 1]})


def test_the_calibrated_confidence_uses_whether_the_top_name_is_the_query():
    from medrank.service.calibration import TopHitCalibrator, ranking_features, same_text

    assert ranking_features([0.5, 0.2], exact=True) == (0.5, pytest.approx(0.3), 1.0)
    assert ranking_features([]) == (0.0, 0.0, 0.0)
    assert same_text("腹腔镜下 胆囊切除术", "腹腔镜下胆囊切除术") and same_text("Head Ache", "head ache")
    assert not same_text("乳腺切除", "乳腺切除术")
    # the same two scores, once with the query's own name on top: only the third feature tells them apart
    texts = [f"name{i}" for i in range(40)]

    def rank(batch):
        return [([t if int(t[4:]) % 2 else "other", "second"], [0.03, 0.029]) for t in batch]

    gold = [{t} for t in texts]
    cal = TopHitCalibrator.fit(rank, texts, gold, "test", sample=40)
    assert cal.probability([0.03, 0.029], exact=True) > 0.9 > 0.1 > cal.probability([0.03, 0.029], exact=False)


def test_normalize_endpoint(services):
    r = _client(services).post("/normalize", json={"mention": "乳腺切除", "k": 2})
    assert r.status_code == 200, r.text
    top = r.json()["results"][0]
    assert top["name"] == "乳腺切除术" and top["codes"] == ["85.4", "85.41"]
    # the zero-shot form decides on its top name; without a calibrator it reports no probability
    assert r.json()["predicted"] == ["乳腺切除术"] and r.json()["confidence"] is None and r.json()["low_confidence"] is None


def test_passages_endpoint(services):
    r = _client(services).post("/passages", json={"entity": "asthma", "aspect": "symptoms", "k": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["trained"] is False and "BM25" in body["model"]
    assert body["results"][0]["passage_id"] == "d1-p1"
    assert [s["text"] for s in body["results"][0]["sentences"]][0].startswith("Asthma causes cough")
    curve = body["curve"]
    assert curve["document"] == "Asthma" and len(curve["scores"]) == 5  # 3 + 2 sentences of d1
    assert [(p["start"], p["end"]) for p in curve["passages"]] == [(0, 3), (3, 5)]


def test_next_questions_bank_and_candidates(services):
    c = _client(services)
    dialogue = [{"speaker": "patient", "text": "I have a headache"}, {"speaker": "doctor", "text": "Any chest pain?"},
                {"speaker": "patient", "text": "no"}]
    r = c.post("/next-questions", json={"dialogue": dialogue, "symptoms": ["headache"], "k": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == FIRST_STAGE and body["trained"] is False
    texts = [q["text"] for q in body["results"]]
    assert "Any chest pain?" not in texts and len(texts) == 3  # already asked
    r = c.post("/next-questions", json={"dialogue": dialogue, "candidates": ["Any chest pain?", "Do you smoke?", "Fever?"], "k": 5})
    assert r.status_code == 200
    assert sorted(q["text"] for q in r.json()["results"]) == ["Do you smoke?", "Fever?"]
    zh = c.post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": "头痛"}]})
    assert zh.status_code == 404  # no Chinese bank in this deployment, and the message says so
    assert "candidates" in zh.json()["detail"]


def test_similar_questions_endpoint(services):
    c = _client(services)
    r = c.post("/similar-questions", json={"question": "what causes a headache", "k": 2})
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["text"] == "what causes headache" and r.json()["results"][0]["match_score"] is None
    # a solved question carries its answer and source; one without an answer says null
    assert r.json()["results"][0]["answer"] == "Tension, mostly." and r.json()["results"][0]["answer_url"] == "https://example.org/h"
    fever = c.post("/similar-questions", json={"question": "how to treat a fever", "k": 1}).json()["results"][0]
    assert fever["text"] == "how to treat fever" and fever["answer"] == "Rest." and fever["answer_url"] is None  # not a web page
    cough = c.post("/similar-questions", json={"question": "is a cough contagious", "k": 1}).json()["results"][0]
    assert cough["text"] == "is cough contagious" and cough["answer"] is None and cough["answer_url"] is None
    assert c.post("/similar-questions", json={"question": "头痛怎么办"}).json()["language"] == "zh"


def test_health_models_and_page(services):
    c = _client(services)
    assert c.get("/health").json()["pipelines"] == {"symptoms": True, "normalize": True, "passages": True,
                                                   "next-questions": True, "similar-questions": True,
                                                   "differential": False}
    models = {m["pipeline"]: m for m in c.get("/models").json()["pipelines"]}
    assert models["next-questions"]["model"] == FIRST_STAGE and models["passages"]["trained"] is False
    page = c.get("/")
    assert page.status_code == 200 and "<title>medrank</title>" in page.text
    assert c.get("/static/app.js").status_code == 200
    assert c.get("/static/favicon.svg").status_code == 200 and 'rel="icon"' in page.text
    # the page may load only its own files; every response refuses sniffing and framing
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for r in (page, c.get("/health"), c.post("/symptoms", json={"query": "fever"}), c.get("/nowhere")):
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
        assert r.headers["referrer-policy"] == "no-referrer"
    schema = c.get("/openapi.json").json()
    assert {"/symptoms", "/normalize", "/passages", "/next-questions", "/similar-questions", "/health", "/models"} <= set(schema["paths"])


def test_missing_pipeline_is_503(services):
    services.passages = None
    r = _client(services).post("/passages", json={"entity": "a", "aspect": "b"})
    assert r.status_code == 503 and "not served" in r.json()["detail"]


@pytest.mark.parametrize("body", [
    {"query": ""}, {"query": "   "}, {"query": "fever", "k": 0}, {"query": "fever", "k": 51}, {"query": "fever", "extra": 1},
    {"query": 3}, {}, {"query": "fever", "language": "fr"},
])
def test_validation_errors_are_422_without_echo(services, body):
    r = _client(services).post("/symptoms", json=body)
    assert r.status_code == 422
    assert set(r.json()) == {"detail", "errors"} and isinstance(r.json()["detail"], str)
    assert all(set(d) == {"loc", "msg", "type"} for d in r.json()["errors"])


def _one_error_shape(r) -> dict:
    body = r.json()
    assert set(body) == {"detail", "errors"} and isinstance(body["detail"], str) and body["detail"], body
    assert body["errors"] and all(set(e) == {"loc", "msg", "type"} for e in body["errors"]), body
    return body


def test_every_4xx_has_one_error_shape(services):
    c = _client(services, max_body_bytes=2000)
    cases = [
        (c.post("/symptoms", content=b'{"query": "\xff\xfe fever"}', headers={"content-type": "application/json"}), 422),
        (c.post("/symptoms", content=b'{"query": "fever', headers={"content-type": "application/json"}), 422),
        (c.post("/symptoms", json={"query": ""}), 422),
        (c.post("/symptoms", json={"query": "fever", "kb": "nope"}), 404),
        (c.get("/no-such-page"), 404),
        (c.post("/symptoms", json={"query": "x" * 3000}), 413),
        (c.get("/symptoms"), 405),
    ]
    for r, status in cases:
        assert r.status_code == status, (r.status_code, r.text)
        _one_error_shape(r)


def test_invalid_utf8_body_is_422_in_the_common_shape(services):
    r = _client(services).post("/symptoms", content=b'{"query": "fever \xff\xfe"}', headers={"content-type": "application/json"})
    assert r.status_code == 422 and "UTF-8" in _one_error_shape(r)["detail"]


def test_deeply_nested_json_is_422_in_the_common_shape(services):
    deep = b'{"query": "fever", "k": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = _client(services, max_body_bytes=1_000_000).post("/symptoms", content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 422
    _one_error_shape(r)


def test_401_is_in_the_common_shape(services):
    c = TestClient(create_app(ServiceSettings(api_token="t0ken"), services))
    r = c.post("/symptoms", json={"query": "fever"})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    _one_error_shape(r)


def test_nul_bytes_are_refused(services):
    c = _client(services)
    for path, body in [("/symptoms", {"query": "fever\u0000"}), ("/normalize", {"mention": "乳腺\u0000切除"}),
                       ("/passages", {"entity": "asthma\u0000", "aspect": "symptoms"}),
                       ("/next-questions", {"dialogue": [{"speaker": "patient", "text": "cough\u0000"}]})]:
        r = c.post(path, json=body)
        assert r.status_code == 422 and "NUL" in _one_error_shape(r)["detail"], path


def test_empty_candidate_list_is_refused(services):
    r = _client(services).post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": "I cough"}], "candidates": []})
    assert r.status_code == 422 and _one_error_shape(r)["errors"][0]["loc"] == ["body", "candidates"]


def test_413_is_logged_under_its_endpoint(services, caplog):
    c = _client(services, max_body_bytes=100)
    with caplog.at_level(logging.INFO, logger="medrank.service.access"):
        assert c.post("/symptoms", json={"query": "fever " * 50}).status_code == 413
        assert c.post("/nowhere", json={"query": "fever " * 50}).status_code == 413
    access = [r.getMessage() for r in caplog.records if r.name == "medrank.service.access"]
    assert access[0].startswith("POST /symptoms 413") and access[1].startswith("POST (unmatched path) 413")


def test_size_limits(services):
    c = _client(services, max_text_chars=20, max_list_items=2, max_body_bytes=2000)
    r = c.post("/symptoms", json={"query": "fever " * 10})
    assert r.status_code == 422 and "longer than 20" in r.json()["errors"][0]["msg"]
    turns = [{"speaker": "patient", "text": "fever"}] * 3
    assert c.post("/next-questions", json={"dialogue": turns}).status_code == 422
    assert c.post("/symptoms", json={"query": "x" * 5000}).status_code == 413
    big = b'{"query": "' + b"a" * 3000 + b'"}'
    chunks = iter([big[:1000], big[1000:2000], big[2000:]])  # streamed, no Content-Length
    assert c.post("/symptoms", content=chunks, headers={"content-type": "application/json"}).status_code == 413
    assert _client(services).post("/symptoms", json={"query": "a" * 2001}).status_code == 422  # schema hard cap


def test_bearer_token(services):
    c = TestClient(create_app(ServiceSettings(api_token="s3cret"), services))
    assert c.post("/symptoms", json={"query": "fever"}).status_code == 401
    assert c.post("/symptoms", json={"query": "fever"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.post("/symptoms", json={"query": "fever"}, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert c.get("/models").status_code == 401
    assert c.get("/health").status_code == 200 and c.get("/").status_code == 200


def test_no_query_text_in_logs(services, caplog):
    c = _client(services)
    with caplog.at_level(logging.DEBUG):
        c.post("/symptoms?debug=" + SECRET.replace(" ", "+"), json={"query": SECRET})
        c.post("/similar-questions", json={"question": SECRET})
        c.post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": SECRET}]})
        c.post("/symptoms", json={"query": SECRET, "k": 0})  # validation error path
    server_side = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore")))
    assert server_side and "zebra" not in server_side and "7731" not in server_side  # (the test client logs its own URLs)
    access = [r.getMessage() for r in caplog.records if r.name == "medrank.service.access"]
    assert any(m.startswith("POST /symptoms 200") for m in access) and any(" 422 " in m for m in access)


def test_access_log_cannot_be_forged_or_carry_text_in_a_path(services, caplog):
    c = _client(services)
    with caplog.at_level(logging.INFO, logger="medrank.service.access"):
        c.get("/static/my%20zebra%0a2026-11-24%2000:00:00%20POST%20/symptoms%20200%201.0ms")
        c.get("/static/my%20zebra.txt")
        c.get("/health")
        c.post("/symptoms", json={"query": "У меня болит голова"})  # a route's own 404
    access = [r.getMessage() for r in caplog.records if r.name == "medrank.service.access"]
    assert len(access) == 4 and all("\n" not in m and "zebra" not in m for m in access)
    assert access[0].startswith("GET (unmatched path) 404") and access[1].startswith("GET /static/(unmatched path) 404")
    assert access[2].startswith("GET /health 200") and access[3].startswith("POST /symptoms 404")
    assert _printable("/a\nb\x1b[31m") == "/a\\nb\\x1b[31m" and _printable("x" * 300).endswith("…")


def test_timeout_is_504(services):
    class Slow:
        def detect(self, *args):
            time.sleep(1.0)

        def info(self):  # pragma: no cover
            raise NotImplementedError

    services.symptoms = Slow()

    class Refuses:
        def detect(self, *args):
            raise ValueError("no such thing")

    with _client(services, request_timeout_s=0.2, max_concurrency=1) as c:  # one event loop, as under uvicorn
        r = c.post("/symptoms", json={"query": "fever"})
        assert r.status_code == 504
        # the timed-out call still runs in its thread and keeps the one slot: the next request is turned away
        assert c.post("/symptoms", json={"query": "fever"}).status_code == 503
        time.sleep(1.0)  # the slow call ends and gives its slot back
        services.symptoms = Refuses()
        assert c.post("/symptoms", json={"query": "fever"}).status_code == 422  # a slot was free again


def test_offline_docs_timing_header_head_health_and_strict_k(services):
    c = _client(services)
    docs = c.get("/docs")
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text and "cdn" not in docs.text.lower()
    assert c.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    assert c.head("/health").status_code == 200
    r = c.post("/symptoms", json={"query": "fever", "k": 2})
    assert r.status_code == 200 and r.headers["server-timing"].startswith("app;dur=")
    for k in (True, "3", 3.0):
        assert c.post("/symptoms", json={"query": "fever", "k": k}).status_code == 422, k


# -- schemathesis: generated requests from the OpenAPI schema never cause a 5xx (bounded, in-process) --------
def test_schemathesis_no_server_errors(services):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hypothesis_settings

    app = create_app(ServiceSettings(api_token=None, request_timeout_s=20), services)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 8
    # a pipeline this deployment does not serve answers 503 by design (the tiny services have no inquiry engine)
    operations = [op for op in operations if op.path != "/differential"]
    seen: dict[int, int] = {}
    for op in operations:
        modes = [schemathesis.GenerationMode.POSITIVE]
        if op.method.upper() == "POST":  # GET routes take no input: nothing to make invalid
            modes.append(schemathesis.GenerationMode.NEGATIVE)
        for mode in modes:

            @given(op.as_strategy(generation_mode=mode))
            @hypothesis_settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def check(case):
                response = case.call()
                seen[response.status_code] = seen.get(response.status_code, 0) + 1
                assert response.status_code < 500, f"{case.method} {case.path} → {response.status_code}: {response.text[:300]}"

            check()
    assert seen.get(200) and seen.get(422)


def test_next_questions_with_a_reranker(services):
    class ReverseAlphabetical:  # stands in for issue 6's re-rankers: score(dialogue, questions) -> list[float]
        def __init__(self):
            self.dialogues = []

        def score(self, dialogue, questions):
            self.dialogues.append(dialogue)
            order = sorted(questions, reverse=True)
            return [float(len(questions) - order.index(q)) for q in questions]

    rr = ReverseAlphabetical()
    old = services.next_questions
    services.next_questions = _next_questions(old.ranker.banks, old.ranker.encoders, "fake re-ranker", True, reranker=rr)
    r = _client(services).post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": "headache"}], "k": 2})
    body = r.json()
    assert body["trained"] is True and body["model"] == "fake re-ranker"
    assert [q["text"] for q in body["results"]] == ["Is the headache worse in the morning?", "Do you have a fever?"]
    assert rr.dialogues == ["patient: headache"]


def test_normalize_with_a_trained_normalizer(services):
    from types import SimpleNamespace

    from medrank.service.adapters import TrainedNormalizeService

    class FakeNormalizer:  # issue 4's ProcedureNormalizer.normalize_one(text) -> Prediction
        def normalize_one(self, text):
            return SimpleNamespace(terms=["乳腺切除术"], candidates=["膝关节置换术", "乳腺切除术"], final=[0.2, 0.9],
                                   confidence=0.31234567, low_confidence=True)

    services.normalize = TrainedNormalizeService(FakeNormalizer(), {"乳腺切除术": ("85.4", "85.41")}, "fake MTCG+KAR", "1")
    body = _client(services).post("/normalize", json={"mention": "左乳切除", "k": 5}).json()
    assert body["trained"] is True and body["predicted"] == ["乳腺切除术"]
    assert [(r["name"], r["codes"]) for r in body["results"]] == [("乳腺切除术", ["85.4", "85.41"]), ("膝关节置换术", [])]
    assert body["confidence"] == 0.3123 and body["low_confidence"] is True


def test_token_and_limits_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MEDRANK_API_TOKEN", "from-env")
    monkeypatch.setenv("MEDRANK_REQUEST_TIMEOUT", "7.5")
    monkeypatch.setenv("MEDRANK_MODELS", str(tmp_path))
    settings = ServiceSettings()
    assert settings.api_token == "from-env" and settings.request_timeout_s == 7.5
    assert settings.model_path("passages") is None  # nothing trained under an empty models dir
    (tmp_path / "passages" / "cdv").mkdir(parents=True)
    assert settings.model_path("passages") == tmp_path / "passages" / "cdv"
    with pytest.raises(FileNotFoundError):
        ServiceSettings(model_paths={"passages": tmp_path / "missing"}).model_path("passages")


class _TableEncoder:
    """A stand-in encoder: fixed vectors per text; every unseen text gets the same extra axis (7)."""

    name = "table"
    dim = 8

    def __init__(self, table):
        self.table = {t: np.asarray(v, dtype=np.float32) for t, v in table.items()}
        self.calls = []

    def encode(self, texts, kind="query", show_progress=False, **_):
        self.calls.append((kind, list(texts)))
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, t in enumerate(texts):
            if t in self.table:
                out[i, : len(self.table[t])] = self.table[t]
            else:
                out[i, 7] = 1.0
        return out


def test_distinct_questions_drops_rephrasings_of_better_and_asked_questions():
    from medrank.pipelines.history.question_bank import distinct_questions
    from medrank.utils.vectors import unit_rows as _unit

    texts = ["Have you had a fever?", "Do you have any fever?", "Any chest pain?", "Any pain in the chest?", "Do you smoke?"]
    vecs = _unit(np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 1, 0], [0, 0.95, 0.05], [0, 0, 1]], dtype=np.float32))
    fever = _unit(np.array([[1, 0.05, 0]], dtype=np.float32))
    none = np.zeros((0, 3), np.float32)
    rows = [{"text": t} for t in texts]

    def kept(asked, threshold, k=5):
        return [r["text"] for r in distinct_questions(rows, vecs, asked, threshold, k)]

    assert kept(none, 0.8) == ["Have you had a fever?", "Any chest pain?", "Do you smoke?"]
    assert kept(none, 0.8, k=2) == ["Have you had a fever?", "Any chest pain?"]
    assert kept(fever, 0.8) == ["Any chest pain?", "Do you smoke?"]  # the doctor asked "Fever?" already
    assert kept(none, 1.0) == texts
    assert distinct_questions([], none, fever, 0.8, 5) == []
    with pytest.raises(ValueError, match="row vectors"):
        distinct_questions(rows, vecs[:2], none, 0.8, 5)


def test_a_centred_bank_compares_questions_around_its_mean():
    # every vector shares a large common component (as e5-small's do): raw cosines are all high, centred ones are not
    common = np.array([10.0, 0, 0, 0])
    raw = np.stack([common + d for d in ([0, 1, 0, 0], [0, 0.9, 0.2, 0], [0, 0, 0, 1], [0, -1, -1, -1])]).astype(np.float32)
    ids = [f"q{i}" for i in range(4)]
    plain = QuestionBank("zh", ids, ids, None, "-", "-", vectors=raw)
    centred = QuestionBank("zh", ids, ids, None, "-", "-", vectors=raw, centre=True)
    assert np.allclose(centred.mean, raw.mean(axis=0)) and plain.mean is None
    assert (plain.vectors @ plain.vectors.T).min() > 0.95
    sims = centred.vectors @ centred.vectors.T
    assert sims[0, 1] > 0.8 and sims[0, 2] < 0.5
    assert np.allclose(centred.comparable(raw[:1]), centred.vectors_of(["q0"]))  # asked questions go through the same map
    with pytest.raises(ValueError, match="centre=True needs"):
        QuestionBank("zh", ids, ids, None, "-", "-", centre=True)


def test_next_questions_from_the_bank_are_distinct(services):
    bank = services.next_questions.ranker.banks["en"]
    texts = list(bank.texts.values())  # fever, headache, chest pain, cough
    enc = _TableEncoder({texts[0]: [1, 0, 0, 0], texts[1]: [0.95, 0.2, 0, 0], texts[2]: [0, 0, 1, 0], texts[3]: [0, 0, 0, 1],
                         "Is it hot?": [0, 0, 0.1, 0.99]})
    with pytest.raises(ValueError, match="cosine in"):
        _next_questions({"en": bank}, {"en": enc}, distinct={"en": 1.5})
    with pytest.raises(ValueError, match="no question bank"):
        _next_questions({"en": bank}, {"en": enc}, distinct={"zh": 0.8})
    with pytest.raises(ValueError, match="needs an encoder"):
        _next_questions({"en": bank}, {}, distinct={"en": 0.8})
    with pytest.raises(ValueError, match="cosine in"):
        _next_questions({"en": bank}, {"en": enc}, distinct={"en": True})
    wide = QuestionBank("en", bank.ids, [bank.texts[i] for i in bank.ids], bank.index, "hybrid", "test",
                        vectors=np.ones((len(bank.ids), 3), np.float32))
    with pytest.raises(ValueError, match="same encoder"):
        _next_questions({"en": wide}, {"en": enc}, distinct={"en": 0.8})
    assert _next_questions({"en": bank}, {"en": enc}, distinct={"en": np.float32(0.8)}).ranker.distinct == {"en": pytest.approx(0.8)}
    services.next_questions = _next_questions({"en": bank}, {"en": enc}, distinct={"en": 0.8})
    stored = QuestionBank("en", bank.ids, [bank.texts[i] for i in bank.ids], bank.index, "hybrid", "test",
                          vectors=enc.encode([bank.texts[i] for i in bank.ids]))
    enc.calls.clear()
    dialogue = [{"speaker": "patient", "text": "headache and fever"}, {"speaker": "doctor", "text": "Is it hot?"},
                {"speaker": "patient", "text": "yes"}]
    body = _client(services).post("/next-questions", json={"dialogue": dialogue, "k": 5}).json()
    got = [q["text"] for q in body["results"]]
    assert "rephrasings dropped (cosine >= 0.80 of table vectors)" in body["retrieval"]
    assert texts[3] not in got  # rephrases the doctor's "Is it hot?"
    assert len(got) == 2 and texts[2] in got and (texts[0] in got) != (texts[1] in got)  # one of the two fever questions
    services.next_questions = _next_questions({"en": stored}, {"en": enc}, distinct={"en": 0.8})
    enc.calls.clear()
    again = _client(services).post("/next-questions", json={"dialogue": dialogue, "k": 5}).json()
    assert [q["text"] for q in again["results"]] == got and enc.calls == [("passage", ["Is it hot?"])]
    # candidates given by the caller are ranked as given, rephrasings and all
    r = _client(services).post("/next-questions", json={"dialogue": dialogue, "candidates": texts[:2], "k": 5}).json()
    assert sorted(q["text"] for q in r["results"]) == sorted(texts[:2])
    # with a re-ranker, rephrasings are dropped from its order: the re-ranker's favourite of the two fever questions stays
    class PreferHeadache:
        def score(self, dialogue, questions):
            return [2.0 if q == texts[1] else 1.0 for q in questions]

    services.next_questions = _next_questions({"en": stored}, {"en": enc}, "fake re-ranker", True, reranker=PreferHeadache(),
                                                  distinct={"en": 0.8})
    reranked = [q["text"] for q in _client(services).post("/next-questions", json={"dialogue": dialogue, "k": 5}).json()["results"]]
    assert reranked[0] == texts[1] and texts[0] not in reranked and texts[3] not in reranked and len(reranked) == 2
    services.next_questions = _next_questions({"en": bank}, {"en": enc})  # no threshold: every question
    body = _client(services).post("/next-questions", json={"dialogue": dialogue, "k": 5}).json()
    assert len(body["results"]) == 4 and "rephrasings" not in body["retrieval"]


def test_next_questions_compare_centred_vectors_for_e5_small(services):
    # e5-small-like vectors: one large shared component, so every raw cosine is above 0.9 and only centred ones tell
    # questions apart; the doctor's turn must be centred on the bank's mean too, or nothing would survive
    bank = services.next_questions.ranker.banks["en"]
    texts = [bank.texts[i] for i in bank.ids]  # fever, headache, chest pain, cough
    common = [10.0, 0, 0, 0, 0]
    table = {texts[0]: [0, 1, 0, 0, 0], texts[1]: [0, 0, 1, 0, 0], texts[2]: [0, 0, 0, 1, 0], texts[3]: [0, 0, 0, 0, 1],
             "Do you cough?": [0, -0.25, -0.25, -0.25, 0.75]}  # the cough question, seen around the bank's mean
    enc = _TableEncoder({t: np.add(common, v) for t, v in table.items()})
    enc.name = "e5-small"
    raw_bank = QuestionBank("en", bank.ids, texts, bank.index, "hybrid", "test", vectors=enc.encode(texts))
    with pytest.raises(ValueError, match="centred on the bank"):
        _next_questions({"en": raw_bank}, {"en": enc}, distinct={"en": 0.45})
    centred = QuestionBank("en", bank.ids, texts, bank.index, "hybrid", "test", vectors=enc.encode(texts), centre=True)
    services.next_questions = _next_questions({"en": centred}, {"en": enc}, distinct={"en": 0.45})
    dialogue = [{"speaker": "patient", "text": "headache"}, {"speaker": "doctor", "text": "Do you cough?"},
                {"speaker": "patient", "text": "no"}]
    body = _client(services).post("/next-questions", json={"dialogue": dialogue, "k": 5}).json()
    assert sorted(q["text"] for q in body["results"]) == sorted(texts[:3])  # only the cough question is a repeat
    assert "bank-centred e5-small vectors" in body["retrieval"]


def test_symptoms_with_a_trained_run_apply_its_calibrated_beta(services):
    """A trained symptom run is served through SymptomDetector.detect: terms under its β are not returned."""
    from medrank.pipelines.symptom.inference import SymptomDetector
    from medrank.service.backends import DetectorBackend

    kb = services.symptoms.kbs["tiny-zh"]
    retriever = kb.backend.retriever
    raw = retriever.search(["头痛"], k=3)[0]
    beta = float(raw.scores[0])  # only the best term reaches it
    trained = KnowledgeBase(dataclasses.replace(kb.info, trained=True), list(kb.concepts.values()),
                            DetectorBackend(SymptomDetector(retriever, beta=beta)))
    services.symptoms = SymptomService({"tiny-zh": trained}, {"zh": "tiny-zh"})
    body = _client(services).post("/symptoms", json={"query": "头痛", "k": 3}).json()
    assert body["trained"] is True
    assert [r["id"] for r in body["results"]] == [i for i, s in zip(raw.ids, raw.scores, strict=True) if s >= beta]
    assert len(body["results"]) < 3
    # the same cut where the ranking comes from the set detector's own search of the whole text
    pairs = list(zip(raw.ids, raw.scores, strict=True))
    assert [h.id for h in trained.hits(pairs)] == [r["id"] for r in body["results"]]
    desc = services.symptoms.info().details["knowledge_bases"]["tiny-zh"]
    assert desc["beta"] == pytest.approx(beta) and desc["backend"] == "trained-detector"


def test_garbled_names_are_repaired_counted_and_never_served_first(tiny_encoder):
    from medrank.service.backends import repair_names

    garbled = [Concept("77.59", "其他ð§¿¹囊肿切除术"), Concept("x", "头痛é"), Concept("85.41", "乳腺切除术")]
    repaired, n = repair_names(garbled)
    assert n == 1 and repaired[0].name == "其他\U00027ff9囊肿切除术" and repaired[0].id == "77.59"
    kb = KnowledgeBase.build_index(KBInfo("p", "zh", "t", "1", "t", method="bm25"), garbled, None)
    assert kb.garbled == {"77.59", "x"} and kb.describe()["garbled_names"] == 2
    hits = kb.search(["其他ð§¿¹囊肿切除术 乳腺切除术"], k=3)[0]
    assert hits[0].id == "85.41"  # the garbled name matches best, but a readable one comes first


def test_icd10cm_serves_signs_and_symptoms_only():
    from medrank.data.icd10cm import is_symptom_code

    assert is_symptom_code("R51.9") and is_symptom_code("M54.5") and is_symptom_code("G47.00")
    assert not is_symptom_code("Z28.3")  # "Underimmunization status": administrative, never a complaint's answer
    assert not is_symptom_code("E11.9") and not is_symptom_code("S06.0")


def test_passages_sentence_vectors_are_computed_once_and_repeats_dropped(tiny_encoder):
    class CountingEncoder:
        def __init__(self, inner):
            self.inner, self.name, self.dim, self.calls = inner, inner.name, inner.dim, []

        def encode(self, texts, **kwargs):
            self.calls.append(len(texts))
            return self.inner.encode(texts, **kwargs)

    passages = [
        {"id": "d1-p1", "doc_id": "d1", "title": "Metformin", "label": "side effects", "text": "Nausea can occur. Take it with food."},
        {"id": "d2-p1", "doc_id": "d2", "title": "Metformin", "label": "side effects", "text": "Nausea can occur.  Take it with food."},
        {"id": "d3-p1", "doc_id": "d3", "title": "Asthma", "label": "symptoms", "text": "Cough and wheeze."},
    ]
    enc = CountingEncoder(tiny_encoder)
    svc = BM25PassageService.build(passages, enc, "test")
    assert svc.vectors.shape == (5, tiny_encoder.dim) and enc.calls == [5]
    body = svc.search("nausea", "food", k=5)
    assert enc.calls == [5, 1]  # the request encoded its query only
    assert [r["passage_id"] for r in body["results"]] == ["d1-p1"]  # d2-p1 repeats its text
    assert [s["text"] for s in body["results"][0]["sentences"]] == ["Nausea can occur.", "Take it with food."]
    q = tiny_encoder.encode(["nausea food"], kind="query")[0]
    want = [float(v @ q / np.linalg.norm(v) / np.linalg.norm(q)) for v in tiny_encoder.encode(["Nausea can occur."], kind="passage")]
    assert body["results"][0]["sentences"][0]["score"] == pytest.approx(want[0], abs=2e-3)
    assert body["curve"]["scores"] == [s["score"] for s in body["results"][0]["sentences"]]


def test_passages_answer_from_bm25_until_their_sentence_vectors_are_swapped_in(tiny_encoder):
    passages = [
        {"id": "d1-p1", "doc_id": "d1", "title": "Metformin", "label": "side effects", "text": "Nausea can occur. Take it with food."},
        {"id": "d3-p1", "doc_id": "d3", "title": "Asthma", "label": "symptoms", "text": "Cough and wheeze."},
    ]
    svc = BM25PassageService.build(passages, None, "test")
    body = svc.search("nausea", "food", k=5)
    assert svc.vectors is None and "BM25 of the sentence" in body["sentence_scores"]
    assert svc.info().details["sentence_scorer"] == "BM25 of the sentence"
    # BM25 of each sentence against "nausea food": both sentences match one query word
    assert [r["passage_id"] for r in body["results"]] == ["d1-p1"]
    assert all(s["score"] > 0 for s in body["results"][0]["sentences"])
    vectors = BM25PassageService.encode_sentences(tiny_encoder, svc.flat)
    with pytest.raises(ValueError, match="2 sentence vectors for 3 sentences"):
        svc.use_sentence_vectors(tiny_encoder, vectors[:2])
    svc.use_sentence_vectors(tiny_encoder, vectors)
    after = svc.search("nausea", "food", k=5)
    assert f"cosine({tiny_encoder.name})" in after["sentence_scores"]
    assert [r["passage_id"] for r in after["results"]] == ["d1-p1"]  # the ranking is BM25's either way
    q = tiny_encoder.encode(["nausea food"], kind="query")[0]
    v = tiny_encoder.encode(["Nausea can occur."], kind="passage")[0]
    want = float(v @ q / np.linalg.norm(v) / np.linalg.norm(q))
    assert after["results"][0]["sentences"][0]["score"] == pytest.approx(want, abs=2e-3)


def _building_step(name: str, done: int, total: int, seconds_ago: float = 10.0):
    from medrank.service.readiness import BuildStep

    step = BuildStep(name, 2, 4)
    step.start()
    step.update(0, total)
    step.progress_started -= seconds_ago
    step.update(done, total)
    return step


def test_a_pipeline_still_building_answers_503_with_retry_after(services):
    step = _building_step("passages", 45, 100, seconds_ago=45.0)  # 1 entry/s: 55 s left
    services.passages = None
    services.steps = {"passages": step}
    c = _client(services)
    r = c.post("/passages", json={"entity": "asthma", "aspect": "symptoms"})
    assert r.status_code == 503 and "building 45 %" in r.json()["detail"] and "about" in r.json()["detail"]
    assert 50 <= int(r.headers["retry-after"]) <= 60
    health = c.get("/health").json()
    assert health["pipelines"]["passages"] is False and health["states"]["passages"] == "building 45 %"
    assert health["builds"]["passages"]["progress"] == pytest.approx(0.45) and 50 <= health["builds"]["passages"]["eta_s"] <= 60
    assert health["ready"] is False
    models = {m["pipeline"]: m for m in c.get("/models").json()["pipelines"]}
    assert models["passages"]["state"] == "building 45 %" and models["passages"]["form"] == "not ready yet"
    assert models["symptoms"]["form"] == "zero-shot / first-stage" and "make models" in models["symptoms"]["train_command"]
    step.finish(RuntimeError("disk full"))
    r = c.post("/passages", json={"entity": "asthma", "aspect": "symptoms"})
    assert r.status_code == 503 and "failed: RuntimeError: disk full" in r.json()["detail"]


def test_the_words_of_the_other_language_are_read_by_its_own_list(services):
    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet
    from medrank.service.adapters import han_parts
    from medrank.service.backends import KBInfo, KnowledgeBase

    q = "I have a headache and 发烧"
    assert han_parts(q) == [(22, 24)] and han_parts("头痛，发烧两天 and a cough") == [(0, 7)] and han_parts("cough") == []
    read: list[str] = []

    class En:  # MiniLM cannot read 发烧: a term placed on those words alone is no reading
        def detect(self, text):
            return SymptomSet([DetectedTerm("HP:1", "Headache", 0.97, (9, 17)), DetectedTerm("HP:2", "Burn", 0.6, (22, 24))],
                              [DetectedTerm("HP:3", "Migraine", 0.02, (9, 17))])

    class Icd:
        def detect(self, text):
            read.append(text)
            return SymptomSet([DetectedTerm("发热", "发热", 0.87, (0, 2))], [DetectedTerm("烧伤", "烧伤", 0.2, (0, 2))])

    class Dxy:
        def detect(self, text):
            return SymptomSet([DetectedTerm("发烧", "发烧", 0.95, (0, 2))], [])

    tiny, en = services.symptoms.kbs["tiny-zh"], services.symptoms.kbs["tiny-en"]
    icd = KnowledgeBase(KBInfo("chip-cdn", "zh", "test", "1", "test"), list(tiny.concepts.values()), tiny.backend)
    dxy = KnowledgeBase(KBInfo("dxy", "zh", "test", "1", "test"), list(tiny.concepts.values()), tiny.backend)
    services.symptoms = SymptomService({"tiny-en": en, "chip-cdn": icd, "dxy": dxy},
                                       set_detectors={"tiny-en": En(), "chip-cdn": Icd(), "dxy": Dxy()})
    c = _client(services)
    body = c.post("/symptoms", json={"query": q}).json()
    assert body["kb"] == "tiny-en" and body["language"] == "en" and read == ["发烧"]  # the Chinese words alone
    assert [(t["name"], t["span"], t["source"]) for t in body["terms"]] == [
        ("Headache", [9, 17], None), ("发热", [22, 24], "chip-cdn")]  # at their place in the whole text
    assert [(t["name"], t["source"]) for t in body["alternatives"]] == [("Migraine", None), ("烧伤", "chip-cdn")]
    assert body["unread"] is None
    # a named knowledge base reads the text as asked; an English text with no Chinese word is read as before
    assert [t["name"] for t in c.post("/symptoms", json={"query": q, "kb": "tiny-en"}).json()["terms"]] == [
        "Headache", "Burn"]
    assert [t["name"] for t in c.post("/symptoms", json={"query": "I have a headache"}).json()["terms"]] == [
        "Headache", "Burn"]
    # the English words of a Chinese text, the other way round: the Chinese list's terms stay (e5-small reads English)
    from medrank.service.adapters import latin_parts

    assert [("孩子拉肚子，还有 vomiting"[a:b]) for a, b in latin_parts("孩子拉肚子，还有 vomiting")] == ["vomiting"]
    assert latin_parts("查了CT和MRI，PICC置管") == [] and latin_parts("宝宝fever三天") == [(2, 7)]
    zh_text = "孩子拉肚子，还有 vomiting"

    class Zh:
        def detect(self, text):
            return SymptomSet([DetectedTerm("稀便", "稀便", 0.98, (2, 5))], [])

    class EnWords:
        def detect(self, text):
            read.append(text)
            return SymptomSet([DetectedTerm("HP:4", "Vomiting", 0.9, (0, 8))], [])

    services.symptoms = SymptomService({"tiny-en": en, "chip-cdn": icd}, set_detectors={"tiny-en": EnWords(), "chip-cdn": Zh()})
    read.clear()
    body = _client(services).post("/symptoms", json={"query": zh_text}).json()
    assert body["kb"] == "chip-cdn" and read == ["vomiting"]
    assert [(t["name"], t["span"], t["source"]) for t in body["terms"]] == [
        ("稀便", [2, 5], None), ("Vomiting", [9, 17], "tiny-en")]
    # no Chinese list ready yet: the words are said to be unread, and why
    services.symptoms = SymptomService({"tiny-en": en}, pending={"chip-cdn": ("zh", _building_step("chip-cdn", 0, 0))},
                                       set_detectors={"tiny-en": En()})
    body = _client(services).post("/symptoms", json={"query": q}).json()
    assert [t["name"] for t in body["terms"]] == ["Headache"]
    assert [u["span"] for u in body["unread"]] == [[22, 24]] and "still being built" in body["unread"][0]["reason"]


def test_symptoms_answer_from_a_ready_knowledge_base_while_another_builds(services):
    hpo = _building_step("hpo", 10, 40)
    zh = _building_step("chip-cdn", 0, 0)
    ready = services.symptoms.kbs["tiny-en"]
    services.symptoms = SymptomService({"icd10cm": ready}, pending={"hpo": ("en", hpo), "chip-cdn": ("zh", zh)})
    c = _client(services)
    body = c.post("/symptoms", json={"query": "bad headache and fever"}).json()
    assert body["kb"] == "tiny-en"  # the ready English knowledge base answers meanwhile
    assert body["still_building"] == ["hpo"]  # ... and says which one it stands in for
    assert c.post("/symptoms", json={"query": "fever", "kb": "icd10cm"}).json()["still_building"] is None
    r = c.post("/symptoms", json={"query": "fever", "kb": "hpo"})
    assert r.status_code == 503 and "hpo knowledge base is still being built (building 25 %)" in r.json()["detail"]
    assert int(r.headers["retry-after"]) >= 1
    r = c.post("/symptoms", json={"query": "头痛发热"})
    assert r.status_code == 503 and "chip-cdn" in r.json()["detail"] and r.headers["retry-after"] == "10"
    services.symptoms.add("hpo", ready)
    assert services.symptoms.defaults["en"] == "hpo" and "hpo" not in services.symptoms.pending
    assert c.post("/symptoms", json={"query": "bad headache and fever"}).json()["still_building"] == []


def test_build_progress_lines_are_named_and_plain_off_a_terminal():
    import io

    from medrank.service.readiness import BuildReport, human_duration

    out = io.StringIO()
    report = BuildReport(out, log_every_s=0.0, tty=False)
    step = _building_step("hpo", 12_034, 40_459, seconds_ago=60.0)
    step.index, step.count = 1, 4
    report.progress(step)
    line = out.getvalue().strip()
    assert line.startswith("building hpo (1/4): 12,034/40,459 entries, ETA ") and line.endswith("min")
    assert "\x1b" not in line and "\r" not in line
    step.finish()
    report.finished(step)
    assert out.getvalue().splitlines()[-1].startswith("building hpo (1/4): ready in ")
    assert human_duration(30) == "30 s" and human_duration(180) == "3 min" and human_duration(3900) == "1 h 5 min"


def test_build_plan_puts_the_small_steps_first(tmp_path):
    from medrank.service.build import plan

    settings = ServiceSettings(api_token=None, state_dir=tmp_path, models_dir=tmp_path)
    assert plan(settings, ("symptoms", "normalize", "passages", "next-questions", "similar-questions")) == [
        "symptoms:icd10cm", "symptoms:dxy", "similar-questions", "next-questions", "passages", "differential", "normalize",
        "symptoms:hpo", "symptoms:chip-cdn", "similar-questions:vectors", "passages:sentence-vectors"]
    with pytest.raises(ValueError, match="unknown pipelines"):
        plan(settings, ("nope",))


def test_progress_encoder_reports_and_encodes_the_same(tiny_encoder):
    from medrank.service.readiness import ProgressEncoder

    seen = []
    enc = ProgressEncoder(tiny_encoder, lambda done, total: seen.append((done, total)), chunk=2)
    texts = ["fever", "cough", "rash", "headache", "nausea"]
    assert np.allclose(enc.encode(texts, kind="passage"), tiny_encoder.encode(texts, kind="passage"), atol=1e-5)
    assert seen == [(0, 5), (2, 5), (4, 5), (5, 5)] and enc.fingerprint() == tiny_encoder.fingerprint()


def test_set_detector_adapter(services):
    """The adapter the lead wires SetDetector into, over a stand-in with its interface."""
    from types import SimpleNamespace

    class Sets:  # SetDetector.detect(text) -> SymptomSet(terms, alternatives)
        def detect(self, text):
            term = SimpleNamespace(id="HP:1", name="headache", probability=0.91, span=(6, 14))
            alt = SimpleNamespace(id="HP:5", name="nausea", probability=0.3, span=None)
            return SimpleNamespace(terms=[term], alternatives=[alt])

    services.symptoms = SymptomService(services.symptoms.kbs, services.symptoms.defaults, set_detectors={"tiny-en": Sets()})
    body = _client(services).post("/symptoms", json={"query": "a bad headache"}).json()
    assert body["terms"] == [{"id": "HP:1", "name": "headache", "probability": 0.91, "span": [6, 14], "source": None}]
    assert body["alternatives"][0]["span"] is None and body["results"]
    with pytest.raises(ValueError, match="detect"):
        SymptomService(services.symptoms.kbs, set_detectors={"tiny-en": object()})
    # a knowledge base that joins later brings its detector along; one without a set calibration gets none
    services.symptoms.add("tiny-zh", services.symptoms.kbs["tiny-zh"], Sets())
    assert _client(services).post("/symptoms", json={"query": "头痛"}).json()["terms"][0]["name"] == "headache"
    details = {m["pipeline"]: m for m in _client(services).get("/models").json()["pipelines"]}["symptoms"]["details"]
    assert set(details["set_detection"]) == {"tiny-en", "tiny-zh"}


def test_symptoms_ranking_is_read_from_the_set_detectors_own_search(services):
    """The detector searched the whole text already: the plain ranking reuses those hits (no second search) when
    they go deep enough, and searches again when the request asks for more."""
    from types import SimpleNamespace

    kb = services.symptoms.kbs["tiny-en"]
    pairs = kb.backend.search(["a bad headache"], 3)[0]
    calls = []
    search = kb.backend.search
    kb.backend.search = lambda texts, k: calls.append(k) or search(texts, k)

    class Sets:
        k = 3

        def detect(self, text):
            return SimpleNamespace(terms=[], alternatives=[], ranking=tuple(pairs))

    services.symptoms = SymptomService(services.symptoms.kbs, services.symptoms.defaults, set_detectors={"tiny-en": Sets()})
    try:
        body = _client(services).post("/symptoms", json={"query": "a bad headache", "k": 2}).json()
        assert calls == [] and [r["id"] for r in body["results"]] == [cid for cid, _ in pairs[:2]]
        body = _client(services).post("/symptoms", json={"query": "a bad headache", "k": 5}).json()
        assert calls == [5] and len(body["results"]) == 5
    finally:
        kb.backend.search = search


def test_a_knowledge_base_without_a_set_calibration_serves_its_ranking(services, tmp_path):
    from medrank.service.build import Builder

    builder = Builder(ServiceSettings(api_token=None, state_dir=tmp_path), show_progress=False)
    assert builder.set_detector(services.symptoms.kbs["tiny-en"]) is None
    assert _client(services).post("/symptoms", json={"query": "fever"}).json()["terms"] is None

    # the inquiry engine's adapters are exercised over small real engines in test_service_inquiry.py
    assert _client(services).post("/differential", json={"findings": [{"name": "E_91"}], "language": "en"}).status_code == 503


def test_auto_completes_the_chinese_set_with_the_dxy_terms_on_uncovered_words(services):
    """ICD-10 Beijing has no plain 流涕: under kb 'auto' the DXY set adds its terms on words no ICD-10 term covers."""
    from types import SimpleNamespace

    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet
    from medrank.service.backends import KBInfo, KnowledgeBase

    q = "宝宝咳嗽流鼻涕，昨晚发烧"

    class Icd:
        def detect(self, text):
            return SymptomSet([DetectedTerm("咳嗽", "咳嗽", 0.99, (2, 4)), DetectedTerm("发热", "发热", 0.87, (10, 12))],
                              [DetectedTerm("鼻病毒感染", "鼻病毒感染", 0.04, (4, 7))])

    class Dxy:
        def detect(self, text):
            return SymptomSet([DetectedTerm("咳嗽", "咳嗽", 0.97, (2, 4)), DetectedTerm("流涕", "流涕", 0.96, (4, 7)),
                               DetectedTerm("发烧", "发烧", 0.94, (10, 12)), DetectedTerm("厌食", "厌食", 0.6, None)],
                              [])

    tiny = services.symptoms.kbs["tiny-zh"]
    icd = KnowledgeBase(KBInfo("chip-cdn", "zh", "test", "1", "test"), list(tiny.concepts.values()), tiny.backend)
    dxy = KnowledgeBase(KBInfo("dxy", "zh", "test", "1", "test"), list(tiny.concepts.values()), tiny.backend)
    services.symptoms = SymptomService({"tiny-en": services.symptoms.kbs["tiny-en"], "chip-cdn": icd, "dxy": dxy},
                                       set_detectors={"chip-cdn": Icd(), "dxy": Dxy()})
    c = _client(services)
    body = c.post("/symptoms", json={"query": q}).json()
    assert body["kb"] == "chip-cdn"
    # ICD-10 Beijing's terms first; then only 流涕, whose words (流鼻涕) no ICD-10 term covers; 厌食 has no words
    assert [(t["name"], t["source"]) for t in body["terms"]] == [("咳嗽", None), ("发热", None), ("流涕", "dxy")]
    assert [t["name"] for t in body["alternatives"]] == ["鼻病毒感染"]
    # the same decided sets for the inquiry's reader, several texts at once (one batch: detect_many), or one alone
    Icd.detect_many = lambda self, texts: [self.detect(t) for t in texts]
    Dxy.detect_many = lambda self, texts: [self.detect(t) for t in texts]
    many = services.symptoms.decide_many([q, q], "zh")
    assert [[t.name for t in one.terms] for one in many] == [["咳嗽", "发热", "流涕"]] * 2
    assert [t.name for t in services.symptoms.decide_many([q], "zh")[0].terms] == ["咳嗽", "发热", "流涕"]
    assert services.symptoms.decide_many([], "zh") == []
    assert services.symptoms.decide_many(["headache"], "en") is None  # a ranking only: nothing decided
    # confident: only the terms at or above the detector's calibrated threshold (none known: every decided term)
    assert [t.name for t in services.symptoms.decide_many([q], "zh", confident=True)[0].terms] == ["咳嗽", "发热", "流涕"]
    Icd.calibration = SimpleNamespace(threshold=0.9)
    assert [t.name for t in services.symptoms.decide_many([q], "zh", confident=True)[0].terms] == ["咳嗽", "流涕"]
    assert [t.name for t in services.symptoms.decide_many([q], "zh")[0].terms] == ["咳嗽", "发热", "流涕"]
    # one knowledge base named: its own set, not completed
    assert [t.name for t in services.symptoms.decide_many([q], "zh", kb="dxy")[0].terms] == ["咳嗽", "流涕", "发烧", "厌食"]
    # a knowledge base asked for by name answers alone
    assert [t["name"] for t in c.post("/symptoms", json={"query": q, "kb": "chip-cdn"}).json()["terms"]] == ["咳嗽", "发热"]


def test_a_decided_urgent_sign_puts_its_notice_in_the_response(services):
    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet

    class En:
        def detect(self, text):
            return SymptomSet([DetectedTerm("HP:0031589", "Suicidal ideation", 0.5, (0, 10)),
                               DetectedTerm("HP:0033771", "Pleuritic chest pain", 0.7, (12, 20))],  # below Chest pain
                              [DetectedTerm("HP:0001250", "Seizure", 0.1, (0, 10))])  # an alternative raises nothing

    class Quiet:
        def detect(self, text):
            return SymptomSet([DetectedTerm("HP:0002315", "Headache", 0.9, (0, 8))], [])

    class Dxy:
        def detect(self, text):
            return SymptomSet([DetectedTerm("抽搐", "抽搐", 0.9, (2, 4))], [])

    en, tiny = services.symptoms.kbs["tiny-en"], services.symptoms.kbs["tiny-zh"]
    dxy = KnowledgeBase(KBInfo("dxy", "zh", "test", "1", "test"), list(tiny.concepts.values()), tiny.backend)
    services.symptoms = SymptomService({"tiny-en": en, "dxy": dxy}, set_detectors={"tiny-en": En(), "dxy": Dxy()})
    c = _client(services)
    body = c.post("/symptoms", json={"query": "I want to die and my chest hurts"}).json()
    crisis, emergency = body["urgent"]
    assert crisis["kind"] == "crisis" and crisis["terms"] == ["HP:0031589"] and "emergency number" in crisis["message"]
    assert emergency["kind"] == "emergency" and emergency["signs"] == ["chest pain"]
    assert emergency["terms"] == ["HP:0033771"] and emergency["source"].startswith("https://")
    assert c.post("/symptoms", json={"query": "宝宝抽搐了"}).json()["urgent"][0]["signs"] == ["抽搐"]
    services.symptoms = SymptomService({"tiny-en": en}, set_detectors={"tiny-en": Quiet()})
    assert _client(services).post("/symptoms", json={"query": "I have a headache"}).json()["urgent"] == []

    class Past:  # a faint of years ago is history, not a notice
        def detect(self, text):
            return SymptomSet([DetectedTerm("HP:0001279", "Syncope", 0.9, (2, 9))], [])

    services.symptoms = SymptomService({"tiny-en": en}, set_detectors={"tiny-en": Past()})
    c = _client(services)
    assert c.post("/symptoms", json={"query": "I fainted at a concert years ago"}).json()["urgent"] == []
    assert c.post("/symptoms", json={"query": "I fainted at work today"}).json()["urgent"][0]["kind"] == "emergency"
    services.symptoms = SymptomService({"tiny-en": en})  # a ranking only: no set decided, nothing read
    assert _client(services).post("/symptoms", json={"query": "I have a headache"}).json()["urgent"] is None


def test_a_crisis_reader_raises_the_crisis_notice_where_no_word_or_term_does(services):
    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet

    class Quiet:
        def detect(self, text):
            return SymptomSet([DetectedTerm("HP:0002315", "Headache", 0.9, (0, 8))], [])

    def reader(text):  # stands for the probe: the clause that says it
        at = text.find("sorted out who gets the dog")
        return (at, at + 27) if at >= 0 else None

    en = services.symptoms.kbs["tiny-en"]
    services.symptoms = SymptomService({"tiny-en": en}, set_detectors={"tiny-en": Quiet()}, crisis_readers={"en": reader})
    c = _client(services)
    text = "headache, and I have sorted out who gets the dog"
    (notice,) = c.post("/symptoms", json={"query": text}).json()["urgent"]
    assert notice["kind"] == "crisis" and notice["spans"] == [[21, 48]]
    assert c.post("/symptoms", json={"query": "headache since Monday"}).json()["urgent"] == []


def test_next_questions_and_differential_carry_the_notices_of_the_confirmed_symptoms(services):
    en = services.symptoms.kbs["tiny-en"]
    hpo = KnowledgeBase(KBInfo("hpo", "en", "test", "1", "test"),
                        [Concept("HP:0100749", "Chest pain"), Concept("HP:0002315", "Headache")], en.backend)
    services.symptoms = SymptomService({"hpo": hpo})
    c = _client(services)
    dialogue = [{"speaker": "patient", "text": "my chest hurts"}]
    body = c.post("/next-questions", json={"dialogue": dialogue, "symptoms": ["Chest pain", "Headache"]}).json()
    assert [(n["kind"], n["terms"]) for n in body["urgent"]] == [("emergency", ["HP:0100749"])]
    assert c.post("/next-questions", json={"dialogue": dialogue, "symptoms": ["Headache"]}).json()["urgent"] == []
    assert c.post("/next-questions", json={"dialogue": dialogue, "symptoms": ["not a term"]}).json()["urgent"] == []
    services.symptoms = None  # no symptom list served (yet): nothing can be said
    assert _client(services).post("/next-questions", json={"dialogue": dialogue, "symptoms": ["Chest pain"]}).json()[
        "urgent"] is None


def test_a_signs_own_words_raise_its_notice_where_the_detector_misreads_them(services):
    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet

    class Dxy:  # 吐血 read as vomiting: the blood is lost in the term, not in the notice
        def detect(self, text):
            return SymptomSet([DetectedTerm("呕吐", "呕吐", 0.6, (0, 2))], [])

    tiny = services.symptoms.kbs["tiny-zh"]
    dxy = KnowledgeBase(KBInfo("dxy", "zh", "test", "1", "test"), list(tiny.concepts.values()), tiny.backend)
    services.symptoms = SymptomService({"dxy": dxy}, set_detectors={"dxy": Dxy()})
    c = _client(services)
    (notice,) = c.post("/symptoms", json={"query": "吐血了"}).json()["urgent"]
    assert (notice["kind"], notice["terms"], notice["spans"]) == ("emergency", [], [[0, 2]])
    assert c.post("/symptoms", json={"query": "没有吐血"}).json()["urgent"] == []
