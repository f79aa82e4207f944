"""The Chinese complaints that showed the ranking-only /symptoms wrong, on the 41 DXY symptom names: the
self-report model fitted on the visible DXY dialogues (slow: real data)."""

from __future__ import annotations

from functools import cache

import pytest

pytestmark = pytest.mark.slow


@cache
def _model():
    from medrank.pipelines.symptom.self_report import dxy_self_report_model

    try:
        return dxy_self_report_model(cache=False)
    except FileNotFoundError as exc:  # no DXY data in this checkout
        pytest.skip(f"DXY dialogues not found: {exc}")


def _decided(text: str) -> dict[str, tuple[int, int] | None]:
    return {t.name: t.span for t in _model().detect(text).terms}


def test_headache_and_fever_for_two_days() -> None:
    assert _decided("头痛发烧两天") == {"头痛": (0, 2), "发烧": (2, 4)}


def test_child_coughing_runny_nose_fever() -> None:
    assert _decided("宝宝咳嗽流鼻涕，昨晚发烧") == {"咳嗽": (2, 4), "流涕": (4, 7), "发烧": (10, 12)}


def test_tummy_ache_and_diarrhoea() -> None:
    assert _decided("肚子疼拉肚子") == {"腹痛": (0, 3), "稀便": (3, 6)}


def test_a_negated_fever_is_not_decided() -> None:
    decided = _decided("孩子不发烧，一直咳嗽")
    assert "发烧" not in decided and "咳嗽" in decided
