"""The trained self-report model: word context, folds, threshold, fitting, storage; one-character lexicon spans."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.pipelines.symptom.lexicon import DxyRecord, SurfaceLexicon
from medrank.pipelines.symptom.self_report import (
    STACK_FEATURES,
    SelfReportModel,
    _feature_mask,
    best_threshold,
    folds,
    mentions,
)
from medrank.pipelines.symptom.sets import SymptomTextError
from medrank.pipelines.symptom.spans import find_spans


def test_one_character_lexicon_words_are_spans() -> None:
    lex = SurfaceLexicon({"吐": "呕吐", "发烧": "发烧"})
    spans = find_spans("喝了水也吐了，发烧", lex, "zh")
    assert [(s.text, s.normalised) for s in spans if s.normalised] == [("吐", "呕吐"), ("发烧", "发烧")]
    assert "了" not in [s.text for s in spans]  # a one-character piece between words is still dropped


def test_mentions_carry_context_negation_and_questions() -> None:
    lex = SurfaceLexicon({"发烧": "发烧", "咳嗽": "咳嗽", "过敏": "过敏"})
    found = mentions("孩子不发烧，有点咳嗽，是过敏吗？", lex)
    assert [(m.form, m.name, m.negated) for m in found] == [("发烧", "发烧", True), ("咳嗽", "咳嗽", False),
                                                            ("过敏", "过敏", False)]
    fever, cough, allergy = found
    assert fever.context["negation=不"] == 1.0 and fever.context["left1=不"] == 1.0
    assert cough.context["question"] == 0.0 and cough.context["left2=有点"] == 1.0
    assert allergy.context["question"] == 1.0  # the clause asks
    assert (cough.start, cough.end) == (8, 10)


def test_folds_are_disjoint_and_cover_every_index() -> None:
    fs = folds(11, 3, seed=5)
    assert sorted(i for f in fs for i in f) == list(range(11))
    assert [len(f) for f in fs] == [4, 4, 3]
    assert fs == folds(11, 3, seed=5)


def test_best_threshold_by_hand() -> None:
    names = ["a", "b"]
    p = np.array([[0.9, 0.3], [0.6, 0.1]])
    gold = [{"a", "b"}, set()]
    # t <= 0.3: 3 predicted, 2 right, 2 gold -> F1 0.8; 0.3 < t <= 0.6: {a},{a} -> P 1/2 R 1/2 F1 0.5;
    # 0.6 < t <= 0.9: {a} -> P 1 R 1/2 F1 2/3
    t, f1 = best_threshold(p, gold, names, grid=[0.2, 0.5, 0.7])
    assert t == 0.2 and f1 == pytest.approx(0.8)
    t, f1 = best_threshold(p, gold, names, grid=[0.5, 0.7])
    assert t == 0.7 and f1 == pytest.approx(2 / 3)


def test_feature_mask_leaves_out_the_parts_not_used() -> None:
    mask = _feature_mask(("lexicon", "position"))
    off = {f for f, m in zip(STACK_FEATURES, mask, strict=True) if m == 0.0}
    assert off == {"context_probability", "context_log", "ngram_probability", "ngram_logit"}
    assert _feature_mask(("lexicon", "context", "ngrams", "position")).all()


def _records() -> list[DxyRecord]:
    base = [
        ("宝宝发烧两天，有点咳嗽", ("发烧", "咳嗽"), ("发烧", "咳嗽")),
        ("一直流鼻涕，咳嗽", ("鼻涕", "咳嗽"), ("流涕", "咳嗽")),
        ("孩子不发烧，流鼻涕", ("鼻涕",), ("流涕",)),
        ("发烧，流鼻涕", ("发烧", "鼻涕"), ("发烧", "流涕")),
        ("咳嗽三天，没有发烧", ("咳嗽",), ("咳嗽",)),
        ("昨晚发烧，今天咳嗽", ("发烧", "咳嗽"), ("发烧", "咳嗽")),
    ]
    return [DxyRecord(t, o, e) for t, o, e in base * 2]


def test_model_fits_decides_and_round_trips(tmp_path) -> None:
    names = ["发烧", "咳嗽", "流涕"]
    model = SelfReportModel.fit(_records(), names, inner_folds=3)
    assert model.lexicon.normalise("鼻涕") == "流涕"
    assert model.predict(["宝宝发烧，流鼻涕"]) == [{"发烧", "流涕"}]
    assert model.predict(["孩子不发烧，咳嗽"]) == [{"咳嗽"}]  # the negated word is not stated
    s = model.detect("宝宝发烧，流鼻涕")
    assert [t.probability for t in s.terms] == sorted((t.probability for t in s.terms), reverse=True)
    assert {t.name: t.span for t in s.terms} == {"发烧": (2, 4), "流涕": (6, 8)}  # the word written: 鼻涕
    assert all(0.0 <= t.probability <= 1.0 for t in s.terms + s.alternatives)
    assert [t.name for t in s.alternatives] == ["咳嗽"]
    path = tmp_path / "model.json"
    model.save(path)
    again = SelfReportModel.load(path)
    np.testing.assert_allclose(again.probabilities(["宝宝发烧，流鼻涕"]), model.probabilities(["宝宝发烧，流鼻涕"]),
                               atol=1e-6)
    with pytest.raises(SymptomTextError):
        model.detect("")
    with pytest.raises(ValueError):
        SelfReportModel.fit(_records()[:2], names, inner_folds=3)
    with pytest.raises(ValueError):
        SelfReportModel.fit(_records(), names, parts_used=("ngrams",))


def test_model_with_character_ngrams_round_trips(tmp_path) -> None:
    names = ["发烧", "咳嗽", "流涕"]
    model = SelfReportModel.fit(_records(), names, inner_folds=3, parts_used=("lexicon", "ngrams", "position"))
    assert model.ngrams.vocabulary and model.ngrams.coef.shape == (3, len(model.ngrams.vocabulary))
    p = model.probabilities(["宝宝发烧，流鼻涕", "咳嗽"])
    assert p.shape == (2, 3) and ((p >= 0) & (p <= 1)).all()
    model.save(tmp_path / "m.json")
    np.testing.assert_allclose(SelfReportModel.load(tmp_path / "m.json").probabilities(["咳嗽"]), p[1:], atol=1e-5)
    without = SelfReportModel.fit(_records(), names, inner_folds=3)
    assert not without.ngrams.vocabulary  # the default parts fit no n-gram model



def test_a_given_lexicon_is_used_instead_of_mining_one() -> None:
    # the records never write 流清涕; a lexicon that knows it (mined from more reports, or curated) is used as given
    names = ["发烧", "咳嗽", "流涕"]
    given = SurfaceLexicon({"发烧": "发烧", "咳嗽": "咳嗽", "鼻涕": "流涕", "流清涕": "流涕"})
    mined = SelfReportModel.fit(_records(), names, inner_folds=3)
    model = SelfReportModel.fit(_records(), names, inner_folds=3, lexicon=given)
    assert mined.lexicon.normalise("流清涕") is None and model.lexicon is given
    assert model.info["lexicon_settings"] == "given"
    assert "流涕" in model.predict(["宝宝发烧，流清涕"])[0]


def test_detect_cli_reads_a_saved_self_report_model_and_the_dxy_alias(tmp_path, monkeypatch) -> None:
    import json

    from typer.testing import CliRunner

    from medrank.cli import app

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "model.json"
    SelfReportModel.fit(_records(), ["发烧", "咳嗽", "流涕"], inner_folds=3).save(path)
    runner = CliRunner()
    res = runner.invoke(app, ["detect", "--model", str(path), "--json", "宝宝发烧，流鼻涕", "I have a fever"])
    assert res.exit_code == 1, res.output  # the English complaint is reported, not detected
    first, second = json.loads(res.stdout)
    assert {t["name"]: t["words"] for t in first["terms"]} == {"发烧": "发烧", "流涕": "鼻涕"}  # the form it mined
    assert "reads as English" in second["error"]
    res = runner.invoke(app, ["detect", "--model", str(path), "--ranking", "宝宝发烧"])
    assert res.exit_code != 0 and "decides the set with its own fitted threshold" in res.output
    # 'dxy': the model fitted on the DXY folder of the data root (here a small one laid out like dxy-dialog)
    folder = tmp_path / "data" / "dxy-dialog"
    folder.mkdir(parents=True)
    rows = [{"consult_id": str(i), "self_repo": r.report, "dialog": [r.report],
             "goal": {"origin_inform_slots": list(r.origin), "explicit_inform_slots": {n: True for n in r.explicit}}}
            for i, r in enumerate(_records())]
    (folder / "dxy_dialog_data_dialog_v2.txt").write_text(f"train@{rows!r}", encoding="utf-8")
    (folder / "symptoms_dxy.txt").write_text("发烧\n咳嗽\n流涕\n", encoding="utf-8")
    res = runner.invoke(app, ["--data", str(tmp_path / "data"), "detect", "--model", "dxy", "--json", "孩子咳嗽，流鼻涕"])
    assert res.exit_code == 0, res.output
    assert {t["name"] for t in json.loads(res.stdout)[0]["terms"]} == {"咳嗽", "流涕"}
