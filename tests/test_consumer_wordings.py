"""Everyday wordings of HPO terms from MedQuAD's focus annotations (medrank.data.consumer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from medrank.data.consumer import (
    FocusAnnotation,
    consumer_wordings,
    gloss_wordings,
    merge_wordings,
    read_answer_texts,
    read_focus_annotations,
    usable_wording,
    with_consumer_wordings,
    wording_key,
)
from medrank.data.hpo import without_layperson_of
from medrank.records import Concept

DIARRHEA = Concept("HP:0002014", "Diarrhea", ("Diarrhoea", "Watery stool"), (), {"layperson": ("Watery stool",)})
FEVER = Concept("HP:0001945", "Fever", ("Pyrexia",), (), {"layperson": ()})
RELAPSING = Concept("HP:0001954", "Recurrent fever", ("Episodic fever",), (), {"layperson": ()})
CUIS = {"C0011991": ["HP:0002014"], "C0015967": ["HP:0001945"], "C0035021": ["HP:0001954"]}


def test_a_page_anchored_on_a_term_lends_it_its_other_words() -> None:
    pages = [FocusAnnotation("Diarrhea", ("Dysentery", "The runs", "Diarrhea - what to ask your doctor", "CRF"),
                             ("C0011991",))]
    got = consumer_wordings([DIARRHEA, FEVER], pages, CUIS)
    # an article title and a short acronym are not wordings; the focus is the term's own name already
    assert got == {"HP:0002014": ("Dysentery", "The runs")}


def test_a_page_that_only_shares_a_cui_lends_nothing() -> None:
    # a page about relapsing fever lists Fever's CUI too, but none of its words is Fever's
    pages = [FocusAnnotation("Tick-borne relapsing fever", ("Mountain fever",), ("C0035021", "C0015967"))]
    assert consumer_wordings([FEVER, RELAPSING], pages, CUIS) == {}
    # anchored on Fever by one of its words ("Pyrexia"): Fever takes the rest
    pages = [FocusAnnotation("Fever", ("Pyrexia", "Elevated temperature"), ("C0015967",))]
    assert consumer_wordings([FEVER, RELAPSING], pages, CUIS) == {"HP:0001945": ("Elevated temperature",)}


def test_a_word_two_terms_claim_or_hpo_already_gives_goes_to_neither() -> None:
    pages = [FocusAnnotation("Fever", ("High temperature",), ("C0015967",)),
             FocusAnnotation("Recurrent fever", ("High temperature", "Watery stool"), ("C0035021",))]
    # "High temperature" is claimed by both; "Watery stool" is HPO's wording of Diarrhea
    assert consumer_wordings([DIARRHEA, FEVER, RELAPSING], pages, CUIS) == {}


def test_wording_rules() -> None:
    assert wording_key("Belly-ache!") == "belly ache" == wording_key("belly  ache")
    assert usable_wording("The runs") and usable_wording("Swollen glands")
    assert not usable_wording("Diarrhea - babies") and not usable_wording("AFIB") and not usable_wording("Type 2")
    assert not usable_wording("one two three four five")


def test_an_abbreviation_that_reads_as_a_common_word_makes_no_wording() -> None:
    # the index lower-cases "HIS deficiency" to "his deficiency": "he's off his food" would find Hyperhistidinemia
    assert not usable_wording("HIS deficiency") and not usable_wording("ST-elevation myocardial infarction")
    # an abbreviation no one writes as a word, a Roman numeral, a wording all in capitals stay
    assert usable_wording("HAL deficiency") and usable_wording("MPGN type II") and usable_wording("GLOBOZOOSPERMIA, TOTAL")


def test_added_wordings_are_synonyms_marked_as_consumer_and_held_phrases_never_reach_an_index() -> None:
    plus = with_consumer_wordings([DIARRHEA, FEVER], {"HP:0002014": ("The runs",), "HP:0001945": ("watery stool",)})
    assert plus[0].synonyms == ("Diarrhoea", "Watery stool", "The runs") and plus[0].meta["consumer"] == ("The runs",)
    assert plus[0].meta["layperson"] == ("Watery stool",)
    # Diarrhea's layperson phrase is held out: it leaves Diarrhea, and the same phrase as Fever's everyday wording goes too
    reduced = without_layperson_of(plus, [plus[0]])
    assert reduced[0].synonyms == ("Diarrhoea", "The runs") and reduced[1].synonyms == ("Pyrexia",)


def test_read_focus_annotations(tmp_path: Path) -> None:
    folder = tmp_path / "4_MPlus_Health_Topics_QA"
    folder.mkdir()
    (folder / "0000282.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><Document id="0000282" source="MPlusHealthTopics"><Focus>Diarrhea</Focus>'
        "<FocusAnnotations><UMLS><CUIs><CUI>C0011991</CUI></CUIs></UMLS><Synonyms><Synonym>The runs</Synonym>"
        "</Synonyms></FocusAnnotations><QAPairs/></Document>", encoding="utf-8")
    (folder / "0000001.xml").write_text('<Document id="1" source="X"><Focus/><QAPairs/></Document>', encoding="utf-8")
    assert read_focus_annotations(path=tmp_path) == [FocusAnnotation("Diarrhea", ("The runs",), ("C0011991",))]


@pytest.mark.slow
def test_the_real_pages_give_hpo_terms_the_words_people_use() -> None:
    from medrank.config import DataNotFoundError
    from medrank.data.consumer import hpo_with_consumer_wordings

    try:
        read_focus_annotations()
    except (DataNotFoundError, FileNotFoundError):
        pytest.skip("no MedQuAD pages here")
    by_name = {c.name: c for c in hpo_with_consumer_wordings()}
    assert "The runs" in by_name["Diarrhea"].synonyms
    assert by_name["Fever"].meta["consumer"] == ("Elevated temperature",)
    assert "Bedwetting" in by_name["Enuresis nocturna"].meta["consumer"]
    assert "Swollen glands" in by_name["Lymphadenopathy"].meta["consumer"]
    # HPO's own words are untouched, and a term no page is anchored on has none
    assert by_name["Headache"].synonyms[0] == "Headaches" and "consumer" not in by_name["Stiff neck"].meta


NAUSEA = Concept("HP:0002018", "Nausea", (), (), {"layperson": ()})
SCOLIOSIS = Concept("HP:0002650", "Scoliosis", (), (), {})
KYPHOSIS = Concept("HP:0002808", "Kyphosis", (), (), {})
KYPHOSCOLIOSIS = Concept("HP:0002751", "Kyphoscoliosis", (), (), {})


def test_a_gloss_written_three_times_after_one_term_s_wording_is_its_wording() -> None:
    answers = ["Side effects include nausea (feeling sick to your stomach) and headache."] * 3
    assert gloss_wordings([NAUSEA, FEVER], answers) == {"HP:0002018": ("feeling sick to your stomach",)}
    assert gloss_wordings([NAUSEA, FEVER], answers[:2]) == {}  # twice is not enough


def test_what_is_no_everyday_gloss_is_not_read() -> None:
    def read(text: str) -> dict:
        return gloss_wordings([NAUSEA, FEVER, DIARRHEA, SCOLIOSIS, KYPHOSIS, KYPHOSCOLIOSIS], [text] * 3)

    assert read("a high fever (FMF) in children") == {}  # an acronym
    assert read("nausea (NAW-zee-uh) is common") == {}  # a pronunciation guide
    assert read("a fever (especially at night) is common") == {}  # a qualifier
    assert read("a fever (pyrexia) is common") == {}  # another name, not an explanation
    assert read("nausea (nausea of pregnancy) may come") == {}  # shares the term's word
    assert read("kyphoscoliosis (kyphosis and scoliosis) may come") == {}  # only other terms' words
    assert read("the runs (watery stool) may come") == {}  # already a wording


def test_a_gloss_two_terms_claim_says_neither_and_merged_wordings_keep_one_of_each() -> None:
    answers = ["nausea (a feeling in the stomach)"] * 3 + ["diarrhea (a feeling in the stomach)"] * 3
    assert gloss_wordings([NAUSEA, DIARRHEA], answers) == {}
    merged = merge_wordings({"HP:1": ("The runs",)}, {"HP:1": ("the runs", "the trots"), "HP:2": ("x y",)})
    assert merged == {"HP:1": ("The runs", "the trots"), "HP:2": ("x y",)}


@pytest.mark.slow
def test_the_medquad_answers_gloss_nausea_and_wheezing() -> None:
    from medrank.data.hpo import load_hpo

    try:
        answers = read_answer_texts()
    except FileNotFoundError:
        pytest.skip("no MedQuAD data")
    got = gloss_wordings(load_hpo(), answers)
    assert "feeling sick to your stomach" in got["HP:0002018"]  # Nausea
    assert "a whistling sound when you breathe" in got["HP:0030828"]  # Wheezing
