"""BM25 over :mod:`bm25s`, with English stemming and Chinese jieba / character n-grams.

``add`` re-indexes: BM25's idf depends on the whole corpus, so appending
entries changes every score. Re-indexing 50k short texts takes about a second.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from medrank.index.base import Index, IndexFormatError, register, top_items
from medrank.index.tokenize import LexicalTokenizer, TokenizerConfig
from medrank.index.topk import topk_positive
from medrank.records import Ranking


def _bm25s() -> Any:
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets its logger to DEBUG on import
    return bm25s


BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


@register
class BM25Index(Index):
    """Lexical BM25 index.

    Args:
        language: ``"en"``, ``"zh"`` or ``"auto"`` (per-script).
        zh_mode: ``"char"`` (character uni+bigrams) or ``"jieba"``.
        k1, b, method: BM25 parameters passed to ``bm25s.BM25`` (``method`` one of
            ``"lucene"``, ``"robertson"``, ``"atire"``, ``"bm25l"``, ``"bm25+"``).
    """

    kind: ClassVar[str] = "bm25"

    def __init__(
        self,
        language: str = "auto",
        zh_mode: str = "char",
        k1: float = 1.2,
        b: float = 0.75,
        method: str = "lucene",
        tokenizer: TokenizerConfig | None = None,
    ) -> None:
        super().__init__()
        self.tokenizer_config = tokenizer or TokenizerConfig(language=language, zh_mode=zh_mode)  # type: ignore[arg-type]
        self.tokenizer = LexicalTokenizer(self.tokenizer_config)
        if method not in BM25_METHODS:
            raise ValueError(f"method must be one of {BM25_METHODS}, got {method!r}")
        if not float(k1) >= 0 or not 0 <= float(b) <= 1:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.params = {"k1": float(k1), "b": float(b), "method": method}
        self.retriever: Any = None
        self._items = np.array([], dtype=object)
        self._n_unique = 0

    def _new_retriever(self) -> Any:
        bm25s = _bm25s()

        return bm25s.BM25(**self.params)

    def _build(self) -> None:
        tokens = [self.tokenizer(t) for t in self.entry_texts]
        if not any(tokens):
            raise ValueError("nothing to index: the texts hold no tokens (empty, or stop words only)")
        self.retriever = self._new_retriever()
        self.retriever.index(tokens, show_progress=False)
        self._items = np.array(self.entry_items, dtype=object)
        self._n_unique = len(set(self.entry_items))

    def _add(self, start: int) -> None:
        self._build()

    def query_scores(self, text: str) -> np.ndarray:
        """BM25 score of every entry for one query text (zeros when no query token is indexed)."""
        vocab = self.retriever.vocab_dict
        ids = [vocab[t] for t in self.query_tokens(text) if t in vocab]
        n = len(self.entry_ids)
        if not ids:
            return np.zeros(n, dtype=np.float32)
        return np.asarray(self.retriever.get_scores(ids), dtype=np.float32)[:n]

    def query_tokens(self, text: str) -> list[str]:
        """The tokens a query is scored by: the text's, each English adjective in -y or -ish that the index does not
        hold read as the word it is made from when the index holds that (Snowball stems "thirsty" to "thirsti" and
        "feverish" to "feverish", so a patient's "thirsty", "itchy", "runny" or "feverish" shared no token with
        "Excessive thirst", "Itching", "Runny nose" or "Fever"). A token the index holds is left as it is: it matches
        already."""
        vocab = self.retriever.vocab_dict
        tokens = self.tokenizer(text)
        if all(t in vocab for t in tokens):
            return tokens
        bases = self.tokenizer.adjective_bases(text)
        return [t if t in vocab or t not in bases else next((b for b in bases[t] if b in vocab), t) for t in tokens]

    def _search(self, qids: list[str], texts: list[str], k: int) -> list[Ranking]:
        out = []
        for qid, text in zip(qids, texts, strict=True):
            scores = self.query_scores(text)
            if not scores.any():
                out.append(Ranking(qid, (), ()))
                continue
            depth = min(len(scores), k if self._n_unique == len(self._items) else k * 4)
            while True:
                idx = topk_positive(scores, depth)  # an entry sharing no token with the query is not a match
                ids, sc = top_items(self._items, idx, scores[idx], k)
                if len(ids) == k or depth >= len(scores) or len(idx) < depth:
                    break
                depth = min(len(scores), depth * 4)
            out.append(Ranking(qid, tuple(ids), tuple(sc)))
        return out

    def _save(self, path: Path) -> None:
        self.retriever.save(str(path / "bm25s"), show_progress=False)

    def config(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer_config.to_dict(), "params": self.params}

    @classmethod
    def _from_saved(cls, path: Path, config: dict[str, Any], **kwargs: Any) -> BM25Index:
        bm25s = _bm25s()
        index = cls(tokenizer=TokenizerConfig.from_dict(config["tokenizer"]), **config["params"])
        index.retriever = bm25s.BM25.load(str(path / "bm25s"), show_progress=False, verbosity=0)
        return index

    def _load_entries(self, path: Path) -> None:
        super()._load_entries(path)
        n_docs = int(getattr(self.retriever, "scores", {}).get("num_docs", len(self.entry_ids)))
        if n_docs != len(self.entry_ids):
            raise IndexFormatError(f"{path}: {n_docs} BM25 documents but {len(self.entry_ids)} entries (corrupt index)")
        self._items = np.array(self.entry_items, dtype=object)
        self._n_unique = len(set(self.entry_items))
