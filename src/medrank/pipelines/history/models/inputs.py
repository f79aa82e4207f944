"""Token-level input construction shared by the history re-rankers (dialogue truncated from its start)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from medrank.records import require_text


def check_score_inputs(dialogue: str, questions: Sequence[str]) -> list[str]:
    """The candidate questions as a list, or a clear error (the one check every re-ranker's ``score`` runs).

    The dialogue may be empty (the opening question of a consultation has no context yet) but must
    be a string; there must be at least one candidate, and each must be a string with some text.
    """
    if not isinstance(dialogue, str):
        raise TypeError(f"the dialogue must be a string, got {type(dialogue).__name__}")
    if isinstance(questions, str):
        raise TypeError("questions must be a sequence of strings, not one string")
    out = list(questions)
    if not out:
        raise ValueError("a sample needs at least one candidate question")
    return [require_text(q, f"candidate question {i}") for i, q in enumerate(out)]


def special_ids(tokenizer: Any) -> tuple[int, int, int, int]:
    """``(cls, sep, mask, pad)`` ids, with a clear error for tokenizers that lack one."""
    ids = (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id, tokenizer.pad_token_id)
    if any(i is None for i in ids):
        raise ValueError("the tokenizer needs [CLS], [SEP], [MASK] and [PAD] tokens (a BERT-style tokenizer)")
    return ids  # type: ignore[return-value]


def dialogue_tail_ids(tokenizer: Any, text: str, max_tokens: int) -> list[int]:
    """Word-piece ids of the dialogue's **last** ``max_tokens`` tokens (the oldest turns are dropped)."""
    if max_tokens < 1:
        raise ValueError(f"max_dialogue_tokens must be >= 1, got {max_tokens}")
    ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]  # long dialogues are expected
    return list(ids[-max_tokens:])


def question_ids(tokenizer: Any, texts: Sequence[str], max_tokens: int) -> list[list[int]]:
    """Word-piece ids of each candidate question, cut at ``max_tokens``."""
    if not texts:
        return []
    return [list(ids[:max_tokens]) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
