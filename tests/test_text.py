"""medrank.text: language identification (en / zh / other) and the shared script classes."""

from __future__ import annotations

import math

import pytest

from medrank.text import (
    EN_ALL_WELL,
    HAN,
    HAN_RUN,
    LESS_SAID,
    LESS_WORD,
    base_form,
    has_han,
    identify,
    plain_adjectives,
)


@pytest.mark.parametrize("text", ["I have a bad headache and feel sick", "fever and cough for three days",
                                  "Can sun urticaria cause anaphylaxis?", "my chest hurts when I breathe",
                                  "headache", "nausea", "fatigue", "constipation", "abdominal pain", "chest pain",
                                  "headache fever zebra-7731",
                                  # read word by word: a character n-gram model took these for German, Polish, Dutch, Italian
                                  "seizures", "eczema", "swollen hands", "dizzy",
                                  # one word English speakers write, more common in French / Italian: not refused for it
                                  "malaise", "influenza",
                                  # abbreviations in capitals are no words of a language (TIA: tía, aunt, in Spanish)
                                  "GERD", "TIA", "MRI scan"])
def test_english(text):
    assert identify(text).language == "en"


@pytest.mark.parametrize("text", ["头痛两天", "CT检查后头痛", "宝宝发烧咳嗽三天了", "腹腔镜下胆囊切除术"])
def test_chinese(text):
    assert identify(text).language == "zh"


@pytest.mark.parametrize(("text", "code"), [("J'ai mal à la tête et je me sens malade", "fr"),
                                            ("Ich habe starke Kopfschmerzen und mir ist übel", "de"),
                                            ("j'ai de la fièvre depuis trois jours", "fr"), ("douleur à la poitrine quand je respire", "fr"),
                                            # one foreign word, which character n-grams read as English
                                            ("vertiges", "fr"), ("mareos", "es"), ("tonturas", "pt"), ("Kopfschmerzen", "de"),
                                            ("hoofdpijn", "nl"),
                                            ("У меня сильно болит голова и тошнит", "ru"),
                                            ("頭がひどく痛くて吐き気がします", "ja"),  # Han characters, but kana: Japanese
                                            ("머리가 아파요", "ko"),
                                            ("😀😀", "none"), ("38.5", "none"), ("?!", "none")])
def test_other_languages(text, code):
    found = identify(text)
    assert found.language == "other" and found.code == code, found


def test_script_classes():
    assert has_han("CT检查") and not has_han("hello") and not has_han("ひらがな")
    assert HAN_RUN.findall("a头痛b发热") == ["头痛", "发热"] and HAN.match("痛")


def test_mojibake_is_repaired_or_flagged():
    from medrank.text import looks_like_mojibake, repair_mojibake

    assert repair_mojibake("其他ð§¿¹囊肿切除术") == "其他\U00027ff9囊肿切除术"  # the UTF-8 bytes of one Ext-B character
    assert repair_mojibake("cafÃ©") == "café"
    assert repair_mojibake("Ménière disease") is None and repair_mojibake("Sjögren") is None
    assert looks_like_mojibake("其他ð§¿¹囊肿切除术") and looks_like_mojibake("头痛é") and not looks_like_mojibake("Ménière")


def test_language_refusal_says_why_text_is_not_searched():
    from medrank.text import language_refusal

    assert "reads as French" in language_refusal("J'ai mal à la tête depuis deux jours")
    assert "has no letters" in language_refusal("38.5 !")
    assert language_refusal("headache and fever for two days") is None
    assert language_refusal("头痛发烧两天", "zh") is None
    assert language_refusal("headache and fever for two days", "zh").endswith("this model reads Chinese")


