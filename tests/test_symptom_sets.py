"""Set-level symptom detection: spans, the DXY lexicon, merging / diversification, calibration, the CBLUE metric."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import pytest

from medrank.pipelines.symptom.lexicon import (
    DxyFormatError,
    DxyRecord,
    SurfaceLexicon,
    mine_surface_lexicon,
    read_dxy_folder,
)
from medrank.pipelines.symptom.sets import (
    BASE_FEATURES,
    FEATURES,
    CodePrefixHierarchy,
    HpoHierarchy,
    SetCalibration,
    SetDetector,
    SymptomTextError,
    _besides_blood,
    _only_blood,
    fit_logistic,
    has_overlapping_spans,
    set_prf,
    zh_says_more,
)
from medrank.pipelines.symptom.spans import clauses, find_spans, in_vocabulary_words, is_measure_zh


# -- spans -------------------------------------------------------------------------------------------
def test_chinese_spans_split_at_lexicon_words_punctuation_and_conjunctions() -> None:
    lex = SurfaceLexicon({"发烧": "发烧", "头痛": "头痛", "流鼻涕": "流涕", "咳嗽": "咳嗽"})
    spans = find_spans("头痛发烧两天", lex)
    # "两天" says how long, not what: no span of its own
    assert [(s.text, s.normalised) for s in spans] == [("头痛", "头痛"), ("发烧", "发烧")]
    assert [(s.start, s.end) for s in spans] == [(0, 2), (2, 4)]
    spans = find_spans("宝宝咳嗽流鼻涕，昨晚发烧", lex)
    assert [s.normalised for s in spans if s.normalised] == ["咳嗽", "流涕", "发烧"]
    assert [t for t in ("左膝退变", "游离体")] == [s.text for s in find_spans("左膝退变伴游离体", None)]


def test_a_chinese_piece_that_is_only_a_measure_is_no_span() -> None:
    lex = SurfaceLexicon({"发烧": "发烧", "拉肚子": "稀便"})
    # searched alone, "38度5" found the vocabulary's 孕38周
    assert [s.text for s in find_spans("孩子嗓子疼，发烧38度5", lex)] == ["嗓子疼", "发烧"]
    assert [s.text for s in find_spans("拉肚子一天三四次，体重20斤", lex)] == ["拉肚子", "体重20斤"]
    assert [is_measure_zh(t) for t in ("39.2℃", "两天", "半个月", "3岁", "十来天")] == [True] * 5
    assert [is_measure_zh(t) for t in ("发烧", "头痛三天", "多汗", "孕38周")] == [False] * 4


def test_a_thermometer_reading_is_searched_as_what_it_says() -> None:
    # the point of "37.8" is no clause end; a normal reading is no span
    spans = find_spans("my temperature is 37.8 and I have a cough. My temperature is normal")
    assert [(s.text, s.start, s.end) for s in spans] == [("fever", 0, 22), ("cough", 36, 41)]
    lex = SurfaceLexicon({"发烧": "发烧", "咳嗽": "咳嗽"})
    # a reading after a lexicon word is that word's; one standing alone is read
    assert [s.text for s in find_spans("宝宝发烧39.2℃两天了，咳嗽", lex)][-2:] == ["发烧", "咳嗽"]
    assert [(s.text, s.normalised) for s in find_spans("体温38.5度，咳嗽三天", lex)] == [("发热", None), ("咳嗽", "咳嗽")]


def test_a_weight_lost_or_gained_is_searched_as_the_change() -> None:
    # "lost 10 pounds" found nothing near enough; "put on weight" was nearest Failure to thrive (poor weight gain)
    assert [s.text for s in find_spans("I lost 10 pounds without trying")] == ["lost weight without trying"]
    assert [s.text for s in find_spans("I've put on weight")] == ["gained weight"]
    # a stone is 14 pounds, not Nephrolithiasis
    assert [s.text for s in find_spans("lost nearly a stone since christmas") if not s.reading] == ["lost weight"]
    assert [s.text for s in find_spans("I've lost half a stone")] == ["lost weight"]
    assert [s.text for s in find_spans("she has put on about 20 lbs and gained a lot of weight")] == [
        "gained weight", "gained weight"]
    # what is lost must be weight or its amount
    assert [s.text for s in find_spans("I lost my keys")] == ["lost my keys"]
    assert [s.text for s in find_spans("I weigh 80 kg")] == ["weigh 80 kg"]


def test_being_out_of_breath_is_searched_as_short_of_breath() -> None:
    # "out of breath" shares no word with Dyspnea's wordings but "breath" (Halitosis' too), and "out" is Syncope's
    # "passing out"; "puffed out" found Syncope
    assert [s.text for s in find_spans("I'm out of breath")] == ["short of breath"]
    assert [s.text for s in find_spans("I get winded easily")] == ["short of breath easily"]
    assert [s.text for s in find_spans("I'm puffed out after the stairs") if not s.reading] == ["short of breath"]
    assert [s.text for s in find_spans("I get out of breath walking up stairs") if s.reading] == [
        "short of breath walking up stairs"]
    # "puffed" of a part is its swelling, not breathlessness
    for text in ("my eyes are puffed up", "my eyes are puffed", "my cheeks puffed out"):
        assert "short of breath" not in " ".join(s.text for s in find_spans(text)), text
    assert [s.text for s in find_spans("I passed out")] == ["passed out"]


def test_sick_in_words_that_state_no_illness_is_not_searched() -> None:
    # "I need a sick note for work" decided Nausea: a sick note, off sick, sick of something state no nausea
    assert find_spans("I need a sick note for work") == []
    assert find_spans("can you sign me off sick") == []
    assert [s.text for s in find_spans("I have been off sick with the flu")] == ["the flu"]
    assert [s.text for s in find_spans("I am sick of this cough")] == ["this cough"]
    assert [s.text for s in find_spans("sick and tired of being tired")] == ["tired of being tired"]
    # "sick" that states it is kept
    assert [s.text for s in find_spans("I feel sick")] == ["feel sick"]
    assert [s.text for s in find_spans("I've been sick for a week")] == ["sick"]
    assert [s.text for s in find_spans("I feel sick and tired")] == ["feel sick", "tired"]


def test_a_craving_said_as_dying_for_something_is_not_searched() -> None:
    # "dying for a coffee" decided Coffee ground vomitus, and raised an emergency notice
    assert find_spans("dying for a coffee") == []
    assert find_spans("honestly dying for a cup of tea") == []
    assert [s.text for s in find_spans("I could murder a pint and I have a headache")] == ["headache"]
    assert [s.text for s in find_spans("gasping for air")] == ["shortness of breath"]


def test_a_thing_swallowed_is_not_searched_but_what_it_does_is() -> None:
    # "my 3yo swallowed a button battery" decided Aphagia; no phenotype names an ingestion (a notice reads the words)
    assert find_spans("my 3yo swallowed a button battery from the tv remote") == []
    assert find_spans("I think I swallowed some bleach") == []
    assert [s.text for s in find_spans("my son has swallowed a magnet and has tummy pain")] == ["tummy pain"]
    assert [s.text for s in find_spans("it hurts when I swallow")] == ["hurts when I swallow"]


def test_not_breathing_through_the_nose_is_its_blockage() -> None:
    # "can't breathe through it" (a stuffy nose) decided Dyspnea, and raised a notice to act on now
    assert [s.text for s in find_spans("can't breathe through my nose")] == ["stuffy nose"]
    assert [s.text for s in find_spans("I can't breathe")] == ["can't breathe"]


def test_a_piece_whose_subject_is_nothing_denies_what_it_says() -> None:
    # "nothing makes me happy" decided Conspicuously happy disposition, "nothing stays down" Insomnia
    assert [(s.text, s.negated) for s in find_spans("I feel low and nothing makes me happy")] == [
        ("feel depressed", False), ("nothing makes me happy", True)]
    assert [s.negated for s in find_spans("nothing I eat stays down")] == [True]
    # that nothing relieves a finding says the finding is there
    for text in ("nothing helps the pain", "nothing I take seems to help my cough", "nothing at all helps"):
        assert [s.negated for s in find_spans(text)] == [False], text


def test_wetting_and_leaking_urine_read_in_the_vocabulary_words() -> None:
    # "my mum wets herself" decided Productive cough ("Wet cough"), "leak" Capillary leak (the bed: joined_words)
    assert [s.text for s in find_spans("my mum wets herself")] == ["loss of bladder control"]
    assert [s.text for s in find_spans("I leak a bit of wee when I sneeze") if not s.reading] == [
        "loss of bladder control"]
    assert [s.text for s in find_spans("I can't hold my wee")] == ["loss of bladder control"]
    # a wet cough, and what is wet with sweat, are no wetting
    assert [s.text for s in find_spans("I have a wet cough")] == ["wet cough"]
    assert [s.text for s in find_spans("my shirt is wet with sweat")] == ["my shirt is wet", "sweat"]


def test_british_sickness_counted_is_vomiting_and_peeing_at_night_is_nocturia() -> None:
    # "sick" alone finds Nausea: "been sick twice", "being sick" is vomiting; "been sick for a week" stays ill
    assert [s.text for s in find_spans("I was sick twice this morning")] == ["vomiting"]
    assert [s.text for s in find_spans("I've been sick three times")] == ["vomiting"]
    assert [s.text for s in find_spans("my son keeps being sick")] == ["keeps vomiting"]
    assert [s.text for s in find_spans("I have diarrhoea and I've been sick twice")] == ["diarrhoea", "vomiting"]
    assert [s.text for s in find_spans("I'm sick of being tired")] == ["being tired"]
    # the time "at night" is a piece's trailing time, so the clause is read whole ("up at night to pee" found
    # Maintenance insomnia); a second clause keeps its own words
    assert [s.text for s in find_spans("I get up at night to pee")] == ["nocturia"]
    assert [s.text for s in find_spans("I pee a lot at night")] == ["nocturia"]
    assert [s.text for s in find_spans("I have to get up twice a night to wee and my back hurts")] == [
        "nocturia", "my back hurts"]
    assert [s.text for s in find_spans("I wake up at night and can't get back to sleep")] == [
        "wake up at night", "can't get back to sleep"]


def test_everyday_words_and_idioms_read_in_the_vocabulary_words() -> None:
    def read(text: str) -> list[str]:
        return [s.text for s in find_spans(text) if not s.reading]

    # British "poo" and "wee" as "poop" and "pee", which the lay-word reading reads; "a wee bit" is small
    assert read("there is blood in my poo") == ["blood in stool"]
    assert read("it hurts when I wee") == ["hurts when I pee"]
    assert read("my wee is dark") == ["my pee is dark"]
    assert read("a wee bit of pain in my chest") == ["wee bit of pain in my chest"]
    assert read("I feel queasy") == ["feel nauseous"]
    # feeling faint or light-headed is presyncope ("faint" alone found Loss of consciousness); fainting stays
    assert read("I feel faint") == ["presyncope"]
    assert read("I get really light-headed") == ["presyncope"]
    assert read("I fainted yesterday") == ["fainted"]
    assert read("food gets stuck in my throat") == ["difficulty swallowing"]
    assert read("something feels stuck in my throat") == ["difficulty swallowing"]
    assert read("I have something stuck in my eye") == ["something stuck in my eye"]
    # not remembering things ("trouble remembering words" is Semantic dementia's wording)
    assert read("I can't remember things") == ["poor memory"]
    assert read("my memory is getting worse") == ["poor memory"]
    # British "spots" on the face are acne (they found Purpura); coloured spots stay spots
    assert read("I have spots on my face") == ["acne on my face"]
    assert read("I've got red spots on my legs") == ["red spots on my legs"]
    assert read("my nose is all blocked up") == ["stuffy nose"] and read("I have a blocked nose") == ["stuffy nose"]
    assert read("my throat is scratchy") == ["sore throat"]
    assert read("I keep hearing voices") == ["auditory hallucinations"]
    # Dyspareunia has no everyday wording; "sex is painful" reads "sex pain" by the part-pain rule first
    assert read("it hurts when we have sex") == ["dyspareunia"] and read("sex is painful") == ["dyspareunia"]
    assert [s.text for s in find_spans("sex is painful", part_pain=True)] == ["dyspareunia"]
    assert read("I've been off my food") == ["poor appetite"] and read("I've done my back in") == ["back pain"]
    assert read("I feel really low") == ["feel depressed"] and read("I'm feeling low on energy") == [
        "feeling low on energy"]
    assert read("he's pulling at his ear") == ["ear pain"] and read("I can't concentrate") == ["poor concentration"]
    assert read("I've got wind") == ["flatulence"] and read("the wind makes my eyes water") == [
        "the wind makes my eyes water"]
    assert read("I'm run down") == ["tired"] and read("I'm burning up") == ["fever"]
    assert read("I have a water infection") == ["urinary tract infection"]
    assert read("I can't hear properly") == ["hearing loss"]
    assert read("my head is pounding") == ["headache"] and read("I see flashing lights") == ["photopsia"]
    assert read("I'm passing blood") == ["rectal bleeding"] and read("I'm passing blood in my urine") == [
        "passing blood in my urine"]
    assert read("it burns when I go to the loo") == ["burns when I pee"]
    assert read("it stings when I wee") == ["burns when I pee"] and read("my wee stings") == ["my pee burns"]
    assert read("a bee sting") == ["bee sting"]
    assert read("I get bad period pains") == ["bad painful periods"]
    assert read("it's painful to pee") == ["painful urination"]
    # the small-talk gate reads a piece in the words it is searched as
    assert in_vocabulary_words("feel down") == "feel depressed" and in_vocabulary_words("thank you") == "thank you"


def test_a_pain_said_before_its_part_is_searched_as_the_parts_pain() -> None:
    # "a sore tummy" found Peptic ulcer and "a sore back" Oral ulcer: "sore" is an ulcer's word too
    def read(text: str) -> list[str]:
        return [s.text for s in find_spans(text, part_pain=True)]

    assert read("my kid has a sore tummy") == ["tummy pain"] and read("I've got a sore back") == ["back pain"]
    assert read("she has sore eyes") == ["eye pain"] and read("I have a really sore knee") == ["knee pain"]
    # a sore throat is worded so already; a part with more after it is left to the other rules
    assert read("I have a sore throat") == ["sore throat"]
    assert read("a sore on my foot") == ["sore on my foot"]
    # painful stools, periods, a painful defecation are no part's pain (the vocabulary's own wordings stay)
    assert read("Painful stools") == ["Painful stools"] and read("Painful defecation") == ["Painful defecation"]
    assert read("Menstrual cramps") == ["Menstrual cramps"]


def test_the_words_of_a_crisis_and_of_an_emergency_are_read() -> None:
    def read(text: str) -> list[tuple[str, bool]]:
        return [(s.text, s.negated) for s in find_spans(text) if not s.reading]

    # "I don't want to live anymore" was read as denying "want to live anymore": its negation states the finding
    assert read("I don't want to live anymore") == [("suicidal thoughts", False)]
    assert find_spans("I don't want to live anymore")[0].start == 2  # the piece holds the negation
    assert read("I want to kill myself") == [("suicidal thoughts", False)]
    assert read("I've been thinking about ending it all") == [("suicidal thoughts", False)]
    assert read("I don't want to die") == [("suicidal thoughts", True)]  # a fear of dying, denied
    assert read("I had a fit") == [("seizure", False)] and read("my son has fits") == [("seizure", False)]
    assert read("I'm fit and well") == [("fit", False), ("well", False)]
    assert read("I had a coughing fit") == [("coughing fit", False)]
    assert read("I feel like I'm going to pass out") == [("presyncope", False)]
    assert read("my face has dropped on one side") == [("facial droop", False)]
    assert read("his lips have gone blue") == [("lip cyanosis", False)]
    assert read("my baby is floppy") == [("low muscle tone", False)]
    assert in_vocabulary_words("don't want to live anymore") == "suicidal thoughts anymore"


def test_cold_as_a_noun_is_no_coldness() -> None:
    # "I have a cold" decided Coldness: the illness, or the weather a finding comes in, is no sensation of cold
    assert find_spans("I have a cold") == [] and find_spans("I've had a stinking cold for a week") == []
    assert [s.text for s in find_spans("I think I've caught a cold, runny nose and sneezing")] == [
        "runny nose", "sneezing"]
    assert [s.text for s in find_spans("I had a cold last week and now my ear hurts")] == ["my ear hurts"]
    assert [s.text for s in find_spans("my fingers go white in the cold")] == ["my fingers go white"]
    # the adjective says the sensation; a compound with the noun after it is another thing
    assert [s.text for s in find_spans("my hands are cold")] == ["my hands are cold"]
    assert [s.text for s in find_spans("I feel cold all the time")] == ["feel cold"]
    assert [s.text for s in find_spans("I break out in a cold sweat")] == ["break out in a cold sweat"]
    assert [s.text for s in find_spans("I've got a cold sore")] == ["cold sore"]


def test_a_relative_clause_of_a_sensation_is_a_second_finding() -> None:
    # "a rash on my legs that itches" was one piece, which decided Pruritus alone: the rash and the itch are two
    spans = find_spans("I have a rash on my legs that itches")
    assert [s.text for s in spans if not s.reading] == ["rash on my legs", "itches"]
    assert [s.text for s in find_spans("a lump in my neck that hurts") if not s.reading] == ["lump in my neck", "hurts"]
    # "that" before anything else stays inside its clause
    assert [s.text for s in find_spans("a rash that is spreading")] == ["rash that is spreading"]


def test_feel_stays_before_one_word_and_a_time_of_day() -> None:
    # "I feel sick in the mornings" was searched as "sick in the mornings" (morning terms, no Nausea decided)
    assert [s.text for s in find_spans("I feel sick in the mornings")] == ["feel sick in the mornings"]
    assert [s.text for s in find_spans("I feel sick")] == ["feel sick"]
    assert [s.text for s in find_spans("I feel a sharp pain in the evening")] == ["sharp pain in the evening"]


def test_chinese_pieces_leave_out_who_and_when() -> None:
    lex = SurfaceLexicon({"发烧": "发烧", "咳嗽": "咳嗽"})
    assert [s.text for s in find_spans("孩子嗓子疼，还有点发烧", lex)] == ["嗓子疼", "发烧"]
    spans = find_spans("咳嗽，晚上咳得厉害", lex)
    assert [(s.text, s.start) for s in spans] == [("咳嗽", 0), ("咳得厉害", 5)]
    # a negation cue is no lead-in; a piece that is only a lead-in stays as it is
    assert [s.text for s in find_spans("孩子没有精神", lex)] == ["没有精神"]
    assert [s.text for s in find_spans("最近", lex)] == ["最近"]


def test_a_chinese_piece_of_who_and_when_beside_a_lexicon_word_is_no_span_and_a_trailing_time_is_cut() -> None:
    lex = SurfaceLexicon({"发烧": "发烧", "头疼": "头痛"})
    assert [s.text for s in find_spans("孩子发烧", lex)] == ["发烧"]  # 孩子 alone found 痱子
    assert [s.text for s in find_spans("嗓子疼了两天，今天下午开始有点发烧", lex)] == ["嗓子疼", "发烧"]
    assert [(s.text, s.negated) for s in find_spans("没有头疼", lex)] == [("头疼", True)]  # the word reads the cue itself
    # a piece alone is kept; 多 without a unit is "much", no time; a piece is not cut below two characters
    assert [s.text for s in find_spans("最近", lex)] == ["最近"]
    assert [s.text for s in find_spans("尿多", lex)] == ["尿多"]
    assert [s.text for s in find_spans("咳了一个多礼拜", lex)] == ["咳了一个多礼拜"]


def test_symptom_chapter_names_are_words_of_their_own() -> None:
    from medrank.pipelines.symptom.sets import symptom_names
    from medrank.records import Concept

    concepts = [Concept("恶心", "恶心", meta={"codes": ("R11.x00",)}), Concept("胃痛", "胃痛", meta={"codes": ("R10.101",)}),
                Concept("胃恶性肿瘤", "胃恶性肿瘤", meta={"codes": ("C16.900",)}),
                Concept("腹部和盆腔痛", "腹部和盆腔痛", meta={"codes": ("R10",)}), Concept("痛", "痛", meta={"codes": ("R52",)})]
    assert symptom_names(concepts) == ["恶心", "胃痛"]  # chapter R, two to four characters
    lex = SurfaceLexicon({"吐": "呕吐", "恶心": "呕吐"}).with_names(symptom_names(concepts))
    assert lex.normalise("胃痛") == "胃痛" and lex.normalise("恶心") == "呕吐"  # the lexicon's own forms keep their names
    # "想" between two words is too short a piece to search
    assert [(s.text, s.normalised) for s in find_spans("胃疼恶心想吐", lex)] == [("胃疼", None), ("恶心", "呕吐"), ("吐", "呕吐")]



def test_a_symptom_name_the_dxy_words_map_to_an_unrelated_term_names_itself(monkeypatch) -> None:
    import medrank.pipelines.symptom.sets as sets_module

    # the DXY annotators wrote 头晕 under 头痛 (no dizziness among their 41 symptoms); 发热 under 发烧 is no other term
    lex = SurfaceLexicon({"头晕": "头痛", "头疼": "头痛", "发热": "发烧", "水肿": "淋巴结肿大"})
    codes = {"头晕": ("R42",), "头痛": ("R51",), "发热": ("R50.9",), "水肿": ("R60.9",), "淋巴结肿大": ("R59.9",),
             "胃痛": ("R10.1",)}
    monkeypatch.setattr(sets_module, "_vocabulary_codes", lambda root: codes)
    own = sets_module._named_otherwise(lex, ["头晕", "发热", "水肿", "胃痛"], None)
    assert set(own) == {"水肿", "头晕"}
    named = lex.with_names(["头晕", "发热", "胃痛"], own=own)
    assert named.normalise("头晕") == "头晕" and named.normalise("头疼") == "头痛" and named.normalise("发热") == "发烧"


def test_a_cue_opening_a_piece_denies_the_name_after_it() -> None:
    from medrank.pipelines.symptom.spans import denied_name_zh

    names = {"胸痛", "贫血", "感冒", "不安", "无尿", "无症状型鼠疫", "霍奇金淋巴瘤", "食欲不振"}
    assert denied_name_zh("没有胸痛", names) == 2
    assert denied_name_zh("没有明显胸痛", names) == 4  # a word of degree between
    assert denied_name_zh("不贫血", names) == 1
    # a name that opens with the cue, and words that are no name: what the patient has or lacks, not a denial
    assert [denied_name_zh(p, names) for p in ("不安", "无尿", "无症状型鼠疫", "没有食欲", "没精神", "胸痛")] == [None] * 6
    # 非 opens names; the cause denied is not the finding
    assert denied_name_zh("非霍奇金淋巴瘤", names) is None and denied_name_zh("无明显诱因出现胸痛", names) is None


def test_a_cue_inside_a_piece_denies_the_name_it_splits() -> None:
    from medrank.pipelines.symptom.spans import denied_name_zh

    names = {"头痛", "肚子痛", "消化不良", "食欲不振", "不安", "通气"}
    assert [denied_name_zh(p, names) for p in ("头不痛", "肚子不痛了", "头也不痛")] == [0, 0, 0]
    # a name across the cue, and what the patient cannot do, deny nothing
    for piece in ("消化不良", "食欲不振", "坐立不安", "吃不下", "睡不着", "喘不上气", "鼻子不通气"):
        assert denied_name_zh(piece, names) is None, piece


def test_the_detector_does_not_decide_a_name_a_piece_denies() -> None:
    det = _detector()
    det.lexicon = det.lexicon.with_variants({"疼": "痛"})
    det.names = {**NAMES, "R07": "胸痛"}
    det.search = lambda texts, k: [[("R07", 0.9)] if "胸" in t else _search([t], k)[0] for t in texts]
    det.calibration.rules = ("zh_variants",)
    assert "胸痛" in {t.name for t in det.detect("咳嗽，胸疼").terms}
    assert "胸痛" not in {t.name for t in det.detect("咳嗽，没有胸疼").terms}
    assert "胸痛" not in {t.name for t in det.detect("咳嗽，胸不疼").terms}


def test_the_span_lexicon_is_the_dxy_words_alone_without_a_vocabulary(tmp_path) -> None:
    from medrank.pipelines.symptom.sets import span_lexicon

    dxy = SurfaceLexicon({"吐": "呕吐"})
    assert span_lexicon(tmp_path / "nowhere", lexicon=dxy) is dxy


def test_negation_marks_the_span() -> None:
    lex = SurfaceLexicon({"发烧": "发烧", "咳嗽": "咳嗽"})
    spans = {s.text: s.negated for s in find_spans("孩子不发烧，有点咳嗽", lex)}
    assert spans["发烧"] is True and spans["咳嗽"] is False
    en = {s.text: s.negated for s in find_spans("I have no fever but a headache")}
    assert en == {"no fever": True, "headache": False}
    # a clause that says all is well with what it names denies it ("my appetite is fine" decided Poor appetite)
    en = {s.text: s.negated for s in find_spans("my appetite is fine but I have a headache")}
    assert en == {"my appetite is fine": True, "headache": False}
    # a Chinese denial holds over the items 、 or a conjunction of a list adds to it ("没有发烧、咳嗽"), not over a comma
    # nor over a clause that affirms ("有点咳嗽")
    lex = SurfaceLexicon({"发烧": "发烧", "咳嗽": "咳嗽", "咳痰": "咳痰", "头疼": "头痛"})

    def zh(text: str) -> list[tuple[str, bool]]:
        return [(s.text, s.negated) for s in find_spans(text, lex)]

    assert zh("孩子头疼，没有发烧、咳嗽") == [("头疼", False), ("发烧", True), ("咳嗽", True)]
    assert zh("无发烧、咳嗽、咳痰") == [("发烧", True), ("咳嗽", True), ("咳痰", True)]
    assert zh("没有发烧或者咳嗽") == [("发烧", True), ("咳嗽", True)]
    assert zh("没有发烧，咳嗽") == [("发烧", True), ("咳嗽", False)]
    assert zh("没有发烧、有点咳嗽") == [("发烧", True), ("咳嗽", False)]
    assert zh("发烧和咳嗽") == [("发烧", False), ("咳嗽", False)]


def test_english_clauses_and_bare_predicates() -> None:
    text = "my knee is swollen and hurts when I walk"
    spans = [s.text for s in find_spans(text)]
    assert "my knee is swollen" in spans
    assert "my knee is swollen and hurts" in spans  # "hurts" alone does not say where
    other = "cough, fever and chills"
    assert [other[a:b] for a, b in clauses(other, "en")] == ["cough", "fever", "chills"]
    readings = {s.text: s.reading for s in find_spans(text)}
    assert readings["my knee is swollen and hurts"] and not readings["my knee is swollen"]
    # an adjective alone says how the part before it is; before a noun it names a part of its own
    eyes = "my eyes are red and itchy"
    got = [(s.text, eyes[s.start:s.end], s.reading) for s in find_spans(eyes)]
    # ... and is searched with the subject it shares, covering its own words
    assert got == [("my eyes are red", "my eyes are red", False), (eyes, eyes, True), ("my eyes are itchy", "itchy", False)]
    assert [s.text for s in find_spans("a rash and itchy eyes")] == ["rash", "itchy eyes"]
    # its own verb comes along; a clause that opens with no body part shares nothing
    assert [s.text for s in find_spans("my left knee hurts and is swollen")][-1] == "my left knee is swollen"
    assert [s.text for s in find_spans("my knee is swollen and now hurts")][-1] == "hurts"  # a verb of pain: alone
    assert [s.text for s in find_spans("my son has a rash and itchy")] == ["rash", "rash and itchy", "itchy"]


def test_adjectives_after_a_part_say_how_that_part_is_one_after_another() -> None:
    def spans(text: str) -> list[tuple[str, bool]]:
        return [(s.text, s.reading) for s in find_spans(text, language="en", part_pain=True)]

    # "hot" alone found Hot flashes, "painful" alone Pain: each is said of the toe, the next one too
    assert spans("my toe is red, hot and really painful") == [
        ("my toe is red", False), ("my toe is red, hot", True), ("my toe is hot", False),
        ("my toe is hot and painful", True), ("toe pain", False)]
    # with a time of day after it, the adjective is still the part's ("sticky in the morning" found Generalized
    # morning stiffness); the time stays with it
    assert spans("my eyes are red and sticky in the morning") == [
        ("my eyes are red", False), ("my eyes are red and sticky in the morning", True),
        ("my eyes are sticky in the morning", False)]
    assert spans("my nose is blocked and runny")[-1] == ("my nose is runny", False)
    # a colour or a texture too ("yellow" alone decided Jaundice for "my toenails are thick and yellow")
    assert spans("my toenails are thick and yellow")[-1] == ("my toenails are yellow", False)
    assert spans("my pee is dark and cloudy")[-1] == ("my pee is cloudy", False)
    # a participle too ("bleeding" alone was nothing but blood, and "my gums are sore and bleeding" decided nothing)
    assert spans("my gums are sore and bleeding")[-1] == ("my gums are bleeding", False)
    # ... after a verb with its auxiliary ("painful" alone decided Pain)
    assert spans("my left calf has been swollen and painful")[-1] == ("left calf pain", False)
    # those words alone, with no part before them, stay as they were: no piece of their own joins a circumstance
    assert spans("I feel hot and sweaty") == [("feel hot", False), ("sweaty", False)]
    assert spans("cold when I go outside") == [("cold", False), ("cold when I go outside", True)]
    assert spans("burning when I pee") == [("burning when I pee", False)]


def _english_pieces(text: str) -> list[str]:
    """The texts of the English pieces of ``text``, as the set detector reads them (``part_pain``)."""
    return [s.text for s in find_spans(text, language="en", part_pain=True)]


def test_a_clause_that_says_when_the_one_before_is_worst_is_no_piece() -> None:
    spans = _english_pieces
    # "especially in the cold" alone decided Coldness, "worse when I climb stairs" Difficulty climbing stairs
    assert spans("my chest feels tight, especially in the cold") == ["my chest feels tight"]
    assert spans("my knee hurts, worse when I climb stairs") == ["knee pain"]
    assert spans("I get a rash, especially on my arms") == ["rash"]
    assert spans("I feel worse") == ["feel worse"]  # no place or time after it: left as it was
    # ... nor one that says the finding goes ("it goes when I rest" alone decided Resting tremor)
    assert spans("my legs hurt when I walk and it goes when I rest") == ["leg pain", "leg pain when I walk"]
    assert spans("it goes to my arm") == ["goes to my arm"]  # where it goes is no relief


def test_a_time_that_opens_a_clause_is_left_out_as_a_trailing_one_is() -> None:
    spans = _english_pieces
    # "Since Monday my left calf …" kept the time, and the part's clause was no longer one that opens with the part
    assert spans("Since Monday my knee is swollen") == ["my knee is swollen"]
    assert spans("For the last three days I've had a sore throat") == ["sore throat"]
    assert spans("for a couple of months I have been tired") == ["tired"]
    assert spans("two days ago I started vomiting") == ["started vomiting"]
    assert spans("for two days") == []  # nothing but a time, as before


def test_a_subordinate_clause_is_read_with_the_clause_it_qualifies_never_alone() -> None:
    def spans(text: str) -> list[tuple[str, bool, bool]]:
        return [(s.text, s.negated, s.reading) for s in find_spans(text, language="en")]

    # "after a meal" alone would find Postprandial fullness
    assert spans("low blood sugar after a meal") == [("low blood sugar", False, False),
                                                     ("low blood sugar after a meal", False, True)]
    # one word of sensation says neither what nor where: it and its circumstance are one piece ("burning" alone
    # would find Burning mouth)
    assert spans("it hurts when I swallow") == [("hurts when I swallow", False, False)]
    assert spans("burning when I pee") == [("burning when I pee", False, False)]
    assert [s.circumstance for s in find_spans("burning when I pee", language="en")] == ["when I pee"]
    assert spans("my knee is swollen and hurts when I walk") == [
        ("my knee is swollen", False, False), ("my knee is swollen and hurts", False, True),
        ("hurts when I walk", False, False)]
    # a bare predicate with its shared subject is read with its circumstance like any clause
    assert spans("my knee hurts and is stiff when I wake up") == [
        ("my knee hurts", False, False), ("my knee hurts and is stiff", False, True),
        ("my knee is stiff", False, False), ("my knee is stiff when I wake up", False, True)]
    assert spans("no pain when I swallow") == [("no pain", True, False), ("no pain when I swallow", True, True)]
    # nothing before it to qualify: its own clause, as before
    assert spans("when I walk my knee hurts") == [("when I walk my knee hurts", False, False)]
    # after a comma, what says when the clause before is worst is no piece at all
    assert spans("a cough, especially when I lie down") == [("cough", False, False)]


def test_english_spans_leave_out_who_and_when() -> None:
    def spans(text: str) -> list[tuple[str, bool]]:
        return [(s.text, s.negated) for s in find_spans(text, language="en")]

    # with one word left, "feel" is half of what is said: "sick" alone reads as ill, "feel sick" as nauseous
    assert spans("I feel sick") == [("feel sick", False)]
    # ... and how much of it is no part of what is felt ("feel really weak" found Retrognathia's "weak chin")
    assert spans("she felt really sick") == [("felt sick", False)]
    assert spans("I feel really weak") == [("feel weak", False)]
    assert spans("I feel dizzy and tired") == [("feel dizzy", False), ("tired", False)]
    assert spans("I don't feel sick") == [("feel sick", True)]
    # a clause with its own subject is no bare predicate of the clause before it
    assert [(s.text, s.reading) for s in find_spans("my stomach hurts and I feel sick", language="en")] == [
        ("my stomach hurts", False), ("feel sick", False)]
    assert [(s.text, s.reading) for s in find_spans("my knee is swollen and feels warm", language="en")] == [
        ("my knee is swollen", False), ("my knee is swollen and feels warm", True), ("my knee feels warm", False)]

    assert spans("headache and fever for two days") == [("headache", False), ("fever", False)]
    assert spans("I have a headache and fever since yesterday") == [("headache", False), ("fever", False)]
    assert spans("I've had a runny nose for 3 weeks, also a sore throat") == [("runny nose", False), ("sore throat", False)]
    assert spans("my son has a rash with itchy eyes") == [("rash", False), ("itchy eyes", False)]
    assert spans("I'm dizzy") == [("dizzy", False)]
    assert spans("coughing at night") == [("coughing at night", False)]  # "at night" qualifies the finding
    # how often, and a time of day behind a qualifier, say when: alone "especially at night" finds Maintenance insomnia
    assert spans("I cough a lot, especially at night") == [("cough", False)]
    assert spans("I get headaches, mostly in the morning") == [("headaches", False)]
    # a count may be near ("for about 3 days", "in over a week"); "first thing (in the morning)" is a time of day
    assert spans("I have had a fever for about 3 days") == [("fever", False)]
    assert spans("constipated for over a week") == [("constipated", False)]
    assert spans("tingling in my right hand, mostly first thing in the morning") == [("tingling in my right hand", False)]
    assert spans("my head aches first thing") == [("my head aches", False)]
    # waking says when what follows "with" was noticed; waking itself may be the finding
    assert spans("I woke up this morning with a sore throat") == [("sore throat", False)]
    assert spans("my son woke up with a rash") == [("rash", False)]
    assert spans("I keep waking up at night") == [("waking up at night", False)]
    # a participle of a movement with what it moves over is a circumstance, like "when ..."; what the patient
    # cannot do and a gerund are not; "running a temperature" is having one
    got = [(s.text, s.reading, s.circumstance) for s in find_spans("I get breathless walking up the stairs", language="en")]
    assert got == [("breathless", False, None), ("breathless walking up the stairs", True, "walking up the stairs")]
    assert spans("difficulty walking up stairs") == [("difficulty walking up stairs", False)]
    assert spans("slow breathing") == [("slow breathing", False)]
    assert spans("she has been running a temperature") == [("temperature", False)]
    assert spans("my head hurts all the time") == [("my head hurts", False)]
    # a denial holds over what "or" adds to it, and over the items a comma lists before that "or" ("no fever or cough"
    # decided Cough); not over a clause with its own subject, nor where nothing before was denied
    assert spans("I have no fever or cough") == [("no fever", True), ("cough", True)]
    assert spans("I don't have a fever or a cough") == [("fever", True), ("cough", True)]
    assert spans("no fever, cough or vomiting") == [("no fever", True), ("cough", True), ("vomiting", True)]
    assert spans("I have a headache but no fever or vomiting") == [("headache", False), ("no fever", True),
                                                                   ("vomiting", True)]
    assert spans("no fever or I would have called")[1] == ("would have called", False)
    assert spans("no fever, a cough and a runny nose") == [("no fever", True), ("cough", False), ("runny nose", False)]
    # what "or" adds to what the patient cannot do, they cannot do either ("taste anything" alone found Phantageusia)
    assert spans("I can't smell or taste anything") == [("can't smell", False), ("can't taste anything", False)]
    assert spans("I can't stop coughing or sneezing")[1] == ("can't stop sneezing", False)
    assert spans("I can't sleep or I wake up early")[1] == ("wake up early", False)  # its own subject
    # what the patient has not been able to do is what they cannot do, no denial: as "I can't sleep" reads
    assert spans("I haven't been able to sleep for days") == [("can't sleep", False)]
    assert spans("I'm not able to breathe properly") == [("can't breathe properly", False)]
    assert spans("I haven't had a fever") == [("fever", True)]
    # every morning, like every day, says when; every night stays, as "at night" does ("I wake up every night")
    assert spans("I feel sick every morning") == [("feel sick", False)]
    assert spans("I wake up every night") == [("wake up every night", False)]
    assert spans("I wake up at night") == [("wake up at night", False)]
    assert spans("I don't have a fever") == [("fever", True)]
    assert spans("I do not have a cough but my head hurts") == [("cough", True), ("my head hurts", False)]
    # who may be any person with a word or two before it, and a clause may open with when ("and now ...")
    assert spans("my little girl has been vomiting and has diarrhoea since this morning") == [
        ("vomiting", False), ("diarrhoea", False)]
    assert spans("a sore throat for three days, and now I have a fever") == [("sore throat", False), ("fever", False)]
    assert spans("this morning our 3-year-old son threw up") == [("threw up", False)]
    # a child named by age is who, not what ("2 year old" found Neonatal inspiratory stridor)
    assert spans("my 2 year old has a high temperature") == [("high temperature", False)]
    assert spans("our 18 month old is vomiting") == [("vomiting", False)]
    # ... and a parent's "little one" ("my little one is off her food" decided Food allergy), not a part's "left one"
    assert spans("my little one has a fever") == [("fever", False)]
    assert spans("my newborn is jaundiced") == [("jaundiced", False)]
    assert spans("my left one is swollen") == [("my left one is swollen", False)]
    assert spans("now I don't have a fever") == [("fever", True)]
    assert spans("her throat hurts") == [("her throat hurts", False)]  # a body part is what, not who


# -- lexicon -----------------------------------------------------------------------------------------
def _records() -> list[DxyRecord]:
    return [
        DxyRecord("一直流鼻涕，有点咳嗽", ("鼻涕", "咳嗽"), ("流涕", "咳嗽")),
        DxyRecord("鼻涕很多，发烧", ("鼻涕", "发烧"), ("流涕", "发烧")),
        DxyRecord("拉肚子三天，发烧", ("拉肚子", "发烧"), ("稀便", "发烧")),
        DxyRecord("拉肚子，咳嗽", ("拉肚子", "咳嗽"), ("稀便", "咳嗽")),
        DxyRecord("咳嗽，发烧", ("咳嗽", "发烧"), ("咳嗽", "发烧")),
    ]


def test_lexicon_mining_aligns_written_words_to_names() -> None:
    lex = mine_surface_lexicon(_records())
    assert lex.normalise("鼻涕") == "流涕"
    assert lex.normalise("拉肚子") == "稀便"
    assert lex.normalise("咳嗽") == "咳嗽"  # names map to themselves
    assert lex.cluster("流涕")[0] == "流涕" and "鼻涕" in lex.cluster("流涕")
    assert lex.find("拉肚子和鼻涕") == [(0, 3, "稀便"), (4, 6, "流涕")]
    assert lex.precision["鼻涕"] == 1.0


def test_lexicon_round_trip(tmp_path) -> None:
    lex = mine_surface_lexicon(_records()).with_variants({"疼": "痛"})
    lex.save(tmp_path / "lex.json")
    back = SurfaceLexicon.load(tmp_path / "lex.json")
    assert back.forms == lex.forms and back.precision == lex.precision and back.variants == {"疼": "痛"}


def test_character_variants_come_from_equivalent_questions_towards_the_vocabulary() -> None:
    from medrank.pipelines.symptom.lexicon import character_variants

    pairs = [("腰疼", "腰痛"), ("胃疼吃什么药", "胃痛吃什么药"), ("牙疼药", "牙痛药"), ("头疼", "头痛"),
             ("孕妇能吃吗", "孕期能吃吗"), ("孕妇感冒", "孕期感冒"), ("孕妇头晕", "孕期头晕"),  # one word, one context
             ("会胖吗", "会胖么"), ("能吃吗", "能吃么"), ("头晕吗", "头晕么"),  # question words: no name holds them
             ("腰疼得厉害", "腰痛的厉害")]  # two characters differ: no evidence
    names = ["腰痛", "胃痛", "头痛", "牙痛", "疼痛", "孕期", "妊娠期", "产妇", "孕妇"]
    assert character_variants(pairs, names, min_names=1) == {"疼": "痛"}
    # the vocabulary's own writing decides the direction; too few pairs, no variant
    assert character_variants(pairs, ["疼"] * 3 + ["痛"], min_names=1) == {"痛": "疼"}
    assert character_variants(pairs[:2], names, min_names=1) == {}
    lex = SurfaceLexicon({"恶心": "恶心"}).with_variants({"疼": "痛"})
    assert lex.vary("胃疼恶心") == "胃痛恶心" and SurfaceLexicon({}).vary("胃疼") == "胃疼"
    with pytest.raises(ValueError, match="one character"):
        lex.with_variants({"疼痛": "痛"})


def test_read_dxy_folder_takes_any_split_prefix_and_the_goal_file(tmp_path) -> None:
    recs = [{"goal": {"origin_inform_slots": ["鼻涕"], "explicit_inform_slots": {"流涕": True}},
             "self_repo": "流鼻涕\n", "consult_id": "1"}]
    (tmp_path / "x_dialog.txt").write_text("test@" + repr(recs), encoding="utf-8")
    got = read_dxy_folder(tmp_path)
    assert got == [DxyRecord("流鼻涕", ("鼻涕",), ("流涕",), "1")]
    (tmp_path / "test_goal_dict_dxy.txt").write_text(json.dumps([{"explicit_inform_slots": {"鼻塞": True, "咳嗽": False}}]),
                                                     encoding="utf-8")
    assert read_dxy_folder(tmp_path)[0].explicit == ("鼻塞",)
    (tmp_path / "x_dialog.txt").write_text("no prefix", encoding="utf-8")
    with pytest.raises(DxyFormatError, match="split"):
        read_dxy_folder(tmp_path)


# -- metric and calibration --------------------------------------------------------------------------
def test_cblue_set_metric_by_hand() -> None:
    pred = [{"a", "b"}, {"c"}, set()]
    gold = [{"a"}, {"c", "d"}, {"e"}]
    # tp = 2, predicted = 3, gold = 4
    m = set_prf(pred, gold)
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 4)
    assert m["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert set_prf([set()], [set()]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_calibration_is_monotone_in_an_informative_feature_and_round_trips(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(FEATURES)))
    y = (x[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
    cal = fit_logistic(x, y)
    grid = np.zeros((21, len(FEATURES)))
    grid[:, 0] = np.linspace(-3, 3, 21)
    p = cal.probability(grid)
    assert np.all(np.diff(p) > 0) and p[0] < 0.1 and p[-1] > 0.9
    cal.save(tmp_path / "cal.json")
    assert np.allclose(SetCalibration.load(tmp_path / "cal.json").probability(grid), p)
    with pytest.raises(ValueError, match="both"):
        fit_logistic(x, np.ones(400))


def _one_feature_calibration(feature: str = "span_top1", intercept: float = -2.0, min_terms: int = 0,
                             **kw) -> SetCalibration:
    """A calibration that reads one feature only (weight 4, unscaled), threshold 0.5."""
    n = len(BASE_FEATURES)
    return SetCalibration([0.0] * n, [1.0] * n, [4.0 if f == feature else 0.0 for f in BASE_FEATURES], intercept,
                          threshold=0.5, min_terms=min_terms, **kw)


def _table_detector(hits: dict, names: dict, calibration: SetCalibration, missing: list | None = None,
                    **kw) -> SetDetector:
    """An English detector whose search reads ``hits`` (query → [(id, score)]); other queries get ``missing``."""
    return SetDetector(lambda texts, k: [hits.get(t, missing or [])[:k] for t in texts], names, language="en",
                       calibration=calibration, **kw)


# -- the detector over a fake retriever ---------------------------------------------------------------
NAMES = {"R50": "发热", "R05": "咳嗽", "R05.1": "干咳", "J00": "流涕", "T20": "鼻部烧伤"}


def _search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
    table = {"发烧": ["R50", "T20"], "发热": ["R50"], "咳嗽": ["R05", "R05.1"], "流鼻涕": ["J00"], "流涕": ["J00"]}
    out = []
    for t in texts:
        ids = table.get(t) or ["R05", "R05.1", "R50"]
        out.append([(cid, 1.0 - 0.1 * r) for r, cid in enumerate(ids[:k])])
    return out


def _detector(**kw) -> SetDetector:
    lex = SurfaceLexicon({"发烧": "发烧", "发热": "发烧", "咳嗽": "咳嗽", "流鼻涕": "流涕"})
    hier = CodePrefixHierarchy({k: (k,) for k in NAMES})
    n = len(BASE_FEATURES)
    weights = dict.fromkeys(BASE_FEATURES, 0.0)
    weights.update(exact=4.0, span_top1=2.0)
    cal = SetCalibration([0.0] * n, [1.0] * n, [weights[f] for f in BASE_FEATURES], 0.0, threshold=0.5)
    cal.intercept = -3.0
    return SetDetector(_search, NAMES, language="zh", lexicon=lex, hierarchy=hier, calibration=cal, **kw)


def test_detector_spans_probabilities_and_diversification() -> None:
    det = _detector()
    text = "咳嗽流鼻涕，昨晚发烧"
    got = det.detect(text)
    names = {t.name: t for t in got.terms}
    assert set(names) == {"咳嗽", "流涕", "发热"}  # 发烧 searched as 发热 too; no burn
    assert text[slice(*names["流涕"].span)] == "流鼻涕"
    assert text[slice(*names["发热"].span)] == "发烧"
    assert all(0.0 <= t.probability <= 1.0 for t in got.terms + got.alternatives)
    assert "干咳" not in names  # a child code of 咳嗽 on the same span
    assert [t.probability for t in got.terms] == sorted((t.probability for t in got.terms), reverse=True)
    assert list(got.ranking) == _search([text], det.k)[0]  # the whole text's own hits, kept for the caller


def test_the_zh_variants_rule_searches_a_complaint_as_the_vocabulary_writes_it() -> None:
    det = _detector()
    det.lexicon = det.lexicon.with_variants({"疼": "痛"})
    det.names = {**NAMES, "R51": "头痛", "R52": "疼痛"}
    asked: list[str] = []

    def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        asked.extend(texts)
        return [[("R51", 0.9)] if t == "头痛" else [("R52", 0.9)] if "疼" in t else [] for t in texts]

    det.search = search
    det.calibration.rules = ("zh_variants",)
    got = det.detect("头疼")
    assert [t.name for t in got.terms] == ["头痛"] and got.terms[0].span == (0, 2)  # the offsets are the text's
    assert "头疼" not in asked
    det.calibration.rules = ()
    assert [t.name for t in det.detect("头疼").terms] == ["疼痛"]  # off: searched as written


def test_the_zh_joined_rule_reads_a_joined_name_only_where_both_findings_are_written() -> None:
    det = _detector()
    det.names = {**NAMES, "R07": "咽痛和胸痛", "R07.0": "咽痛", "R07.4": "胸痛", "R11": "恶心和呕吐", "R11.0": "恶心",
                 "R11.1": "呕吐"}

    def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [[("R07", 0.9), ("R07.0", 0.8)] if "嗓子" in t else [("R11", 0.9), ("R11.0", 0.5)] if "恶心" in t
                else _search([t], k)[0] for t in texts]

    det.search = search
    assert det._joined_names() == {"R07": ("咽痛", "胸痛"), "R11": ("恶心", "呕吐")}
    det.calibration.rules = ("zh_joined",)
    got = det.detect("嗓子疼")
    assert got.terms[0].name == "咽痛" and "咽痛和胸痛" not in {t.name for t in got.terms + got.alternatives}
    both = det.detect("恶心呕吐")  # both written: the joined name stays a candidate
    assert "恶心和呕吐" in {t.name for t in both.terms + both.alternatives}
    det.calibration.rules = ()
    assert "咽痛和胸痛" in {t.name for t in det.detect("嗓子疼").terms}  # off: as before


def test_detector_drops_negated_findings_and_validates_input() -> None:
    det = _detector()
    assert "发热" not in {t.name for t in det.detect("咳嗽，不发烧").terms}
    with pytest.raises(SymptomTextError):
        det.detect("   ")
    with pytest.raises(SymptomTextError):
        det.detect("咳" * 5000)
    with pytest.raises(SymptomTextError):
        det.detect_many("咳嗽")  # type: ignore[arg-type]
    # a text without a letter names no symptom (its nearest terms are still ranked)
    for junk in ("12345", "🙂🙂", "???"):
        got = det.detect(junk)
        assert got.terms == [] and got.alternatives == [] and list(got.ranking) == _search([junk], det.k)[0]
    assert [len(s.terms) for s in det.detect_many(["12345", "咳嗽"])] == [0, 1]


def test_fit_learns_a_calibration_from_labelled_complaints() -> None:
    det = _detector()
    det.calibration = None
    with pytest.raises(ValueError, match="calibration"):
        det.detect("咳嗽")
    texts = ["咳嗽", "发烧", "咳嗽流鼻涕", "发热，咳嗽", "流鼻涕"] * 4
    gold = [{"R05"}, {"R50"}, {"R05", "J00"}, {"R50", "R05"}, {"J00"}] * 4
    cal = det.fit(texts, gold)
    assert cal.info["complaints"] == 20 and 0.0 < cal.threshold < 1.0
    preds = [{t.id for t in s.terms} for s in det.detect_many(texts)]
    assert set_prf(preds, gold)["f1"] > 0.9


def test_lexicon_forms_are_searched_once_and_complaints_every_time() -> None:
    asked: list[str] = []

    def counting(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        asked.extend(texts)
        return _search(texts, k)

    det = _detector()
    plain = det.detect("咳嗽流鼻涕，昨晚发烧")
    det.search = counting
    det._lexicon_hits = None  # search the lexicon again, through the counter
    first = det.detect("咳嗽流鼻涕，昨晚发烧")
    assert first == plain  # the kept hits are the search's own
    forms = {"发烧", "发热", "咳嗽", "流鼻涕", "流涕"}
    assert forms <= set(asked) and "咳嗽流鼻涕，昨晚发烧" in asked
    asked.clear()
    det.detect("咳嗽，昨晚发烧")
    assert not forms & set(asked)  # lexicon words come from the kept hits
    assert asked.count("咳嗽，昨晚发烧") == 1  # the complaint itself is searched (and never kept)


def test_an_uncovered_word_offers_first_a_term_whose_name_holds_one_of_its_forms() -> None:
    # a vocabulary with no plain 腹泻 (as ICD-10 Beijing): 拉肚子's best hit is 腹胀, its form 腹泻 sits in 功能性腹泻
    names = {"R10": "腹痛", "R14": "腹胀", "K59": "功能性腹泻"}
    table = {"肚子疼": ["R10"], "腹痛": ["R10"], "拉肚子": ["R14", "K59"], "稀便": ["R14"], "腹泻": ["K59", "R14"]}

    def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [[(cid, 1.0 - 0.1 * r) for r, cid in enumerate((table.get(t) or ["R10", "R14"])[:k])] for t in texts]

    lex = SurfaceLexicon({"肚子疼": "腹痛", "腹痛": "腹痛", "拉肚子": "稀便", "稀便": "稀便", "腹泻": "稀便", "稀": "稀便"})
    base = _detector()
    det = SetDetector(search, names, language="zh", lexicon=lex, calibration=base.calibration)
    got = det.detect("肚子疼拉肚子")
    assert [t.name for t in got.terms] == ["腹痛"]
    assert got.alternatives[0].name == "功能性腹泻"  # not 腹胀, the span's most probable term
    # no name holds a form: the most probable term placed on the word comes first, as before
    det = SetDetector(search, {"R10": "腹痛", "R14": "腹胀"}, language="zh", lexicon=lex, calibration=base.calibration)
    table["拉肚子"], table["腹泻"] = ["R14"], ["R14"]
    assert det.detect("肚子疼拉肚子").alternatives[0].name == "腹胀"
    assert det._surface_forms(find_spans("拉肚子", lex)[0]) == ["拉肚子", "稀便", "腹泻"]  # one-character forms left out


# -- joining English clauses that are one finding ------------------------------------------------------
EN_NAMES = {"H1": "Proximal tibial and fibular fusion", "H2": "Tibial fusion", "H3": "Calf pain", "H4": "Rhinorrhea",
            "H5": "Pharyngitis", "H6": "Upper respiratory infection"}
EN_HITS = {  # query → [(id, cosine)]
    "fusion of shinbone and calf bone": [("H1", 0.90), ("H2", 0.70)],
    "fusion of shinbone": [("H2", 0.80)],
    "calf bone": [("H3", 0.55)],
    "runny nose and sore throat": [("H6", 0.70), ("H4", 0.60)],
    "runny nose": [("H4", 0.95), ("H6", 0.50)],
    "sore throat": [("H5", 0.90), ("H6", 0.55)],
    "hurts": [("H3", 0.60)],
    "hurts when I swallow": [("H5", 0.80), ("H3", 0.50)],
    "sore throat when I swallow": [("H5", 0.85), ("H3", 0.50)],
}


def _en_search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
    return [EN_HITS.get(t, [("H6", 0.3)])[:k] for t in texts]


def _en_detector(**kw) -> SetDetector:
    return SetDetector(_en_search, EN_NAMES, language="en", calibration=_one_feature_calibration(), **kw)


def test_a_reading_span_is_searched_but_adds_no_vote_and_no_piece() -> None:
    # "sore throat when I swallow" re-reads "sore throat": the complaint still has one piece, and H5 one vote of two
    # queries (the piece and the whole text), as the calibration's complaints count them
    spans, cands, x, _ = _en_detector()._candidates_many(["I have a sore throat when I swallow"])[0]
    assert [(s.text, s.reading) for s in spans] == [("sore throat", False), ("sore throat when I swallow", True)]
    row = {c.id: dict(zip(FEATURES, x[j], strict=True)) for j, c in enumerate(cands)}
    assert row["H5"]["n_spans"] == pytest.approx(math.log1p(1))
    assert row["H5"]["votes"] == pytest.approx(1 / 2)
    assert row["H3"]["votes"] == 0.0 and row["H3"]["span_score"] == pytest.approx(0.50)  # found by the reading alone


def test_a_word_of_sensation_and_its_circumstance_are_one_piece() -> None:
    # "hurts" is not searched alone (it would find H3); "hurts when I swallow" is the complaint's one piece
    spans, cands, x, _ = _en_detector()._candidates_many(["it hurts when I swallow"])[0]
    assert [(s.text, s.reading) for s in spans] == [("hurts when I swallow", False)]
    row = {c.id: dict(zip(FEATURES, x[j], strict=True)) for j, c in enumerate(cands)}
    assert row["H5"]["n_spans"] == pytest.approx(math.log1p(1))
    assert row["H5"]["votes"] == pytest.approx(1 / 2) and row["H5"]["span_score"] == pytest.approx(0.80)
    assert row["H3"]["span_score"] == pytest.approx(0.50)


def test_a_term_the_circumstance_alone_explains_is_not_offered_by_its_reading() -> None:
    hits = {"short of breath": [("D1", 0.75)], "when I climb stairs": [("D2", 0.63), ("D3", 0.40)],
            "short of breath when I climb stairs": [("D2", 0.52), ("D1", 0.48), ("D3", 0.45)],
            "hurts": [("D4", 0.60)], "when I swallow": [("D5", 0.50)], "hurts when I swallow": [("D5", 0.70)]}
    names = {"D1": "Dyspnea", "D2": "Difficulty climbing stairs", "D3": "Exertional dyspnea", "D4": "Pain",
             "D5": "Odynophagia"}

    def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [hits.get(t, [("D4", 0.1)])[:k] for t in texts]

    det = SetDetector(search, names, language="en", calibration=_one_feature_calibration())
    spans, cands, x, _ = det._candidates_many(["I get short of breath when I climb stairs"])[0]
    assert [(s.text, s.circumstance) for s in spans] == [("short of breath", None),
                                                         ("short of breath when I climb stairs", "when I climb stairs")]
    row = {c.id: dict(zip(FEATURES, x[j], strict=True)) for j, c in enumerate(cands)}
    # D2 scores higher for "when I climb stairs" alone than for the reading: the reading does not offer it;
    # D3 gains from the clause read with its circumstance (0.45 > 0.40): offered
    assert "D2" not in row and row["D3"]["span_score"] == pytest.approx(0.45)
    assert row["D1"]["votes"] == pytest.approx(1 / 2)  # the circumstance's search is no vote and no query counted
    assert {t.id for t in det.detect("I get short of breath when I climb stairs").terms} == {"D1"}
    # a finding of the two together scores higher for the reading than for either part
    assert "D5" in {t.id for t in det.detect("it hurts when I swallow").terms}


def test_a_term_found_as_well_for_the_reading_as_for_its_circumstance_stays_offered() -> None:
    # "I struggle climbing stairs": the reading and the participle alone both rank Difficulty climbing stairs first,
    # the same reciprocal-rank score; "struggle" names no finding of its own, so the reading's term is the finding
    hits = {"struggle": [("D9", 0.2)], "climbing stairs": [("D2", 0.6)], "struggle climbing stairs": [("D2", 0.6)]}
    names = {"D2": "Difficulty climbing stairs", "D9": "Poor speech"}
    det = SetDetector(lambda texts, k: [hits.get(t, [("D9", 0.1)])[:k] for t in texts], names, language="en",
                      calibration=_one_feature_calibration())
    spans, cands, x, _ = det._candidates_many(["I struggle climbing stairs"])[0]
    assert [s.circumstance for s in spans if s.reading] == ["climbing stairs"]
    assert "D2" in {c.id for c in cands}


def test_the_kin_of_a_term_about_the_circumstance_is_about_it_too() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    # "short of breath climbing stairs": the participle finds Difficulty climbing stairs better than the reading does,
    # and its sibling Difficulty descending stairs nearly as well; which of the two the reading ranks first is a tie
    hits = {"short of breath": [("D1", 0.7)], "climbing stairs": [("D2", 0.7), ("D6", 0.65)],
            "short of breath climbing stairs": [("D6", 0.66), ("D2", 0.66), ("D1", 0.6)]}
    names = {"D1": "Dyspnea", "D2": "Difficulty climbing stairs", "D6": "Difficulty descending stairs"}
    parents = {"D2": ["P"], "D6": ["P"], "P": ["Q"], "Q": ["R"], "R": ["ROOT"], "D1": ["R"], "ROOT": []}
    det = SetDetector(lambda texts, k: [hits.get(t, [("D1", 0.1)])[:k] for t in texts], names, language="en",
                      calibration=_one_feature_calibration(), hierarchy=HpoHierarchy(parents))
    _, cands, _, _ = det._candidates_many(["I get short of breath climbing stairs"])[0]
    assert {c.id for c in cands} == {"D1"}
    det.hierarchy = None  # without a hierarchy, only the term the circumstance finds better
    _, cands, _, _ = det._candidates_many(["I get short of breath climbing stairs"])[0]
    assert {c.id for c in cands} == {"D1", "D6"}


def test_a_bare_predicate_makes_overlapping_spans() -> None:
    # "swollen and hurts": the clause with its place, and "hurts" on its own
    assert has_overlapping_spans(find_spans("my knee is swollen and hurts", language="en"))
    assert not has_overlapping_spans(find_spans("I have a runny nose and a sore throat", language="en"))
    assert not has_overlapping_spans([])


def test_joinable_pairs_are_neighbours_parted_by_a_separator_only() -> None:
    from medrank.pipelines.symptom.sets import _joinable

    text = "I have fusion of shinbone and calf bone, absent/small toe bone"
    spans = find_spans(text, language="en")
    pairs = [(i, j.text) for i, j in _joinable(text, spans)]
    assert pairs == [(0, "fusion of shinbone and calf bone"), (1, "calf bone, absent"), (2, "absent/small toe bone")]
    text = "I've had fever for two days, also a cough"  # a time between two clauses: never one finding
    assert _joinable(text, find_spans(text, language="en")) == []
    text = "no fever and calf bone pain"  # a negated clause is never joined
    assert _joinable(text, find_spans(text, language="en")) == []


def test_two_clauses_read_as_one_finding_only_when_the_joined_text_reads_better() -> None:
    det = _en_detector()
    assert det.join_margin is None  # the calibration's: never
    assert {t.id for t in det.detect("fusion of shinbone and calf bone").terms} == {"H2", "H3"}
    det = _en_detector(join_margin=0.0)
    got = det.detect("fusion of shinbone and calf bone")
    assert [t.id for t in got.terms] == ["H1"] and got.terms[0].span == (0, len("fusion of shinbone and calf bone"))
    # each clause reads better alone than the two together: two findings
    assert {t.id for t in det.detect("runny nose and sore throat").terms} == {"H4", "H5"}
    assert {t.id for t in _en_detector(join_margin=0.25).detect("fusion of shinbone and calf bone").terms} == {"H2", "H3"}


def test_fit_chooses_the_join_margin_and_the_calibration_carries_it(tmp_path) -> None:
    det = _en_detector()
    # the whole text ("I have …") finds nothing useful: only the joined clause can name H1
    texts = [f"I have {t}" for t in ("fusion of shinbone and calf bone", "runny nose and sore throat", "runny nose",
                                     "sore throat")] * 5
    gold = [{"H1"}, {"H4", "H5"}, {"H4"}, {"H5"}] * 5
    cal = det.fit(texts, gold, join_margins=(None, 0.0))
    assert cal.join_margin == 0.0 and cal.info["join_margins_tried"] == [None, 0.0] and cal.info["fit_f1"] == 1.0
    assert det.join_margin == 0.0
    cal.save(tmp_path / "cal.json")
    assert SetCalibration.load(tmp_path / "cal.json").join_margin == 0.0
    assert "join_margin" not in SetCalibration.load(tmp_path / "cal.json").info
    with pytest.raises(ValueError, match="join_margins"):
        det.fit(texts, gold, join_margins=())
    # a detector given its own margin keeps it
    fixed = _en_detector(join_margin=None)
    assert fixed.fit(texts, gold, join_margins=(None, 0.0)).join_margin is None


def test_a_one_word_clause_shares_the_place_or_the_finding_of_its_neighbour() -> None:
    from medrank.pipelines.symptom.sets import _shared_reading

    def read(text: str) -> list[tuple[str, str, bool]]:
        spans = find_spans(text, language="en")
        return [(text[sp.start:sp.end], sp.text, sp.negated) for _, sp in _shared_reading(text, spans)]

    assert read("I have pain in my hands and feet") == [("feet", "pain in my feet", False)]
    assert read("pain in my chest, back") == []  # a comma parts findings as often as it lists places
    assert read("abnormality of the sternum and aneurysms") == []  # "of" names what is affected, not a place
    assert read("I have pain and swelling in my knee") == [("pain", "pain in my knee", False)]
    assert read("no pain in my hands and feet") == [("feet", "no pain in my feet", True)]  # the negation is shared
    assert read("I have a runny nose and a sore throat") == []  # no place to share
    assert read("headache and fever") == []


def test_a_shared_reading_is_taken_only_when_it_finds_a_better_term() -> None:
    hits = {"pain in my hands": [("P1", 0.9)], "feet": [("P3", 0.5)], "pain in my feet": [("P2", 0.85)],
            "pain in my hands and feet": [("P1", 0.6)], "back": [("P4", 0.95)], "pain in my back": [("P5", 0.7)],
            "pain in my hands and back": [("P1", 0.6)]}
    names = {"P1": "Hand pain", "P2": "Foot pain", "P3": "Short foot", "P4": "Back", "P5": "Back pain"}

    def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        return [hits.get(t, [("P3", 0.1)])[:k] for t in texts]

    cal = _one_feature_calibration(join_margin=0.0)
    det = SetDetector(search, names, language="en", calibration=cal)
    got = det.detect("pain in my hands and feet")
    assert {t.id for t in got.terms} == {"P1", "P2"}
    assert [t.span for t in got.terms if t.id == "P2"] == [(len("pain in my hands and "), len("pain in my hands and feet"))]
    assert {t.id for t in det.detect("pain in my hands and back").terms} == {"P1", "P4"}  # "back" alone reads better
    hits.update({"thick skin in my nose": [("P6", 0.9)], "warts": [("P7", 0.69)], "thick skin in my warts": [("P6", 0.76)]})
    names.update(P6="Thick nasal skin", P7="Plantar warts")
    # the shared reading finds only its neighbour's own term: "warts" stays "warts"
    assert {t.id for t in det.detect("thick skin in my nose and warts").terms} == {"P6", "P7"}
    cal.join_margin = None  # never re-read
    assert {t.id for t in det.detect("pain in my hands and feet").terms} == {"P1", "P3"}


def test_a_parent_term_on_words_a_chosen_term_already_covers_is_left_out() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    names = {"K": "Knee pain", "P": "Pain", "S": "Large knee"}
    hits = {"my knee is swollen and hurts": [("K", 0.9)], "hurts": [("P", 0.8)], "my knee is swollen": [("S", 0.7)]}
    def detector(hierarchy) -> SetDetector:
        return _table_detector(hits, names, _one_feature_calibration(), hierarchy=hierarchy)

    text = "my knee is swollen and hurts"
    # "hurts" lies inside "my knee is swollen and hurts": Pain, the parent of Knee pain, says nothing more
    got = detector(HpoHierarchy({"K": ["P"], "S": []})).detect(text)
    assert {t.id for t in got.terms} == {"K", "S"}
    assert "P" in {t.id for t in got.alternatives}
    # unrelated terms on overlapping words are each kept
    assert {t.id for t in detector(HpoHierarchy({"K": [], "S": []})).detect(text).terms} == {"K", "P", "S"}


def test_hpo_kin_by_hand() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    # root > A (abnormality) > C (constitutional) > P (pain) > {CP chest pain, M myalgia > EM exercise myalgia};
    # C > F (fatigue); root > A > J (joint) > K (knee pain)
    h = HpoHierarchy({"root": [], "A": ["root"], "C": ["A"], "P": ["C"], "CP": ["P"], "M": ["P"], "EM": ["M"],
                      "F": ["C"], "J": ["A"], "K": ["J"]})
    assert [h.depth(t) for t in ("root", "A", "C", "P", "EM")] == [0, 1, 2, 3, 5]
    assert h.within("EM", 2) == {"M", "P"} and h.within("EM", 0) == frozenset()
    assert h.kin("CP", "EM") and h.kin("EM", "CP")  # P is CP's parent and EM's grandparent
    assert h.kin("CP", "M") and h.kin("P", "EM")  # siblings; ancestor
    assert not h.kin("F", "CP")  # C is F's parent and CP's grandparent, but only 2 links below the root
    assert not h.kin("K", "CP") and not h.kin("K", "F")
    assert not h.kin("CP", "CP2") and not h.kin("unknown", "CP")


def test_two_readings_of_one_pain_decide_one_term() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    names = {"CP": "Chest pain", "EM": "Exercise-induced myalgia"}
    hits = {"chest pain when I exercise": [("EM", 0.9)], "chest pain": [("CP", 0.95)]}
    hierarchy = HpoHierarchy({"root": [], "A": ["root"], "C": ["A"], "P": ["C"], "CP": ["P"], "M": ["P"],
                              "EM": ["M"]})
    det = _table_detector(hits, names, _one_feature_calibration(), hierarchy=hierarchy)
    text = "I have chest pain when I exercise"
    spans = det._spans(text)
    assert {s.text for s in spans} >= {"chest pain"} and has_overlapping_spans(spans)
    got = det.detect(text)
    assert len(got.terms) == 1 and "EM" in {t.id for t in got.alternatives}


def test_a_term_whose_descendant_on_the_same_words_passes_is_offered_not_decided() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    names = {"P": "Pruritus", "O": "Ocular pruritus", "R": "Red eye"}
    hits = {"my eyes are red and itchy": [("O", 0.9)], "my eyes are itchy": [("P", 0.95)], "my eyes are red": [("R", 0.8)]}
    cal = _one_feature_calibration("span_score")
    det = _table_detector(hits, names, cal, hierarchy=HpoHierarchy({"O": ["P"], "P": [], "R": []}))
    got = det.detect("my eyes are red and itchy")
    assert {t.id for t in got.terms} == {"O", "R"} and got.alternatives[0].id == "P"
    # Pruritus's probability is the higher one: it is still the vaguer term
    assert next(t for t in got.alternatives if t.id == "P").probability > next(t for t in got.terms if t.id == "O").probability
    # on words of its own the ancestor is decided beside its descendant
    apart = SetDetector(lambda texts, k: [hits.get(t, [])[:k] for t in texts], names, language="en",
                        hierarchy=HpoHierarchy({"O": ["P"], "P": [], "R": []}), calibration=cal)
    hits2 = {"itchy skin": [("P", 0.95)], "itchy eyes": [("O", 0.9)]}
    apart.search = lambda texts, k: [hits2.get(t, [])[:k] for t in texts]
    assert {t.id for t in apart.detect("itchy skin, itchy eyes").terms} == {"P", "O"}


def test_a_descendant_a_rule_holds_back_leaves_its_ancestor_decided() -> None:
    from medrank.pipelines.symptom.body_parts import BodyParts
    from medrank.pipelines.symptom.sets import HpoHierarchy

    # "my knee is swollen": Pharyngeal edema (a throat's) passes on the words, but names another body part than the
    # complaint's and is not decided; Edema, its ancestor, is no vaguer for it
    names = {"E": "Edema", "PE": "Pharyngeal edema", "K": "Abnormality of the knee", "PH": "Abnormal pharynx physiology"}
    wordings = {"E": ("Edema", "Swelling"), "PE": ("Pharyngeal edema", "Throat swelling"), "K": ("Abnormality of the knee",),
                "PH": ("Abnormal pharynx physiology",)}
    hits = {"my knee is swollen": [("PE", 0.9), ("E", 0.85)]}
    det = _table_detector(hits, names, _one_feature_calibration("span_score"), wordings=wordings,
                          hierarchy=HpoHierarchy({"PE": ["E"], "E": [], "K": [], "PH": []}))
    det.calibration = SetCalibration(det.calibration.mean, det.calibration.scale, det.calibration.coef,
                                     det.calibration.intercept, features=det.calibration.features, rules=("body_parts",))
    assert det._parts() is not None and BodyParts.from_wordings(wordings).contradicts("my knee is swollen", wordings["PE"])
    got = det.detect("my knee is swollen")
    assert [t.id for t in got.terms] == ["E"] and "PE" in [t.id for t in got.alternatives]


def test_a_descendant_stands_in_for_its_ancestor_only_on_words_of_its_own() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    names = {"F": "Fever", "R": "Recurrent fever"}
    wordings = {"F": ("Fever", "Pyrexia"), "R": ("Recurrent fever", "Episodic fever", "Intermittent fevers")}
    # the encoder puts the descendant first on every span
    hits = {q: [("R", 0.97), ("F", 0.95)] for q in ("high fever", "intermittent fever", "strange fever", "niggling fever")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score"),
                          hierarchy=HpoHierarchy({"R": ["F"], "F": []}), wordings=wordings)
    # Fever's wordings hold every word of "high fever" ("high" says how much), and nothing in it says recurrent
    got = det.detect("I have a high fever")
    assert [t.id for t in got.terms] == ["F"] and got.alternatives[0].id == "R"
    # "intermittent" (a plural cut: "fevers" and "fever" meet) is the descendant's own word
    assert [t.id for t in det.detect("I have an intermittent fever").terms] == ["R"]
    # a word Fever's wordings lack that another wording of the vocabulary holds may be the descendant's: it stands in
    det.wordings = {**wordings, "S": ("Strange behaviour",)}
    assert [t.id for t in det.detect("I have a strange fever").terms] == ["R"]
    # a word no wording holds says how, not which kind: the term the piece ends with is decided, at least as
    # probable as its kind (is-a)
    got = det.detect("I have a niggling fever")
    assert [t.id for t in got.terms] == ["F"] and got.terms[0].probability == pytest.approx(
        1 / (1 + math.exp(-(4 * 0.97 - 2))), abs=1e-4)
    assert got.alternatives[0].id == "R"  # the kind is offered first, to tick
    # without the vocabulary's wordings every passing descendant stands in for its ancestor, as before
    det.wordings = None
    assert [t.id for t in det.detect("I have a high fever").terms] == ["R"]


def test_a_word_no_wording_holds_keeps_the_kind_it_finds_searched_alone() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    names = {"P": "Pain", "A": "Abdominal pain", "S": "Neoplasm of the stomach", "D": "Type II diabetes mellitus"}
    wordings = {"P": ("Pain",), "A": ("Abdominal pain", "Stomach pain"), "S": ("Stomach tumor",),
                "D": ("Type II diabetes",)}
    hits = {"tummy pain": [("A", 0.97), ("P", 0.95)], "niggling pain": [("A", 0.97), ("P", 0.95)],
            "tummy": [("S", 0.9), ("D", 0.8)], "niggling": [("D", 0.9)]}
    det = _table_detector(hits, names, _one_feature_calibration("span_score"),
                          hierarchy=HpoHierarchy({"A": ["P"], "P": [], "S": [], "D": []}), wordings=wordings)
    # "tummy" alone finds a term worded with "stomach", a word Abdominal pain has and Pain lacks: the kind stays
    assert [t.id for t in det.detect("I have a tummy pain").terms] == ["A"]
    # "niggling" alone finds nothing of the kind: it says how, and the term the piece ends with is decided
    got = det.detect("I have a niggling pain")
    assert [t.id for t in got.terms] == ["P"] and got.alternatives[0].id == "A"
    # the kind itself among the word's best is enough
    det.search = lambda texts, k: [({**hits, "tummy": [("A", 0.9)]}).get(t, [])[:k] for t in texts]
    assert [t.id for t in det.detect("I have a tummy pain").terms] == ["A"]


def test_the_one_word_pains_of_the_vocabulary_are_those_of_parts_never_worded_with_pain() -> None:
    names = {"H": "Headache", "E": "Ear pain", "C": "Cafe-au-lait spot"}
    wordings = {"H": ("Headache", "Headaches"), "E": ("Ear pain", "Earache"), "C": ("Cafe-au-lait tache",)}
    det = _table_detector({}, names, _one_feature_calibration("span_score"), wordings=wordings)
    assert det._ache_words() == {"headache"}


def test_the_lead_of_a_span_named_by_its_top_term_passes_over_descendants_that_say_no_more() -> None:
    from medrank.pipelines.symptom.sets import FEATURES, HpoHierarchy

    names = {"F": "Fever", "R": "Recurrent fever", "S": "Febrile seizure"}
    wordings = {"F": ("Fever",), "R": ("Recurrent fever", "Intermittent fever"), "S": ("Febrile seizure",)}
    hits = {q: [("F", 0.71), ("R", 0.70), ("S", 0.55)] for q in ("high fever", "strange fever", "intermittent fever")}
    det = _table_detector(hits, names, _one_feature_calibration("span_margin"),
                          hierarchy=HpoHierarchy({"R": ["F"], "F": [], "S": []}), wordings=wordings)

    def margin(text: str) -> float:
        _, cands, x, _ = det._candidates_many([text])[0]
        return float(x[[c.id for c in cands].index("F"), FEATURES.index("span_margin")])

    # "high fever" is Fever's own wording: Recurrent fever, a hair behind, is no rival; the lead is over S
    assert margin("I have a high fever") == pytest.approx(0.16)
    # a word Fever's wordings lack ("strange"), or the descendant's own ("intermittent"): the next hit is the rival
    assert margin("I have a strange fever") == pytest.approx(0.01)
    assert margin("I have an intermittent fever") == pytest.approx(0.01)


def test_a_piece_that_is_a_terms_own_wording_decides_it() -> None:
    names = {"P": "Pharyngalgia", "R": "Rhinorrhea"}
    wordings = {"P": ("Pharyngalgia", "Sore throat"), "R": ("Rhinorrhea", "Runny nose")}
    hits = {"sore throat": [("P", 0.3)], "runny nose": [("R", 0.9)], "throat irritation": [("P", 0.3)]}
    det = _table_detector(hits, names, _one_feature_calibration("span_score"), wordings=wordings)
    got = det.detect("a runny nose and a sore throat")
    assert [t.id for t in got.terms] == ["R", "P"]
    # its probability stays the calibration's: the words decide, they do not make it surer
    assert got.terms[1].probability == pytest.approx(1 / (1 + math.exp(-(4 * 0.3 - 2))), abs=1e-4)
    # other words for it, a denial of it, or no wordings: the calibration alone decides
    assert [t.id for t in det.detect("a runny nose and throat irritation").terms] == ["R"]
    assert [t.id for t in det.detect("a runny nose but no sore throat").terms] == ["R"]
    det.wordings = None
    assert [t.id for t in det.detect("a runny nose and a sore throat").terms] == ["R"]


def test_a_piece_ending_in_a_terms_wording_decides_it_when_the_search_reads_it_as_that_term() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    names = {"H": "Headache", "C": "Cluster headache", "N": "Split nail", "B": "Blindness", "P": "Prosopagnosia",
             "W": "Facial weakness"}
    wordings = {"H": ("Headache",), "C": ("Cluster headache",), "N": ("Split nail",), "B": ("Blindness",),
                "P": ("Prosopagnosia",), "W": ("Facial weakness", "Weak face")}
    hits = {"splitting headache": [("C", 0.3), ("H", 0.29), ("N", 0.2)],
            "cluster type headache": [("C", 0.3), ("H", 0.29)],
            "face blindness": [("W", 0.3), ("B", 0.29), ("P", 0.2)]}
    hierarchy = HpoHierarchy({"C": ["H"], "H": [], "N": [], "B": [], "P": [], "W": []})
    det = _table_detector(hits, names, _one_feature_calibration("span_score"), hierarchy=hierarchy, wordings=wordings)
    # nothing passes the calibration; the piece ends with "headache", and the search's two best are Headache and a
    # kind of it: Headache is decided, as probable as that kind ("split" of Split nail is no kind of headache)
    got = det.detect("a splitting headache")
    assert [t.id for t in got.terms] == ["H"]
    assert got.terms[0].probability == pytest.approx(1 / (1 + math.exp(-(4 * 0.3 - 2))), abs=1e-4)
    # a kind worded with a word before says which headache: the rule stands aside
    assert det.detect("a cluster type headache").terms == []
    # the search reads "face blindness" as something else first: "face" may name what the piece is about
    assert det.detect("face blindness").terms == []
    # no wordings, no rule
    det.wordings = None
    assert det.detect("a splitting headache").terms == []


def test_a_clause_that_says_there_is_none_is_a_denial() -> None:
    spans = find_spans("itchy all over, but there's no rash", None, "en")
    assert [(s.text, s.negated) for s in spans] == [("itchy all over", False), ("no rash", True)]
    assert [(s.text, s.negated) for s in find_spans("there was blood in my wee", None, "en")] == [("blood in my pee", False)]


def test_a_trailing_time_goes_before_the_lead_in_is_weighed() -> None:
    # with "all day" gone, "sick" is the one word left: read with its verb, as in "I feel sick" (alone: Fever)
    assert [s.text for s in find_spans("I feel sick all day", None, "en")] == ["feel sick"]
    assert [s.text for s in find_spans("I have had a cough for two days", None, "en")] == ["cough"]
    assert find_spans("since yesterday", None, "en") == []


def test_how_long_it_lasts_is_read_with_the_clause_it_qualifies() -> None:
    got = [(s.text, s.reading) for s in find_spans("I have a tickly cough that won't go away", None, "en")]
    assert got == [("tickly cough", False), ("tickly cough that won't go away", True)]
    assert [s.text for s in find_spans("pain that comes and goes", None, "en")][0] == "pain that comes"  # not a duration


def test_how_many_times_says_how_often_not_what() -> None:
    # alone, "twice" finds duplications (Bifid antitragus for "thrown up twice")
    assert [s.text for s in find_spans("I've thrown up twice", None, "en")] == ["thrown up"]
    assert [s.text for s in find_spans("I vomited three times today", None, "en")] == ["vomited"]
    assert [s.text for s in find_spans("coughing 5 times an hour", None, "en")] == ["coughing"]


def test_a_pair_of_function_words_is_how_often_not_two_findings() -> None:
    # split, "off" alone decided Squared-off platyspondyly
    assert [s.text for s in find_spans("my tummy's been hurting on and off since sunday", None, "en")] == [
        "my tummy's been hurting"]
    assert [s.text for s in find_spans("I have a headache every now and then", None, "en")] == ["headache"]
    assert [s.text for s in find_spans("I feel sick and dizzy off and on", None, "en")] == ["feel sick", "dizzy"]
    assert [s.text for s in find_spans("my cough gets worse and worse", None, "en")] == ["my cough gets worse and worse"]
    # two findings, and a finding and a function word, still part
    assert [s.text for s in find_spans("I had a fever and then a rash", None, "en")] == ["fever", "rash"]
    assert [s.text for s in find_spans("pain in my neck and back", None, "en")] == ["pain in my neck", "back"]
    assert [s.text for s in find_spans("no fever and no cough", None, "en")] == ["no fever", "no cough"]


def test_a_body_part_and_a_verb_of_pain_read_as_the_vocabulary_says_them() -> None:
    def read(text: str) -> list[tuple[str, bool]]:
        return [(s.text, s.reading) for s in find_spans(text, None, "en", part_pain=True)]

    assert read("my knee hurts going down the stairs") == [("knee pain", False), ("knee pain going down the stairs", True)]
    assert read("her ear is sore") == [("ear pain", False)]
    assert read("both my knees hurt") == [("knee pain", False)]
    assert read("my feet hurt") == [("foot pain", False)]  # as the vocabulary names the part: Foot pain
    assert read("my shoulder's been aching") == [("shoulder pain", False)]
    # the body part is still shared with a bare predicate ("my knee is swollen"), then the piece is renamed
    assert read("my knee hurts and is swollen") == [("knee pain", False), ("knee pain and is swollen", True),
                                                    ("my knee is swollen", False)]
    # ... and a bare verb of pain after it takes that part ("my wrist is swollen and hurts": wrist pain)
    assert read("my wrist is swollen and hurts") == [("my wrist is swollen", False),
                                                     ("my wrist is swollen and hurts", True), ("wrist pain", False)]
    assert read("my knee is swollen and hurts when I walk")[-2:] == [("knee pain", False),
                                                                   ("knee pain when I walk", True)]
    assert [s.text for s in find_spans("my wrist is swollen and hurts", None, "en")][-1] == "hurts"  # rule off
    # "it hurts to swallow": "it" stood before the verb, so the verb does not take the throat
    assert read("my throat is really sore and it hurts to swallow") == [
        ("throat pain", False), ("throat pain and hurts to swallow", True), ("hurts to swallow", False)]
    assert read("I hurt my back") == [("hurt my back", False)]  # no body part before the verb
    assert [s.text for s in find_spans("her ear is sore", None, "en")] == ["her ear is sore"]  # off by default
    # a part whose pain the vocabulary words as one word, and never as "<part> pain", is searched as that word
    aches = {"headache"}
    assert [s.text for s in find_spans("my head hurts", None, "en", part_pain=True, ache_words=aches)] == ["headache"]
    assert [s.text for s in find_spans("my head is killing me at night", None, "en", part_pain=True,
                                       ache_words=aches)] == ["headache at night"]
    assert [s.text for s in find_spans("the back of my head hurts", None, "en", part_pain=True,
                                       ache_words=aches)] == ["the back of my head hurts"]
    assert read("my head hurts") == [("head pain", False)]  # without the word
    # a part whose pain no term words, as the part that holds it ("heel pain" found nothing; Foot pain is worded)
    within = {"heel": "foot", "calf": "lower limb"}
    assert [s.text for s in find_spans("my heel hurts", None, "en", part_pain=True, part_within=within)] == ["foot pain"]
    assert [s.text for s in find_spans("my left heel is painful", None, "en", part_pain=True, part_within=within)] == [
        "left foot pain"]
    assert [s.text for s in find_spans("my calf aches", None, "en", part_pain=True, part_within=within)] == [
        "lower limb pain"]
    assert [s.text for s in find_spans("my knee hurts", None, "en", part_pain=True, part_within=within)] == ["knee pain"]


def test_a_swollen_body_part_reads_as_the_vocabulary_says_it() -> None:
    from medrank.pipelines.symptom.spans import as_swelling

    assert as_swelling("my knee is swollen") == "knee swelling"
    assert as_swelling("both my knees are swollen") == "knee swelling"
    assert as_swelling("my ankles are puffy") == "ankle swelling"
    assert as_swelling("swollen feet") == "foot swelling"  # as the vocabulary names the part
    assert as_swelling("my lips have gone puffy") == "lip swelling"
    assert as_swelling("my ankles puff up by the evening") == "ankle swelling by the evening"
    assert as_swelling("my left knee is swollen") == "left knee swelling"
    # no body part before it, or nothing swollen
    for text in ("it is swollen", "everything is swollen", "the swelling in my knee", "I am swollen", "my knee hurts"):
        assert as_swelling(text) is None, text


def test_a_swollen_part_is_searched_both_ways_under_part_swelling() -> None:
    vocab = {"T1": "Ankle swelling", "T2": "Pharyngeal edema"}
    searched: list[str] = []

    def search(texts, k):
        searched.extend(texts)
        return [[("T1", 0.9), ("T2", 0.1)] for _ in texts]

    det = SetDetector(search, vocab, language="en", k=2)
    det.calibration = SetCalibration([0.0], [1.0], [1.0], 0.0, features=("span_score",))
    det.detect("my ankles are swollen")
    assert "ankle swelling" not in searched  # the rule is off: the patient's words only
    det.calibration = SetCalibration([0.0], [1.0], [1.0], 0.0, features=("span_score",), rules=("part_swelling",))
    got = det.detect("my ankles are swollen")
    assert "ankle swelling" in searched and "my ankles are swollen" in searched
    # a reading of the same words: the term covers the patient's words, and the piece is counted once
    assert all(t.span == (0, len("my ankles are swollen")) for t in got.terms + got.alternatives)


def test_a_piece_that_says_only_swollen_is_the_swelling_of_the_part_named_before() -> None:
    from medrank.pipelines.symptom.spans import is_bare_swelling

    assert is_bare_swelling("swollen") and is_bare_swelling("all swollen") and is_bare_swelling("really swollen up")
    assert not is_bare_swelling("swollen glands") and not is_bare_swelling("my knee is swollen")
    vocab = {"T1": "Lymphadenopathy", "T2": "Edema", "T3": "Abnormality of the calf", "T4": "Abnormality of the knee"}
    wordings = {"T1": ["Lymphadenopathy", "Swollen glands"], "T2": ["Edema", "Swelling"],
                "T3": ["Abnormality of the calf"], "T4": ["Abnormality of the knee"]}
    searched: list[str] = []

    def search(texts, k):
        searched.extend(texts)
        return [[("T1", 0.9), ("T2", 0.1)] if t == "swollen" else [("T2", 0.9), ("T1", 0.1)] for t in texts]

    det = SetDetector(search, vocab, language="en", k=2, wordings=wordings)
    det.calibration = SetCalibration([0.0], [1.0], [4.0], -2.0, features=("span_score",),
                                     rules=("part_swelling", "body_parts"))
    # "it's swollen" leaves "swollen", alone nearest "Swollen glands": the calf's swelling, searched only so
    got = det.detect("there's a pain in my calf and it's swollen")
    assert "calf swelling" in searched and "swollen" not in searched
    assert "Edema" in [t.name for t in got.terms] and "Lymphadenopathy" not in [t.name for t in got.terms]
    searched.clear()
    assert [t.name for t in det.detect("I'm all swollen").terms] == ["Edema"] and "swelling" in searched
    searched.clear()
    det.detect("my knee hurts and it's swollen")
    assert "knee swelling" in searched
    searched.clear()
    det.calibration = SetCalibration([0.0], [1.0], [4.0], -2.0, features=("span_score",), rules=("body_parts",))
    det.detect("I'm all swollen")
    assert "all swollen" in searched and "swelling" not in searched  # the rule off: as written


def test_a_reading_of_exactly_the_same_words_decides_no_second_term() -> None:
    # "my glands are swollen" finds Lymphadenopathy, its reading "gland swelling" Edema: one finding, said two ways
    vocab = {"T1": "Lymphadenopathy", "T2": "Edema"}

    def search(texts, k):
        return [[("T2", 0.9), ("T1", 0.1)] if t == "gland swelling" else [("T1", 0.9), ("T2", 0.1)] for t in texts]

    det = SetDetector(search, vocab, language="en", k=2)
    det.calibration = SetCalibration([0.0], [1.0], [4.0], -2.0, features=("span_score",), rules=("part_swelling",))
    got = det.detect("my glands are swollen")
    assert [t.name for t in got.terms] == ["Lymphadenopathy"] and "Edema" in [t.name for t in got.alternatives]
    det.calibration = SetCalibration([0.0], [1.0], [4.0], -2.0, features=("span_score",))
    assert [t.name for t in det.detect("my glands are swollen").terms] == ["Lymphadenopathy"]  # rule off: no reading


def test_whoever_reports_a_pain_is_a_lead_in_and_the_part_keeps_its_pain() -> None:
    def read(text: str) -> list[str]:
        return [s.text for s in find_spans(text, None, "en", part_pain=True)]

    # "says" was left before the part, so "her ear hurts" was never read as a body part and its pain
    assert read("My daughter says her ear hurts and she's been running a temperature") == [
        "ear pain", "temperature"]
    assert read("my little boy keeps telling me his tummy hurts") == ["tummy pain"]
    assert read("she complains of a headache") == ["headache"]
    # the person's lead-in took the determiner ("my son's"): the part alone still takes its pain
    assert read("my son's tummy hurts") == ["tummy pain"]
    # ... but no pronoun, quantifier or gerund is a body part
    assert read("it hurts when I pee") == ["hurts when I pee"]
    assert read("everything hurts") == ["everything hurts"]
    assert read("walking hurts") == ["walking hurts"]


def test_running_a_temperature_is_having_one() -> None:
    def read(text: str) -> list[str]:
        return [s.text for s in find_spans(text, None, "en")]

    assert read("I've been running a temperature since yesterday") == ["temperature"]
    assert read("he ran a high fever last night") == ["high fever"]
    # running itself stays a word
    assert any("running" in t for t in read("my knee hurts when running"))
    assert any("running" in t for t in read("running makes my chest hurt"))


def test_calibration_rules_are_known_and_travel_with_it() -> None:
    with pytest.raises(ValueError, match="rules"):
        SetCalibration([0.0], [1.0], [1.0], 0.0, features=("span_score",), rules=("no-such-rule",))
    cal = SetCalibration([0.0], [1.0], [1.0], 0.0, features=("span_score",), rules=("part_pain",))
    assert SetCalibration.from_json(cal.to_json()).rules == ("part_pain",)


def test_a_chinese_kind_says_more_only_when_the_text_says_what_its_name_adds() -> None:
    assert not zh_says_more(["急性咳嗽"], ["咳嗽"], "孩子发烧两天，咳嗽有痰")  # 急性 is not said
    assert zh_says_more(["急性咳嗽"], ["咳嗽"], "孩子急性咳嗽")
    assert zh_says_more(["偏头痛"], ["头痛"], "偏头痛三天")  # one character left: the character itself
    assert zh_says_more(["神经性头痛"], ["头痛"], "神经性的头痛")  # a two-character run of 神经性
    # no wording of the term inside the kind's: the characters the term's wordings lack ("干" of 干咳 over 咳嗽)
    assert zh_says_more(["干咳"], ["咳嗽"], "一直干咳") and not zh_says_more(["干咳"], ["咳嗽"], "一直咳嗽")


def test_the_zh_kinds_rule_decides_the_term_the_words_say() -> None:
    det = _detector(wordings={k: (v,) for k, v in NAMES.items()})
    det.calibration.threshold = 0.01  # 咳嗽 and its kind 干咳 both pass on "咳嗽"
    assert [t.name for t in det.detect("咳嗽").terms] == ["干咳"]  # without the rule, every kind says more
    det.calibration.rules = ("zh_kinds",)
    got = det.detect("咳嗽")
    assert [t.name for t in got.terms] == ["咳嗽"] and "干咳" in [t.name for t in got.alternatives]
    assert "干咳" in [t.name for t in det.detect("孩子干咳").terms]


def test_fit_prepares_complaints_with_its_rules_and_the_calibration_keeps_them() -> None:
    det = _en_detector()
    texts = ["my throat hurts", "I have a runny nose"] * 5
    gold = [{"H5"}, {"H4"}] * 5
    cal = det.fit(texts, gold, rules=("body_parts", "part_pain"))
    assert cal.rules == ("part_pain", "body_parts")  # in RULES' order
    assert [s.text for s in det._spans("my throat hurts")] == ["throat pain"]
    assert [s.text for s in _en_detector()._spans("my throat hurts")] == ["my throat hurts"]  # a calibration without it
    with pytest.raises(ValueError, match="rules"):
        det.fit(texts, gold, rules=("no-such-rule",))


def test_code_prefix_ancestors() -> None:
    h = CodePrefixHierarchy({"R10": ("R10",), "R10.1": ("R10.1",), "R10.101": ("R10.101",), "R11": ("R11",)})
    assert h.is_ancestor("R10", "R10.101") and h.is_ancestor("R10.1", "R10.101")
    assert not h.is_ancestor("R10.101", "R10") and not h.is_ancestor("R10", "R11") and not h.is_ancestor("R10", "R10")


def test_with_uncovered_adds_only_terms_on_words_no_term_covers() -> None:
    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet, with_uncovered

    primary = SymptomSet([DetectedTerm("R05", "咳嗽", 0.99, (2, 4)), DetectedTerm("R50", "发热", 0.8, None)],
                         [DetectedTerm("J00", "鼻病毒感染", 0.04, (4, 7))], (("R05", 0.9),))
    other = SymptomSet([DetectedTerm("咳嗽", "咳嗽", 0.97, (1, 3)),   # overlaps 咳嗽's words: left out
                        DetectedTerm("发烧", "发烧", 0.5, (10, 12)),  # R50 has no span: these words are uncovered
                        DetectedTerm("流涕", "流涕", 0.96, (4, 7)),
                        DetectedTerm("厌食", "厌食", 0.9, None)], [])  # no words: left out
    got = with_uncovered(primary, other, "dxy")
    assert [(t.name, t.source) for t in got.terms] == [("咳嗽", None), ("发热", None), ("流涕", "dxy"), ("发烧", "dxy")]
    assert got.ranking == primary.ranking
    assert with_uncovered(primary, SymptomSet([], []), "dxy") == primary
    # an alternative named as an added term goes; one on words an added term now covers goes after the others
    offered = SymptomSet(primary.terms, [DetectedTerm("R11", "婴儿腹泻", 0.01, (4, 7)), DetectedTerm("R11.1", "流涕", 0.04, (4, 7)),
                                         DetectedTerm("R63", "食欲不振", 0.18, (13, 18))], primary.ranking)
    got = with_uncovered(offered, other, "dxy")
    assert [t.name for t in got.alternatives] == ["食欲不振", "婴儿腹泻"]


def test_a_term_read_unsurely_gives_way_to_a_more_probable_one_of_the_other_list() -> None:
    from medrank.pipelines.symptom.sets import DetectedTerm, SymptomSet, with_uncovered

    # "孩子发烧": the zero-shot ICD-10 Beijing reading is a burn at 21 %, the DXY list's 发烧 95 %
    primary = SymptomSet([DetectedTerm("T30", "烧伤", 0.21, (2, 4))], [DetectedTerm("R50", "发热", 0.05, (2, 4))])
    got = with_uncovered(primary, SymptomSet([DetectedTerm("发烧", "发烧", 0.95, (2, 4))], []), "dxy")
    assert [(t.name, t.source) for t in got.terms] == [("发烧", "dxy")]
    assert [t.name for t in got.alternatives] == ["烧伤", "发热"]  # offered first, then the others
    # a sure term stays, and so does an unsure one that the other list reads less probably still
    for first, second in ((0.6, 0.95), (0.3, 0.2)):
        primary = SymptomSet([DetectedTerm("R51", "头痛", first, (0, 2))], [])
        got = with_uncovered(primary, SymptomSet([DetectedTerm("头痛", "头痛", second, (0, 2))], []), "dxy")
        assert got == primary


def test_slot_prf_by_hand() -> None:
    from medrank.pipelines.symptom.set_eval import slot_prf

    # text 1: slots {A or B}, {A}; predicted A, B: both filled (A moves to the second slot for B), no false positive
    # text 2: slot {C}; predicted C, D, C: C fills it, D fills nothing (the repeated C counts once)
    got = slot_prf([["A", "B"], ["C", "D", "C"]], [[["A", "B"], ["A"]], [["C"]]])
    assert got["precision"] == pytest.approx(3 / 4) and got["recall"] == pytest.approx(3 / 3)
    assert got["f1"] == pytest.approx(2 * 0.75 / 1.75)
    # one term never fills two slots; nothing predicted fills nothing
    assert slot_prf([["A"], []], [[["A"], ["A"]], [["E"]]]) == pytest.approx({"precision": 1.0, "recall": 1 / 3, "f1": 0.5})
    with pytest.raises(ValueError, match="predicted sets"):
        slot_prf([[]], [])


def _toy_detector(hits: dict, names: dict, min_terms: int = 1, **kw) -> SetDetector:
    return _table_detector(hits, names, _one_feature_calibration(min_terms=min_terms), missing=[("X", 0.1)], **kw)


def test_a_complaint_that_only_denies_decides_nothing_whatever_the_minimum_count() -> None:
    names = {"C": "Cough", "X": "Whooping cough"}
    det = _toy_detector({"no cough": [("C", 0.9)], "I have no cough": [("X", 0.2)]}, names)
    assert det.detect("I have no cough").terms == []
    # a stated piece still fills the minimum count
    det = _toy_detector({"cough": [("X", 0.2)]}, names)
    assert [t.id for t in det.detect("cough").terms] == ["X"]


def test_a_negated_wording_that_is_a_term_s_own_names_it() -> None:
    from medrank.pipelines.symptom.sets import negated_phrases
    from medrank.records import Concept

    concepts = [Concept("PA", "Poor appetite", ("No appetite", "Decreased appetite")), Concept("F", "Fever", ())]
    assert negated_phrases(concepts) == ["No appetite"]
    hits = {"no appetite": [("PA", 0.95)], "no fever": [("F", 0.95)]}
    det = _toy_detector(hits, {"PA": "Poor appetite", "F": "Fever", "X": "Other"}, min_terms=0,
                        phrases=negated_phrases(concepts))
    assert [t.name for t in det.detect("I have no appetite").terms] == ["Poor appetite"]
    assert det.detect("I have no fever").terms == []  # "no fever" is no wording of Fever: a negation


def test_a_reading_decides_its_best_match_only() -> None:
    hits = {"hives": [("U", 0.6)], "hives after eating shrimp": [("J1", 0.5), ("J2", 0.49)],
            "after eating shrimp": [("F", 0.3)]}
    det = _table_detector(hits, {"U": "Urticaria", "J1": "Food allergy", "J2": "Chromosomal breakage", "F": "Food"},
                          _one_feature_calibration("span_score", intercept=-1.0))
    got = det.detect("hives after eating shrimp")
    assert [t.id for t in got.terms] == ["U", "J1"]
    assert "J2" in [t.id for t in got.alternatives]
    # a hit the circumstance alone explains is passed over: the reading's best match is then the next one
    hits["hives after eating shrimp"] = [("F", 0.55), ("J1", 0.5), ("J2", 0.49)]
    hits["after eating shrimp"] = [("F", 0.6)]
    got = det.detect("hives after eating shrimp")
    assert [t.id for t in got.terms] == ["U", "J1"]


def test_a_term_only_another_wording_found_is_not_offered() -> None:
    # 发热 is 发烧's other wording: searched for 发烧's term, it also returns its own neighbour T99 (高烧 → 高血压 for
    # real), which no word of the complaint found
    def search(texts: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        extra = {"发热": [("R50", 1.0), ("T99", 0.9)]}
        return [extra.get(t) or _search([t], k)[0] for t in texts]

    det = _detector()
    det.search = search
    det.names = {**NAMES, "T99": "高血压"}
    got = det.detect("咳嗽，发烧")
    assert {t.name for t in got.terms} == {"咳嗽", "发热"}
    assert "高血压" not in {t.name for t in got.alternatives}
    assert "鼻部烧伤" in {t.name for t in got.alternatives}  # the piece 发烧 found it: still offered


def test_a_term_on_denied_words_is_not_offered() -> None:
    det = _detector()
    got = det.detect("咳嗽，不发烧")
    assert {t.name for t in got.terms} == {"咳嗽"}
    assert not {"发热", "鼻部烧伤"} & {t.name for t in got.alternatives}


def test_a_term_of_blood_is_decided_only_on_words_of_blood() -> None:
    # "coughing up green stuff" decided Hemoptysis ("Coughing up blood"): a patient who bleeds says so
    names = {"HP": "Hemoptysis", "EP": "Epistaxis", "PC": "Productive cough"}
    hits = {"coughing up green stuff": [("HP", 0.9)], "coughing up blood": [("HP", 0.9)],
            "my nose runs red": [("EP", 0.9)], "coughing up phlegm": [("PC", 0.9)]}
    wordings = {"HP": ("Hemoptysis", "Coughing up blood", "Haemoptysis"), "EP": ("Epistaxis", "Nosebleed"),
                "PC": ("Productive cough",)}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert [t.id for t in det.detect("coughing up green stuff").terms] == ["HP"]  # the rule is off
    det.calibration.rules = ("unsaid_blood",)
    got = det.detect("coughing up green stuff")
    assert got.terms == [] and [t.id for t in got.alternatives][:1] == ["HP"]
    assert [t.id for t in det.detect("coughing up blood").terms] == ["HP"]
    # a term with a wording of no blood ("Epistaxis") is left to the probabilities, as is any other term
    assert [t.id for t in det.detect("my nose runs red").terms] == ["EP"]
    assert [t.id for t in det.detect("coughing up phlegm").terms] == ["PC"]
    assert det._unsaid_blood("咳血", [], []) == set()  # Chinese text is left alone


def test_a_first_hit_an_unsaid_rule_keeps_back_gives_way_to_the_next() -> None:
    # "coughing up yellow phlegm" found Hemoptysis first and decided nothing once the blood rule kept it back: the next
    # hit, Increased sputum production, is that piece's first under the rule give_way
    names = {"HP": "Hemoptysis", "IS": "Increased sputum production", "CO": "Cough"}
    hits = {"coughing up yellow phlegm": [("HP", 0.9), ("IS", 0.8), ("CO", 0.7)]}
    wordings = {"HP": ("Hemoptysis", "Coughing up blood"), "IS": ("Increased sputum production", "More phlegm"),
                "CO": ("Cough",)}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    det.calibration.rules = ("unsaid_blood",)
    got = det.detect("coughing up yellow phlegm")
    assert got.terms == [] and "HP" in [t.id for t in got.alternatives]  # the rule alone: nothing decided
    det.calibration.rules = ("unsaid_blood", "give_way")
    got = det.detect("coughing up yellow phlegm")
    assert [t.id for t in got.terms] == ["IS"] and "HP" in [t.id for t in got.alternatives]  # still offered
    # words that say the blood keep the term first
    hits["coughing up blood"] = [("HP", 0.9), ("CO", 0.8)]
    assert [t.id for t in det.detect("coughing up blood").terms] == ["HP"]


def test_a_term_of_a_lessening_is_decided_only_on_words_that_say_one() -> None:
    # "I'm always hungry" decided Poor appetite: "hungry" is as near a poor appetite as an increased one by meaning
    names = {"PA": "Poor appetite", "PP": "Polyphagia", "WL": "Weight loss", "CO": "Cough"}
    hits = {"hungry": [("PA", 0.9), ("PP", 0.8)], "my appetite has changed": [("PA", 0.9), ("PP", 0.8)],
            "eating less": [("PA", 0.9)], "losing weight": [("WL", 0.9)],
            "getting thinner": [("WL", 0.9)], "thinner": [("WL", 0.9)], "cough": [("CO", 0.9)]}
    wordings = {"PA": ("Poor appetite", "Loss of appetite", "No appetite"), "PP": ("Polyphagia", "Increased appetite"),
                "WL": ("Weight loss",), "CO": ("Cough",)}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert [t.id for t in det.detect("I'm always hungry").terms] == ["PA"]  # the rule is off
    det.calibration.rules = ("unsaid_less",)
    got = det.detect("I'm always hungry")
    assert got.terms == [] and "PA" in [t.id for t in got.alternatives]
    det.calibration.rules = ("unsaid_less", "give_way")
    got = det.detect("I'm always hungry")  # the next hit is the piece's first
    assert [t.id for t in got.terms] == ["PP"] and "PA" in [t.id for t in got.alternatives]
    # words that name what the term says is less, and no more, say neither way: nothing takes its place
    got = det.detect("my appetite has changed")
    assert got.terms == [] and {"PA", "PP"} <= {t.id for t in got.alternatives}
    # everyday words of a lessening keep the term, as does a term with a wording that names none
    for words, term in (("eating less", "PA"), ("losing weight", "WL"), ("getting thinner", "WL"), ("cough", "CO")):
        assert [t.id for t in det.detect(words).terms] == [term], words
    assert det._unsaid_less("食欲不振", [], []) == set()  # Chinese text is left alone
    # words that share with the term only the word of the lessening say nothing of what is less: "a low mood" is no
    # low body weight (nor was "I feel low", now read as feeling depressed before any search)
    hits["low mood"] = [("DW", 0.9)]
    names["DW"], wordings["DW"] = "Decreased body weight", ("Decreased body weight", "Low weight")
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    det.calibration.rules = ("unsaid_less",)
    got = det.detect("a low mood")
    assert got.terms == [] and "DW" in [t.id for t in got.alternatives]
    hits["my weight is low"] = [("DW", 0.9)]
    assert [t.id for t in det.detect("my weight is low").terms] == ["DW"]


def test_a_term_of_an_increase_is_not_decided_on_words_that_say_less() -> None:
    # "I have less urine output" decided Polyuria ("Increased urine output"): the encoder puts both directions near
    names = {"PU": "Polyuria", "OL": "Oliguria", "CO": "Cough"}
    hits = {"less urine output": [("PU", 0.9), ("OL", 0.85)], "more urine": [("PU", 0.9)], "cough": [("CO", 0.9)]}
    wordings = {"PU": ("Polyuria", "Increased urine output"), "OL": ("Oliguria", "Decreased urine output"),
                "CO": ("Cough",)}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert [t.id for t in det.detect("less urine output").terms] == ["PU"]  # the rule is off
    det.calibration.rules = ("less_of_more",)
    got = det.detect("less urine output")
    assert got.terms == [] and "PU" in [t.id for t in got.alternatives]
    det.calibration.rules = ("less_of_more", "give_way")
    got = det.detect("less urine output")  # the next hit is the piece's first
    assert [t.id for t in got.terms] == ["OL"] and "PU" in [t.id for t in got.alternatives]
    # words of an increase keep it; a term of no increase is left alone
    assert [t.id for t in det.detect("more urine").terms] == ["PU"]
    assert [t.id for t in det.detect("cough").terms] == ["CO"]
    assert det._less_of_more("尿少", [], []) == set()  # Chinese text is left alone


def test_two_words_a_wording_writes_as_one_are_also_searched_joined() -> None:
    # "wetting the bed" found Productive cough, Pulmonary edema ("wet"); HPO writes Bedwetting as one word
    names = {"EN": "Enuresis nocturna", "PC": "Productive cough", "SE": "Small earlobe"}
    hits = {"keeps wetting the bed": [("PC", 0.5)], "keeps bedwetting": [("EN", 0.9)], "my son keeps wetting the bed":
            [("PC", 0.5)], "lump on the lobe of my ear": [("PC", 0.2)], "lump on the earlobe": [("SE", 0.9)]}
    wordings = {"EN": ("Enuresis nocturna", "Bedwetting"), "PC": ("Productive cough",),
                "SE": ("Small earlobe", "Small ear lobes")}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert "EN" not in [t.id for t in det.detect("my son keeps wetting the bed").terms]  # the rule is off
    det.calibration.rules = ("joined_words",)
    spans = det._spans("my son keeps wetting the bed")
    assert [(s.text, s.reading) for s in spans] == [("keeps wetting the bed", False), ("keeps bedwetting", True)]
    assert [t.id for t in det.detect("my son keeps wetting the bed").terms] == ["EN"]
    # ... and its learned name is said ("learned_unsaid" reads the joined words as the complaint's)
    det.calibration.rules = ("joined_words", "learned_unsaid")
    assert [t.id for t in det.detect("my son keeps wetting the bed").terms] == ["EN"]
    # a part's name inside a longer wording is not joined: "earlobe" is no finding by itself
    assert all(not s.reading for s in det._spans("a lump on the lobe of my ear"))


def test_the_first_hit_of_two_words_read_without_their_joined_meaning_gives_way_under_lay_first() -> None:
    # "I keep getting bed sores" decided Oral ulcer ("Mouth sores" shares "sores"); read "bedsore" the piece finds
    # Pressure ulcer first, which the patient's own words find second
    names = {"PU": "Pressure ulcer", "OU": "Oral ulcer", "HB": "Heartburn"}
    hits = {"bed sores": [("OU", 0.9), ("PU", 0.85)], "bedsore": [("PU", 0.8)],
            "heart burn": [("HB", 0.9), ("PU", 0.1)], "heartburn": [("PU", 0.8), ("HB", 0.7)]}
    wordings = {"PU": ("Pressure ulcer", "Bedsore"), "OU": ("Oral ulcer", "Mouth sores"), "HB": ("Heartburn", "Heart burn")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    det.calibration.rules = ("joined_words",)
    assert [(s.text, s.joined_of) for s in det._spans("bed sores")] == [("bed sores", None), ("bedsore", "bed sores")]
    assert "OU" in [t.id for t in det.detect("bed sores").terms]  # without lay_first, as before
    det.calibration.rules = ("joined_words", "lay_first")
    got = det.detect("bed sores")
    assert [t.id for t in got.terms] == ["PU"] and "OU" in [t.id for t in got.alternatives]
    # a term one of whose wordings holds both words was found with the joined meaning: it stays
    assert "HB" in [t.id for t in det.detect("heart burn").terms]


def test_a_joined_reading_needs_no_confirmation_from_the_own_words() -> None:
    # "he still wets the bed" decided Productive cough ("Wet cough"): read "bedwetting" the piece finds Enuresis
    # nocturna first, which the own words never find; a joined reading is the vocabulary's own word, no wrong sense
    names = {"EN": "Enuresis nocturna", "PC": "Productive cough"}
    hits = {"wets the bed": [("PC", 0.9), ("EN", 0.1)], "bedwetting": [("EN", 0.8)]}
    wordings = {"EN": ("Enuresis nocturna", "Bedwetting"), "PC": ("Productive cough", "Wet cough")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    hits["wets the bed"] = [("PC", 0.9)]  # the own words' list holds no Enuresis nocturna
    det.calibration.rules = ("joined_words",)
    assert [(s.text, s.joined_of) for s in det._spans("wets the bed")] == [
        ("wets the bed", None), ("bedwetting", "wets the bed")]
    assert "PC" in [t.id for t in det.detect("wets the bed").terms]  # without lay_first
    det.calibration.rules = ("joined_words", "lay_first")
    got = det.detect("wets the bed")
    assert [t.id for t in got.terms] == ["EN"] and "PC" in [t.id for t in got.alternatives]


def test_a_term_found_for_where_a_named_finding_is_gives_way_to_it() -> None:
    from medrank.pipelines.symptom.sets import HpoHierarchy

    # "headaches on one side of my head" decided Hemiparesis (found for "one side"), Headache third
    names = {"HP": "Hemiparesis", "HS": "Hemifacial spasm", "HA": "Headache", "MI": "Migraine", "CP": "Chest pain",
             "PA": "Pain", "IB": "Increased bone mineral density", "OR": "Osteosclerosis of ribs",
             "AR": "Abnormality of the rib"}
    parents = {"HP": ["ROOT"], "HS": ["ROOT"], "HA": ["PA"], "MI": ["HA"], "CP": ["PA"], "PA": ["ROOT"], "IB": ["ROOT"],
               "OR": ["AR"], "AR": ["ROOT"], "ROOT": []}
    hits = {"headaches on one side of my head": [("HP", 0.9), ("HS", 0.85), ("HA", 0.8)],
            "migraines on one side": [("MI", 0.9), ("HP", 0.5)], "pain in my chest": [("CP", 0.9), ("PA", 0.5)],
            "increased bone density in ribs": [("OR", 0.9), ("IB", 0.5)]}
    wordings = {"HP": ("Hemiparesis", "Weakness of one side of the body"), "HS": ("Hemifacial spasm",),
                "HA": ("Headache", "Head ache"), "MI": ("Migraine",), "CP": ("Chest pain",), "PA": ("Pain",),
                "IB": ("Increased bone mineral density", "Increased bone density"), "OR": ("Osteosclerosis of ribs",),
                "AR": ("Abnormality of the rib",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0),
                          hierarchy=HpoHierarchy(parents), wordings=wordings)
    text = "headaches on one side of my head"
    assert "HP" in [t.id for t in det.detect(text).terms]  # the rule is off
    det.calibration.rules = ("placed_head",)
    got = det.detect(text)
    assert "HP" not in [t.id for t in got.terms] and "HP" in [t.id for t in got.alternatives]
    det.calibration.rules = ("placed_head", "give_way")
    got = det.detect(text)  # both terms of the place give way at once
    assert [t.id for t in got.terms] == ["HA"] and {"HP", "HS"} <= {t.id for t in got.alternatives}
    # the head's term and its kinds stay ("pain in my chest": Chest pain is a pain; a plural head is read singular)
    assert [t.id for t in det.detect("pain in my chest").terms][:1] == ["CP"]
    got = [t.id for t in det.detect("migraines on one side").terms]
    assert "MI" in got and "HP" not in got
    spans, cands = det._candidates_many(["pain in my chest"])[0][:2]
    assert det._placed_head("pain in my chest", spans, cands) == set()
    # a term worded with the place's body part is the head's finding there, though not filed under it
    assert [t.id for t in det.detect("increased bone density in ribs").terms][:1] == ["OR"]
    spans, cands = det._candidates_many(["increased bone density in ribs"])[0][:2]
    assert det._placed_head("increased bone density in ribs", spans, cands) == set()
    spans, cands = det._candidates_many([text])[0][:2]
    assert {cands[j].id for j in det._placed_head(text, spans, cands)} == {"HP", "HS"}
    det.calibration.rules = ()
    assert det._placed_head(text, spans, cands) == set()  # the rule is off


def test_a_behaviour_is_not_decided_for_a_thing_that_does_it() -> None:
    from medrank.pipelines.symptom.sets import BEHAVIOUR, HpoHierarchy

    # "the room spins" found Spinning (a child's twirling, a behaviour) above Vertigo
    names = {"SP": "Spinning", "VE": "Vertigo", "RO": "Stereotypical body rocking"}
    parents = {"SP": [BEHAVIOUR], "RO": [BEHAVIOUR], BEHAVIOUR: ["ROOT"], "VE": ["ROOT"], "ROOT": []}
    hits = {"the room spins": [("SP", 0.9), ("VE", 0.85)], "keeps spinning": [("SP", 0.9), ("VE", 0.85)],
            "keeps rocking": [("RO", 0.9)]}
    det = _toy_detector(hits, names, min_terms=0, hierarchy=HpoHierarchy(parents))
    assert [t.id for t in det.detect("the room spins").terms] == ["SP"]  # the rule is off
    det.calibration.rules = ("thing_subject",)
    got = det.detect("the room spins")
    assert got.terms == [] and "SP" in [t.id for t in got.alternatives]
    det.calibration.rules = ("thing_subject", "give_way")
    assert [t.id for t in det.detect("the room spins").terms] == ["VE"]  # the next hit is the piece's first
    # the patient's own doing, or a person's, stays
    assert [t.id for t in det.detect("my son keeps spinning").terms] == ["SP"]
    assert [t.id for t in det.detect("the little one keeps rocking").terms] == ["RO"]  # a person: the lead-in
    spans, cands, _, _ = det._candidates_many(["the room spins"])[0]
    assert det._thing_subject("the room spins", spans, cands)
    det.hierarchy = None
    assert det._thing_subject("the room spins", spans, cands) == set()  # no hierarchy: no behaviour known


def test_words_of_breath_decide_only_a_term_of_breath() -> None:
    # "I'm out of breath" decided Loss of consciousness ("Passing out", near by its "out"); that idiom is now searched
    # as "short of breath" (spans), and the rule still guards other words of breath
    names = {"LOC": "Loss of consciousness", "DY": "Dyspnea", "HA": "Halitosis", "AS": "Ankle swelling"}
    hits = {"catch my breath": [("LOC", 0.9)], "short of breath": [("DY", 0.9)], "bad breath": [("HA", 0.9)],
            "passed out": [("LOC", 0.9)], "my ankles are swollen": [("AS", 0.9)]}
    wordings = {"LOC": ("Loss of consciousness", "Passing out", "Fainting"), "DY": ("Dyspnea", "Shortness of breath"),
                "HA": ("Halitosis", "Bad breath"), "AS": ("Ankle swelling",)}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert [t.id for t in det.detect("catch my breath").terms] == ["LOC"]  # the rule is off
    det.calibration.rules = ("breath_words",)
    got = det.detect("catch my breath")
    assert got.terms == [] and [t.id for t in got.alternatives][:1] == ["LOC"]
    assert [t.id for t in det.detect("short of breath").terms] == ["DY"]
    assert [t.id for t in det.detect("bad breath").terms] == ["HA"]
    assert [t.id for t in det.detect("passed out").terms] == ["LOC"]  # no word of breath: left to the probabilities
    assert det._unsaid_breath("呼吸困难", [], []) == set()  # Chinese text is left alone


def test_a_term_of_blood_is_not_decided_where_the_words_beside_the_blood_are_another_terms_wording() -> None:
    # "I threw up blood" decided Hemoptysis ("Coughing up blood"): "threw up" is Vomiting's "Throwing up", a term
    # that shares no word with Hemoptysis', and Hematemesis ("Vomiting blood") shares one
    names = {"HP": "Hemoptysis", "HE": "Hematemesis", "VO": "Vomiting", "HU": "Hematuria", "DI": "Diarrhea",
             "UR": "Abnormality of urine homeostasis"}
    hits = {"threw up blood": [("HP", 0.9)], "vomited blood": [("HE", 0.9)], "coughing up blood": [("HP", 0.9)],
            "blood in my pee": [("HU", 0.9)], "blood in all my poop": [("HU", 0.9)], "poop": [("DI", 0.8)],
            "pee": [("UR", 0.8)]}
    wordings = {"HP": ("Hemoptysis", "Coughing up blood"), "HE": ("Hematemesis", "Vomiting blood"),
                "VO": ("Vomiting", "Throwing up"), "HU": ("Hematuria", "Blood in the urine"),
                "DI": ("Diarrhea", "The runs", "Watery stool"), "UR": ("Abnormality of urine homeostasis", "Pee issues")}
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert [t.id for t in det.detect("threw up blood").terms] == ["HP"]  # the rule is off
    det.calibration.rules = ("blood_source",)
    got = det.detect("threw up blood")
    assert got.terms == [] and "HP" in [t.id for t in got.alternatives]
    assert [t.id for t in det.detect("vomited blood").terms] == ["HE"]  # Vomiting's words are Hematemesis' too
    assert [t.id for t in det.detect("coughing up blood").terms] == ["HP"]  # its own wording
    # one word no wording holds stands for the term the search finds first for it: "poop" for Diarrhea, whose words
    # meet none of Hematuria's ("the" aside); "pee" for a term of urine, whose words do
    assert det.detect("blood in all my poop").terms == []
    assert [t.id for t in det.detect("blood in my pee").terms] == ["HU"]
    assert _besides_blood("I threw up some blood this morning") == "threw up"
    assert _besides_blood("there was a lot of bleeding in it") == ""
    assert det._blood_elsewhere("吐血", [], []) == set()  # Chinese text is left alone
    # words of nothing but blood say no source: "there's blood" decided Hematemesis; a nosebleed names its own
    hits.update({"blood": [("HE", 0.9)], "nosebleed": [("EP", 0.9)]})
    names["EP"], wordings["EP"] = "Epistaxis", ("Epistaxis", "Nosebleed")
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    det.calibration.rules = ("blood_source",)
    got = det.detect("there's blood")
    assert got.terms == [] and "HE" in [t.id for t in got.alternatives]
    assert [t.id for t in det.detect("nosebleed").terms] == ["EP"]
    # nor a term that is no term of blood but says more than blood ("I noticed blood": Purpura, "Blood spots")
    hits["noticed blood"] = [("PU", 0.9)]
    names["PU"], wordings["PU"] = "Purpura", ("Purpura", "Blood spots", "Red or purple spots on the skin")
    det = _toy_detector(hits, names, min_terms=0, wordings=wordings)
    assert [t.id for t in det.detect("noticed blood").terms] == ["PU"]  # the rule is off
    det.calibration.rules = ("blood_source",)
    got = det.detect("noticed blood")
    assert got.terms == [] and "PU" in [t.id for t in got.alternatives]
    assert _only_blood("there's some blood this morning") and _only_blood("bleeding")
    assert not _only_blood("nosebleed") and not _only_blood("blood in my pee")


def test_an_adjective_no_wording_holds_is_also_read_as_the_wordings_word() -> None:
    # "wheezy chest" decided Shield chest: "wheezy" is near no wheeze, and its piece is also searched as "wheezing chest"
    names = {"SC": "Shield chest", "WH": "Wheezing"}
    hits = {"wheezy chest": [("SC", 0.6)], "wheezing chest": [("WH", 0.9)]}
    wordings = {"SC": ("Shield chest", "Broad chest"), "WH": ("Wheezing", "Wheeze")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert [t.id for t in det.detect("wheezy chest").terms] == ["SC"]  # the rule is off
    det.calibration.rules = ("plain_adjectives",)
    assert [(s.text, s.reading) for s in det._spans("wheezy chest")] == [("wheezy chest", False),
                                                                        ("wheezing chest", True)]
    got = det.detect("wheezy chest")
    # one finding said two ways: the reading's term, the nearer, is decided and the other offered
    assert [t.id for t in got.terms] == ["WH"] and "SC" in [t.id for t in got.alternatives]


class _WordVectors:
    """Unit vectors written out for the lay-word rule: "pee" is near urine, "shattered" near fractured."""

    vectors = {"urine": (1.0, 0.0, 0.0), "fractured": (0.0, 1.0, 0.0), "pee": (0.9, 0.0, float(np.sqrt(0.19))),
               "shattered": (0.0, 0.9, float(np.sqrt(0.19)))}

    def encode(self, texts, kind=None, batch_size=64, show_progress=False):
        return np.array([self.vectors.get(t, (0.0, 0.0, 1.0)) for t in texts], dtype=np.float32)


def test_an_everyday_word_no_wording_holds_is_also_read_as_the_nearest_wording_word() -> None:
    # "burns when I pee" found Dysuria second only; read as "burns when I urine" it finds it first
    names = {"DY": "Dysuria", "RU": "Red urine", "UO": "Urine odor", "PF": "Pathologic fracture", "FR": "Fractured rib",
             "EP": "Epiphora"}
    hits = {"burns when I pee": [("GL", 0.7), ("DY", 0.65)], "burns when I urine": [("DY", 0.9), ("RU", 0.5)],
            "shattered": [("EP", 0.5), ("FR", 0.45), ("GL", 0.4), ("UO", 0.3)], "fractured": [("PF", 0.9)]}
    wordings = {"DY": ("Dysuria", "Painful urination"), "RU": ("Red urine",), "UO": ("Urine odor",),
                "PF": ("Pathologic fracture", "Fractured bone"), "FR": ("Fractured rib",), "EP": ("Epiphora",)}
    names["GL"] = "Glossitis"
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    det.calibration.rules = ("lay_words",)
    assert [s.text for s in det._spans("burns when I pee")] == ["burns when I pee"]  # no encoder: the rule is off
    assert det.use_lay_words(_WordVectors())
    assert [(s.text, s.reading, s.lay_of) for s in det._spans("burns when I pee")] == [
        ("burns when I pee", False, None), ("burns when I urine", True, "burns when I pee")]
    got = det.detect("burns when I pee")
    assert [t.id for t in got.terms] == ["DY"]
    # a clause read with its circumstance is read so too, the circumstance with it: in "a burning feeling when I pee"
    # the piece holds no everyday word, its circumstance does (Dysuria was not decided)
    spans = det._spans("a burning feeling when I pee")
    assert [(s.text, s.reading) for s in spans if not s.lay_of] == [("burning feeling", False),
                                                                    ("burning feeling when I pee", True)]
    assert [(s.text, s.circumstance, s.lay_of) for s in spans if s.lay_of] == [
        ("burning feeling when I urine", "when I urine", "burning feeling when I pee")]
    # a term only the reading finds is offered, not decided: the encoder's nearest word may be another sense of the
    # patient's ("I'm shattered": tired), and the search of their own words finds no fracture first
    got = det.detect("shattered")
    assert "PF" not in [t.id for t in got.terms] and "PF" in [t.id for t in got.alternatives]
    det.calibration.rules = ()
    assert [s.text for s in det._spans("burns when I pee")] == ["burns when I pee"]
    # a Chinese detector never reads English words so
    assert not SetDetector(lambda texts, k: [], {}, language="zh", wordings=wordings).use_lay_words(_WordVectors())


def test_a_part_that_does_something_is_said_with_the_verbs_adjective() -> None:
    from medrank.text import as_part_adjective

    adjectives = {"runny", "watery", "itchy", "flaky"}
    assert as_part_adjective("my nose is running", adjectives) == "runny nose"
    assert as_part_adjective("my nose runs", adjectives) == "runny nose"
    assert as_part_adjective("my eyes keep watering", adjectives) == "watery eyes"
    assert as_part_adjective("my skin itches", adjectives) == "itchy skin"
    assert as_part_adjective("my skin flakes", adjectives) == "flaky skin"
    assert as_part_adjective("my heart pounds", adjectives) is None  # no adjective of the verb in the vocabulary
    assert as_part_adjective("it runs", adjectives) is None and as_part_adjective("a runny nose", adjectives) is None
    # "my nose is running" was nearest nose bleeding; the vocabulary says "Runny nose" (rule part_adjective)
    names = {"RH": "Rhinorrhea", "EP": "Epistaxis", "NO": "Abnormality of the nose"}
    hits = {"my nose is running": [("EP", 0.6)], "runny nose": [("RH", 0.9)]}
    wordings = {"RH": ("Rhinorrhea", "Runny nose"), "EP": ("Epistaxis", "Nose bleeding"),
                "NO": ("Abnormality of the nose",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert [t.id for t in det.detect("my nose is running").terms] == ["EP"]  # the rule is off
    det.calibration.rules = ("part_adjective",)
    assert [(s.text, s.reading) for s in det._spans("my nose is running")] == [("my nose is running", False),
                                                                              ("runny nose", True)]
    got = det.detect("my nose is running")
    assert [t.id for t in got.terms] == ["RH"] and "EP" in [t.id for t in got.alternatives]
    # a subject that is no body part of the vocabulary is not read so (no "runny tap")
    assert [s.text for s in det._spans("the tap runs")] == ["the tap runs"]


def test_a_term_that_shares_only_the_part_with_the_words_is_offered() -> None:
    # "my heart is pounding" decided Myocardial infarction ("Heart attack"): the encoder put it near for the heart
    names = {"MI": "Myocardial infarction", "TA": "Tachycardia", "MA": "Mastalgia", "HE": "Abnormality of the heart",
             "BR": "Abnormality of the breast"}
    hits = {"my heart is pounding": [("MI", 0.9)], "my heart races": [("TA", 0.9)], "painful breast": [("MA", 0.9)]}
    wordings = {"MI": ("Myocardial infarction", "Heart attack"), "TA": ("Tachycardia", "Fast heart rate", "Racing heart"),
                "MA": ("Mastalgia", "Mastodynia"), "HE": ("Abnormality of the heart",), "BR": ("Abnormality of the breast",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert [t.id for t in det.detect("my heart is pounding").terms] == ["MI"]  # the rule is off
    det.calibration.rules = ("part_only",)
    got = det.detect("my heart is pounding")
    assert got.terms == [] and [t.id for t in got.alternatives] == ["MI"]
    # a word of the term's besides the part, by stem ("races", "Racing heart"), keeps it
    assert [t.id for t in det.detect("my heart races").terms] == ["TA"]
    # a term with learned names only ("Mastalgia") is left to the probabilities: the encoder's reading is all there is
    assert [t.id for t in det.detect("painful breast").terms] == ["MA"]
    assert det._part_only("心慌", [], []) == set()  # Chinese text is left alone


def test_a_learned_name_whose_telling_word_is_unsaid_is_offered() -> None:
    # "my heart flutters" decided Ventricular flutter: "flutter" brought it, "ventricular" only an ECG tells
    names = {"VF": "Ventricular flutter", "PA": "Palpitations", "MA": "Mastalgia", "HA": "Abnormality of the heart"}
    hits = {"my heart flutters": [("VF", 0.9)], "ventricular flutter": [("VF", 0.9)], "painful breast": [("MA", 0.9)],
            "heart pounding": [("PA", 0.9)]}
    wordings = {"VF": ("Ventricular flutter",), "PA": ("Palpitations", "Pounding heart"), "MA": ("Mastalgia",),
                "HA": ("Abnormality of the heart",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert [t.id for t in det.detect("my heart flutters").terms] == ["VF"]  # the rule is off
    det.calibration.rules = ("learned_unsaid",)
    got = det.detect("my heart flutters")
    assert got.terms == [] and [t.id for t in got.alternatives] == ["VF"]
    # said in full, it is decided; a learned name sharing nothing with the words is the encoder's reading; a term with
    # an everyday wording is left alone
    assert [t.id for t in det.detect("ventricular flutter").terms] == ["VF"]
    assert [t.id for t in det.detect("painful breast").terms] == ["MA"]
    assert [t.id for t in det.detect("heart pounding").terms] == ["PA"]
    assert det._learned_unsaid("心慌", [], []) == set()  # Chinese text is left alone


def test_a_term_whose_wording_denies_the_words_is_offered() -> None:
    # "I'm pregnant" decided Infertility: its wording "Unable to get pregnant" shares the word and denies it
    names = {"IN": "Infertility", "AN": "Anosmia"}
    hits = {"pregnant": [("IN", 0.9)], "can't get pregnant": [("IN", 0.9)], "lost my sense of smell": [("AN", 0.9)]}
    wordings = {"IN": ("Infertility", "Unable to get pregnant"), "AN": ("Anosmia", "Loss of smell")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert [t.id for t in det.detect("pregnant").terms] == ["IN"]  # the rule is off
    det.calibration.rules = ("denied_wording",)
    got = det.detect("pregnant")
    assert got.terms == [] and [t.id for t in got.alternatives] == ["IN"]
    # words that say the lack themselves keep the term
    assert [t.id for t in det.detect("can't get pregnant").terms] == ["IN"]
    assert [t.id for t in det.detect("lost my sense of smell").terms] == ["AN"]
    assert det._denied_wording("怀孕", [], []) == set()


def test_a_term_that_shares_only_the_linking_verb_is_offered() -> None:
    # "I've been feeling weak" decided Nausea: its wording "feeling sick to your stomach" shares the verb, not "weak"
    names = {"NA": "Nausea", "AS": "Asthenia"}
    hits = {"feeling weak": [("NA", 0.9), ("AS", 0.85)], "feeling sick": [("NA", 0.9)]}
    wordings = {"NA": ("Nausea", "feeling sick to your stomach"), "AS": ("Asthenia", "Weakness")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert "NA" in {t.id for t in det.detect("feeling weak").terms}  # the rule is off
    det.calibration.rules = ("linking_only",)
    got = det.detect("feeling weak")
    assert "NA" not in {t.id for t in got.terms} and "NA" in {t.id for t in got.alternatives}
    assert "AS" in {t.id for t in got.terms}
    # the words that say what is felt are the term's: decided
    assert [t.id for t in det.detect("feeling sick").terms] == ["NA"]
    assert det._linking_only("感觉恶心", [], []) == set()  # Chinese text is left alone


def test_a_wording_that_denies_a_short_word_in_a_longer_form_is_read() -> None:
    # "I eat a lot" decided Anorexia: "Deliberately not eating" denies "eating", whose first four letters ("eati") the
    # three-letter "eat" does not hold; their Snowball stems meet
    names = {"AX": "Anorexia"}
    hits = {"eat": [("AX", 0.9)], "refuses to eat": [("AX", 0.9)]}  # "a lot" says how often: the piece is "eat"
    wordings = {"AX": ("Anorexia", "Deliberately not eating")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    det.calibration.rules = ("denied_wording",)
    got = det.detect("eat a lot")
    assert got.terms == [] and [t.id for t in got.alternatives] == ["AX"]
    # a piece that refuses says the denial itself
    assert [t.id for t in det.detect("refuses to eat").terms] == ["AX"]


def test_a_part_named_by_a_reading_of_everyday_words_is_named() -> None:
    # "I have tummy cramps" decided Muscle spasm: every wording of Abdominal cramps names a part, "tummy" is no part the
    # vocabulary names, and unnamed_parts kept it back, though the lay-word reading reads "tummy" as "stomach"
    class TummyVectors(_WordVectors):
        vectors = {"stomach": (1.0, 0.0, 0.0), "tummy": (0.9, 0.0, float(np.sqrt(0.19)))}

    names = {"AC": "Abdominal cramps", "ST": "Abnormality of the stomach", "SP": "Stomach pain",
             "LG": "Abnormality of the leg", "LC": "Leg cramps"}
    hits = {"tummy cramps": [("AC", 0.9)], "stomach cramps": [("AC", 0.9)]}
    # cramps are of the stomach and of the leg: the word alone names no part
    wordings = {"AC": ("Stomach cramps", "Cramps in the stomach"), "ST": ("Abnormality of the stomach",),
                "SP": ("Stomach pain", "Stomach ache"), "LG": ("Abnormality of the leg",), "LC": ("Leg cramps",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    det.calibration.rules = ("unnamed_parts",)
    got = det.detect("I have tummy cramps")
    assert got.terms == [] and [t.id for t in got.alternatives] == ["AC"]  # no reading: the complaint names no part
    det.calibration.rules = ("unnamed_parts", "lay_words")
    assert det.use_lay_words(TummyVectors())
    assert [(s.text, s.lay_of) for s in det._spans("I have tummy cramps")][1:] == [("stomach cramps", "tummy cramps")]
    assert [t.id for t in det.detect("I have tummy cramps").terms] == ["AC"]


def test_the_first_hit_of_words_read_without_an_everyday_words_meaning_gives_way_to_the_readings() -> None:
    # "pain in my lower right tummy" decided Low back pain: the search of the patient's words knows no "tummy", its
    # reading "... stomach" finds Abdominal pain first, and the patient's words find it second
    class TummyVectors(_WordVectors):
        vectors = {"stomach": (1.0, 0.0, 0.0), "tummy": (0.9, 0.0, float(np.sqrt(0.19)))}

    names = {"LB": "Low back pain", "AP": "Abdominal pain", "TA": "Tummy ache", "FR": "Fracture"}
    hits = {"pain in my tummy": [("LB", 0.95), ("AP", 0.85)], "pain in my stomach": [("AP", 0.9), ("LB", 0.8)],
            "tummy ache": [("TA", 0.95), ("AP", 0.85)], "stomach ache": [("AP", 0.9), ("TA", 0.5)],
            "tummy twinge": [("FR", 0.95), ("LB", 0.1)], "stomach twinge": [("AP", 0.9)]}
    wordings = {"LB": ("Low back pain", "Lower back pain"), "AP": ("Abdominal pain", "Stomach pain", "Stomach ache"),
                "TA": ("Tummy ache",), "FR": ("Fracture",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert det.use_lay_words(TummyVectors())
    det.calibration.rules = ("lay_words",)
    assert [t.id for t in det.detect("pain in my tummy").terms] == ["LB"]  # without the rule, as before
    det.calibration.rules = ("lay_words", "lay_first")
    got = det.detect("pain in my tummy")
    assert [t.id for t in got.terms] == ["AP"] and "LB" in [t.id for t in got.alternatives]
    # a term with a wording holding the everyday word was found with its meaning: it stays ("earache": Earache)
    assert [t.id for t in det.detect("tummy ache").terms] == ["TA"]
    # the patient's words do not find the reading's first hit among their first three: the reading may be another
    # sense of the word, and nothing gives way (FR stays decided; lay_words keeps AP offered)
    assert [t.id for t in det.detect("tummy twinge").terms] == ["FR"]


def test_how_often_is_left_out_of_a_piece_and_read_as_frequent_under_often_words() -> None:
    # "a lot" says how often, left out as a time ("I cough a lot": cough), but for peeing it is the finding itself
    assert [(s.text, s.often) for s in find_spans("I'm peeing a lot", language="en")] == [("peeing", True)]
    assert [(s.text, s.often) for s in find_spans("I cough a lot, especially at night", language="en")] == [("cough", True)]
    assert [(s.text, s.often) for s in find_spans("I have a headache for two days", language="en")] == [("headache", False)]
    names = {"AU": "Abnormality of urine homeostasis", "PO": "Pollakisuria"}
    hits = {"peeing": [("AU", 0.9), ("PO", 0.1)], "frequent peeing": [("PO", 0.95), ("AU", 0.1)]}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0))
    det.calibration.rules = ()
    assert [t.id for t in det.detect("I'm peeing a lot").terms] == ["AU"]  # without the rule, as before
    det.calibration.rules = ("often_words",)
    assert [(s.text, s.reading) for s in det._spans("I'm peeing a lot")] == [("peeing", False), ("frequent peeing", True)]
    assert [t.id for t in det.detect("I'm peeing a lot").terms] == ["PO"]
    assert [s.text for s in det._spans("I have a headache")] == ["headache"]  # nothing said of how often


def test_a_frequent_reading_of_everyday_words_is_confirmed_by_the_frequent_reading_of_the_own_words() -> None:
    # "I need to pee all the time": "frequent need to urinate" finds Pollakisuria first, "need to pee" not among its
    # first three hits, "frequent need to pee" second; the clause's "all the time" is the patient's word too
    names = {"AU": "Abnormality of urine homeostasis", "PO": "Pollakisuria", "UI": "Urinary incontinence",
             "A": "Aciduria", "B": "Bacteriuria", "C": "Cystitis"}
    hits = {"need to pee": [("AU", 0.6), ("A", 0.5), ("B", 0.4), ("C", 0.3)],
            "frequent need to pee": [("AU", 0.6), ("PO", 0.55)], "need to urine": [("UI", 0.5)],
            "frequent need to urine": [("PO", 0.9)]}
    wordings = {"AU": ("Abnormality of urine homeostasis",), "PO": ("Pollakisuria", "Frequent urine passing"),
                "UI": ("Urinary incontinence", "Urine leaking"), "A": ("Aciduria",), "B": ("Bacteriuria",),
                "C": ("Cystitis",)}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    assert det.use_lay_words(_WordVectors())
    det.calibration.rules = ("lay_words", "often_words")
    spans = det._spans("I need to pee all the time")
    assert [(s.text, s.lay_of) for s in spans] == [
        ("need to pee", None), ("frequent need to pee", None), ("need to urine", "need to pee"),
        ("frequent need to urine", "need to pee")]
    assert "PO" in [t.id for t in det.detect("I need to pee all the time").terms]
    # where the own words' frequent reading does not find it either, the reading is not confirmed: offered
    hits["frequent need to pee"] = [("AU", 0.6), ("A", 0.5), ("B", 0.4), ("C", 0.3)]
    got = det.detect("I need to pee all the time")
    assert "PO" not in [t.id for t in got.terms] and "PO" in [t.id for t in got.alternatives]


def test_a_term_on_words_the_vocabulary_does_not_use_and_shares_none_of_is_offered() -> None:
    # "I feel lightheaded" decided Paresthesia: no wording says lightheaded, and the encoder guessed from word pieces
    # (lightheadedness is now read as presyncope before any search: "wobbly" stands in for such a word here)
    names = {"PA": "Paresthesia", "VE": "Vertigo", "UO": "Urine odor"}
    hits = {"feel wobbly": [("PA", 0.9)], "feel dizzy": [("VE", 0.9)], "feel pee": [("UO", 0.9)]}
    wordings = {"PA": ("Paresthesia", "Pins and needles feeling"), "VE": ("Vertigo", "Dizzy spell"),
                "UO": ("Urine odor", "Red urine")}
    det = _table_detector(hits, names, _one_feature_calibration("span_score", intercept=-1.0), wordings=wordings)
    det.calibration.rules = ("unread_words",)
    assert [t.id for t in det.detect("I feel wobbly").terms] == ["PA"]  # no lay-word reader: the rule is off
    assert det.use_lay_words(_WordVectors())
    got = det.detect("I feel wobbly")
    assert got.terms == [] and [t.id for t in got.alternatives] == ["PA"]
    # a word the term's wordings begin like ("dizzy": "Dizzy spell") is one the vocabulary reads
    assert [t.id for t in det.detect("I feel dizzy").terms] == ["VE"]
    # a word the lay-word reading reads ("pee": urine) is searched as the vocabulary's word: its reading decides
    assert [t.id for t in det.detect("I feel pee").terms] == ["UO"]
    assert det._unread("头晕", [], []) == set()  # Chinese text is left alone


def test_the_grouping_rule_offers_an_upper_class_its_words_do_not_name() -> None:
    # HPO's "Abnormality of temperature regulation" holds Fever: found for "running a temperature", it said nothing a
    # clinician could tick, and was decided
    names = {"ATR": "Abnormality of temperature regulation", "F": "Fever", "AWL": "Abnormal weight loss", "X": "Other"}
    hier = HpoHierarchy({"ATR": (), "F": ("ATR",), "AWL": (), "X": ()})
    hits = {"temperature trouble": [("ATR", 0.9)], "poor temperature control": [("ATR", 0.9)],
            "losing weight": [("AWL", 0.9)]}
    wordings = {"ATR": ("Abnormality of temperature regulation", "Poor temperature control"), "F": ("Fever",),
                "AWL": ("Abnormal weight loss",)}
    det = _toy_detector(hits, names, min_terms=0, hierarchy=hier, wordings=wordings)
    assert [t.id for t in det.detect("temperature trouble").terms] == ["ATR"]  # the rule is off
    det.calibration.rules = ("grouping",)
    got = det.detect("temperature trouble")
    assert got.terms == [] and [t.id for t in got.alternatives][:1] == ["ATR"]
    # decided on words that are one of its wordings ...
    assert [t.id for t in det.detect("poor temperature control").terms] == ["ATR"]
    # ... and a term so named without kinds below it is no grouping class (ICD-10-CM's leaf Abnormal weight loss)
    assert [t.id for t in det.detect("losing weight").terms] == ["AWL"]
    # Chinese text is left alone
    assert det._grouping("发烧", [], []) == set()
