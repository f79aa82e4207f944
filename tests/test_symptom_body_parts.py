"""Body parts read from a vocabulary's own names, and the contradiction check (tiny hand-built vocabularies)."""

from __future__ import annotations

import numpy as np

from medrank.pipelines.symptom.body_parts import BodyParts, containing_parts, pained_parts, stem
from medrank.pipelines.symptom.sets import FEATURES, SetCalibration, SetDetector

WORDINGS = {
    "neck": ("Abnormality of the neck",),
    "breast": ("Abnormal breast morphology",),
    "knee": ("Abnormality of the knee",),
    "skin": ("Abnormality of the skin",),
    "hand": ("Abnormality of the hand",),
    "pharynx": ("Abnormal pharynx physiology",),
    "lymph": ("Abnormal lymph node morphology",),  # two words: no part
    "node-skin": ("Abnormality of the skin of the hand",),  # more than a part: no part
    "mass": ("Breast mass", "Breast lump"),
    "neck-lump": ("Neck lump",),  # a lump is of the breast and of the neck: the word alone names no part
    "edema": ("Pharyngeal edema", "Swollen throat"),
    "pruritus": ("Pruritus", "Itchy skin"),
    "hand-skin": ("Thickened skin of the hands",),
    "neck-pain": ("Neck pain",),
    "fever": ("Fever",),
}


def parts() -> BodyParts:
    return BodyParts.from_wordings(WORDINGS)


def test_parts_are_the_one_word_of_part_naming_names():
    assert parts().words == frozenset({"neck", "breast", "knee", "skin", "hand", "pharynx"})
    # the region whose muscles a name names: HPO has no branch of the back itself
    musculature = BodyParts.from_wordings({**WORDINGS, "back": ("Abnormality of the back musculature",)})
    assert musculature.words == parts().words | {"back"} and musculature.only_a_part("back")


def test_stem_meets_adjective_and_plural():
    assert stem("pharyngeal") == stem("pharynx") == "phary"
    assert stem("breasts") == stem("breast")
    assert stem("glass") == "glass"  # a double s is no plural


def test_a_complaint_names_a_part_by_its_own_word_only():
    p = parts()
    assert p.in_complaint("a lump in my neck") == {"neck"}
    assert p.in_complaint("both knees hurt") == {"knee"}
    assert p.in_complaint("my pharyngeal area") == frozenset()  # an adjective is the vocabulary's, not the patient's
    assert p.in_wording("Pharyngeal edema") == {"phary"}


def test_a_part_word_written_as_two_part_words_names_both():
    # "my toenails are yellow" contradicted Yellow nails: "toenail" is a part of its own, and no wording names it
    # beside the nail
    p = BodyParts.from_wordings({"toe": ("Abnormality of the toe",), "nail": ("Abnormality of the nail",),
                                 "toenail": ("Abnormality of the toenail",), "yellow": ("Yellow nails",),
                                 "eye": ("Abnormality of the eye",), "eyelid": ("Abnormality of the eyelid",)})
    assert p.in_complaint("my toenails are yellow") == {stem("toenail"), stem("toe"), stem("nail")}
    assert not p.contradicts("my toenails are yellow", ("Yellow nails",))
    assert p.contradicts("my eyes are yellow", ("Yellow nails",))
    # one part word and another word is no such pair ("eyelid": "lid" is no part here)
    assert p.in_complaint("my eyelid is swollen") == {stem("eyelid")}


def test_parts_go_together_when_one_wording_names_both():
    p = parts()
    assert p.together[stem("skin")] == {stem("skin"), stem("hand")}
    assert p.together[stem("neck")] == {stem("neck")}


def test_a_wording_that_lists_parts_says_nothing_of_which_go_together():
    # "in fingers, hands, toes, and feet" names places side by side: Finger swelling is no reading of "swollen feet"
    wordings = {"finger": ("Abnormality of the finger",), "foot": ("Abnormality of the foot",),
                "athetosis": ("Athetosis", "Involuntary writhing movements in fingers and feet"),
                "polydactyly": ("Polydactyly", "More than five fingers or toes on hands or feet", "Extra fingers"),
                "swelling": ("Finger swelling", "Swollen fingers")}
    p = BodyParts.from_wordings(wordings)
    assert stem("foot") not in p.together[stem("finger")]
    assert p.contradicts("my feet are swollen", ["Finger swelling", "Swollen fingers"])
    # one place named two ways, in a wording that lists nothing, still makes two parts go together
    synonyms = BodyParts.from_wordings({**wordings, "toe": ("Abnormality of the toe",), "hallux": ("Long toe", "Foot digit 1 long")})
    assert stem("foot") in synonyms.together[stem("toe")] and stem("finger") not in synonyms.together[stem("toe")]


