"""Characters a tokenizer cannot spell (medrank.encoders.vocab): a tiny SentencePiece-style tokenizer built here, and e5-small on the real procedure data (slow)."""

from __future__ import annotations

import pytest
import torch

from medrank.encoders.vocab import prefix_first_piece_only, sample_embedding_rows, unknown_characters


def tiny_metaspace_tokenizer():
    """A Unigram tokenizer with XLM-R's pre-tokenizer shape: Metaspace(prepend_scheme="always") + per-character split."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pieces = ["<unk>", "<s>", "</s>", "<pad>", "▁", "▁que", "ry", ":", "骨", "折", "术", "左", "右", "切", "除"]
    model = models.Unigram([(p, -1.0 if i else 0.0) for i, p in enumerate(pieces)], unk_id=0, byte_fallback=False)
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
        pre_tokenizers.Split(Regex("[^▁a-z:]"), behavior="isolated"),
    ])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def test_unknown_characters_and_metaspace_prefix() -> None:
    tok = tiny_metaspace_tokenizer()
    assert unknown_characters(tok, ["左桡骨骨折", "右髌骨 切除术"]) == ["桡", "髌"]
    texts = ["query: 左桡骨骨折", "query: 髌骨切除术", "query: 右骨折"]
    before = [tok(t)["input_ids"] for t in texts]
    tok_always = tiny_metaspace_tokenizer()
    tok_always.add_tokens(["桡", "髌"])
    # with "always" the piece after an added token gets an extra "▁": the token sequence changes length
    assert len(tok_always("query: 左桡骨骨折")["input_ids"]) == len(before[0]) + 1
    assert prefix_first_piece_only(tok) and not prefix_first_piece_only(tok)  # changed once, then nothing to change
    tok.add_tokens(["桡", "髌"])
    new = set(tok.convert_tokens_to_ids(["桡", "髌"]))
    for text, old in zip(texts, before, strict=True):
        ids = tok(text)["input_ids"]
        assert len(ids) == len(old) and all(a == b or (a == tok.unk_token_id and b in new) for a, b in zip(old, ids, strict=True))


def test_sample_embedding_rows_moments_and_seeding() -> None:
    gen = torch.Generator().manual_seed(0)
    mix = torch.tensor([[1.0, 0.0, 0.0], [0.5, 2.0, 0.0], [0.0, -1.0, 0.5]])
    weight = torch.randn(20000, 3, generator=gen) @ mix + torch.tensor([3.0, -1.0, 0.0])
    chars = [chr(0x4E00 + i) for i in range(4000)]
    rows = sample_embedding_rows(weight, chars, seed=5, chunk=777)
    assert rows.shape == (4000, 3) and rows.dtype == weight.dtype
    assert torch.allclose(rows.mean(0), weight.mean(0), atol=0.1)
    assert torch.allclose(torch.cov(rows.T), torch.cov(weight.T), atol=0.15)
    # a character's row depends on the seed and the character, not on the others drawn with it
    assert torch.equal(sample_embedding_rows(weight, chars[10:11], seed=5)[0], rows[10])
    assert not torch.equal(sample_embedding_rows(weight, chars[10:11], seed=6)[0], rows[10])


@pytest.mark.slow
def test_e5_small_spells_every_procedure_text_with_the_added_characters(real_data) -> None:
    """On every standard name and train/val mention: the old token sequence with <unk> replaced by the new ids."""
    from medrank.encoders import load_encoder
    from medrank.pipelines.procedures.data import load_mentions, load_term_base

    enc = load_encoder("e5-small", max_length=64)
    texts = list(load_term_base(real_data).names) + [m.text for s in ("train", "val") for m in load_mentions(s, real_data)]
    chars = unknown_characters(enc.tokenizer, texts)
    assert {"桡", "髌", "跖", "跗", "颞", "髂"} <= set(chars)
    before = {k: enc.tokenize(texts, k)["input_ids"] for k in ("query", "passage")}
    enc.add_characters(chars, seed=13)
    new = set(enc.tokenizer.convert_tokens_to_ids(chars))
    unk = enc.tokenizer.unk_token_id
    for kind, old in before.items():
        ids = enc.tokenize(texts, kind)["input_ids"]
        assert ids.shape == old.shape
        same = (ids == old) | ((old == unk) & torch.isin(ids, torch.tensor(sorted(new))))
        assert bool(same.all()), kind
        assert not bool((ids == unk).any())
