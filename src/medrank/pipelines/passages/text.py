"""Documents as sentence sequences with structural flags (the CDV document encoder's input).

Each passage is split into sentences: list items (``" - "`` separated, as in
the CDV reader, which turns ``" - "`` into a new line) are their own
sentences, the rest is split after ``.``/``!``/``?`` followed by an upper-case
letter, a digit or an opening bracket, and any sentence longer than
``max_tokens`` words is cut into ``max_tokens``-word pieces so no text is lost
(the paper's ≤ 96 tokens per sentence).

Every sentence carries five structural flags — begin/end of document,
begin/end of paragraph (= passage), list item — which the paper appends to the
sentence embedding.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from medrank.records import Document

FLAG_NAMES = ("doc_begin", "doc_end", "par_begin", "par_end", "list_item")

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9(\[\"'])")
_LIST_SEP = re.compile(r"\s+-\s+")
_WORDS = re.compile(r"\S+")


def split_sentences(text: str, max_tokens: int = 96) -> list[tuple[str, bool]]:
    """``(sentence, is_list_item)`` pairs of one passage, in order."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    out: list[tuple[str, bool]] = []
    pieces = _LIST_SEP.split(text.strip())
    for i, piece in enumerate(pieces):
        piece = piece.strip()
        if not piece:
            continue
        is_item = i > 0 or text.lstrip().startswith("- ")
        if piece.startswith("- "):
            piece = piece[2:].strip()
        for sent in _SENT_END.split(piece):
            sent = sent.strip()
            if not sent:
                continue
            words = _WORDS.findall(sent)
            for start in range(0, len(words), max_tokens):
                out.append((" ".join(words[start : start + max_tokens]), is_item))
    return out


@dataclass
class SentenceTable:
    """All sentences of a list of documents, flattened in document → passage → sentence order.

    ``passage_offsets[j]`` is the first sentence of passage ``j`` (length
    ``n_passages + 1``), ``doc_offsets[i]`` the first sentence of document ``i``
    and ``doc_passage_offsets[i]`` its first passage.
    """

    texts: list[str]
    flags: np.ndarray  # (n_sentences, 5) float32
    passage_ids: list[str]
    passage_offsets: np.ndarray  # (n_passages + 1,) int64
    doc_ids: list[str]
    doc_offsets: np.ndarray  # (n_docs + 1,) int64
    doc_passage_offsets: np.ndarray  # (n_docs + 1,) int64

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def sentence_passage(self) -> np.ndarray:
        """Passage index of every sentence."""
        counts = np.diff(self.passage_offsets)
        return np.repeat(np.arange(len(counts)), counts)

    def doc_slice(self, i: int) -> slice:
        return slice(int(self.doc_offsets[i]), int(self.doc_offsets[i + 1]))


def build_sentence_table(documents: Sequence[Document], max_tokens: int = 96) -> SentenceTable:
    """Split every passage of ``documents`` into sentences with structural flags."""
    texts: list[str] = []
    flags: list[list[float]] = []
    passage_ids: list[str] = []
    passage_offsets = [0]
    doc_offsets = [0]
    doc_passage_offsets = [0]
    for doc in documents:
        doc_start = len(texts)
        for p in doc.passages:
            sents = split_sentences(p.text, max_tokens) or [(p.text.strip()[:1000] or ".", False)]
            for j, (s, is_item) in enumerate(sents):
                texts.append(s)
                flags.append([0.0, 0.0, float(j == 0), float(j == len(sents) - 1), float(is_item)])
            passage_ids.append(p.id)
            passage_offsets.append(len(texts))
        if len(texts) > doc_start:
            flags[doc_start][0] = 1.0
            flags[-1][1] = 1.0
        doc_offsets.append(len(texts))
        doc_passage_offsets.append(len(passage_ids))
    return SentenceTable(
        texts=texts,
        flags=np.asarray(flags, dtype=np.float32).reshape(-1, len(FLAG_NAMES)),
        passage_ids=passage_ids,
        passage_offsets=np.asarray(passage_offsets, dtype=np.int64),
        doc_ids=[d.id for d in documents],
        doc_offsets=np.asarray(doc_offsets, dtype=np.int64),
        doc_passage_offsets=np.asarray(doc_passage_offsets, dtype=np.int64),
    )
