"""Characters a tokenizer cannot spell: find them, and give each an id and an embedding row of its own.

Multilingual e5-small (XLM-R's SentencePiece vocabulary) has no piece for 30 characters of the
Chinese procedure data: 颞 (temporal), 桡 (radius), 髂 (ilium), 跖 (metatarsal), 髌 (patella),
跗 (tarsal), 骺, 腘, 钬, 髁, … All of them become the one ``<unk>`` token, so 桡骨骨折切开复位内固定术
and 髌骨骨折切开复位内固定术 are the same token sequence: no model over those tokens can tell the two
names apart (359 of the 9,468 standard names, 47 of the 1,000 val mentions hold such a character).

:func:`unknown_characters` lists the characters of some texts that a tokenizer maps to its unknown
token; :meth:`medrank.encoders.TransformerEncoder.add_characters` adds them as whole tokens with
embedding rows drawn by :func:`sample_embedding_rows` — from a normal distribution with the mean and
covariance of the existing rows (what ``transformers``' ``resize_token_embeddings(mean_resizing=True)``
does, but with the full covariance: ``transformers`` scales it by 1e-9, which makes every new row
almost the mean and leaves the characters nearly as indistinguishable as ``<unk>``). Each row is
seeded by the character's code point, so within one call a character's row does not depend on which
others are drawn with it (a later call reads moments that include the rows added before).

For SentencePiece tokenizers whose pre-tokenizer prefixes every text piece with ``▁``
(``Metaspace(prepend_scheme="always")``), :func:`prefix_first_piece_only` switches it to ``"first"``:
a text is split around added tokens, and with ``"always"`` the piece after 桡 would start with an
extra ``▁`` token; with ``"first"`` a text behind a prompt (e5's ``query: `` / ``passage: ``)
tokenises exactly as before, the ``<unk>`` ids replaced by the new ones (checked on every name and
mention of the procedure data in ``tests/test_vocab.py``'s slow test). A text that *starts* with an
added character, with no prompt before it, loses the leading ``▁`` piece.

Add characters before building models over the encoder: a :class:`~medrank.models.BiEncoder`
fixes its cache key when it is built and refuses to run once the vocabulary has changed under it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


def unknown_characters(tokenizer: Any, texts: Iterable[str]) -> list[str]:
    """The characters of ``texts`` (sorted, no whitespace) that ``tokenizer`` maps to its unknown token."""
    unk = tokenizer.unk_token_id
    if unk is None:
        return []
    chars = sorted({ch for text in texts for ch in text if not ch.isspace()})
    if not chars:
        return []
    ids = tokenizer(chars, add_special_tokens=False)["input_ids"]
    return [ch for ch, row in zip(chars, ids, strict=True) if unk in row]


def prefix_first_piece_only(tokenizer: Any) -> bool:
    """Make a fast tokenizer's ``Metaspace`` pre-tokenizer prefix only a text's first piece; True when changed."""
    from tokenizers import pre_tokenizers

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.pre_tokenizer is None:
        return False
    pre = backend.pre_tokenizer

    def first(p: Any) -> Any:
        if isinstance(p, pre_tokenizers.Metaspace) and p.prepend_scheme == "always":
            return pre_tokenizers.Metaspace(replacement=p.replacement, prepend_scheme="first", split=p.split)
        return p

    if isinstance(pre, pre_tokenizers.Sequence):
        parts: list[Any] = []
        while True:
            try:
                parts.append(pre[len(parts)])
            except IndexError:
                break
        changed = [first(p) for p in parts]
        if all(a is b for a, b in zip(changed, parts, strict=True)):
            return False
        backend.pre_tokenizer = pre_tokenizers.Sequence(changed)
        return True
    new = first(pre)
    if new is pre:
        return False
    backend.pre_tokenizer = new
    return True


def sample_embedding_rows(weight: torch.Tensor, chars: list[str], seed: int = 0, chunk: int = 16384) -> torch.Tensor:
    """``(len(chars), d)`` rows drawn from N(mean, covariance) of ``weight``'s rows, one seeded draw per character."""
    w = weight.detach()
    n, d = w.shape
    total = torch.zeros(d, dtype=torch.float64)
    second = torch.zeros(d, d, dtype=torch.float64)
    for start in range(0, n, chunk):  # float64 moments in chunks: no second copy of a 250k-row table
        block = w[start : start + chunk].to("cpu", torch.float64)
        total += block.sum(0)
        second += block.T @ block
    mean = total / n
    cov = second / n - torch.outer(mean, mean)
    # a tiny ridge keeps the factorisation defined for a rank-deficient table
    factor = torch.linalg.cholesky(cov + 1e-8 * torch.eye(d, dtype=torch.float64) * cov.diagonal().mean())
    rows = []
    for ch in chars:
        gen = torch.Generator().manual_seed(int(seed) * 1_000_003 + ord(ch))
        z = torch.randn(d, generator=gen, dtype=torch.float64)
        rows.append(mean + factor @ z)
    return torch.stack(rows).to(weight.dtype)
