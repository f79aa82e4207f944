"""Urgent signs: which decided terms raise a crisis / emergency notice (tiny hand-built signs, and the shipped file)."""

from __future__ import annotations

import json

import pytest

from medrank.pipelines.symptom.urgent import DEFAULT_SIGNS, KINDS, UrgentSigns

MESSAGES = {"emergency": {"en": "{signs}: call now.", "zh": "{signs}：请拨打。"},
            "crisis": {"en": "Talk to someone now.", "zh": "请找人倾诉。"}}


def _signs(**changes) -> dict:
    raw = {"format": "medrank-urgent-signs", "version": 1, "messages": MESSAGES,
           "sources": {"emergency": "https://example.org/999"},
           "signs": [
               {"key": "mind", "kind": "crisis", "label": {"en": "thoughts of suicide", "zh": "自杀念头"},
                "hpo": ["HP:9"]},
               {"key": "chest", "kind": "emergency", "label": {"en": "chest pain", "zh": "胸痛"},
                "hpo": ["HP:1"], "hpo_except": ["HP:12"], "icd10cm": ["R07.1"], "icd10_beijing": ["R07.4"]},
               {"key": "fit", "kind": "emergency", "label": {"en": "a fit", "zh": "抽搐"}, "dxy": ["抽搐"]},
               {"key": "blood", "kind": "emergency", "label": {"en": "vomiting blood", "zh": "吐血"},
                "words": {"zh": ["吐血"], "en": [r"\bthrew\s+up\s+blood\b"]}}]}
    raw.update(changes)
    return raw


#: HP:11 and HP:12 are kinds of HP:1, HP:111 a kind of HP:11
PARENTS = {"HP:11": {"HP:1"}, "HP:12": {"HP:1"}, "HP:111": {"HP:11"}}


def ancestors(term: str) -> set[str]:
    out, todo = set(), list(PARENTS.get(term, ()))
    while todo:
        t = todo.pop()
        out.add(t)
        todo.extend(PARENTS.get(t, ()))
    return out


def test_hpo_terms_are_signs_with_their_descendants_but_not_the_excepted_ones():
    signs = UrgentSigns.from_dict(_signs())
    assert [s.key for s in signs.signs_of("hpo", "HP:111", (), ancestors)] == ["chest"]
    assert signs.signs_of("hpo", "HP:12", (), ancestors) == []  # excepted
    assert signs.signs_of("hpo", "HP:111") == []  # no hierarchy: only the listed ids themselves
    assert [s.key for s in signs.signs_of("hpo", "HP:1")] == ["chest"]
    assert signs.signs_of("hpo", "HP:2", (), ancestors) == []


def test_icd_codes_match_by_prefix_in_their_own_system_and_dxy_by_name():
    signs = UrgentSigns.from_dict(_signs())
    assert [s.key for s in signs.signs_of("icd10cm", "R07.1", ("R07.1",))] == ["chest"]
    assert [s.key for s in signs.signs_of("icd10_beijing", "胸痛", ("R07.401",))] == ["chest"]
    assert signs.signs_of("icd10_beijing", "呼吸时胸痛", ("R07.101",)) == []  # R07.1 is listed for ICD-10-CM only
    assert signs.signs_of("icd10cm", "R07.0", ("R07.0",)) == []  # pain in throat
    assert [s.key for s in signs.signs_of("dxy", "抽搐")] == ["fit"]
    assert signs.signs_of("dxy", "咳嗽") == [] and signs.signs_of("unknown", "HP:1") == []


def test_notices_one_per_kind_crisis_first_with_the_signs_in_file_order():
    signs = UrgentSigns.from_dict(_signs())
    rows = [("dxy", "抽搐", ()), ("hpo", "HP:111", ()), ("hpo", "HP:11", ()), ("hpo", "HP:9", ()), ("hpo", "HP:2", ())]
    crisis, emergency = signs.notices(rows, "en", ancestors)
    assert (crisis.kind, crisis.signs, crisis.terms, crisis.message, crisis.source) == (
        "crisis", ("thoughts of suicide",), ("HP:9",), "Talk to someone now.", "")
    assert emergency.kind == "emergency" and emergency.signs == ("chest pain", "a fit")
    assert emergency.terms == ("HP:111", "HP:11", "抽搐")
    assert emergency.message == "Chest pain; a fit: call now." and emergency.source == "https://example.org/999"
    (zh,) = signs.notices([("dxy", "抽搐", ()), ("icd10_beijing", "胸痛", ("R07.401",))], "zh")
    assert zh.message == "胸痛、抽搐：请拨打。"
    assert signs.notices([("hpo", "HP:2", ())], "en", ancestors) == []
    assert emergency.as_dict()["signs"] == ["chest pain", "a fit"]


