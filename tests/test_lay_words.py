"""The lay-word reading (:mod:`medrank.pipelines.symptom.lay_words`) on a toy encoder whose vectors are written out."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.pipelines.symptom.lay_words import LayWords, word_uses

# unit vectors by hand: "pee" is 0.8 from urine (cos) and 0.6 from abdomen, "tummy" 0.8 from abdomen and 0.6 from
# cough, "weird" 0.3 from urine, abdomen and cough, "coughs" points at cough; any other word is far from every one
_VECTORS = {
    "urine": (1.0, 0.0, 0.0, 0.0), "abdomen": (0.0, 1.0, 0.0, 0.0), "cough": (0.0, 0.0, 1.0, 0.0),
    "pain": (0.6, 0.0, 0.8, 0.0), "pee": (0.8, 0.6, 0.0, 0.0), "tummy": (0.0, 0.8, 0.6, 0.0),
    "coughs": (0.0, 0.0, 1.0, 0.0), "weird": (0.3, 0.3, 0.3, float(np.sqrt(0.73))), "strong": (1.0, 0.0, 0.0, 0.0),
}


class _Encoder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts, kind=None, batch_size=64, show_progress=False):
        self.calls.append(list(texts))
        return np.array([_VECTORS.get(t, (0.0, 0.0, 0.0, 1.0)) for t in texts], dtype=np.float32)


WORDINGS = ["Red urine", "Urine odor", "Abdominal pain", "Pain of the abdomen", "Swollen abdomen", "Cough",
            "Dry cough", "Chronic pain", "Pee issues"]


def test_word_uses_counts_each_wording_once() -> None:
    uses = word_uses(["Urine urine", "Red urine", "of a"])
    assert uses["urine"] == 2 and uses["red"] == 1 and "of" not in uses  # words under three letters are not counted


def test_a_rare_word_is_read_as_the_nearest_common_word_when_it_is_near_enough() -> None:
    words = LayWords(_Encoder(), WORDINGS, min_similarity=0.7)
    assert words.targets == ["abdomen", "cough", "pain", "urine"]  # used by two wordings or more, stop words aside
    assert words.rare("pee") and words.rare("Tummy") and not words.rare("urine") and not words.rare("the")
    assert words.rewrite("it burns when I pee") == "it burns when I urine"  # cos 0.8
    assert words.rewrite("my Tummy and pee") == "my abdomen and urine"
    assert words.rewrite("a weird feeling") is None  # 0.42 from pain, the nearest common word
    # a word that is its target's own inflection stays as written ("coughs" is cough)
    assert words.nearest(["coughs"]) == {"coughs": None}
    assert words.rewrite("nothing rare here: urine and cough") is None


def test_a_word_of_general_english_is_never_rewritten() -> None:
    # "strong" is rare in the vocabulary and its vector here is urine's, but a word that common (wordfreq Zipf >= 5)
    # is no everyday name of a finding: MiniLM put "strong" nearest weak, and "every" nearest everted
    words = LayWords(_Encoder(), WORDINGS, min_similarity=0.7)
    assert words.rare("strong") and words.nearest(["strong"]) == {"strong": "urine"}
    assert words.rewrite("my pee smells strong") == "my urine smells strong"


def test_the_threshold_and_the_memory_of_words_read() -> None:
    enc = _Encoder()
    words = LayWords(enc, WORDINGS, min_similarity=0.85)
    assert words.rewrite("I pee a lot") is None  # 0.8 is below 0.85
    calls = len(enc.calls)
    assert words.rewrite("lot of pee") is None and len(enc.calls) == calls  # a word is read once
    with pytest.raises(ValueError, match="min_similarity"):
        LayWords(enc, WORDINGS, min_similarity=0.0)
    with pytest.raises(ValueError, match="min_uses"):
        LayWords(enc, WORDINGS, min_uses=0)


def test_an_empty_vocabulary_reads_no_word_and_an_inflection_of_a_common_word_is_not_rare() -> None:
    words = LayWords(_Encoder(), [])
    assert words.targets == [] and words.rewrite("it burns when I pee") is None
    # "coughs" is a regular inflection of cough, a common word ("Cough", "Dry cough"): rare, but read as it is
    words = LayWords(_Encoder(), WORDINGS, min_similarity=0.7)
    assert words.rare("coughs") and words.rewrite("my coughs") is None


def test_a_word_written_as_two_is_found_by_its_parts_stems() -> None:
    from medrank.pipelines.symptom.lay_words import compound_parts

    table = compound_parts(["bedwetting", "nosebleed", "hayfever", "daytime", "withdrawn", "bed"])
    assert table[("bed", "wet")] == "bedwetting" and table[("nose", "bleed")] == "nosebleed"
    assert table[("hay", "fever")] == "hayfever"
    # two words of general English ("this time of day"), a stop word ("with" + "drawn") and a short word are none
    assert set(table.values()) == {"bedwetting", "nosebleed", "hayfever"}


def test_two_words_a_vocabulary_writes_as_one_are_joined() -> None:
    from medrank.pipelines.symptom.lay_words import join_compounds

    table = {("bed", "wet"): "bedwetting", ("nose", "bleed"): "nosebleed", ("hay", "fever"): "hayfever"}
    assert join_compounds("my son keeps wetting the bed", table) == "my son keeps bedwetting"
    assert join_compounds("my nose keeps bleeding", table) == "my nosebleed"
    assert join_compounds("my nose won't stop bleeding", table) == "my nosebleed"
    assert join_compounds("blood coming from my nose, bleeding from my nose", table) == (
        "blood coming from my nose, nosebleed")
    assert join_compounds("hay fever and a nose bleed", table) == "hayfever and a nosebleed"
    # other words between, or words of place in the written order, keep them apart
    assert join_compounds("I wet myself in bed", table) is None
    assert join_compounds("my nose from bleeding", table) is None
    assert join_compounds("a fever", table) is None and join_compounds("", {}) is None


def test_a_word_that_alone_is_a_wording_is_never_rewritten() -> None:
    # a term's one-word name is the vocabulary's own however rarely other wordings use it ("nocturia" was read as
    # MiniLM's nearest "uraciluria", another term's name); "pee", in the two-word "Pee issues", is still read
    words = LayWords(_Encoder(), [*WORDINGS, "Tummy"], min_similarity=0.7)
    assert words.uses["tummy"] == 1 and not words.rare("tummy") and words.rewrite("my tummy") is None
    assert words.rare("pee") and words.rewrite("I pee") == "I urine"

