"""/next-questions and /differential over small real inquiry engines (naive-Bayes tables fitted on a handful of
hand-written patients, the product's detectors), and their input errors."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("fastapi")

from test_service import _client, services, tiny_services  # noqa: E402, F401 - the tiny-services fixtures

from medrank.pipelines.history.inquiry import Calibration, InquiryEngine  # noqa: E402
from medrank.pipelines.history.inquiry.findings import ChineseDetector, EnglishDetector  # noqa: E402
from medrank.pipelines.history.inquiry.kb import Evidence, Patient  # noqa: E402
from medrank.pipelines.history.inquiry.posterior import fit_ddxplus, fit_dxy  # noqa: E402
from medrank.service.adapters import (  # noqa: E402
    DifferentialService,
    Inquiry,
    NextQuestionService,
    ReadTerm,
    without_spans,
)

ZH_SYMPTOMS = ["发烧", "咳嗽", "流涕", "咳痰", "腹泻", "呕吐"]
ZH_DISEASES = ["上呼吸道感染", "肺炎", "小儿腹泻"]


def _zh_engine(asked: bool = False) -> InquiryEngine:
    """Colds have a runny nose, pneumonia phlegm, diarrhoea loose stools and vomiting; fever and cough are shared.
    ``asked``: each symptom asked as DXY's doctors ask about the child, and its question to the one writing."""
    records = {
        "上呼吸道感染": [{"发烧": True, "咳嗽": True, "流涕": True}, {"咳嗽": True, "流涕": True, "咳痰": False},
                     {"发烧": True, "流涕": True}],
        "肺炎": [{"发烧": True, "咳嗽": True, "咳痰": True}, {"咳嗽": True, "咳痰": True, "流涕": False},
               {"发烧": True, "咳嗽": True, "咳痰": True}],
        "小儿腹泻": [{"腹泻": True, "呕吐": True}, {"腹泻": True, "发烧": True}, {"腹泻": True, "呕吐": True, "咳嗽": False}],
    }
    patients = [Patient(f"{d}-{i}", d, tuple(r)[:1], r) for d, rs in records.items() for i, r in enumerate(rs)]
    model = fit_dxy(patients, ZH_SYMPTOMS, ZH_DISEASES)
    pairs = [(["发烧", "咳嗽"], ["发烧", "咳嗽"]), (["拉肚子"], ["腹泻"]), (["鼻涕"], ["流涕"]), (["发烧"], ["发烧"])]
    questions = {"questions": {s: f"请问孩子最近有{s}吗?" for s in ZH_SYMPTOMS},
                 "questions_to_writer": {s: f"请问您最近有{s}吗?" for s in ZH_SYMPTOMS}, "population": "children"}
    return InquiryEngine("zh", model, {s: s for s in ZH_SYMPTOMS}, {d: d for d in ZH_DISEASES},
                         Calibration(threshold=0.95, budget=10), name="dxy-kb",
                         detector=ChineseDetector(ZH_SYMPTOMS, pairs, min_reports_unlike=1),  # one report per word here
                         **(questions if asked else {}))


def _en_engine(tiny_encoder, detector=None) -> InquiryEngine:
    evidences = {
        "E_91": Evidence("E_91", "Do you have a fever?", "B", "E_91", "", ()),
        "E_53": Evidence("E_53", "Do you have pain somewhere?", "B", "E_53", "", ()),
        "E_55": Evidence("E_55", "Where is the pain?", "M", "E_53", "V_123", ("V_123", "V_29", "V_89"),
                         {"V_123": "nowhere", "V_29": "lower chest", "V_89": "forehead"}),
        "E_201": Evidence("E_201", "Do you have a cough?", "B", "E_201", "", ()),
    }
    support = {"Influenza": {"E_91", "E_201", "E_53", "E_55"}, "Migraine": {"E_53", "E_55"}}
    patients = [Patient("f1", "Influenza", ("E_91",), {"E_91": True, "E_201": True}, age=30, sex="F"),
                Patient("f2", "Influenza", ("E_91",), {"E_91": True, "E_53": True, "E_55": ("V_29",)}, age=40, sex="M"),
                Patient("m1", "Migraine", ("E_53",), {"E_53": True, "E_55": ("V_89",)}, age=35, sex="F"),
                Patient("m2", "Migraine", ("E_53",), {"E_53": True, "E_55": ("V_89",)}, age=50, sex="M")]
    model = fit_ddxplus(patients, evidences, support)
    # the tiny encoder's vectors are random: a threshold above any cosine keeps it from detecting anything, so
    # the English findings here are the ones a request sends
    detector = detector or EnglishDetector(evidences, threshold=2.0, encoder=tiny_encoder, hpo=False)
    return InquiryEngine("en", model, {n: e.question for n, e in evidences.items()}, {"Influenza": "Influenza (flu)"},
                         Calibration(threshold=0.95, budget=5), demographics=True, name="ddxplus-kb", detector=detector,
                         value_meanings={n: e.meanings for n, e in evidences.items() if e.meanings})


@pytest.fixture
def inquiry_services(services):  # noqa: F811 - the imported fixture
    encoder = services.next_questions.ranker.encoders["en"]
    inquiry = Inquiry({"en": _en_engine(encoder), "zh": _zh_engine()})
    return dataclasses.replace(services, differential=DifferentialService(inquiry),
                               next_questions=NextQuestionService(services.next_questions.ranker, inquiry))


def _patient(text: str) -> dict:
    return {"speaker": "patient", "text": text}