def test_contradicts():
    p = parts()
    assert p.contradicts("lump in my neck", WORDINGS["mass"])
    assert p.contradicts("my knee is swollen", WORDINGS["edema"])
    assert not p.contradicts("itchy skin on my hands", WORDINGS["pruritus"])  # skin goes with hand
    assert not p.contradicts("itchy hands", WORDINGS["pruritus"])  # ... even when only the hand is named
    assert not p.contradicts("a sore neck", WORDINGS["neck-pain"])  # the same part
    assert not p.contradicts("a lump", WORDINGS["mass"])  # the span names no part
    assert not p.contradicts("hot all over my neck", WORDINGS["fever"])  # the term names no part
    assert not p.contradicts("lump in my neck", ())


def test_unnamed():
    p = parts()
    assert p.unnamed("a lump", WORDINGS["mass"])  # every wording of Breast mass names the breast, the complaint none
    assert not p.unnamed("a lump in my breast", WORDINGS["mass"])
    assert not p.unnamed("an itch", WORDINGS["pruritus"])  # "Pruritus" names no part
    assert not p.unnamed("my hands itch", WORDINGS["hand-skin"])  # the hand is named
    assert p.unnamed("my neck hurts", WORDINGS["hand-skin"])  # a part, but not one that goes with the hand's
    assert not p.unnamed("a lump", ())


def test_a_word_that_names_its_part_by_itself_names_the_part():
    # "everything's gone blurry" names no part, but the vocabulary blurs vision only; bleeding is of many parts
    vocabulary = {"eye": ("Abnormality of the eye", "Abnormal vision physiology"), "nose": ("Abnormality of the nose",),
                  "gum": ("Abnormality of the gum",), "blurred": ("Blurred vision",),
                  "transient": ("Transient blurring of vision", "Hemianopic blurring"),
                  "gingival": ("Bleeding gums", "Gum bleeding"), "nosebleed": ("Nose bleeding",),
                  "tendency": ("Bleeding tendency",)}
    p = BodyParts.from_wordings(vocabulary)
    assert p.parts_of_word["blur"] == {stem("vision")}  # "Hemianopic blurring" names no part: no other part either
    assert not p.unnamed("everything's gone blurry", vocabulary["blurred"])
    assert p.implied("things look blurry", vocabulary["transient"])
    assert p.unnamed("I am bleeding", vocabulary["gingival"])  # bleeding is of the gums and the nose
    assert p.unnamed("everything's gone", vocabulary["blurred"])  # no word of the term's said


def test_a_term_of_a_part_the_complaint_does_not_name_is_offered_under_unnamed_parts():
    names = {"mass": "Breast mass", "fever": "Fever"}
    hits = [("mass", 0.9), ("fever", 0.6)]
    cal = SetCalibration(mean=[0.0], scale=[1.0], coef=[10.0], intercept=-5.0, threshold=0.5, min_terms=0,
                         features=("span_score",), rules=("unnamed_parts",))
    det = SetDetector(lambda texts, k: [hits[:k] for _ in texts], names, language="en", calibration=cal,
                      wordings=WORDINGS)
    got = det.detect("I have a lump")
    assert [t.id for t in got.terms] == ["fever"] and [t.id for t in got.alternatives] == ["mass"]
    assert [t.id for t in det.detect("a lump in my breast").terms] == ["mass", "fever"]


def test_a_piece_that_is_only_a_part_says_where_not_what():
    assert parts().only_a_part("my skin") and parts().only_a_part("knees") and parts().only_a_part("both hands")
    assert not parts().only_a_part("itchy skin") and not parts().only_a_part("my back")  # no part the list knows


def test_what_a_bare_part_finds_is_offered_under_bare_parts():
    names = {"pruritus": "Pruritus", "fever": "Fever"}

    def search(texts, k):  # "my skin" finds Pruritus; the other piece, Fever
        return [[("pruritus", 0.9)] if "skin" in t else [("fever", 0.9)] for t in texts]

    cal = SetCalibration(mean=[0.0], scale=[1.0], coef=[10.0], intercept=-5.0, threshold=0.5, min_terms=0,
                         features=("span_score",), rules=("bare_parts",))
    det = SetDetector(search, names, language="en", calibration=cal, wordings=WORDINGS)
    got = det.detect("my skin and a fever")
    assert [t.id for t in got.terms] == ["fever"] and "pruritus" in [t.id for t in got.alternatives]
    assert "pruritus" in [t.id for t in det.detect("my skin itches").terms]  # more than the part
    cal.rules = ()
    assert "pruritus" in [t.id for t in det.detect("my skin and a fever").terms]


