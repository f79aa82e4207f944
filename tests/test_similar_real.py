"""Real-data checks of the question-pair loaders, splits and corpora (``make test-slow``)."""

from __future__ import annotations

import pytest

from medrank.data.questions import load_question_pairs, question_groups, split_pairs, unique_questions

pytestmark = pytest.mark.slow

COUNTS = {"chip-sts": (16000, 8011), "kuake-qqr": (15000, 3451), "medical-question-pairs": (2488, 1244), "rqe": (8587, 4654)}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_real_pair_datasets_and_leak_free_splits(real_data, name):
    if not (real_data / name).is_dir():
        pytest.skip(f"{name} not under {real_data}")
    pairs = load_question_pairs(name, real_data)
    assert (len(pairs), sum(p.label for p in pairs)) == COUNTS[name]
    train, valid, dropped = split_pairs(pairs, 0.2, 13)
    assert not set(unique_questions(train)) & set(unique_questions(valid))
    assert len(train) + len(valid) + len(dropped) == len(pairs)
    assert 0.19 * len(pairs) <= len(valid) <= 0.21 * len(pairs) or name == "rqe"
    if name == "chip-sts":
        assert (len(train), len(valid), len(dropped)) == (12800, 3200, 0)
        assert len(question_groups(train)) == 4691


def test_real_corpora(real_data):
    from medrank.pipelines.similar.corpus import language_corpus

    for name in ("chip-sts", "kuake-qqr", "medical-question-pairs", "rqe", "medquad"):
        if not (real_data / name).is_dir():
            pytest.skip(f"{name} not under {real_data}")
    assert len(language_corpus("zh", real_data)) == 35491
    assert len(language_corpus("en", real_data)) >= 50000
