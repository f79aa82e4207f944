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