def test_next_questions_come_from_the_engine_and_skip_what_the_patient_said(inquiry_services):
    c = _client(inquiry_services)
    r = c.post("/next-questions", json={"dialogue": [_patient("宝宝发烧咳嗽两天了")], "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["engine"] == "dxy-kb" and body["language"] == "zh" and body["model"].startswith("dxy-kb (naive Bayes")
    assert {(f["name"], f["value"], f["source"]) for f in body["findings"]} == {("发烧", "present", "self-report"),
                                                                                ("咳嗽", "present", "self-report")}
    asked = [q["finding"] for q in body["results"]]
    assert asked and not {"发烧", "咳嗽"} & set(asked) and len(asked) == len(set(asked))
    # fever + cough: a cold or pneumonia, so the runny nose or the phlegm tells them apart best
    assert asked[0] in ("流涕", "咳痰")
    assert all(q["id"] == q["finding"] and q["text"] and q["options"] == [] for q in body["results"])
    assert body["should_stop"] is False
    # an answer joins the findings and leaves the questions; a negated word in the complaint is a finding too
    r = c.post("/next-questions", json={"dialogue": [_patient("宝宝发烧两天，没有拉肚子"), {"speaker": "doctor", "text": "有没有咳痰？"},
                                                     _patient("yes")],  # the complaint decides the language
                                        "findings": [{"name": "咳痰", "value": "present"}]})
    body = r.json()
    assert body["language"] == "zh"
    found = {f["name"]: (f["value"], f["source"]) for f in body["findings"]}
    assert found == {"咳痰": ("present", "question:咳痰"), "发烧": ("present", "self-report"), "腹泻": ("absent", "self-report")}
    assert not set(found) & {q["finding"] for q in body["results"]}


def test_a_chinese_greeting_gets_the_engines_questions_an_english_one_the_bank(inquiry_services):
    # nothing read: the DXY engine still asks its most telling questions (its bank holds only templates about its
    # own symptoms); English keeps the question bank, which asks what the complaint is
    c = _client(inquiry_services)
    zh = c.post("/next-questions", json={"dialogue": [_patient("你好医生")], "k": 3}).json()
    assert zh["engine"] == "dxy-kb" and zh["findings"] == [] and zh["should_stop"] is False
    assert len(zh["results"]) == 3 and all(q["finding"] in ZH_SYMPTOMS for q in zh["results"])
    en = c.post("/next-questions", json={"dialogue": [_patient("Hello doctor")], "k": 3}).json()
    assert en["engine"] == "question-bank" and en["findings"] == []
    # there is no condition to rank yet: /differential says so, as before
    bare = c.post("/differential", json={"dialogue": [_patient("你好医生")]})
    assert bare.status_code == 422 and "no finding" in bare.json()["detail"]
    # words were sent, and none is a finding of the engine: the answer says so, not "send a symptom"
    assert "none of the symptoms or words sent" in bare.json()["detail"] and "dxy-kb" in bare.json()["detail"]
    nothing = c.post("/differential", json={"findings": [], "language": "en"})
    assert nothing.status_code == 422 and "send at least one finding" in nothing.json()["detail"]


def test_the_question_bank_serves_a_complaint_outside_the_knowledge_base(inquiry_services):
    c = _client(inquiry_services)
    body = c.post("/next-questions", json={"dialogue": [_patient("I have a headache")], "k": 3}).json()
    assert body["engine"] == "question-bank" and body["findings"] == [] and body["should_stop"] is None
    assert len(body["results"]) == 3 and all(q["finding"] is None and not q["choice_only"] for q in body["results"])
    # ... and says why, since no list of possible conditions follows
    assert "Nothing in these words is one of the findings the ddxplus-kb engine asks about" in body["note"]
    assert "no list of possible conditions is made yet (it weighs the 2 conditions" in body["note"]
    # an age read from the words alone names nothing the engine asks about: still the bank, and no differential
    body = c.post("/next-questions", json={"dialogue": [_patient("my 3 year old has a headache")], "k": 3}).json()
    assert body["engine"] == "question-bank" and body["findings"] == []
    assert c.post("/differential", json={"dialogue": [_patient("my 3 year old has a headache")]}).status_code == 422
    # given candidates are ranked by the bank too (the engine asks about findings, not given texts): nothing to explain
    body = c.post("/next-questions", json={"dialogue": [_patient("宝宝发烧")], "candidates": ["咳嗽吗？", "拉肚子吗？"]}).json()
    assert body["engine"] == "question-bank" and body["note"] is None
    # English findings sent by the page: the engine serves, with the categorical finding's options
    body = c.post("/next-questions", json={"dialogue": [_patient("I have a headache")],
                                           "findings": [{"name": "E_53", "value": "present"}], "k": 5}).json()
    assert body["engine"] == "ddxplus-kb"
    by_name = {q["finding"]: q for q in body["results"]}
    assert "E_53" not in by_name and "E_55" in by_name  # the location follows once pain is present
    assert by_name["E_55"]["options"][1] == {"value": "V_29", "label": "lower chest"}
    # pain is known: "Do you feel pain somewhere?" asks where, a yes / no answer would say nothing
    assert by_name["E_55"]["choice_only"] is True
    assert not any(q["choice_only"] for q in body["results"] if not q["options"])
    assert body["findings"] == [{"name": "E_53", "label": "pain somewhere", "value": "present", "value_label": "yes",
                                 "source": "question:E_53"}]


def test_differential_reads_the_confirmed_symptoms_as_next_questions_does(inquiry_services):
    # the complaint's words hold no finding the engine reads; the symptoms ticked from it do
    c = _client(inquiry_services)
    body = {"dialogue": [_patient("宝宝不舒服")], "symptoms": ["拉肚子"]}
    questions = c.post("/next-questions", json={**body, "k": 3}).json()
    assert questions["engine"] == "dxy-kb"
    assert [(f["name"], f["source"]) for f in questions["findings"]] == [("腹泻", "self-report")]
    ranked = c.post("/differential", json={**body, "language": "zh", "k": 3})
    assert ranked.status_code == 200, ranked.text
    ranked = ranked.json()
    assert ranked["findings"] == questions["findings"] and ranked["results"][0]["name"] == "小儿腹泻"
    bare = c.post("/differential", json={"dialogue": [_patient("宝宝不舒服")], "language": "zh"})
    assert bare.status_code == 422 and "confirmed symptom" in bare.json()["detail"]


def test_differential_changes_with_answers_and_says_it_is_not_a_diagnosis(inquiry_services):
    c = _client(inquiry_services)
    dialogue = [_patient("宝宝发烧咳嗽两天了")]
    first = c.post("/differential", json={"dialogue": dialogue, "language": "zh", "k": 3})
    assert first.status_code == 200, first.text
    first = first.json()
    assert first["engine"] == "dxy-kb" and "not a diagnosis" in first["note"]
    assert "It weighs the 3 conditions of its case collection only" in first["note"]  # the fixture's three
    assert {x["name"] for x in first["results"][:2]} == {"肺炎", "上呼吸道感染"}  # fever and cough: not diarrhoea
    assert abs(sum(x["probability"] for x in first["results"]) - 1) < 1e-3
    second = c.post("/differential", json={"dialogue": dialogue, "language": "zh",
                                           "findings": [{"name": "咳痰", "value": "present"}]}).json()
    top = second["results"][0]
    assert top["name"] == "肺炎" and top["label"] == "肺炎" and "咳痰" in top["supporting"]
    p = {x["name"]: x["probability"] for x in first["results"]}
    assert top["probability"] > p["肺炎"]
    en = c.post("/differential", json={"findings": [{"name": "E_91"}, {"name": "E_201"}], "language": "en"}).json()
    assert en["results"][0]["label"] == "Influenza (flu)" and en["results"][0]["supporting_labels"] == ["a fever", "a cough"]
    assert en["results"][0]["unexplained"] == [] and "unexplained" not in en["note"]
    # a fever with forehead pain: no influenza case had forehead pain, no migraine case a fever
    mixed = c.post("/differential", json={"findings": [{"name": "E_91"}, {"name": "E_53"},
                                                       {"name": "E_55", "value": "V_89"}], "language": "en"}).json()
    unexplained = {x["name"]: (x["unexplained"], x["unexplained_labels"]) for x in mixed["results"]}
    assert unexplained["Influenza"] == (["E_55=V_89"], ["Where is the pain: forehead"])
    assert unexplained["Migraine"] == (["E_91"], ["a fever"])
    # the pain and where it is read apart: a multiple-choice finding names its established values
    migraine = next(x for x in mixed["results"] if x["name"] == "Migraine")
    assert dict(zip(migraine["supporting"], migraine["supporting_labels"], strict=True)) == {
        "E_53": "pain somewhere", "E_55": "Where is the pain: forehead"}
    assert "Each condition listed leaves something reported unexplained" in mixed["note"]
    assert isinstance(en["should_stop"], bool)
    assert first["outside_probability"] is None and en["outside_probability"] is None  # closed-world engines


def test_an_open_world_engine_says_how_likely_the_condition_is_none_of_its_own(inquiry_services):
    engine = inquiry_services.differential.inquiry.engines["en"]
    engine.calibration = dataclasses.replace(engine.calibration, outside_prior=0.2, outside_leak=0.1)
    c = _client(inquiry_services)
    findings = [{"name": "E_91"}, {"name": "E_53"}, {"name": "E_55", "value": "V_89"}]
    body = c.post("/differential", json={"findings": findings, "language": "en"}).json()
    p_out = body["outside_probability"]
    assert 0.0 < p_out < 1.0 and "the chance that the condition is none of them" in body["note"]
    assert abs(sum(x["probability"] for x in body["results"]) + p_out - 1) < 1e-3  # the two conditions share the rest
    # a fever and a cough: influenza explains both, the outside class gets less than with a finding none explains
    flu = c.post("/differential", json={"findings": [{"name": "E_91"}, {"name": "E_201"}], "language": "en"}).json()
    assert flu["outside_probability"] < p_out


def test_differential_reads_its_language_as_next_questions_does(inquiry_services):
    # no language sent: the first patient turn's, else the confirmed symptoms', else the one engine knowing the findings
    c = _client(inquiry_services)
    zh = c.post("/differential", json={"dialogue": [_patient("宝宝发烧咳嗽两天了")], "k": 3})
    assert zh.status_code == 200, zh.text
    assert zh.json()["language"] == "zh" and zh.json()["engine"] == "dxy-kb"
    assert c.post("/differential", json={"dialogue": [_patient("宝宝不舒服")], "symptoms": ["拉肚子"]}).json()["language"] == "zh"
    en = c.post("/differential", json={"findings": [{"name": "E_91"}, {"name": "E_201"}, {"name": "age", "value": "30"}]})
    assert en.status_code == 200, en.text
    assert en.json()["language"] == "en" and en.json()["results"][0]["name"] == "Influenza"
    # a language neither engine speaks is refused as /next-questions refuses it, not read as English
    french = c.post("/differential", json={"dialogue": [_patient("J'ai de la fièvre et je tousse depuis deux jours")]})
    assert french.status_code == 404 and french.json()["errors"][0]["type"] == "unsupported_language", french.text
    # findings no single engine knows, and no words: say what to send
    mixed = c.post("/differential", json={"findings": [{"name": "E_91"}, {"name": "咳嗽"}]})
    assert mixed.status_code == 422 and "send language 'en' or 'zh'" in mixed.json()["detail"]


@pytest.mark.parametrize("path, body, status, match", [
    ("/differential", {"findings": [{"name": "E_999"}], "language": "en"}, 422, "unknown finding 'E_999'"),
    ("/next-questions", {"dialogue": [_patient("I have a headache")], "findings": [{"name": "E_999"}]}, 422, "unknown finding"),
    ("/differential", {"findings": [{"name": "E_91"}, {"name": "E_91", "value": "absent"}], "language": "en"}, 422,
     "contradictory"),
    ("/next-questions", {"dialogue": [_patient("宝宝发烧")], "findings": [{"name": "咳嗽"}, {"name": "咳嗽", "value": "absent"}]},
     422, "contradictory"),
    ("/differential", {"findings": [{"name": "E_55", "value": "V_999"}], "language": "en"}, 422, "unknown value"),
    ("/differential", {"findings": [], "language": "en"}, 422, "no finding"),
    ("/differential", {"dialogue": [_patient("今天天气很好")], "language": "zh"}, 422, "no finding"),
    ("/next-questions", {"dialogue": []}, 422, "dialogue"),
    ("/next-questions", {"dialogue": [_patient("   ")]}, 422, "dialogue"),
    ("/differential", {"findings": [{"name": "E_91", "value": "maybe"}], "language": "en"}, 422, "not understood"),
])
def test_bad_inquiry_input_is_a_clear_4xx(inquiry_services, path, body, status, match):
    r = _client(inquiry_services).post(path, json=body)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"detail", "errors"} and match in r.json()["detail"], r.json()


def test_ten_thousand_turns_are_refused_in_the_common_shape(inquiry_services):
    turns = [_patient("发烧")] * 10_000
    for settings, status in (({}, 413), ({"max_body_bytes": 10_000_000}, 422)):  # too big a body; too many turns
        c = _client(inquiry_services, **settings)
        for path, extra in (("/next-questions", {}), ("/differential", {"language": "zh"})):
            r = c.post(path, json={"dialogue": turns, **extra})
            assert r.status_code == status, r.text
            assert set(r.json()) == {"detail", "errors"} and r.json()["detail"]


def test_findings_without_an_engine_for_the_language_are_refused(inquiry_services):
    zh_only = Inquiry({"zh": inquiry_services.differential.inquiry.engines["zh"]})
    inquiry_services.next_questions.inquiry = zh_only
    r = _client(inquiry_services).post("/next-questions", json={"dialogue": [_patient("I have a fever")],
                                                                  "findings": [{"name": "E_91"}]})
    assert r.status_code == 404 and "inquiry engine" in r.json()["detail"]
    inquiry_services.differential = DifferentialService(zh_only)
    assert _client(inquiry_services).post("/differential", json={"findings": [{"name": "E_91"}], "language": "en"}).status_code == 404


def test_models_list_the_inquiry_engines(inquiry_services):
    models = {m["pipeline"]: m for m in _client(inquiry_services).get("/models").json()["pipelines"]}
    assert models["differential"]["details"]["en"]["engine"] == "ddxplus-kb"
    assert models["differential"]["details"]["zh"]["conditions"] == 3
    assert models["next-questions"]["model"].startswith("en: ddxplus-kb; zh: dxy-kb; fallback: question bank")
    assert models["next-questions"]["details"]["inquiry_engines"]["zh"]["engine"] == "dxy-kb"


def test_schemathesis_inquiry_endpoints_never_answer_5xx(inquiry_services):
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hypothesis_settings

    from medrank.service.app import create_app
    from medrank.service.settings import ServiceSettings

    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(ServiceSettings(api_token=None, request_timeout_s=20),
                                                                        inquiry_services))
    operations = [op for op in (r.ok() for r in schema.get_all_operations()) if op.path in ("/next-questions", "/differential")]
    assert len(operations) == 2
    seen: dict[int, int] = {}
    for op in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @given(op.as_strategy(generation_mode=mode))
            @hypothesis_settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
            def check(case):
                response = case.call()
                seen[response.status_code] = seen.get(response.status_code, 0) + 1
                assert response.status_code < 500, f"{case.method} {case.path} → {response.status_code}: {response.text[:300]}"

            check()
    assert seen.get(422)


def test_engine_model_names_the_rerankers_backend():
    from types import SimpleNamespace

    from medrank.service.adapters import engine_model

    engine = SimpleNamespace(name="ddxplus-kb", language="en", reranker=None, reranker_backend=None)
    assert engine_model(engine).endswith("knowledge-base first stage; zero-shot: no re-ranker)")
    engine.reranker = object()
    assert engine_model(engine).endswith("re-ranked by a trained history re-ranker)")
    engine.reranker_backend = {"kind": "global", "backend": "torch", "reason": "fastest that agrees"}
    assert engine_model(engine).endswith("re-ranked by a trained history re-ranker on torch)")


class _WordDetector:
    """Reads "fever" as E_91 and nothing else: the engine's own detector knows the evidence's word, not the
    patient's ("a high temperature")."""

    @staticmethod
    def detect(text: str, term: bool = False, question: bool = False) -> list[tuple[str, str]]:
        return [("E_91", "present")] if "fever" in text.lower() else []


def _reading_services(inquiry_services, reader):
    engines = dict(inquiry_services.differential.inquiry.engines)
    engines["en"] = _en_engine(inquiry_services.next_questions.ranker.encoders["en"], detector=_WordDetector())
    inquiry = Inquiry(engines, reader=reader)
    return dataclasses.replace(inquiry_services, differential=DifferentialService(inquiry),
                               next_questions=NextQuestionService(inquiry_services.next_questions.ranker, inquiry))


def test_a_dialogue_sent_alone_has_its_symptoms_read_by_the_reader(inquiry_services):
    calls = []

    def reader(texts, language):
        calls.append((list(texts), language))
        return [["Fever"] if "temperature" in t else [] for t in texts]

    c = _client(_reading_services(inquiry_services, reader))
    dialogue = [_patient("I've had a high temperature since last night"), {"speaker": "doctor", "text": "Any cough?"},
                _patient("a bit of a temperature still")]
    body = c.post("/next-questions", json={"dialogue": dialogue, "k": 3}).json()
    # only the first patient turn is read, in the engine's language; its terms count as confirmed
    assert calls == [(["I've had a high temperature since last night"], "en")]
    assert body["engine"] == "ddxplus-kb" and body["symptoms_read"] == ["Fever"]
    assert [(f["name"], f["source"]) for f in body["findings"]] == [("E_91", "self-report")]
    assert "E_91" not in {q["finding"] for q in body["results"]}
    body = c.post("/differential", json={"dialogue": dialogue[:1], "language": "en"}).json()
    assert body["symptoms_read"] == ["Fever"] and [f["name"] for f in body["findings"]] == ["E_91"]
    # symptoms sent (an empty list too: the patient unticked them all) are the confirmed ones; none is read, but the
    # first turns are, for the words each confirmed symptom covers
    calls.clear()
    body = c.post("/next-questions", json={"dialogue": dialogue[:1], "symptoms": [], "k": 3}).json()
    assert calls == [] and body["engine"] == "question-bank" and body["symptoms_read"] is None
    body = c.post("/next-questions", json={"dialogue": dialogue, "symptoms": ["a fever"], "k": 3}).json()
    assert calls == [([dialogue[0]["text"], dialogue[2]["text"]], "en")]
    assert body["symptoms_read"] is None and [f["name"] for f in body["findings"]] == ["E_91"]
    calls.clear()
    # Chinese: the DXY engine's detector reads the words alone (reading them too found nothing more)
    body = c.post("/next-questions", json={"dialogue": [_patient("宝宝发烧咳嗽两天了")], "k": 3}).json()
    assert calls == [] and body["engine"] == "dxy-kb" and body["symptoms_read"] is None


def test_a_symptom_the_engine_reads_nothing_from_is_said_not_weighed(inquiry_services):
    # "my vision goes blurry": Blurred vision is no finding of DDXPlus; the differential was ranked without it and the
    # response did not say so
    from medrank.service.adapters import ReadTerm

    def reader(texts, language):
        return [[ReadTerm("Fever", (9, 14), 0.9), ReadTerm("Blurred vision", (19, 38), 0.8)] if "vision" in t
                else [ReadTerm("Pyrexia", (9, 14), 0.9)] if "fever" in t else [] for t in texts]

    c = _client(_reading_services(inquiry_services, reader))
    text = "I have a fever and my vision is blurry"
    body = c.post("/differential", json={"dialogue": [_patient(text)], "language": "en"}).json()
    assert body["symptoms_read"] == ["Fever", "Blurred vision"] and body["symptoms_not_weighed"] == ["Blurred vision"]
    body = c.post("/next-questions", json={"dialogue": [_patient(text)], "k": 3}).json()
    assert body["engine"] == "ddxplus-kb" and body["symptoms_not_weighed"] == ["Blurred vision"]
    # a term whose name reads nothing is weighed where the words it covers read a finding
    body = c.post("/differential", json={"dialogue": [_patient("I have a fever")], "language": "en"}).json()
    assert body["symptoms_read"] == ["Pyrexia"] and body["symptoms_not_weighed"] == []
    # a confirmed symptom whose name reads a finding is weighed; one sent that reads none is not
    body = c.post("/differential", json={"dialogue": [_patient(text)], "symptoms": ["a fever", "Floaters"]}).json()
    assert body["symptoms_not_weighed"] == ["Floaters"]
    # the question bank weighs no condition: nothing to say
    body = c.post("/next-questions", json={"dialogue": [_patient("I need a sick note")], "symptoms": [], "k": 3}).json()
    assert body["engine"] == "question-bank" and body["symptoms_not_weighed"] is None


def test_a_read_term_is_read_with_the_words_it_was_decided_on(inquiry_services):
    # the engine's detector is told the patient's words each read term covers (``spoken``), so that a past diagnosis is
    # read from the term only where those words name it
    from medrank.service.adapters import ReadTerm

    heard = []

    class SpokenDetector(_WordDetector):
        @staticmethod
        def detect(text, term=False, question=False, spoken=None):
            if term:
                heard.append((text, spoken))
            return _WordDetector.detect(text, term, question)

    engines = dict(inquiry_services.differential.inquiry.engines)
    engines["en"] = _en_engine(inquiry_services.next_questions.ranker.encoders["en"], detector=SpokenDetector())
    inquiry = Inquiry(engines, reader=lambda texts, language: [[ReadTerm("Pyrexia", (9, 14), 0.9)] for _ in texts])
    c = _client(dataclasses.replace(inquiry_services, differential=DifferentialService(inquiry)))
    c.post("/differential", json={"dialogue": [_patient("I have a fever")], "language": "en"})
    assert ("Pyrexia", "fever") in heard


class _PhraseDetector:
    """Reads the words "hot all over" as a cough (a misreading), "head hurts" as pain, and the term name "Fever" as
    the fever: how the engine's detector and a term's name may read one symptom two ways."""

    @staticmethod
    def detect(text: str, term: bool = False, question: bool = False) -> list[tuple[str, str]]:
        if term:
            return [("E_91", "present")] if text == "Fever" else []
        return ([("E_201", "present")] if "hot all over" in text else []) + (
            [("E_53", "present")] if "head hurts" in text else [])


class _ChestDetector:
    """Reads "my chest hurts" as pain in the lower chest (E_55 = V_29)."""

    @staticmethod
    def detect(text: str, term: bool = False, question: bool = False) -> list[tuple[str, str]]:
        return [("E_53", "present"), ("E_55", "V_29")] if "chest hurts" in text else []


def test_a_choice_to_the_engines_own_question_settles_its_finding_before_the_words(inquiry_services):
    # the words said where the pain is one way; asked where, the patient says another: the answer is the finding
    engines = dict(inquiry_services.differential.inquiry.engines)
    engines["en"] = _en_engine(inquiry_services.next_questions.ranker.encoders["en"], detector=_ChestDetector())
    inquiry = Inquiry(engines, reader=None)
    c = _client(dataclasses.replace(inquiry_services, differential=DifferentialService(inquiry),
                                    next_questions=NextQuestionService(inquiry_services.next_questions.ranker, inquiry)))
    dialogue = [_patient("my chest hurts"), {"speaker": "doctor", "text": "Where is the pain?"},
                {"speaker": "patient", "text": "forehead"}]
    body = c.post("/next-questions", json={"dialogue": dialogue, "k": 3, "language": "en"}).json()
    got = {(f["name"], f["value"], f["source"]) for f in body["findings"]}
    assert ("E_55", "V_89", "question:E_55") in got and not any(v == "V_29" for _, v, _ in got)
    assert ("E_53", "present", "self-report") in got  # the rest of what the words said stands


def test_a_confirmed_symptoms_words_are_read_through_its_name_not_twice(inquiry_services):
    complaint = "I'm hot all over and my head hurts"
    span = (complaint.index("hot"), complaint.index(" and"))
    probability = {"value": 0.8}
    calls = []

    def reader(texts, language):
        calls.append(list(texts))
        return [[ReadTerm("Fever", span, probability["value"])] if "hot" in t else [] for t in texts]

    engine = _en_engine(inquiry_services.next_questions.ranker.encoders["en"], detector=_PhraseDetector())
    inquiry = Inquiry({"en": engine}, reader=reader)
    c = _client(dataclasses.replace(inquiry_services, differential=DifferentialService(inquiry),
                                    next_questions=NextQuestionService(inquiry_services.next_questions.ranker, inquiry)))

    def findings(**request):
        body = c.post("/next-questions", json={"dialogue": [_patient(complaint)], "k": 3, **request}).json()
        return {f["name"] for f in body["findings"]}

    # the words the term covers are read as its name says (a fever), not also as the words say (a cough); the words
    # outside its span are read as before
    assert findings() == {"E_91", "E_53"}
    # the same when the page sends the ticked term: the complaint is read for the words each covers
    calls.clear()
    assert findings(symptoms=["Fever"]) == {"E_91", "E_53"} and calls == [[complaint]]
    body = c.post("/differential", json={"dialogue": [_patient(complaint)], "language": "en"}).json()
    assert {f["name"] for f in body["findings"]} == {"E_91", "E_53"}
    # a term more probably wrong than right leaves the words their own reading, and where they read a finding its name
    # does not, they stand for it: the name is not read ("I feel faint" decided Loss of consciousness at 38 %)
    probability["value"] = 0.3
    assert findings() == {"E_201", "E_53"}


def _fixed_reader(readings: dict[str, set[tuple[str, str]]]):
    """An engine's ``read(text, term)`` that gives, for each text (stripped), the (finding, value) pairs listed."""
    finding = dataclasses.make_dataclass("F", ["name", "value"])

    def read(t: str, term: bool = False) -> list:
        return [finding(n, v) for n, v in sorted(readings.get(t.strip(), set()))]

    return read


def test_words_that_say_more_than_a_terms_name_keep_their_reading(inquiry_services):
    # "my cough brings up green stuff", decided Cough: the words read the cough that produces colored sputum, the name
    # a cough; the words say the name's finding and more, which is no double reading (a wheeze heard on breathing in
    # for Wheezing, read as one on breathing out, is)
    text = "my cough brings up green stuff"
    read = _fixed_reader({text: {("E_77", "present")}, "Cough": {("E_201", "present")}, "": set()})

    inquiry = inquiry_services.differential.inquiry
    terms = [ReadTerm("Cough", (0, len(text)), 0.9)]
    assert inquiry.double_readings(read, text, terms, ["Cough"]) == {("E_77", "present")}
    assert inquiry.double_readings(read, text, terms, ["Cough"], lambda a, b: (a, b) == ("E_77", "E_201")) == set()


def test_an_unsure_terms_words_stand_for_its_name(inquiry_services):
    # "I feel faint", Loss of consciousness at 38 %: the words read feeling about to faint (E_82), the name the loss of
    # consciousness (E_159); a sure term, or one whose words read nothing of their own, keeps its name's reading
    text = "I feel faint"
    read = _fixed_reader({text: {("E_82", "present")}, "Loss of consciousness": {("E_159", "present")}, "": set()})

    inquiry = inquiry_services.differential.inquiry
    assert inquiry.unsure_names(read, text, [ReadTerm("Loss of consciousness", (0, len(text)), 0.38)]) == {
        "Loss of consciousness"}
    assert inquiry.unsure_names(read, text, [ReadTerm("Loss of consciousness", (0, len(text)), 0.9)]) == set()
    assert inquiry.unsure_names(read, "I feel", [ReadTerm("Loss of consciousness", (0, 6), 0.38)]) == set()
    assert inquiry.unsure_names(read, text, [ReadTerm("Loss of consciousness", None, 0.38)]) == set()


def test_a_yes_or_no_in_the_dialogue_answers_the_doctors_question(inquiry_services):
    c = _client(_reading_services(inquiry_services, None))

    def findings(turns, **request):
        dialogue = [{"speaker": s, "text": t} for s, t in turns]
        body = c.post("/next-questions", json={"dialogue": dialogue, "k": 5, **request}).json()
        return body, {(f["name"], f["value"], f["source"]) for f in body["findings"]}

    # the engine's own question, word for word, answered "no, not really": the fever is absent, and not asked again
    body, got = findings([("patient", "I have a cough"), ("doctor", "Do you have a fever?"), ("patient", "No, not really")],
                         language="en")
    assert ("E_91", "absent", "question:E_91") in got
    assert "E_91" not in {q["finding"] for q in body["results"]}
    # a question in the doctor's own words is read by the engine's detector (here: "fever" is E_91)
    _, got = findings([("patient", "I have a cough"), ("doctor", "Any fever at all?"), ("patient", "yes, since Monday")],
                      language="en")
    assert ("E_91", "present", "question:E_91") in got
    # not an answer: a turn that states something else, an open question, or no question at all
    for turns in ([("doctor", "Any fever at all?"), ("patient", "I have a cough")],
                  [("doctor", "Where is the fever worst?"), ("patient", "yes")],
                  [("patient", "yes")]):
        assert not any(name == "E_91" and source.startswith("question:") for name, _, source in findings(
            [("patient", "I have a cough"), *turns], language="en")[1])
    # the patient's own words settle a finding before an answer does (a free-worded question may ask less than it)
    _, got = findings([("patient", "I have a fever"), ("doctor", "Any fever at night?"), ("patient", "no")],
                      language="en")
    assert ("E_91", "present", "self-report") in got and not any(source.startswith("question:") for *_, source in got)
    # an answer sent as a finding settles it: the dialogue's word does not overrule it
    _, got = findings([("patient", "I have a cough"), ("doctor", "Do you have a fever?"), ("patient", "no")],
                      findings=[{"name": "E_91", "value": "present"}], language="en")
    assert ("E_91", "present", "question:E_91") in got and ("E_91", "absent", "question:E_91") not in got
    # the engine's own question about a multi-choice finding is answered by the meanings of the values the turn names
    _, got = findings([("patient", "I have pain"), ("doctor", "Where is the pain?"), ("patient", "forehead, I think")],
                      language="en")
    assert ("E_55", "V_89", "question:E_55") in got
    # ... the values' names are not read again as the patient's words, what the turn says besides them is
    en = _reading_services(inquiry_services, None).next_questions.inquiry.engines["en"]
    assert en.choice_remainder("Where is the pain?", "forehead, and I have a fever") == " , , and I have a fever"
    assert en.choice_remainder("Do you have a fever?", "yes") is None
    _, got = findings([("patient", "I have pain"), ("doctor", "Where is the pain?"), ("patient", "forehead, fever")],
                      language="en")
    assert ("E_55", "V_89", "question:E_55") in got and ("E_91", "present", "patient") in got
    _, got = findings([("patient", "I have pain"), ("doctor", "Where is the pain?"), ("patient", "forehead")],
                      language="en")
    assert not any(name == "E_91" for name, *_ in got)
    # Chinese: the DXY engine asks by the symptom's name; a doctor may ask in words of their own
    _, got = findings([("patient", "宝宝咳嗽两天"), ("doctor", "发烧"), ("patient", "没有")], language="zh")
    assert ("发烧", "absent", "question:发烧") in got
    _, got = findings([("patient", "宝宝咳嗽两天"), ("doctor", "有没有拉肚子？"), ("patient", "有的，一天三次")], language="zh")
    assert ("腹泻", "present", "question:腹泻") in got


def test_without_spans_leaves_the_other_words_as_clauses():
    assert without_spans("I hear a whistling sound", [(9, 24)]) == "I hear a  , "
    assert without_spans("cough and fever", [(10, 15), (0, 5)]) == " ,  and  , "
    assert without_spans("abcdef", [(1, 4), (2, 5)]) == "a , f"  # overlapping spans are one
    assert without_spans("no span", []) == "no span"
    term = ReadTerm("Fever", (0, 5), 0.9)
    assert term == "Fever" and isinstance(term, str) and term.span == (0, 5) and term.probability == 0.9


def test_a_complaint_stated_after_a_greeting_is_read_too(inquiry_services):
    calls = []

    def reader(texts, language):
        calls.append(list(texts))
        return [["Fever"] if "temperature" in t else [] for t in texts]

    c = _client(_reading_services(inquiry_services, reader))
    greeting = [_patient("Hello doctor"), {"speaker": "doctor", "text": "What brings you here today?"},
                _patient("I've had a high temperature since last night")]
    body = c.post("/next-questions", json={"dialogue": greeting, "k": 3}).json()
    # the patient turns are read one after the other until one names a symptom
    assert calls == [["Hello doctor"], ["I've had a high temperature since last night"]]
    assert body["engine"] == "ddxplus-kb" and body["symptoms_read"] == ["Fever"]
    assert [(f["name"], f["source"]) for f in body["findings"]] == [("E_91", "self-report")]
    assert c.post("/differential", json={"dialogue": greeting}).json()["symptoms_read"] == ["Fever"]
    # only the first turns may hold the complaint: a temperature named in the fourth patient turn is not read so
    calls.clear()
    late = [_patient("Hello"), {"speaker": "doctor", "text": "How are you?"}, _patient("ok"),
            {"speaker": "doctor", "text": "And?"}, _patient("well"), {"speaker": "doctor", "text": "So?"},
            _patient("a high temperature")]
    body = c.post("/next-questions", json={"dialogue": late, "k": 3}).json()
    assert calls == [["Hello"], ["ok"], ["well"]] and body["symptoms_read"] == [] and body["engine"] == "question-bank"


def test_a_reader_that_cannot_read_now_leaves_the_engine_its_own_detector(inquiry_services):
    c = _client(_reading_services(inquiry_services, lambda texts, language: None))
    body = c.post("/next-questions", json={"dialogue": [_patient("I have a fever")], "k": 3}).json()
    assert body["engine"] == "ddxplus-kb" and body["symptoms_read"] is None
    assert [f["name"] for f in body["findings"]] == ["E_91"]
    body = c.post("/next-questions", json={"dialogue": [_patient("I've had a high temperature")], "k": 3}).json()
    assert body["engine"] == "question-bank" and body["findings"] == [] and body["symptoms_read"] is None
    with pytest.raises(ValueError, match="reader must be a callable"):
        Inquiry(inquiry_services.differential.inquiry.engines, reader="Fever")


def test_the_service_reader_gives_the_decided_terms_or_none():
    from types import SimpleNamespace

    from medrank.service.adapters import StillBuildingError
    from medrank.service.build import symptom_reader

    class Symptoms:
        def __init__(self, out):
            self.out, self.calls = out, []

        def decide_many(self, texts, language, confident=False, kb="auto"):
            self.calls.append((list(texts), language, confident, kb))
            if isinstance(self.out, Exception):
                raise self.out
            return self.out

    def term(name, span=None, probability=0.9):
        return SimpleNamespace(name=name, span=span, probability=probability)

    assert symptom_reader(SimpleNamespace(symptoms=None))(["I have a fever"], "en") is None
    decided = Symptoms([SimpleNamespace(terms=[term("Fever", (0, 5)), term("Headache", (12, 20))]),
                        SimpleNamespace(terms=[])])
    read = symptom_reader(SimpleNamespace(symptoms=decided))(["fever and a headache", "all fine"], "en")
    # the terms decided at or above the calibrated threshold only (nobody unticks what the reader reads), each with
    # the words it covers
    assert read == [["Fever", "Headache"], []] and decided.calls == [(["fever and a headache", "all fine"], "en", True, "auto")]
    assert [(t.span, t.probability) for t in read[0]] == [((0, 5), 0.9), ((12, 20), 0.9)]
    symptom_reader(SimpleNamespace(symptoms=decided), confident=False)(["fever"], "en")
    assert decided.calls[-1] == (["fever"], "en", False, "auto")
    # Chinese is read with the dxy knowledge base: its 41 symptoms are the DXY engine's findings
    symptom_reader(SimpleNamespace(symptoms=decided))(["宝宝发烧"], "zh")
    assert decided.calls[-1] == (["宝宝发烧"], "zh", True, "dxy")
    # a knowledge base without a set detector ranks terms but decides none: nothing is read
    assert symptom_reader(SimpleNamespace(symptoms=Symptoms(None)))(["fever"], "en") is None
    building = Symptoms(StillBuildingError("the hpo knowledge base", None))
    assert symptom_reader(SimpleNamespace(symptoms=building))(["fever"], "en") is None


def test_the_bank_does_not_ask_yes_or_no_about_a_confirmed_symptom(inquiry_services):
    # "I have a headache" holds no finding of the engine: the question bank answers; the reader tags each question
    # with the symptom terms it decides in it
    tags = {"Do you have a fever?": ["Fever"], "Is the headache worse in the morning?": ["Headache"],
            "Any chest pain?": ["Chest pain"], "Do you cough at night?": ["Cough"]}
    calls = []

    def reader(texts, language):
        calls.extend(texts)
        return [tags.get(t, ["Headache"] if "headache" in t else []) for t in texts]

    c = _client(_reading_services(inquiry_services, reader))
    complaint = [_patient("I have a headache")]
    # none confirmed: nothing is read or dropped
    body = c.post("/next-questions", json={"dialogue": complaint, "symptoms": [], "k": 5}).json()
    plain = [q["text"] for q in body["results"]]
    assert sorted(plain) == sorted(tags) and "dropped" not in body["retrieval"] and calls == []
    body = c.post("/next-questions", json={"dialogue": complaint, "k": 5}).json()
    assert body["engine"] == "question-bank" and body["symptoms_read"] == ["Headache"]
    texts = [q["text"] for q in body["results"]]
    # "Is the headache worse…" asks yes or no about the headache the patient named: dropped; the rest stay in order
    assert texts == [t for t in plain if t != "Is the headache worse in the morning?"]
    assert body["retrieval"].endswith("yes / no questions about a confirmed symptom dropped")
    # each bank question is read once per process
    before = len(calls)
    assert [q["text"] for q in c.post("/next-questions", json={"dialogue": complaint, "k": 5}).json()["results"]] == texts
    assert len(calls) == before + 1  # the complaint only
    # confirmed (ticked) symptoms drop theirs too; given candidates: nothing is dropped
    body = c.post("/next-questions", json={"dialogue": complaint, "symptoms": ["Cough", "Chest pain"], "k": 5}).json()
    assert body["engine"] == "question-bank" and body["symptoms_read"] is None
    assert {q["text"] for q in body["results"]} == {"Do you have a fever?", "Is the headache worse in the morning?"}
    body = c.post("/next-questions", json={"dialogue": complaint, "symptoms": ["Fever"],
                                           "candidates": ["Do you have a fever?", "Any chest pain?"]}).json()
    assert len(body["results"]) == 2
    # an open question about a confirmed symptom asks more about it, not it again
    assert not NextQuestionService.YES_NO.match("Where do you see this rash?")
    assert NextQuestionService.YES_NO.match("Okay, any numbness or tingling?")


def test_where_chinese_is_read_the_terms_read_add_their_findings(inquiry_services):
    # the DXY engine's detector finds nothing in "宝宝不舒服"; a term read there (拉肚子) is read as 腹泻
    reading = _reading_services(inquiry_services, lambda texts, language: [["拉肚子"] for _ in texts])
    reading.next_questions.inquiry.READ_SYMPTOMS_IN = ("en", "zh")
    c = _client(reading)
    body = c.post("/next-questions", json={"dialogue": [_patient("宝宝不舒服")], "k": 3}).json()
    assert body["engine"] == "dxy-kb" and body["symptoms_read"] == ["拉肚子"]
    assert [(f["name"], f["source"]) for f in body["findings"]] == [("腹泻", "self-report")]
    assert "retrieval" in body and "dropped" not in body["retrieval"]


def test_a_collection_about_children_asks_the_adult_who_writes_of_themself(services):  # noqa: F811
    inquiry = Inquiry({"zh": _zh_engine(asked=True)})
    c = _client(dataclasses.replace(services, differential=DifferentialService(inquiry),
                                    next_questions=NextQuestionService(services.next_questions.ranker, inquiry)))

    def questions(*turns: dict) -> list[str]:
        r = c.post("/next-questions", json={"dialogue": list(turns), "language": "zh", "k": 3})
        assert r.status_code == 200, r.text
        return [q["text"] for q in r.json()["results"]]

    # a parent writes of the child, as in every DXY consultation; an adult of themself
    assert all(q.startswith("请问孩子最近有") for q in questions(_patient("宝宝发烧咳嗽两天了")))
    assert all(q.startswith("请问孩子最近有") for q in questions(_patient("我家孩子发烧咳嗽两天了")))
    asked = questions(_patient("我发烧咳嗽两天了"))
    assert asked and all(q.startswith("请问您最近有") for q in asked)
    # the patient's yes to a question worded so answers it
    r = c.post("/next-questions", json={"dialogue": [_patient("我发烧咳嗽两天了"), {"speaker": "doctor", "text": asked[0]},
                                                     _patient("有")], "language": "zh"}).json()
    finding = asked[0].removeprefix("请问您最近有").removesuffix("吗?")
    assert (finding, "present") in {(f["name"], f["value"]) for f in r["findings"]}
    assert all(q["finding"] != finding for q in r["results"])
    note = c.post("/differential", json={"dialogue": [_patient("我发烧咳嗽两天了")], "language": "zh"}).json()["note"]
    assert "conditions of its case collection (consultations about children) only" in note
    # ... and says to the adult who writes of themself that its chances are children's; not to a parent
    assert "You write of yourself, and its cases are consultations about children" in note
    note = c.post("/differential", json={"dialogue": [_patient("宝宝发烧咳嗽两天了")], "language": "zh"}).json()["note"]
    assert "You write of yourself" not in note


def test_differential_carries_the_urgent_notice_of_a_confirmed_symptom(inquiry_services):
    from medrank.records import Concept
    from medrank.service.adapters import SymptomService
    from medrank.service.backends import KBInfo, KnowledgeBase

    tiny = inquiry_services.symptoms.kbs["tiny-zh"]
    dxy = KnowledgeBase(KBInfo("dxy", "zh", "test", "1", "test"), [Concept("抽搐", "抽搐"), Concept("腹泻", "腹泻")],
                        tiny.backend)
    c = _client(dataclasses.replace(inquiry_services, symptoms=SymptomService({"dxy": dxy})))
    body = {"dialogue": [_patient("宝宝拉肚子还抽搐")], "symptoms": ["拉肚子", "抽搐"], "language": "zh", "k": 3}
    ranked = c.post("/differential", json=body).json()
    assert [(n["kind"], n["signs"], n["terms"]) for n in ranked["urgent"]] == [("emergency", ["抽搐"], ["抽搐"])]
    assert "120" in ranked["urgent"][0]["message"]
    # a sign in the patient's words raises it though unticked; words without one raise nothing
    assert c.post("/differential", json={**body, "symptoms": ["拉肚子"]}).json()["urgent"][0]["signs"] == ["抽搐"]
    calm = {**body, "dialogue": [_patient("宝宝拉肚子")], "symptoms": ["拉肚子"]}
    assert c.post("/differential", json=calm).json()["urgent"] == []