@pytest.mark.parametrize(("change", "error"), [
    ({"format": "other"}, "format"),
    ({"messages": {"emergency": MESSAGES["emergency"]}}, "no crisis message"),
    ({"signs": []}, "no signs"),
    ({"signs": [{"key": "a", "kind": "urgent", "label": {"en": "a", "zh": "a"}}]}, "kind must be"),
    ({"signs": [{"key": "a", "kind": "crisis", "label": {"en": "a"}}]}, "label must give"),
    ({"signs": [{"key": "a", "kind": "crisis", "label": {"en": "a", "zh": "a"}, "hpo": "HP:1"}]}, "hpo must be a list"),
    ({"signs": [{"key": "a", "kind": "crisis", "label": {"en": "a", "zh": "a"}}] * 2}, "listed twice"),
    ({"signs": [{"key": "a", "kind": "crisis", "label": {"en": "a", "zh": "a"}, "words": {"fr": ["x"]}}]}, "words must map"),
    ({"signs": [{"key": "a", "kind": "crisis", "label": {"en": "a", "zh": "a"}, "words": {"en": ["(x"]}}]},
     "not a regular expression"),
])
def test_a_wrong_signs_file_is_refused_naming_the_problem(tmp_path, change, error):
    path = tmp_path / "signs.json"
    path.write_text(json.dumps(_signs(**change)), encoding="utf-8")
    with pytest.raises(ValueError, match=error):
        UrgentSigns.load(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not a readable JSON"):
        UrgentSigns.load(path)
    with pytest.raises(FileNotFoundError, match="not found"):
        UrgentSigns.load(tmp_path / "missing.json")


def test_the_shipped_signs_name_real_hpo_terms_and_say_they_are_not_reviewed():
    from medrank.data.hpo import hpo_parents

    signs = UrgentSigns.load(DEFAULT_SIGNS)
    assert not signs.reviewed and set(signs.sources) == set(KINDS)
    known = set(hpo_parents())
    listed = {t for s in signs.signs for t in s.hpo | s.hpo_except}
    assert listed and listed <= known, sorted(listed - known)
    assert {s.kind for s in signs.signs} == set(KINDS)
    from medrank.pipelines.symptom.sets import HpoHierarchy

    ancestors = HpoHierarchy().ancestors
    # Lip cyanosis sits below Cyanosis; Exertional dyspnea is left out; Self-cutting raises the crisis notice
    assert [s.key for s in signs.signs_of("hpo", "HP:0034030", (), ancestors)] == ["breathing"]
    assert signs.signs_of("hpo", "HP:0002875", (), ancestors) == []
    # Coffee ground vomitus is decided from "coffee" alone ("dying for a coffee"): the patient's words raise it
    assert signs.signs_of("hpo", "HP:0032144", (), ancestors) == []
    assert [n.kind for n in signs.notices([], "en", texts=["I threw up stuff like coffee grounds"])] == ["emergency"]
    assert [n.kind for n in signs.notices([("hpo", "HP:5200339", ())], "en", ancestors)] == ["crisis"]
    assert [s.key for s in signs.signs_of("icd10cm", "R45.851", ("R45.851",))] == ["self-harm"]
    assert [s.key for s in signs.signs_of("icd10_beijing", "自杀观念", ("R45.811",))] == ["self-harm"]


def test_a_signs_own_words_raise_it_unless_denied_and_say_where():
    signs = UrgentSigns.from_dict(_signs())
    (notice,) = signs.notices([], "zh", texts=["孩子今天吐血了"])
    assert notice.signs == ("吐血",) and notice.terms == () and notice.spans == ((4, 6),)
    assert notice.as_dict()["spans"] == [[4, 6]]
    assert signs.notices([], "zh", texts=["孩子没有吐血"]) == [] and signs.notices([], "zh", texts=["不吐血"]) == []
    assert signs.notices([], "en", texts=["I never threw up blood"]) == []
    assert signs.notices([], "en", texts=["I didn't eat, then I threw up blood"])[0].signs == ("vomiting blood",)
    # several texts (a dialogue's turns): the sign is raised, no span said (it would be ambiguous)
    (notice,) = signs.notices([("dxy", "抽搐", ())], "en", texts=["hello", "then he threw up blood"])
    assert notice.signs == ("a fit", "vomiting blood") and notice.spans == ()


@pytest.mark.parametrize(("text", "kind"), [
    ("我不想活了", "crisis"), ("有时候想死", "crisis"), ("吐血了", "emergency"), ("咳血两天", "emergency"),
    ("宝宝发烧抽筋了", "emergency"), ("吃了花生后喉咙肿了", "emergency"), ("I took an overdose", "emergency"),
    ("he swallowed a battery", "emergency"), ("我不想死", None), ("没有咳血", None), ("腿抽筋", None),
    ("I have not taken an overdose", None), ("宝宝咳嗽流鼻涕", None),
    # thoughts and acts of self-harm in a patient's own words, and what only sounds like them
    ("I keep having urges to hurt myself", "crisis"), ("burned my leg with a lighter last night", "crisis"),
    ("I can't keep myself safe tonight", "crisis"), ("thinking about jumping off the bridge", "crisis"),
    ("honestly might just kms", "crisis"), ("有自残的冲动", "crisis"), ("用烟头烫自己", "crisis"), ("又割手腕了", "crisis"),
    ("站在楼顶想跳下去", "crisis"), ("I hurt myself playing football", None), ("I cut myself shaving", None),
    ("I'm not suicidal", None), ("I don't want to die", None), ("好想死你了", None), ("累死了", None),
    # emergencies in everyday words
    ("he can't get his words out and his smile is lopsided", "emergency"), ("她说话不利索，左边手脚没力气", "emergency"),
    ("baby's lips have gone greyish", "emergency"), ("喘得说不出话", "emergency"), ("she collapsed in the kitchen", "emergency"),
    ("爷爷突然糊涂了，说胡话", "emergency"), ("吐了好多血，有咖啡渣样的东西", "emergency"),
    ("my 3yo swallowed a button battery", "emergency"), ("I took double my paracetamol", "emergency"),
    ("孩子吞了一颗纽扣电池", "emergency"), ("crushing pain in my chest", "emergency"),
    ("stuffy nose, can't breathe through it", None), ("I can't lift my arm above my head", None),
    ("collapsed on the sofa after work", None), ("I choked up at the film", None), ("could kill for a nap", None),
    ("my blood test came back normal", None),
    ("I want to go to sleep and never wake up", "crisis"), ("how many paracetamol would it take to die", "crisis"),
    ("不如死了算了", "crisis"), ("攒了好多安眠药", "crisis"), ("我把药都攒起来了，想一次吃掉", "crisis"),
    ("I just want to sleep and not wake up", "crisis"), ("I think he's having a stroke", "emergency"),
    ("我爸是不是心梗了", "emergency"), ("she's not breathing", "emergency"), ("孩子口吐白沫", "emergency"),
    ("my dad had a heart attack five years ago", None), ("I'm not breathing well through my nose", None),
    ("fitting room was too hot", None),
    # from the third written set's misses
    ("took 30 of my tablets on purpose", ("crisis", "emergency")), ("he can't see any way out", "crisis"), ("thinking about unaliving myself", "crisis"),
    ("拿刀片划手腕", "crisis"), ("想结束这一切", "crisis"), ("my left arm and leg have gone numb and heavy", "emergency"),
    ("my words keep coming out wrong", "emergency"), ("她突然一边脸麻了，右手拿不住筷子，说话也含含糊糊的", "emergency"),
    ("哮喘犯了 说话都说不完整一句", "emergency"), ("血一直止不住 毛巾都湿透了", "emergency"),
    ("nose pouring blood for 40 minutes non stop", "emergency"), ("dad keeled over at dinner", "emergency"),
    ("my toddler got into granny's pill box", "emergency"), ("stung by a wasp and now I'm wheezing", "emergency"),
    # a resolved past raises nothing, unless it is back now
    ("I had a seizure as a child", None), ("我爸小时候抽风过", None), ("my grandad died of a stroke", None),
    ("coughed up blood years ago and again now", "emergency"), ("小时候抽风过一次，今天又抽风了", "emergency")])
def test_the_shipped_words(text, kind):
    got = [n.kind for n in UrgentSigns.load().notices([], "zh", texts=[text])]
    assert got == (list(kind) if isinstance(kind, tuple) else [kind] if kind else [])


def test_words_said_of_a_resolved_past_are_told_apart_from_now():
    from medrank.pipelines.symptom.urgent import said_of_the_past

    text = "I fainted once at a concert years ago when it was hot, should I mention it?"
    assert said_of_the_past(text, 2, 9)  # "fainted"
    assert not said_of_the_past(text, 62, 69)  # "mention": the clause after the comma says nothing of the past
    assert not said_of_the_past("I fainted years ago and again today", 2, 9)
    assert said_of_the_past("我去年晕倒过一次", 3, 5) and not said_of_the_past("去年晕倒过，今天又晕倒了", 9, 11)
    assert not said_of_the_past("I fainted at work", 2, 9)
