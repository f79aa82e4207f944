"""Shared fixtures: tiny random-weight models with a local vocabulary (never a download)."""

from __future__ import annotations

import os

# No test may reach the Hugging Face hub: offline mode makes any hub id fail at once, not probe
# the network (set before anything imports huggingface_hub, whose constants read it once).
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch

from medrank.config import data_root

WORDS = (
    "fever cough headache pain chest back abdominal nausea vomiting rash itch fatigue dizziness "
    "breast cancer heart attack hypertension diabetes asthma kidney liver stroke anemia "
    "头 痛 晕 高 血 压 糖 尿 病 心 肌 梗 死 乳 腺 癌 膝 关 节 炎 咳 嗽 发 热"
).split()


def make_tiny_bert(seed: int = 0, hidden: int = 32, layers: int = 2):
    """A 2-layer BERT with random weights and a ~60-token vocabulary."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])}
    # transformers 5: BertTokenizerFast(vocab_file=...) silently yields all-[UNK]; pass the dict.
    tokenizer = BertTokenizerFast(vocab=vocab, do_lower_case=True, tokenize_chinese_chars=True)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=hidden * 2,
        max_position_embeddings=64,
    )
    return BertModel(cfg).eval(), tokenizer


@pytest.fixture
def tiny_encoder():
    from medrank.encoders import TransformerEncoder

    model, tok = make_tiny_bert()
    return TransformerEncoder(model, tok, pooling="mean", name="tiny")


@pytest.fixture(scope="session")
def real_data():
    root = data_root()
    if not (root / "chip-cdn").is_dir():
        pytest.skip(f"real datasets not found under {root}; set MEDRANK_DATA")
    return root
