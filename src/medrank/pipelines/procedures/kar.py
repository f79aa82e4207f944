"""KAR, the keyword-attentive ranker: a cross-encoder whose [PS] / [PT] tokens see only keywords.

The paper's input is ``[CLS] [PS] [PT] mention [SEP] candidate [SEP]``; [PS] may attend only to
procedure-*site* tokens (``keywords/body.txt``) and [PT] only to procedure-*type* tokens
(``keywords/ot.txt``) of both texts, [CLS] attends to everything; the mean of the three output
states goes through an FFN to one logit (sigmoid = match probability, BCE loss).

**Keyword masks.** :class:`KeywordMatcher` finds keywords by greedy left-to-right *longest*
match over characters; :func:`token_keyword_flags` maps those character spans to tokens through
the fast tokenizer's ``offset_mapping`` (a token is a keyword token when its span overlaps a
keyword span); :func:`kar_attention_mask` builds the ``(n, 1, L, L)`` mask.

**CPU recipe (the deviation to know about).** A cross-encoder cannot cache anything: every
(mention, candidate) pair is new input, so training on 10 candidates × 3.6k mentions and the
50 ms latency bar are both out of reach for a 12-layer encoder on one CPU thread. This KAR
shares MTCG's frozen bottom instead: the first ``n_frozen`` blocks read the mention and the
candidate *separately* (both are cached; every standard name is cached once for good), and
only the top blocks — a trainable copy of the base model's (or, ``kar_init: mtcg``, of MTCG's
trained) top blocks — read the joint sequence

    [CLS] [PS] [PT]  ⊕  bottom(query: mention)  ⊕  bottom(passage: candidate)

under the keyword mask. [CLS] / [PS] / [PT] therefore enter at the top block as learned vectors
(the mean of both texts' bottom token states plus a learned offset each) rather than as vocabulary tokens
run through the frozen bottom, and a learned segment vector marks the candidate's states. With
``n_frozen = 0`` (``train_layers`` = all blocks) and ``interaction="none"`` this is the paper's
full cross-encoder. The CPU recipe's head also reads MTCG's two embeddings
(``interaction="recall"``, see :class:`KeywordAttentiveRanker`). KAR may also have more joint
blocks than MTCG trains (``kar_train_layers``, :func:`kar_bottom_for`): it then reads its own,
shallower cached bottom, and the blocks between run once more per pair. Or fewer: KAR then reads
MTCG's own first blocks (trained by MTCG, frozen for KAR) and joins the two texts only in its last
few, so over an MTCG that trains every block (the paper's depth) the 50 ms path survives.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from medrank.encoders.base import TextKind
from medrank.encoders.blocks import encoder_blocks, eval_mode
from medrank.models import BiEncoder

N_SPECIAL = 3  # [CLS], [PS], [PT]
INTERACTIONS = ("none", "tokens", "recall")
MENTION_FLAG_CACHE = 4096  # mentions whose keyword flags are kept (training re-reads each mention every epoch)
CLS, PS, PT = 0, 1, 2
WEIGHTS = "kar.safetensors"
SPEC = "kar.json"


class KeywordMatcher:
    """Greedy left-to-right longest-match keyword finder over characters."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = frozenset(w for w in words if w)
        if not self.words:
            raise ValueError("KeywordMatcher needs at least one keyword")
        self.lengths = sorted({len(w) for w in self.words}, reverse=True)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Non-overlapping ``[start, end)`` character spans of keywords, longest match first at each position."""
        out, i = [], 0
        while i < len(text):
            for n in self.lengths:
                if i + n <= len(text) and text[i : i + n] in self.words:
                    out.append((i, i + n))
                    i += n
                    break
            else:
                i += 1
        return out

    def find(self, text: str) -> list[str]:
        return [text[s:e] for s, e in self.spans(text)]


def token_keyword_flags(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]], shift: int = 0) -> np.ndarray:
    """``(L,)`` bool: token ``i`` overlaps a keyword span (spans shifted by ``shift`` characters, e.g. a prompt).

    Special tokens have the empty offset ``(0, 0)`` and are never keyword tokens.
    """
    flags = np.zeros(len(offsets), dtype=bool)
    for i, (s, e) in enumerate(offsets):
        if e <= s:
            continue
        for ks, ke in spans:
            if s < ke + shift and ks + shift < e:
                flags[i] = True
                break
    return flags


def kar_attention_mask(key_valid: torch.Tensor, site: torch.Tensor, type_: torch.Tensor) -> torch.Tensor:
    """The KAR attention mask ``(n, 1, L, L)`` (True = may attend) over ``[CLS] [PS] [PT] tokens...``.

    Args:
        key_valid: ``(n, L)`` bool, real (non-padding) positions; positions 0-2 are [CLS]/[PS]/[PT].
        site / type_: ``(n, L)`` bool, site / type keyword tokens (of both texts).

    Every position attends to every real position, except [PS] (only itself and site tokens) and
    [PT] (only itself and type tokens). A padding row attends to every real position (its output
    is never read, and a row with no allowed key would give NaN).
    """
    if key_valid.shape != site.shape or key_valid.shape != type_.shape or key_valid.ndim != 2:
        raise ValueError(f"key_valid, site, type_ must share a (n, L) shape, got {key_valid.shape}, {site.shape}, {type_.shape}")
    if key_valid.shape[1] < N_SPECIAL:
        raise ValueError("the sequence must start with [CLS] [PS] [PT]")
    n, length = key_valid.shape
    mask = key_valid[:, None, :].expand(n, length, length).clone()
    eye = torch.zeros(length, dtype=torch.bool, device=key_valid.device)
    ps_self, pt_self = eye.clone(), eye.clone()
    ps_self[PS], pt_self[PT] = True, True
    mask[:, PS, :] = (site & key_valid) | ps_self
    mask[:, PT, :] = (type_ & key_valid) | pt_self
    return mask[:, None]


def special_rows_block(block: nn.Module, hidden: torch.Tensor, mask: torch.Tensor, rows: int = N_SPECIAL) -> torch.Tensor:
    """A BERT block's output at the first ``rows`` positions only: ``(n, rows, d)``.

    KAR reads only [CLS]/[PS]/[PT] from its last block, so that block needs keys and values
    for every position but queries, the attention output and the feed-forward for three
    positions — about a fifth of a full block. Same arithmetic as ``block(hidden, mask)[:, :rows]``
    (``tests/test_procedures.py`` checks it); ``mask`` is the bool ``(n, 1, L, L)`` KAR mask.
    """
    sa = block.attention.self
    n, length, d = hidden.shape
    head = sa.attention_head_size
    heads = sa.query.out_features // head
    q_in = hidden[:, :rows]
    q = sa.query(q_in).view(n, rows, heads, head).transpose(1, 2)
    k = sa.key(hidden).view(n, length, heads, head).transpose(1, 2)
    v = sa.value(hidden).view(n, length, heads, head).transpose(1, 2)
    attn = nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask[:, :, :rows, :], dropout_p=sa.dropout.p if sa.training else 0.0, scale=sa.scaling
    )
    attn = attn.transpose(1, 2).reshape(n, rows, heads * head)
    return block.feed_forward_chunk(block.attention.output(attn, q_in))


def packed_block(
    block: nn.Module, hidden: torch.Tensor, valid: torch.Tensor, mask: torch.Tensor, shared: tuple[int, int] | None = None
) -> torch.Tensor:
    """A BERT block over ``(n, L, d)`` whose linear layers see only the ``valid`` positions.

    Same arithmetic as ``block(hidden, mask)`` at every valid position (``tests/test_procedures.py``
    checks it); padded positions come out as zeros, which is safe because the KAR mask never lets a
    query read a padded key. The Q/K/V projections and the feed-forward (most of a block's time on
    CPU) run on the packed ``(T, d)`` real rows; only the attention itself uses the padded layout.
    KAR's joint sequences ``[CLS] [PS] [PT] mention candidate`` of one mention's candidates are
    padded to the longest candidate, so part of every batch is padding.

    Args:
        valid: ``(n, L)`` bool, real positions. mask: the bool ``(n, 1, L, L)`` KAR mask.
        shared: ``(start, end)`` when positions ``start:end`` hold the same states in every row
            (one mention against its ``k_c`` candidates): their Q/K/V are projected once, from
            row 0, and broadcast — the attention and everything after it still run per row.
    """
    sa = block.attention.self
    n, length, d = hidden.shape
    head = sa.attention_head_size
    heads = sa.query.out_features // head
    idx = valid.reshape(-1).nonzero().squeeze(1)
    x = hidden.reshape(n * length, d).index_select(0, idx)
    proj_idx, proj_x = idx, x
    if shared is not None and n > 1:
        start, end = shared
        if not bool(valid[:, start:end].all()):
            raise ValueError("shared positions must be real (valid) in every row")
        repeat = torch.zeros((n, length), dtype=torch.bool, device=valid.device)
        repeat[1:, start:end] = True
        keep = valid & ~repeat
        proj_idx = keep.reshape(-1).nonzero().squeeze(1)
        proj_x = hidden.reshape(n * length, d).index_select(0, proj_idx)

    def padded(t: torch.Tensor) -> torch.Tensor:
        full = t.new_zeros((n * length, t.shape[1])).index_copy(0, proj_idx, t).view(n, length, heads, head)
        if proj_idx is not idx:
            full[1:, shared[0] : shared[1]] = full[:1, shared[0] : shared[1]]
        return full.transpose(1, 2)

    attn = nn.functional.scaled_dot_product_attention(
        padded(sa.query(proj_x)), padded(sa.key(proj_x)), padded(sa.value(proj_x)),
        attn_mask=mask, dropout_p=sa.dropout.p if sa.training else 0.0, scale=sa.scaling,
    )
    attn = attn.transpose(1, 2).reshape(n * length, heads * head).index_select(0, idx)
    out = block.feed_forward_chunk(block.attention.output(attn, x))
    return hidden.new_zeros((n * length, d)).index_copy(0, idx, out).view(n, length, d)


def kar_bottom_for(mtcg: Any, train_layers: int | None, trained_key: str | None = None) -> BiEncoder:
    """The frozen bottom KAR reads: MTCG's own (shared cache), a shallower one, or a deeper one.

    ``train_layers`` is KAR's number of joint blocks; ``None`` or MTCG's own count shares MTCG's
    :class:`BiEncoder` (one cache for both). A larger count gives KAR its own bottom over the same
    base encoder, ending ``train_layers`` blocks below the top, with its own cache (the cache key
    holds the depth). The base blocks are shared, not copied: MTCG trains only its top blocks.

    A KAR with fewer joint blocks than MTCG trains reads MTCG's own *trained* bottom: its first
    ``n_blocks - train_layers`` blocks, frozen for KAR. An MTCG that trains every block (the paper's
    depth) then keeps it for recall while KAR stays a few joint blocks over cached name states (the
    latency path), and in ``normalize_one`` one mention pass serves both (MTCG continues from KAR's
    states, :meth:`MTCG.mention_forward` ``start``). ``trained_key`` (``MTCG.weights_digest``, from
    :func:`~medrank.pipelines.procedures.mtcg.read_weights`) files the cached name states under
    those trained weights, and the saved KAR is tied to them.
    """
    bi = mtcg.bi
    if train_layers is None or train_layers == len(encoder_blocks(bi.encoder.model)) - bi.n_frozen:
        return bi
    shallower = train_layers < len(encoder_blocks(bi.encoder.model)) - bi.n_frozen
    if shallower and trained_key is None:
        raise ValueError(
            f"KAR's joint blocks ({train_layers}) are fewer than MTCG's trained blocks: its bottom holds trained "
            "blocks, so it needs trained_key (the digest of MTCG's weights) for its cache"
        )
    flags = [p.requires_grad for p in bi.encoder.model.parameters()]
    bottom = BiEncoder(
        bi.encoder, train_layers=train_layers, cache=bi.use_cache, cache_dtype=bi.cache_dtype,
        weights_key=trained_key if shallower else None,
    )
    # BiEncoder marks its top blocks trainable in the shared model; MTCG's flags stay as they were
    for p, flag in zip(bi.encoder.model.parameters(), flags, strict=True):
        p.requires_grad_(flag)
    return bottom


def _token_mean(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the real token states of each row, leaving out position 0 (the text's own <s>/[CLS])."""
    weight = mask.to(hidden.dtype).clone()
    weight[:, 0] = 0
    return (hidden * weight[..., None]).sum(1) / weight.sum(1, keepdim=True).clamp(min=1.0)


