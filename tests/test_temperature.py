"""A thermometer's reading in a patient's words (medrank.temperature): hand-checked cases."""

import pytest

from medrank.temperature import temperature_reading


@pytest.mark.parametrize(("text", "reading"), [
    ("my temperature is 38.5", "fever"),
    ("my temp was 102 last night", "fever"),  # Fahrenheit: 38.9 °C
    ("I had 39 degrees", "fever"),
    ("a fever of 37.5", "fever"),  # the cut-off itself is a fever
    ("temperature of 37.4", "normal"),
    ("temperature of 99.4 F", "normal"),  # 37.4 °C
    ("my body temperature is 34.5", "low"),
    ("my temperature is normal", "normal"),
    ("fever for 3 days", None),  # a number of days is no reading
    ("I weigh 102 pounds", None),  # no word of temperature
    ("I am 38", None),
    ("my temperature is fine, I took 1000 mg of paracetamol", None),  # no reading inside a longer number
    ("my temperature was 38.5.", "fever"),  # a sentence's full stop after the number
])
def test_english_readings(text: str, reading: str | None) -> None:
    assert temperature_reading(text, "en") == reading


@pytest.mark.parametrize(("text", "reading"), [
    ("体温38.5度", "fever"),
    ("烧到39度了", "fever"),
    ("38度5", "fever"),  # 38.5, as it is often written
    ("39-40度", "fever"),
    ("体温37度", "normal"),
    ("体温正常", "normal"),
    ("烧了3天", None),
    ("烧伤面积40%", None),
    ("体温385", None),
    ("烧到三十九度多", "fever"),  # in Chinese numerals
    ("三十八度五", "fever"),
    ("三十七点二度", "normal"),
    ("三十多岁", None),
])
def test_chinese_readings(text: str, reading: str | None) -> None:
    assert temperature_reading(text, "zh") == reading
