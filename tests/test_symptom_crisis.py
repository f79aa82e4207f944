"""The crisis probe: clauses, fitting with out-of-fold thresholds, reading, files; the notices it raises."""

from __future__ import annotations

import json

import numpy as np
import pytest

from medrank.pipelines.symptom.crisis import FORMAT, CrisisProbe, clauses, fit, shipped
from medrank.pipelines.symptom.urgent import UrgentSigns

WORDS = ("die", "end", "life", "cough", "fever", "knee", "rash", "tired", "want", "my", "i", "a", "have")


def _encode(texts):
    """Bag of words over a tiny vocabulary (plus a constant so no text is the zero vector)."""
    out = np.zeros((len(texts), len(WORDS) + 1))
    for i, t in enumerate(texts):
        for w in t.lower().replace(",", " ").split():
            if w in WORDS:
                out[i, WORDS.index(w)] += 1
        out[i, -1] = 1
    return out


def test_clauses_are_sentences_and_comma_parts_then_the_whole():
    assert clauses("I have a cough, and I want to die.") == [(0, 14), (16, 33), (0, 34)]
    assert clauses("咳嗽三天，不想活了") == [(0, 4), (5, 9), (0, 9)]
    assert clauses("  just one  ") == [(2, 10)]
    assert clauses("ok") == [(0, 2)] and clauses("   ") == []


def _texts():
    crisis = [f"i want to die {x}" for x in ("now", "today", "tonight", "soon", "really", "honestly")]
    crisis += [f"i want to end my life {x}" for x in ("now", "today", "soon", "please")]
    calm = [f"i have a {x} {y}" for x in ("cough", "fever", "rash", "knee") for y in ("now", "today", "again", "still",
                                                                                        "lately")]
    calm += ["i am tired", "my knee", "a rash and a fever"]
    return crisis + calm, [True] * 10 + [False] * 23


def test_a_fitted_probe_reads_the_clause_that_says_it_and_reloads(tmp_path):
    texts, labels = _texts()
    probe = fit(texts, labels, _encode, encoder="words", language="en", false_alarms=0.0)
    assert probe.fitted["out_of_fold"]["false_alarms"] == 0 and probe.fitted["crisis"] == 10
    p, span = probe.read("I have a cough, and I want to die", _encode)
    assert p >= probe.threshold and span == (16, 33)
    assert probe.read("I have a cough and a fever", _encode)[1] is None
    probe.save(tmp_path / "en.json")
    again = CrisisProbe.load(tmp_path / "en.json")
    assert again.encoder == "words" and again.threshold == pytest.approx(probe.threshold)
    assert np.allclose(again.weights, probe.weights, atol=1e-6)


def test_fit_refuses_what_it_cannot_threshold():
    with pytest.raises(ValueError, match="both kinds"):
        fit(["a", "b"], [True, True], _encode, encoder="words", language="en")
    with pytest.raises(ValueError, match="at least 5"):
        fit(["die", "cough", "fever"], [True, False, False], _encode, encoder="words", language="en")


@pytest.mark.parametrize(("change", "error"), [
    ({"format": "x"}, "format"), ({"weights": []}, "weights"), ({"threshold": 1.5}, "between 0 and 1"),
    ({"bias": "x"}, "bias"), ({"encoder": 3}, "encoder")])
def test_a_wrong_probe_file_is_refused_naming_the_problem(tmp_path, change, error):
    raw = {"format": FORMAT, "encoder": "minilm", "language": "en", "weights": [0.1, 0.2], "bias": 0.0,
           "threshold": 0.5}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({**raw, **change}))
    with pytest.raises(ValueError, match=error):
        CrisisProbe.load(path)
    with pytest.raises(FileNotFoundError):
        CrisisProbe.load(tmp_path / "missing.json")


def test_the_shipped_probes_name_the_served_encoders():
    en, zh = shipped("en"), shipped("zh")
    assert (en.encoder, zh.encoder) == ("minilm", "e5-small") and en.weights.shape == zh.weights.shape == (384,)
    assert 0 < en.threshold < 1 and en.fitted["out_of_fold"]["crisis_raised"] > 0
    assert shipped("fr") is None


def test_a_sign_read_by_another_reader_raises_its_notice_with_where():
    signs = UrgentSigns.load()
    (notice,) = signs.notices([], "en", texts=["I keep a cough"], read=[("self-harm", (2, 6))])
    assert notice.kind == "crisis" and notice.spans == ((2, 6),)
    with pytest.raises(ValueError, match="no urgent sign"):
        signs.notices([], "en", read=[("nothing", (0, 1))])


def test_figures_of_speech_are_blanked_and_denials_read_nothing():
    from medrank.pipelines.symptom.crisis import blank_figurative, denies

    assert blank_figurative("I could kill for a nap") == "I " + " " * 14 + " a nap"
    assert blank_figurative("笑死我了，肚子疼").startswith("    ，")
    assert blank_figurative("this cough is killing me") == "this cough " + " " * 13
    assert blank_figurative("I want to die") == "I want to die"
    assert denies("no thoughts of harming myself") and denies("but not suicidal") and denies("没有自杀的想法")
    assert not denies("no reason to live") and not denies("不想活了") and not denies("I want to hurt myself")
    texts, labels = _texts()
    probe = fit(texts, labels, _encode, encoder="words", language="en", false_alarms=0.0)
    assert probe.read("I have a cough, no thoughts I want to die", _encode)[1] is None


def test_the_threshold_can_be_set_on_some_texts_while_others_only_shape_the_fit():
    texts, labels = _texts()
    replies = ["a bit", "my knee", "i have a rash", "tired", "a fever"]
    marked = [True] * len(texts) + [False] * len(replies)
    probe = fit(texts + replies, labels + [False] * len(replies), _encode, encoder="words", language="en",
                false_alarms=0.0, calibrate_on=marked)
    oof = probe.fitted["out_of_fold"]
    assert oof["calibrated_on"] == 23 and oof["others"] == 5 and oof["false_alarms"] == 0
    with pytest.raises(ValueError, match="calibrate_on"):
        fit(texts, labels, _encode, encoder="words", language="en", calibrate_on=[True] * 10 + [False] * 23)
