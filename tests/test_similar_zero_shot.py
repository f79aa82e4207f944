"""The zero-shot matcher: a pretrained encoder's cosine re-ranks the recalled candidates (no training)."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.pipelines.similar.retrieval import SimilarQuestionSearcher
from medrank.pipelines.similar.zero_shot import EncoderCosineMatcher


class _Counting:
    """A tiny encoder that counts the texts it encodes."""

    def __init__(self, encoder) -> None:
        self.encoder, self.name, self.texts = encoder, "tiny", 0

    def encode(self, texts, kind=None, **kwargs):
        self.texts += len(texts)
        assert kind == "query"  # a question is a query on both sides (e5's prompt for symmetric tasks)
        return self.encoder.encode(texts, kind=kind, **kwargs)


def test_a_pair_scores_the_cosine_of_its_two_questions(tiny_encoder) -> None:
    enc = _Counting(tiny_encoder)
    matcher = EncoderCosineMatcher(enc)
    pairs = [("what causes headache", "what causes headache"), ("what causes headache", "is cough contagious"),
             ("what causes headache", "how to treat fever")]
    got = matcher.score(pairs)
    v = tiny_encoder.encode(["what causes headache", "is cough contagious", "how to treat fever"], kind="query",
                            show_progress=False)
    assert got.shape == (3,) and got.dtype == np.float32
    np.testing.assert_allclose(got, [1.0, v[0] @ v[1], v[0] @ v[2]], rtol=1e-5, atol=1e-5)
    assert enc.texts == 3  # the question all three pairs share is encoded once
    assert matcher.name == "tiny cosine" and matcher.score([]).shape == (0,)
    with pytest.raises(TypeError, match="encode"):
        EncoderCosineMatcher(object())


def test_the_searcher_orders_its_recalled_candidates_by_the_cosine(tiny_encoder) -> None:
    corpus = ["what causes headache", "how to treat fever", "is cough contagious", "what causes a fever"]
    matcher = EncoderCosineMatcher(tiny_encoder)
    searcher = SimilarQuestionSearcher.build(corpus, matcher, "en")
    query = "what causes fever"
    got = searcher.search(query, k=4)
    recalled = {r.text for r in SimilarQuestionSearcher.build(corpus, None, "en").search(query, k=4)}
    assert {r.text for r in got} == recalled  # the same candidates, BM25's recall
    scores = [r.match_score for r in got]
    assert scores == sorted(scores, reverse=True)
    np.testing.assert_allclose(scores, matcher.score([(query, r.text) for r in got]), rtol=1e-5)


def test_similar_cli_without_a_model_re_ranks_by_the_encoder_unless_told_not_to(tmp_path, monkeypatch,
                                                                                tiny_encoder) -> None:
    import json

    from typer.testing import CliRunner

    import medrank.encoders
    from medrank.cli import app

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(medrank.encoders, "load_encoder", lambda name, **kwargs: tiny_encoder)
    corpus = tmp_path / "questions.txt"
    corpus.write_text("what causes headache\nhow to treat fever\nwhat causes a fever\n", encoding="utf-8")
    runner = CliRunner()
    res = runner.invoke(app, ["similar", "what causes fever", "--corpus", str(corpus), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)[0]["results"]
    assert rows and all(r["match_score"] is not None for r in rows)
    res = runner.invoke(app, ["similar", "what causes fever", "--corpus", str(corpus), "--json", "--no-rerank"])
    assert res.exit_code == 0, res.output
    assert all(r["match_score"] is None for r in json.loads(res.stdout)[0]["results"])


def test_a_cosine_calibration_recovers_a_known_curve_and_reads_as_plain_numbers(tmp_path) -> None:
    from medrank.pipelines.similar.zero_shot import CosineCalibration

    rng = np.random.default_rng(0)
    cos = rng.uniform(0.0, 1.0, 20000)
    labels = (rng.uniform(size=cos.size) < 1 / (1 + np.exp(-(8.0 * cos - 5.0)))).astype(int)
    cal = CosineCalibration.fit(cos, labels, "tiny", "en")
    assert abs(cal.slope - 8.0) < 0.5 and abs(cal.intercept + 5.0) < 0.35
    assert cal.info["pairs"] == 20000 and 0.3 < cal.info["positive_share"] < 0.5
    p = cal.probability([0.0, 0.625, 1.0])
    assert p[0] < p[1] < p[2] and abs(p[1] - 0.5) < 0.05  # 8 · 0.625 - 5 = 0
    cal.save(tmp_path / "c.json")
    again = CosineCalibration.load(tmp_path / "c.json")
    assert again == cal and again.info == cal.info
    with pytest.raises(ValueError, match="both kinds"):
        CosineCalibration.fit([0.1, 0.9], [1, 1], "tiny", "en")
    with pytest.raises(ValueError, match="not a cosine calibration"):
        CosineCalibration.from_json({"format": "something else"})
    with pytest.raises(ValueError, match="malformed"):
        CosineCalibration.from_json({"format": "medrank-similar-cosine-calibration", "encoder": "tiny", "language": "en"})
    with pytest.raises(ValueError, match="finite"):
        CosineCalibration("tiny", "en", float("nan"), 0.0)


def test_the_searcher_reads_the_score_that_orders_its_list_as_a_probability(tiny_encoder) -> None:
    from medrank.pipelines.similar.zero_shot import CosineCalibration

    corpus = ["what causes headache", "how to treat fever", "is cough contagious", "what causes a fever"]
    cal = CosineCalibration("tiny", "en", 4.0, -2.0)
    reranked = SimilarQuestionSearcher.build(corpus, EncoderCosineMatcher(tiny_encoder), "en")
    reranked.calibration = cal
    got = reranked.search("what causes fever", k=4)
    np.testing.assert_allclose([r.probability for r in got], 1 / (1 + np.exp(-(4.0 * np.array([r.match_score for r in got]) - 2.0))),
                               rtol=1e-6)
    assert got[0].to_dict()["probability"] == round(got[0].probability, 4)
    # without a calibration, or for a list in BM25's order with none given, there is no probability
    plain = SimilarQuestionSearcher.build(corpus, None, "en").search("what causes fever", k=4)
    assert all(r.probability is None and r.to_dict()["probability"] is None for r in plain)
    with pytest.raises(TypeError, match="probability"):
        SimilarQuestionSearcher(reranked.index, None, 20, calibration=object())


def test_the_shipped_calibrations_are_for_the_served_encoders_only() -> None:
    from medrank.pipelines.similar.zero_shot import shipped_cosine_calibration

    for language, encoder in (("en", "minilm"), ("zh", "e5-small")):
        cal = shipped_cosine_calibration(language, encoder)
        assert cal is not None and cal.slope > 0 and cal.info["pairs"] > 1000
        assert cal.probability([0.99])[0] > cal.probability([0.5])[0]
    assert shipped_cosine_calibration("en", "tiny") is None and shipped_cosine_calibration("fr", "minilm") is None
