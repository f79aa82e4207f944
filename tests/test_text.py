"""medrank.text: language identification (en / zh / other) and the shared script classes."""

from __future__ import annotations

import pytest

from medrank.text import HAN, HAN_RUN, has_han, identify


@pytest.mark.parametrize("text", ["I have a bad headache and feel sick", "fever and cough for three days",
                                  "Can sun urticaria cause anaphylaxis?", "my chest hurts when I breathe",
                                  "headache", "nausea", "fatigue", "constipation", "abdominal pain", "chest pain",
                                  "headache fever zebra-7731"])
def test_english(text):
    assert identify(text).language == "en"


@pytest.mark.parametrize("text", ["头痛两天", "CT检查后头痛", "宝宝发烧咳嗽三天了", "腹腔镜下胆囊切除术"])
def test_chinese(text):
    assert identify(text).language == "zh"


@pytest.mark.parametrize(("text", "code"), [("J'ai mal à la tête et je me sens malade", "fr"),
                                            ("Ich habe starke Kopfschmerzen und mir ist übel", "de"),
                                            ("j'ai de la fièvre depuis trois jours", "fr"), ("douleur à la poitrine quand je respire", "fr"),
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