def mention_runs(mentions: Sequence[str]) -> list[tuple[int, int]]:
    """``[start, end)`` of each run of equal consecutive mentions (one mention's candidate list)."""
    runs, start = [], 0
    for i in range(1, len(mentions) + 1):
        if i == len(mentions) or mentions[i] != mentions[start]:
            runs.append((start, i))
            start = i
    return runs


def _batches(mentions: Sequence[str], batch_size: int, whole_runs: bool) -> list[slice]:
    """Slices of about ``batch_size`` pairs; with ``whole_runs`` a mention's pairs never straddle two."""
    if not whole_runs:
        return [slice(s, s + batch_size) for s in range(0, len(mentions), batch_size)]
    out: list[slice] = []
    start = end = 0
    for s, e in mention_runs(mentions):
        if e - start > batch_size and end > start:
            out.append(slice(start, end))
            start = s
        end = e
    if end > start:
        out.append(slice(start, end))
    return out


class KeywordAttentiveRanker(nn.Module):
    """KAR over a frozen (shared, cached) bottom; see the module docstring.

    Args:
        bottom: the :class:`BiEncoder` whose frozen bottom and cache KAR reads (MTCG's).
        sites / types: the keyword lists.
        hidden: width of the FFN on the pooled [CLS]/[PS]/[PT] state.
        dropout: dropout before the FFN.
        interaction: extra pair features for the FFN, next to the pooled [CLS]/[PS]/[PT] state
            (CPU-recipe deviation; ``"none"`` is the paper's head):

            * ``"recall"`` — ``[u, v, |u-v|, u*v]`` of MTCG's own (frozen) unit embeddings of the
              mention and the candidate. They are already computed for recall, so they cost nothing
              at inference, and they let the head start from MTCG's ranking instead of relearning
              it (``bench/procedures_eval.py`` compares the two feature sets; its results are in
              ``bench/results/``).
            * ``"tokens"`` (``True`` in older specs) — the same four terms of the two texts' token
              means entering the last joint block.
        keyword_attention: ``False`` lets [PS]/[PT] attend to every token (the point-wise baseline).
        list_context: attention across a mention's candidates inside the head (not in the paper).
    """

    def __init__(
        self,
        bottom: BiEncoder,
        sites: Sequence[str],
        types: Sequence[str],
        hidden: int = 256,
        dropout: float = 0.1,
        interaction: str | bool = "recall",
        keyword_attention: bool = True,
        list_context: bool = False,
    ) -> None:
        super().__init__()
        # False: [PS]/[PT] attend to every token like [CLS] — a plain point-wise cross-encoder (the
        # paper's "BERT point-wise ranking" baseline, and the "w/o keyword attention" ablation)
        self.keyword_attention = bool(keyword_attention)
        self.bottom = bottom
        hf = bottom.encoder.model
        d = bottom.dim
        # a trainable copy of the *base* top blocks (MTCG trains the originals in place)
        self.top = nn.ModuleList(copy.deepcopy(b) for b in encoder_blocks(hf)[bottom.n_frozen :])
        for p in self.top.parameters():
            p.requires_grad_(True)
        self.special = nn.Parameter(torch.zeros(N_SPECIAL, d))
        self.segment = nn.Parameter(torch.zeros(2, d))
        self.dropout = nn.Dropout(dropout)
        interaction = {True: "tokens", False: "none"}.get(interaction, interaction)  # type: ignore[call-overload]
        if interaction not in INTERACTIONS:
            raise ValueError(f"interaction must be one of {INTERACTIONS}, got {interaction!r}")
        self.interaction: str = interaction
        self.ffn = nn.Sequential(nn.Linear(d * (1 if interaction == "none" else 5), hidden), nn.GELU(), nn.Linear(hidden, 1))
        # not in the paper: one attention layer across a mention's candidates between the FFN's two
        # layers, so a candidate's score can depend on its competitors (zero-initialised output:
        # training starts from the plain point-wise head)
        self.list_context = bool(list_context)
        self.list_norm = nn.LayerNorm(hidden) if self.list_context else None
        self.list_attn = nn.MultiheadAttention(hidden, 4, dropout=dropout, batch_first=True) if self.list_context else None
        if self.list_attn is not None:
            nn.init.zeros_(self.list_attn.out_proj.weight)
            nn.init.zeros_(self.list_attn.out_proj.bias)
        self.sites, self.types = KeywordMatcher(sites), KeywordMatcher(types)
        self.ffn_hidden = hidden
        # keyword flags per text: standard names are a closed set (kept), mentions are whatever a
        # service receives (least recently used evicted beyond MENTION_FLAG_CACHE)
        self._name_flags: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._mention_flags: OrderedDict[str, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.trainable = nn.ModuleDict(
            {"top": self.top, "ffn": self.ffn, "params": nn.ParameterList([self.special, self.segment])}
        )
        if self.list_context:
            self.trainable["list"] = nn.ModuleList([self.list_norm, self.list_attn])

    # -- keyword flags of one text as the cache tokenises it -----------------------------------------
    def keyword_flags(self, text: str, kind: TextKind) -> tuple[np.ndarray, np.ndarray]:
        """(site, type) bool flags over the tokens of ``prompt + text`` (same tokenisation as the cache)."""
        cache = self._mention_flags if kind == "query" else self._name_flags
        flags = cache.get(text)
        if flags is None:
            enc = self.bottom.encoder
            prompt = enc._prompt(kind)
            tok = enc.tokenizer(prompt + text, truncation=True, max_length=enc.max_length, return_offsets_mapping=True)
            flags = self._flags_from_offsets(text, tok["offset_mapping"], len(prompt))
            cache[text] = flags
            if kind == "query" and len(self._mention_flags) > MENTION_FLAG_CACHE:
                self._mention_flags.popitem(last=False)
        elif kind == "query":
            self._mention_flags.move_to_end(text)
        return flags

    def warm_name_flags(self, names: Sequence[str], batch_size: int = 1024) -> None:
        """Compute the keyword flags of every standard name not cached yet, tokenised in batches.

        Computed one at a time inside requests they would slow every mention whose candidates
        include names not seen yet; :meth:`ProcedureNormalizer.warm_up` calls this once.
        """
        enc = self.bottom.encoder
        prompt = enc._prompt("passage")
        todo = [n for n in dict.fromkeys(names) if n not in self._name_flags]
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            tok = enc.tokenizer([prompt + t for t in chunk], truncation=True, max_length=enc.max_length,
                                return_offsets_mapping=True)
            for text, offsets in zip(chunk, tok["offset_mapping"], strict=True):
                self._name_flags[text] = self._flags_from_offsets(text, offsets, len(prompt))

    def _flags_from_offsets(self, text: str, offsets: Sequence[tuple[int, int]], shift: int) -> tuple[np.ndarray, np.ndarray]:
        """(site, type) flags of ``text``'s tokens, from their offsets in ``prompt + text`` (prompt length ``shift``)."""
        return (
            token_keyword_flags(offsets, self.sites.spans(text), shift=shift),
            token_keyword_flags(offsets, self.types.spans(text), shift=shift),
        )

    def _flag_matrix(self, texts: Sequence[str], kind: TextKind, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        site = torch.zeros((len(texts), length), dtype=torch.bool)
        typ = torch.zeros((len(texts), length), dtype=torch.bool)
        for i, t in enumerate(texts):
            s, ty = self.keyword_flags(t, kind)
            site[i, : len(s)], typ[i, : len(ty)] = torch.from_numpy(s), torch.from_numpy(ty)
        return site, typ

    # -- scoring ---------------------------------------------------------------------------------------
    def forward_states(
        self,
        mentions: Sequence[str],
        candidates: Sequence[str],
        mention_hidden: torch.Tensor,
        mention_mask: torch.Tensor,
        cand_hidden: torch.Tensor,
        cand_mask: torch.Tensor,
        mention_vec: torch.Tensor | None = None,
        cand_vec: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``(P,)`` logits from frozen-bottom states of the pairs' mentions and candidates.

        ``mention_vec`` / ``cand_vec`` ``(P, d)``: MTCG's unit embeddings (needed with ``interaction="recall"``).
        """
        n = len(mentions)
        if not (len(candidates) == n == mention_hidden.shape[0] == cand_hidden.shape[0]):
            raise ValueError(f"{n} mentions, {len(candidates)} candidates, {mention_hidden.shape[0]}/{cand_hidden.shape[0]} states")
        lm, lc = mention_hidden.shape[1], cand_hidden.shape[1]
        dev = mention_hidden.device
        # [CLS]/[PS]/[PT] start from the mean of both texts' token states (without their own <s>):
        # the bottom's <s> state is a near-constant, large-norm attention sink in e5, and specials
        # started from it stayed input-independent (KAR's loss never left the label prior)
        special = (_token_mean(mention_hidden, mention_mask) + _token_mean(cand_hidden, cand_mask))[:, None] / 2 + self.special[None]
        hidden = torch.cat([special, mention_hidden + self.segment[0], cand_hidden + self.segment[1]], dim=1)
        ones = torch.ones((n, N_SPECIAL), dtype=torch.bool)
        key_valid = torch.cat([ones, mention_mask.bool().cpu(), cand_mask.bool().cpu()], dim=1)
        if self.keyword_attention:
            ms, mt = self._flag_matrix(mentions, "query", lm)
            cs, ct = self._flag_matrix(candidates, "passage", lc)
            none = torch.zeros((n, N_SPECIAL), dtype=torch.bool)
            site = torch.cat([none, ms, cs], dim=1)
            typ = torch.cat([none, mt, ct], dim=1)
        else:
            site = typ = key_valid
        bool_mask = kar_attention_mask(key_valid, site, typ).to(dev)
        valid = key_valid.to(dev)
        # one mention against its candidates (the latency path passes an expanded view): the first
        # block projects the mention's Q/K/V once instead of k_c times (exact; later blocks see
        # candidate-dependent mention states)
        same_mention = n > 1 and mention_hidden.stride(0) == 0 and mention_mask.stride(0) == 0
        shared = (N_SPECIAL, N_SPECIAL + lm) if same_mention and bool(mention_mask[0].all()) else None
        for i, block in enumerate(self.top[:-1]):
            hidden = packed_block(block, hidden, valid, bool_mask, shared if i == 0 else None)
        # only [CLS]/[PS]/[PT] of the last block are read
        pooled = special_rows_block(self.top[-1], hidden, bool_mask).mean(dim=1)
        if self.interaction == "tokens":
            # u, v: the two texts' token means entering the last (joint) block
            u = _token_mean(hidden[:, N_SPECIAL : N_SPECIAL + lm], mention_mask)
            v = _token_mean(hidden[:, N_SPECIAL + lm :], cand_mask)
        elif self.interaction == "recall":
            if mention_vec is None or cand_vec is None:
                raise ValueError("interaction='recall' needs MTCG's mention_vec and cand_vec")
            u, v = mention_vec.to(pooled), cand_vec.to(pooled)
            if u.ndim != 2 or u.shape[0] != n or v.shape != u.shape:
                raise ValueError(f"mention_vec {tuple(u.shape)} and cand_vec {tuple(v.shape)} must both be ({n}, d)")
            # unit vectors have components ~ 1/sqrt(d); scaled to ~1 so u*v and |u-v| are not ~1/d
            # against the FFN's initial weights (unscaled, the head took tens of steps to fit one batch)
            u, v = u * u.shape[1] ** 0.5, v * v.shape[1] ** 0.5
        if self.interaction != "none":
            pooled = torch.cat([pooled, u, v, (u - v).abs(), u * v], dim=-1)
        if not self.list_context:
            return self.ffn(self.dropout(pooled))[:, 0]
        z = self.ffn[1](self.ffn[0](self.dropout(pooled)))
        return self.ffn[2](z + self._across_candidates(z, mentions))[:, 0]

    def _across_candidates(self, z: torch.Tensor, mentions: Sequence[str]) -> torch.Tensor:
        """Attention among the pairs of one mention (a run of equal consecutive mentions), ``(P, H)``."""
        assert self.list_norm is not None and self.list_attn is not None
        sizes = [e - s for s, e in mention_runs(mentions)]
        x = self.list_norm(nn.utils.rnn.pad_sequence(list(z.split(sizes)), batch_first=True))
        pad = torch.arange(x.shape[1], device=z.device)[None] >= torch.tensor(sizes, device=z.device)[:, None]
        out, _ = self.list_attn(x, x, x, key_padding_mask=pad, need_weights=False)
        return out[~pad]  # row-major: the pairs back in their input order

    def forward(
        self,
        mentions: Sequence[str],
        candidates: Sequence[str],
        mention_vec: torch.Tensor | None = None,
        cand_vec: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``(P,)`` logits for pairs ``(mentions[p], candidates[p])`` (training: bottoms from the cache)."""
        from medrank.pipelines.procedures.mtcg import bottom_states

        mh, mm = bottom_states(self.bottom, mentions, "query")
        ch, cm = bottom_states(self.bottom, candidates, "passage")
        return self.forward_states(mentions, candidates, mh, mm, ch, cm, mention_vec, cand_vec)

    @torch.no_grad()
    def score(
        self,
        mentions: Sequence[str],
        candidates: Sequence[str],
        mention_vec: np.ndarray | None = None,
        cand_vec: np.ndarray | None = None,
        batch_size: int = 128,
    ) -> np.ndarray:
        """Inference probabilities ``(P,)`` (sigmoid of the logits); vectors as in :meth:`forward_states`."""
        out = np.empty(len(mentions), dtype=np.float32)

        def part(vec: np.ndarray | None, sl: slice) -> torch.Tensor | None:
            return None if vec is None else torch.as_tensor(np.asarray(vec[sl], dtype=np.float32))

        with eval_mode(self):
            for sl in _batches(mentions, batch_size, whole_runs=self.list_context):
                logits = self.forward(mentions[sl], candidates[sl], part(mention_vec, sl), part(cand_vec, sl))
                out[sl] = torch.sigmoid(logits).float().cpu().numpy()
        return out

    # -- persistence -------------------------------------------------------------------------------------
    def spec(self) -> dict[str, Any]:
        return {
            "n_frozen": self.bottom.n_frozen, "train_layers": len(self.top), "ffn_hidden": self.ffn_hidden,
            "interaction": self.interaction, "keyword_attention": self.keyword_attention,
            "list_context": self.list_context,
            # the MTCG weights whose blocks the bottom holds (a KAR shallower than MTCG): checked on load
            **({"mtcg_weights": self.bottom.trained_key} if self.bottom.trained_key else {}),
        }

    def save(self, directory: str | Path, extra: dict[str, Any] | None = None) -> None:
        from safetensors.torch import save_file

        from medrank.utils.io import atomic_dir

        with atomic_dir(directory) as tmp:
            state = {k: v.detach().cpu().contiguous() for k, v in self.trainable.state_dict().items()}
            save_file(state, str(tmp / WEIGHTS))
            (tmp / SPEC).write_text(json.dumps({**self.spec(), **(extra or {})}, indent=1), encoding="utf-8")

    def load_weights(self, directory: str | Path) -> None:
        from safetensors.torch import load_file

        spec = json.loads((Path(directory) / SPEC).read_text(encoding="utf-8"))
        if spec.get("mtcg_weights") != self.bottom.trained_key:
            raise ValueError(
                f"{directory}: KAR was trained over the blocks of MTCG weights {spec.get('mtcg_weights')}, this bottom holds "
                f"{self.bottom.trained_key} (MTCG re-trained since? train KAR again over it)"
            )
        if spec["n_frozen"] != self.bottom.n_frozen:
            raise ValueError(
                f"{directory}: KAR was trained over {spec['n_frozen']} frozen blocks, the bottom has {self.bottom.n_frozen}"
            )
        self.trainable.load_state_dict(load_file(str(Path(directory) / WEIGHTS)))