def test_the_word_reader_scores_languages_by_word_frequency():
    from medrank.text import ENGLISH_PRIOR, UNSEEN_WORD, WORD_LANGUAGES, identify, word_scores

    scores = word_scores(["swollen", "hands"])
    assert set(scores) == set(WORD_LANGUAGES) and max(scores, key=scores.get) == "en"
    # a word no list holds counts the same everywhere: English's prior decides
    unknown = word_scores(["zqxjv"])
    assert abs(unknown["en"] - unknown["fr"] - math.log10(ENGLISH_PRIOR)) < 1e-9
    assert abs(unknown["fr"] - math.log10(UNSEEN_WORD)) < 1e-9
    # the character reader is kept for comparison, and for text in another script
    assert identify("swollen hands", words=False).code == "nl" and identify("swollen hands").code == "en"
    assert identify("У меня болит голова").code == "ru"
    # a word English writes, alone, is English; among other words it counts where it is more common
    assert identify("malaise").language == "en" and identify("malaise").confidence < 0.5
    assert identify("mal de gorge").code == "fr"


def test_base_form_brings_an_irregular_inflection_to_its_word_and_leaves_the_rest():
    assert [base_form(w) for w in ("threw", "thrown", "bled", "ate", "eaten", "woke", "Feet", "teeth")] == [
        "throw", "throw", "bleed", "eat", "eat", "wake", "foot", "tooth"]
    # a regular inflection already stems as its word; a word that is a word of its own stays ("left" arm, a "bit")
    assert [base_form(w) for w in ("coughed", "vomits", "left", "felt", "bit", "swollen", "broken", "worse")] == [
        "coughed", "vomits", "left", "felt", "bit", "swollen", "broken", "worse"]
    # readings that name different words say neither; an unknown word stays
    assert base_form("leaves") == "leaves" and base_form("poop") == "poop"


def test_plain_adjectives_writes_an_unknown_adjective_as_the_vocabularys_word_it_comes_from():
    vocabulary = sorted({"wheeze", "wheezing", "sweating", "sweats", "shivers", "itchy", "chest", "cramps"})
    assert plain_adjectives("wheezy chest", vocabulary) == "wheezing chest"  # the -ing form first
    assert plain_adjectives("I feel Shivery", vocabulary) == "I feel shivers"
    assert plain_adjectives("sweaty hands", vocabulary) == "sweating hands"
    # a word the vocabulary holds, one too short, or one it has no word for stays as written
    assert plain_adjectives("itchy eyes", vocabulary) == "itchy eyes"
    assert plain_adjectives("achy and gassy", vocabulary) == "achy and gassy"
    assert plain_adjectives("crampy", vocabulary) == "cramps"


def test_as_attributive_puts_the_adjective_before_the_thing() -> None:
    from medrank.text import as_attributive

    assert as_attributive("my periods are heavy") == "heavy periods"
    assert as_attributive("my urine has gone dark") == "dark urine"
    assert as_attributive("the stools are black") == "black stools"
    assert as_attributive("my chest feels tight") == "tight chest"
    # a verb going on is as_part_adjective's, a pronoun is no thing, a place after the thing is no such clause
    for text in ("my nose is running", "it is heavy", "I am tired", "the glands in my neck are swollen", "heavy periods"):
        assert as_attributive(text) is None, text


def test_words_of_a_lessening_in_wordings_and_in_a_patients_words() -> None:
    for wording in ("Poor appetite", "Loss of appetite", "No appetite", "Decreased visual acuity", "Hypotension",
                    "Painless fractures", "Reduced sweating"):
        assert LESS_WORD.search(wording), wording
    for wording in ("Polyphagia", "Increased appetite", "Fever", "Lower back pain",
                    "Allowance"):
        assert not LESS_WORD.search(wording), wording
    for said in ("I'm losing weight", "getting thinner", "I've gone off my food", "my eyesight is getting worse",
                 "I can't see well", "I cannot smell", "my appetite is poor"):
        assert LESS_SAID.search(said), said
    for said in ("I'm hungry all the time", "I'm always thirsty", "my knee hurts"):
        assert not LESS_SAID.search(said), said


def test_a_clause_that_says_all_is_well() -> None:
    for clause in ("my appetite is fine", "I can breathe fine", "breathing normally", "my bowels are normal",
                   "it's completely okay"):
        assert EN_ALL_WELL.search(clause), clause
    for clause in ("my knee is swollen", "a fine rash", "abnormal bleeding"):
        assert not EN_ALL_WELL.search(clause), clause
