"""A blood-pressure reading in a patient's words (medrank.blood_pressure): hand-checked cases."""

import pytest

from medrank.blood_pressure import blood_pressure_reading, searched_as


@pytest.mark.parametrize(("text", "reading"), [
    ("my blood pressure was 160/100 this morning", "high"),
    ("BP 150/85", "high"),  # the systolic alone
    ("my bp is 135/92", "high"),  # the diastolic alone
    ("blood pressure 140/90", "high"),  # the cut-offs themselves are high
    ("my blood pressure is 120/80", "normal"),
    ("blood pressure 139/89", "normal"),
    ("my bp is 85/50", "low"),
    ("blood pressure of 100/55", "low"),  # the diastolic alone
    ("since 3/12 I have had a cough", None),  # no word of blood pressure
    ("my blood pressure is high", None),  # no reading: the words say it
    ("blood pressure 80/120", None),  # a systolic below its diastolic is no reading
    ("blood pressure 1600/100", None),
])
def test_english_readings(text: str, reading: str | None) -> None:
    assert blood_pressure_reading(text, "en") == reading


@pytest.mark.parametrize(("text", "reading"), [
    ("血压150/90mmHg", "high"),
    ("血压 120/80", "normal"),
    ("血压85/55", "low"),
    ("3/12开始咳嗽", None),
])
def test_chinese_readings(text: str, reading: str | None) -> None:
    assert blood_pressure_reading(text, "zh") == reading


def test_a_reading_is_searched_as_what_it_says() -> None:
    assert searched_as("my bp is 160/100", "en") == "high blood pressure"
    assert searched_as("血压85/55", "zh") == "低血压"
    assert searched_as("my blood pressure is 120/80", "en") == ""  # normal: nothing to search
    assert searched_as("a cough", "en") is None


def test_a_slash_cuts_a_piece_unless_it_is_in_a_reading() -> None:
    from medrank.pipelines.symptom.spans import find_spans

    def read(text: str, language: str) -> list[str]:
        return [s.text for s in find_spans(text, None, language)]

    assert read("my blood pressure was 160/100 and I have a headache", "en") == ["high blood pressure", "headache"]
    assert read("my blood pressure is 120/80", "en") == []  # a normal reading is no finding
    assert read("血压150/90mmHg，头晕", "zh") == ["高血压", "头晕"]
    assert read("since 3/12 I have had a cough", "en") == ["since 3", "12 I have had a cough"]


def test_a_whole_complaint_is_searched_with_its_readings_said() -> None:
    from medrank.blood_pressure import with_readings_said

    assert with_readings_said("血压150/90mmHg，头晕", "zh") == "高血压，头晕"
    assert with_readings_said("血压120/80，头晕", "zh") == "，头晕"  # a normal reading says nothing
    assert with_readings_said("my bp was 85/50 and I feel dizzy", "en") == "my low blood pressure and I feel dizzy"
    assert with_readings_said("since 3/12 I have a cough", "en") == "since 3/12 I have a cough"
