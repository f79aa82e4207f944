"""Procedure abbreviations written alone (medrank.pipelines.procedures.abbreviations): the data's own, by hand."""

from __future__ import annotations

import pytest

from medrank.pipelines.procedures.abbreviations import (
    abbreviations_of_data,
    latin_words,
    procedure_abbreviations,
    reads_as_abbreviation,
)

NAMES = ["经尿道前列腺切除术（TURP）", "内镜逆行胆管造影[ERC]", "经皮冠状动脉腔内成形术(PTCA)", "CT引导下肺穿刺活检术",
         "T型管引流术"]
MENTIONS = ["PICC", "ＬＣ", "IVUS+", "TURP（TURiS）", "右乳CT定位", "T管", "A"]


def test_latin_words_fold_full_width_forms_and_case() -> None:
    assert latin_words("TURP（TURiS）") == ["TURP", "TURIS"]
    assert latin_words("ＬＣ") == ["LC"] and latin_words("CRT-D植入") == ["CRT-D"] and latin_words("腹腔镜") == []


def test_the_abbreviations_are_the_names_bracketed_words_and_the_bare_mentions_words() -> None:
    found = procedure_abbreviations(NAMES, MENTIONS)
    # bracketed in a name: TURP, ERC, PTCA; words of mentions without a Han character: PICC, LC, IVUS, TURP, TURIS;
    # CT and T stand in names or mentions beside Han characters only, and a lone letter is never one
    assert found == frozenset({"TURP", "ERC", "PTCA", "PICC", "LC", "IVUS", "TURIS"})


@pytest.mark.parametrize(("mention", "read"), [
    ("TURP", True), ("turp", True), ("ＬＣ", True), ("IVUS+", True), ("TURP（TURiS）", True), ("PICC, ERC", True),
    ("CT", False),  # not an abbreviation of the data written alone
    ("TURP please", False), ("hello", False), ("12345", False), ("", False), ("TURP αβ", False),
])
def test_a_mention_is_read_when_every_word_is_one_and_nothing_else_is_written(mention: str, read: bool) -> None:
    assert reads_as_abbreviation(mention, procedure_abbreviations(NAMES, MENTIONS)) is read


def test_without_the_training_file_the_names_alone_give_them(tmp_path) -> None:
    assert abbreviations_of_data(NAMES, tmp_path / "nowhere") == frozenset({"TURP", "ERC", "PTCA"})
