"""A thermometer's reading in a patient's words, and what it says: a fever, a low body temperature, or nothing.

"My temp was 102 last night", "烧到39度了", "体温38.5": the number says whether the patient has a fever, which no
vocabulary's wording can (searched as words, "my temperature is 38.5" is nearest Hypothermia, "39度" a 30-39 %
burn). A reading is a number beside a word of temperature, in degrees Celsius (30-45) or Fahrenheit (86-113),
never a number of days, times or kilograms; the cut-offs are the usual clinical ones (a fever from 37.5 °C, 99.5
°F; a low body temperature below 35 °C, 95 °F). Shared by the symptom pipeline's spans and the history pipeline's
finding detectors.
"""

from __future__ import annotations

import re

_EN_TEMPERATURE = re.compile(r"\b(?:temperature|temp|fever|febrile|thermometer|degrees?)\b|°", re.I)
_READING = re.compile(r"(?<![\d.])(\d{2,3}(?:\.\d+)?)(?!\d|\.\d)(?!\s*(?:[-~]\s*\d|%|"
                      r"(?:minutes?|hours?|days?|nights?|weeks?|months?|years?|times?|kg|lbs?|pounds?|cm|ml)\b))", re.I)
# Chinese writes 度 for degrees of severity too (轻度, II度) and numbers teeth and vertebrae (36, 颈34): a reading is a
# number with its unit ("39度", "38度5", "38.5℃") or right after a word of temperature ("体温38.5", "烧到39")
_ZH_READING = re.compile(
    r"(?:体温|温度|发烧|发热|高烧|低烧|高热|低热|烧|热)\s*(?:到|至|了|是|为|在|达)?\s*(?<![\d.])(\d{2}(?:\.\d+)?)(?!\d|\.\d)"
    r"(?:\s*度\s*(\d)(?![\d.]))?"
    r"|(?<![\d.])(\d{2}(?:\.\d+)?)\s*(?:度\s*(\d)(?![\d.])|度|℃|°)")
# written in Chinese numerals: "三十九度", "三十八度五", "三十八点五度" (a unit is needed: 三十 alone is any count)
_ZH_NUMERAL_READING = re.compile(r"([三四])十([一二三四五六七八九])?(?:点([一二三四五六七八九零]))?度([一二三四五六七八九])?")
_ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")}
_NORMAL = re.compile(r"\bnormal\b|正常", re.I)
#: in degrees Celsius: at or above this, a fever; below ``HYPOTHERMIA_BELOW``, a low body temperature (the usual
#: clinical cut-offs: 37.5 °C is 99.5 °F, 35 °C is 95 °F)
FEVER_FROM = 37.5
HYPOTHERMIA_BELOW = 35.0
#: what a reading is searched as, by language (a normal one: nothing)
TEMPERATURE_WORDS = {"en": {"fever": "fever", "low": "low body temperature", "normal": ""},
                     "zh": {"fever": "发热", "low": "低体温", "normal": ""}}


def temperature_reading(text: str, language: str = "en") -> str | None:
    """What a piece says of the patient's temperature: ``"fever"``, ``"low"``, ``"normal"`` (a reading in between,
    or "normal" said of it), None (no reading). Celsius between 30 and 45, Fahrenheit between 86 and 113; a number
    of days, times or kilograms is no reading."""
    if language == "zh":
        numbers = [(m.group(1) or m.group(3), m.group(2) or m.group(4)) for m in _ZH_READING.finditer(text)]
        numbers += [(str(10 * _ZH_DIGITS[m.group(1)] + _ZH_DIGITS.get(m.group(2) or "零", 0)),
                     str(_ZH_DIGITS[m.group(3) or m.group(4)]) if m.group(3) or m.group(4) else None)
                    for m in _ZH_NUMERAL_READING.finditer(text)]
    elif _EN_TEMPERATURE.search(text):
        numbers = [(m.group(1), None) for m in _READING.finditer(text)]
    else:
        return None
    for whole, tenth in numbers:
        value = float(whole) + (float(tenth) / 10 if tenth else 0.0)
        if 86.0 <= value <= 113.0:
            value = (value - 32.0) * 5.0 / 9.0
        if not 30.0 <= value <= 45.0:
            continue
        return "fever" if value >= FEVER_FROM else "low" if value < HYPOTHERMIA_BELOW else "normal"
    if _NORMAL.search(text) and re.search(r"temperature|temp\b|体温", text, re.I):
        return "normal"
    return None


def searched_as(piece: str, language: str = "en") -> str | None:
    """What a piece that holds a thermometer's reading is searched as: the words of what the reading says ("fever",
    "发热", "low body temperature"), "" for a normal reading (no finding to search), None when it holds no reading."""
    reading = temperature_reading(piece, language)
    return None if reading is None else TEMPERATURE_WORDS[language][reading]