def _detector(body_parts: bool) -> SetDetector:
    names = {"mass": "Breast mass", "neck-pain": "Neck pain"}
    hits = [("mass", 0.9), ("neck-pain", 0.6)]

    def search(texts, k):
        return [hits[:k] for _ in texts]

    cal = SetCalibration(mean=[0.0], scale=[1.0], coef=[10.0], intercept=-5.0, threshold=0.5, min_terms=0,
                         features=("span_score",), rules=("body_parts",) if body_parts else ())
    return SetDetector(search, names, language="en", calibration=cal, wordings=WORDINGS)


def test_a_contradicted_term_is_offered_after_the_others_not_decided():
    on = _detector(True).detect("a lump in my neck")
    assert [t.id for t in on.terms] == ["neck-pain"]
    assert [t.id for t in on.alternatives] == ["mass"]
    off = _detector(False).detect("a lump in my neck")
    assert [t.id for t in off.terms] == ["mass", "neck-pain"]


def test_the_rule_travels_with_the_calibration():
    cal = _detector(True).calibration
    assert cal is not None
    again = SetCalibration.from_json(cal.to_json())
    assert again.rules == ("body_parts",)
    assert "rules" not in _detector(False).calibration.to_json()  # type: ignore[union-attr]
    row = np.zeros((1, len(FEATURES)))
    assert np.isclose(again.probability(row)[0], cal.probability(row)[0])


# a tiny part hierarchy: the foot in the lower limb, the hand in the upper limb
PART_TREE = {"lower-limb": (), "foot": ("lower-limb",), "upper-limb": (), "hand": ("upper-limb",),
             "heel-1": ("foot",), "heel-2": ("foot",), "heel-3": ("lower-limb",), "calf-1": ("lower-limb",),
             "calf-2": ("lower-limb",), "calf-3": ("lower-limb",), "sole-1": ("foot",), "sole-2": ("foot",),
             "sole-3": ("hand",), "cheek-1": ("foot",), "cheek-2": (), "cheek-3": ("hand",), "shin-1": ("lower-limb",),
             "foot-pain": (), "leg-pain": ()}
PART_WORDINGS = {
    "lower-limb": ("Abnormality of the lower limb",), "foot": ("Abnormality of the foot",),
    "upper-limb": ("Abnormality of the upper limb",), "hand": ("Abnormality of the hand",),
    "heel-1": ("Prominent heel",), "heel-2": ("Heel spur",), "heel-3": ("Short heel cord",),
    "calf-1": ("Calf muscle hypertrophy",), "calf-2": ("Calf muscle weakness",), "calf-3": ("Calf tightness",),
    "sole-1": ("Thick soles",), "sole-2": ("Sole pits",), "sole-3": ("Palms and soles peeling",),
    "cheek-1": ("Red cheeks",), "cheek-2": ("Full cheeks",), "cheek-3": ("Cheek pits",),
    "shin-1": ("Shin bowing",),
    "foot-pain": ("Foot pain",), "leg-pain": ("Lower limb pain", "Leg pain"),
}


def _ancestors(tid: str) -> set[str]:
    out: set[str] = set()
    todo = list(PART_TREE[tid])
    while todo:
        a = todo.pop()
        if a not in out:
            out.add(a)
            todo.extend(PART_TREE[a])
    return out


def test_a_part_without_a_pain_of_its_own_is_read_as_the_part_that_holds_it():
    names = {tid: ws[0] for tid, ws in PART_WORDINGS.items()}
    within = containing_parts(PART_WORDINGS, names, _ancestors)
    # heel: all three terms under the lower limb, two of three under the foot: the foot, the more specific
    assert within["heel"] == "foot" and within["calf"] == "lower limb"
    # sole: under the foot twice, the hand once: the foot
    assert within["sole"] == "foot"
    # cheek: no part holds half of its terms; shin: named by one term only; foot: has a pain of its own
    assert "cheek" not in within and "shin" not in within and "foot" not in within and "leg" not in within
    assert pained_parts(PART_WORDINGS.values()) == frozenset({"foot", "lower limb", "leg"})
