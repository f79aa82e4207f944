"""QueryMemo (medrank.encoders.memo): query vectors answered from memory, passages encoded as before."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.encoders import QueryMemo, remembering_queries


class CountingEncoder:
    name, dim, backend = "counting", 3, "torch"

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[str]]] = []

    def encode(self, texts, kind=None, batch_size=64, show_progress=None):
        self.calls.append((kind, list(texts)))
        return np.array([[len(t), 1.0, 0.0 if kind == "query" else 1.0] for t in texts], dtype=np.float32)

    def spec(self):
        return {"name": self.name}


def test_a_query_is_encoded_once_and_the_oldest_is_forgotten() -> None:
    inner = CountingEncoder()
    memo = QueryMemo(inner, size=2)
    first = memo.encode(["ab", "abc"], kind="query")
    again = memo.encode(["abc", "ab"], kind="query")
    assert inner.calls == [("query", ["ab", "abc"])]
    assert np.array_equal(again, first[::-1])
    memo.encode(["abcd"], kind="query")  # "abc" (least recently used) goes
    memo.encode(["ab", "abcd", "abc"], kind="query")
    assert inner.calls[-1] == ("query", ["abc"])
    assert memo.encode("ab", kind="query").shape == (3,)  # one text, one vector, as any encoder


def test_a_symmetric_encoder_shares_a_texts_vector_between_kinds_and_an_asymmetric_one_does_not() -> None:
    inner = CountingEncoder()  # no prompts: a query and a passage of one text are one vector
    memo = remembering_queries(inner)
    memo.encode(["x"], kind="passage")
    memo.encode(["x"], kind="query")
    memo.encode(["x"], kind="passage")
    assert [c[0] for c in inner.calls] == ["passage"]
    e5 = CountingEncoder()
    e5.query_prompt, e5.passage_prompt = "query: ", "passage: "
    memo5 = remembering_queries(e5)
    memo5.encode(["x"], kind="passage")
    memo5.encode(["x"], kind="query")
    memo5.encode(["x"], kind="query")
    assert [c[0] for c in e5.calls] == ["passage", "query"]
    assert remembering_queries(memo) is memo and memo.dim == 3 and memo.spec() == {"name": "counting"}
    with pytest.raises(ValueError, match="size"):
        QueryMemo(inner, size=0)
