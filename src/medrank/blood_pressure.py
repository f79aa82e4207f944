"""A blood-pressure reading in a patient's words, and what it says: high, low, or nothing.

"My blood pressure was 160/100 this morning", "血压150/90": the numbers say whether the pressure is high, which no
vocabulary's wording can (searched as words, "血压150/90mmHg" finds both 低血压 and 高血压). A reading is a systolic and
a diastolic pressure written ``S/D`` beside a word of blood pressure (a systolic from 50 to 300 mmHg above a diastolic
from 20 to 200). The cut-offs are the usual clinical ones: high from 140 systolic or 90 diastolic, low below 90
systolic or 60 diastolic (hypertension and hypotension as the WHO and the ESC guidelines define them on an office
reading). Shared by the symptom pipeline's spans like :mod:`medrank.temperature`.
"""

from __future__ import annotations

import re

_EN_PRESSURE = re.compile(r"\b(?:blood\s+pressure|bp|b\.p\.)\b", re.I)
_ZH_PRESSURE = re.compile(r"血压")
_READING = re.compile(r"(?<![\d.])(\d{2,3})\s*/\s*(\d{2,3})(?![\d.])")
#: mmHg: at or above either, high; below either, low
HIGH_FROM = (140, 90)
LOW_BELOW = (90, 60)
#: what a reading is searched as, by language (a normal one: nothing)
BLOOD_PRESSURE_WORDS = {"en": {"high": "high blood pressure", "low": "low blood pressure", "normal": ""},
                        "zh": {"high": "高血压", "low": "低血压", "normal": ""}}


def blood_pressure_reading(text: str, language: str = "en") -> str | None:
    """What a piece says of the patient's blood pressure: ``"high"``, ``"low"``, ``"normal"``, or None (no reading: no
    word of blood pressure, or no ``S/D`` pair of pressures in range)."""
    if (_ZH_PRESSURE if language == "zh" else _EN_PRESSURE).search(text) is None:
        return None
    for m in _READING.finditer(text):
        systolic, diastolic = int(m.group(1)), int(m.group(2))
        if not (50 <= systolic <= 300 and 20 <= diastolic <= 200 and systolic > diastolic):
            continue
        if systolic >= HIGH_FROM[0] or diastolic >= HIGH_FROM[1]:
            return "high"
        if systolic < LOW_BELOW[0] or diastolic < LOW_BELOW[1]:
            return "low"
        return "normal"
    return None


#: a word of blood pressure, what stands between it and its reading in the same clause, and the reading
_EN_PHRASE = re.compile(r"\b(?:blood\s+pressure|bp|b\.p\.)[^,.;:!?\n]*?(?<![\d.])\d{2,3}\s*/\s*\d{2,3}(?![\d.])"
                        r"(?:\s*mm\s*hg\b)?", re.I)
_ZH_PHRASE = re.compile(r"血压[^，。；：！？,;:!?\n]*?(?<![\d.])\d{2,3}\s*/\s*\d{2,3}(?![\d.])(?:\s*mm\s*hg)?", re.I)


def with_readings_said(text: str, language: str = "en") -> str:
    """``text`` with each blood-pressure reading written as what it says ("血压150/90mmHg，头晕" → "高血压，头晕"; a normal
    reading left out): how a whole complaint is searched, as its pieces are."""
    def said(m: re.Match[str]) -> str:
        words = searched_as(m.group(0), language)
        return m.group(0) if words is None else words

    return (_ZH_PHRASE if language == "zh" else _EN_PHRASE).sub(said, text)


def searched_as(piece: str, language: str = "en") -> str | None:
    """What a piece that holds a blood-pressure reading is searched as ("high blood pressure", "低血压"), "" for a
    normal reading (no finding to search), None when it holds no reading."""
    reading = blood_pressure_reading(piece, language)
    return None if reading is None else BLOOD_PRESSURE_WORDS[language][reading]


def reading_as(piece: str, language: str = "en") -> str | None:
    """What a piece that holds a thermometer's or a cuff's reading is searched as (:func:`medrank.temperature.
    searched_as`, then :func:`searched_as`): the reading's words, "" for a normal reading, None when it holds none."""
    from medrank.temperature import searched_as as temperature_searched_as

    said = temperature_searched_as(piece, language)
    return searched_as(piece, language) if said is None else said
