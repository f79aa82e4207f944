"""Fast tests of the procedure-normalisation pipeline (MTCG + KAR + FB): tiny models, tiny fixture data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from medrank.pipelines.procedures.data import (
    Keywords,
    Mention,
    TermBase,
    carve_validation,
    load_keywords,
    load_mentions,
    load_procedure_kb,
    load_term_base,
    read_mentions,
)
from medrank.pipelines.procedures.fusion import fuse, recall_scores, select_terms, tune_theta
from medrank.pipelines.procedures.kar import KeywordMatcher, kar_attention_mask, token_keyword_flags
from medrank.pipelines.procedures.losses import MultiTaskTripletLoss
from medrank.pipelines.procedures.negatives import STRATEGIES, code_prefixes, make_strategy

KB = [
    ("01.3100", "脑膜切开术"),
    ("01.5100", "脑膜病损切除术"),
    ("06.2100", "单侧甲状腺叶切除术"),
    ("06.3900", "甲状腺病损切除术"),
    ("06.3901", "甲状腺部分切除术"),
    ("06.4x00", "全甲状腺切除术"),
    ("07.2100", "肾上腺病损切除术"),
    ("07.2200", "单侧肾上腺切除术"),
    ("55.0100", "肾切开术"),
    ("55.5100", "肾切除术"),
    ("55.5101", "肾切除术"),  # a name shared by two codes
    ("85.4100", "单侧乳房切除术"),
    ("85.4300", "单侧根治性乳房切除术"),
    ("45.7300", "右半结肠切除术"),
    ("46.5100", "横结肠造口闭合术"),
]
TRAIN = [
    ("右侧甲状腺叶切除术", "单侧甲状腺叶切除术"),
    ("左侧甲状腺叶切除术", "单侧甲状腺叶切除术"),
    ("甲状腺肿物切除术", "甲状腺病损切除术"),
    ("甲状腺全切术", "全甲状腺切除术"),
    ("右肾上腺肿瘤切除术", "肾上腺病损切除术"),
    ("左肾上腺切除术", "单侧肾上腺切除术"),
    ("右肾切除术", "肾切除术"),
    ("肾切开取石术", "肾切开术"),
    ("左侧乳房切除术", "单侧乳房切除术"),
    ("右乳根治性切除术", "单侧根治性乳房切除术"),
    ("横结肠造口还纳术", "横结肠造口闭合术"),
    ("右半结肠切除术", "右半结肠切除术"),
    ("脑膜切开术", "脑膜切开术"),
    ("脑膜肿物切除术", "脑膜病损切除术"),
    ("甲状腺叶切除加肾上腺切除术", "单侧甲状腺叶切除术##单侧肾上腺切除术"),
    ("乳房切除加结肠切除加肾切除术", "单侧乳房切除术##右半结肠切除术##肾切除术"),
]
VAL = [
    ("右甲状腺叶切除术", "单侧甲状腺叶切除术"),
    ("左肾切除术", "肾切除术"),
    ("甲状腺叶切除并肾上腺切除术", "单侧甲状腺叶切除术##单侧肾上腺切除术"),
]
SITES = ["甲状腺", "甲状腺叶", "肾上腺", "肾", "乳房", "脑膜", "结肠", "横结肠"]
TYPES = ["切除术", "切开术", "闭合术", "根治性切除术"]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    folder = root / "chip2019-procedures"
    (folder / "keywords").mkdir(parents=True)
    (folder / "kb.tsv").write_text("\n".join(f"{c}\t{n}" for c, n in KB), encoding="utf-8")
    for name, rows in (("train", TRAIN), ("val", VAL)):
        (folder / f"{name}.tsv").write_text("原始词\t标准词\n" + "".join(f"{m}\t{t}\n" for m, t in rows), encoding="utf-8")
    (folder / "keywords" / "body.txt").write_text("\n".join(SITES) + "\n", encoding="utf-8")
    (folder / "keywords" / "ot.txt").write_text("".join(f"{w}\t{i + 1}\n" for i, w in enumerate(TYPES)), encoding="utf-8")
    return root


@pytest.fixture
def terms(data_dir: Path) -> TermBase:
    return load_term_base(data_dir)


def tiny_chinese_encoder(path: Path | None = None, missing: str = ""):
    """A 3-layer random BERT whose vocabulary is every character of the fixture texts (but ``missing``)."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from medrank.encoders import TransformerEncoder

    chars = sorted({ch for rows in (KB, TRAIN, VAL) for row in rows for text in row for ch in text if ch not in ".#x" + missing} | set("0123456789:"))
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars])}
    tok = BertTokenizerFast(vocab=vocab, do_lower_case=True, tokenize_chinese_chars=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    enc = TransformerEncoder(BertModel(cfg).eval(), tok, pooling="mean", max_length=40, name="tiny-zh")
    if path is not None:
        enc.save(path)
    return enc


# -- data ----------------------------------------------------------------------------------------------


def test_data_loading(data_dir: Path, terms: TermBase) -> None:
    kb = load_procedure_kb(data_dir)
    assert len(kb) == len(KB) - 1 and kb[0].id == "脑膜切开术" and kb[0].meta["codes"] == ("01.3100",)
    assert len(terms) == len(KB) - 1 and terms.codes[terms.index("肾切除术")] == ("55.5100", "55.5101")
    train = load_mentions("train", data_dir)
    assert len(train) == len(TRAIN) and train[-1].terms == ("单侧乳房切除术", "右半结肠切除术", "肾切除术")
    assert [m.count_class for m in train[-2:]] == [1, 2]
    fit, valid = carve_validation(train, fraction=0.25, seed=13)
    assert len(fit) + len(valid) == len(train) and not {m.text for m in fit} & {m.text for m in valid}
    assert carve_validation(train, fraction=0.25, seed=13)[1] == valid
    kw = load_keywords(data_dir)
    assert kw.types[0] == "切除术" and "甲状腺叶" in kw.sites
    with pytest.raises(KeyError, match="not in the knowledge base"):
        terms.index("不存在术")


def test_read_mentions_rejects_bad_rows(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("原始词\t标准词\n只有一列\n", encoding="utf-8")
    with pytest.raises(ValueError, match="expected 'mention<TAB>standard names'"):
        read_mentions(bad)


# -- losses ----------------------------------------------------------------------------------------------


def test_multitask_triplet_loss_hand_computed() -> None:
    mention = torch.tensor([[0.0, 0.0]])
    positive = torch.tensor([[3.0, 4.0]])  # d+ = 5
    negatives = torch.tensor([[[0.0, 1.0], [6.0, 8.0]]])  # d- = 1 and 10
    logits = torch.zeros((1, 3))  # uniform → CE = ln 3
    labels = torch.tensor([0])
    # triplet: mean(max(0, 5 - 1 + 1), max(0, 5 - 10 + 1)) = mean(5, 0) = 2.5
    loss = MultiTaskTripletLoss(margin=1.0)(mention, positive, negatives, logits, labels)
    assert loss.item() == pytest.approx(2.5 + math.log(3), abs=1e-5)
    half = MultiTaskTripletLoss(margin=1.0, count_weight=0.5)(mention, positive, negatives, logits, labels)
    assert half.item() == pytest.approx(2.5 + 0.5 * math.log(3), abs=1e-5)
    # a padded negative slot does not count: only the (d- = 1) triple remains → 5
    valid = torch.tensor([[True, False]])
    masked = MultiTaskTripletLoss(margin=1.0, count_weight=0.0)(mention, positive, negatives, logits, labels, valid)
    assert masked.item() == pytest.approx(5.0, abs=1e-5)


def test_multitask_triplet_loss_gradients_and_errors() -> None:
    m = torch.randn(4, 8, requires_grad=True)
    loss = MultiTaskTripletLoss()(m, torch.randn(4, 8), torch.randn(4, 3, 8), torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    assert m.grad is not None and torch.isfinite(m.grad).all()
    with pytest.raises(ValueError, match="count_logits"):
        MultiTaskTripletLoss()(m, torch.randn(4, 8), torch.randn(4, 3, 8), torch.randn(4, 3), torch.tensor([0, 1]))


# -- KAR keyword masks -----------------------------------------------------------------------------------


def test_keyword_matcher_longest_match() -> None:
    sites = KeywordMatcher(SITES)
    assert sites.find("单侧甲状腺叶切除术") == ["甲状腺叶"]  # not 甲状腺
    assert sites.spans("横结肠造口闭合术") == [(0, 3)]  # 横结肠, not 结肠
    assert sites.find("肾上腺病损切除术") == ["肾上腺"]  # not 肾
    assert KeywordMatcher(TYPES).find("单侧根治性乳房切除术") == ["切除术"]
    assert KeywordMatcher(TYPES).find("根治性切除术") == ["根治性切除术"]


def test_token_keyword_flags_with_prompt_shift() -> None:
    # tokens of "q: 肾切除术": [CLS] q : 肾 切 除 术 [SEP]
    offsets = [(0, 0), (0, 1), (1, 2), (3, 4), (4, 5), (5, 6), (6, 7), (0, 0)]
    site = token_keyword_flags(offsets, KeywordMatcher(SITES).spans("肾切除术"), shift=3)
    typ = token_keyword_flags(offsets, KeywordMatcher(TYPES).spans("肾切除术"), shift=3)
    assert site.tolist() == [False, False, False, True, False, False, False, False]
    assert typ.tolist() == [False, False, False, False, True, True, True, False]
    # a multi-character token overlapping a keyword counts as a keyword token
    assert token_keyword_flags([(0, 2), (2, 4)], [(1, 2)]).tolist() == [True, False]


def test_kar_attention_mask_exact_positions() -> None:
    # [CLS] [PS] [PT] | m0 m1(site) m2(type) | c0(site) c1 c2(type) pad
    valid = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool)
    site = torch.tensor([[0, 0, 0, 0, 1, 0, 1, 0, 0, 0]], dtype=torch.bool)
    typ = torch.tensor([[0, 0, 0, 0, 0, 1, 0, 0, 1, 0]], dtype=torch.bool)
    mask = kar_attention_mask(valid, site, typ)
    assert mask.shape == (1, 1, 10, 10)
    m = mask[0, 0]
    assert torch.nonzero(m[1]).flatten().tolist() == [1, 4, 6]  # [PS]: itself + site tokens of both texts
    assert torch.nonzero(m[2]).flatten().tolist() == [2, 5, 8]  # [PT]: itself + type tokens of both texts
    assert torch.nonzero(m[0]).flatten().tolist() == list(range(9))  # [CLS]: every real token
    for row in (3, 4, 7, 9):  # ordinary tokens (and padding rows) see every real position
        assert torch.nonzero(m[row]).flatten().tolist() == list(range(9))
    # a padded site flag never opens a padding key
    site_pad = site.clone()
    site_pad[0, 9] = True
    assert not kar_attention_mask(valid, site_pad, typ)[0, 0, 1, 9]
    # without keyword attention (the point-wise baseline) the flags are the real positions: every row sees every real token
    plain = kar_attention_mask(valid, valid, valid)[0, 0]
    assert all(torch.nonzero(plain[row]).flatten().tolist() == list(range(9)) for row in range(10))


def _as_model_mask(mask: torch.Tensor, model: torch.nn.Module, dtype: torch.dtype) -> torch.Tensor:
    """The bool KAR mask as an HF block takes it: bool for SDPA, additive float for eager attention."""
    if getattr(model.config, "_attn_implementation", "sdpa") == "eager":
        return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
    return mask


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_kar_mask_blocks_non_keyword_tokens_in_a_real_block(attn: str) -> None:
    """[PS]'s output must not change when a non-site token changes (HF block honours the mask)."""
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=10, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)
    cfg._attn_implementation = attn
    model = BertModel(cfg).eval()
    valid = torch.ones((1, 8), dtype=torch.bool)
    site = torch.tensor([[0, 0, 0, 1, 0, 0, 1, 0]], dtype=torch.bool)
    typ = torch.tensor([[0, 0, 0, 0, 1, 0, 0, 0]], dtype=torch.bool)
    mask = _as_model_mask(kar_attention_mask(valid, site, typ), model, torch.float32)
    h = torch.randn(1, 8, 16)
    h2 = h.clone()
    h2[0, 5] += 3.0  # a non-keyword token
    block = model.encoder.layer[0]
    with torch.no_grad():
        a, b = block(h, mask), block(h2, mask)
    assert torch.allclose(a[0, 1], b[0, 1], atol=1e-5) and torch.allclose(a[0, 2], b[0, 2], atol=1e-5)
    assert not torch.allclose(a[0, 0], b[0, 0], atol=1e-5)  # [CLS] sees it
    h3 = h.clone()
    h3[0, 6] += 3.0  # a site token
    with torch.no_grad():
        c = block(h3, mask)
    assert not torch.allclose(a[0, 1], c[0, 1], atol=1e-5) and torch.allclose(a[0, 2], c[0, 2], atol=1e-5)


# -- fusion ----------------------------------------------------------------------------------------------


def test_recall_scores_and_fuse_hand_computed() -> None:
    s_c = recall_scores(np.array([[1.0, 1.0, 2.0]]))  # Σd = 4
    assert s_c.tolist() == [[0.75, 0.75, 0.5]]
    assert fuse(s_c, np.array([[0.25, 0.75, 1.0]])).tolist() == [[0.5, 0.75, 0.75]]
    assert recall_scores(np.zeros((1, 3))).tolist() == [[1.0, 1.0, 1.0]]
    with pytest.raises(ValueError):
        recall_scores(np.array([1.0, 2.0]))
    with pytest.raises(ValueError):
        fuse(np.zeros((1, 2)), np.zeros((1, 3)))


def test_select_terms_count_rule() -> None:
    cands = ["a", "b", "c", "d", "e"]
    scores = [0.5, 0.9, 0.85, 0.82, 0.1]
    assert select_terms(cands, scores, 0) == ["b"]
    assert select_terms(cands, scores, 1) == ["b", "c"]
    # ≥3: the top 3 plus every other candidate above θ
    assert select_terms(cands, scores, 2, theta=0.8) == ["b", "c", "d"]
    assert select_terms(cands, scores, 2, theta=0.4) == ["b", "c", "d", "a"]
    with pytest.raises(ValueError):
        select_terms(cands, scores, 3)


def test_tune_theta_picks_the_best_threshold() -> None:
    cands = [["a", "b", "c", "d"], ["a", "b", "c", "d"]]
    scores = [[0.9, 0.8, 0.7, 0.65], [0.9, 0.8, 0.7, 0.5]]
    gold = [{"a", "b", "c", "d"}, {"a", "b", "c"}]
    theta, acc = tune_theta(cands, scores, [2, 2], gold, grid=[0.4, 0.6, 0.68, 0.8])
    assert theta == 0.6 and acc == 1.0


# -- negatives ---------------------------------------------------------------------------------------------


def test_code_prefixes() -> None:
    assert code_prefixes("01.3100") == ["01.3", "01"]
    assert code_prefixes("00") == ["00"]


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "online"])
def test_gold_is_never_a_negative(strategy: str, data_dir: Path, terms: TermBase) -> None:
    mentions = load_mentions("train", data_dir)
    kw = load_keywords(data_dir)
    strat = make_strategy(strategy, mentions, terms, kw, pool=5)
    rows = np.repeat(np.arange(len(mentions)), 3)
    golds = [mentions[r].terms[0] for r in rows]
    for seed in range(5):
        negs = strat.sample(rows, golds, 4, np.random.default_rng(seed))
        assert len(negs) == len(rows)
        for r, row in zip(rows, negs, strict=True):
            assert len(row) == 4 and len(set(row)) == 4
            assert not set(row) & set(mentions[r].terms)


def test_tree_coding_prefers_same_category(data_dir: Path, terms: TermBase) -> None:
    mentions = [Mention("x", "甲状腺叶切除", ("单侧甲状腺叶切除术",))]
    strat = make_strategy("tree-coding", mentions, terms)
    negs = strat.sample(np.array([0]), ["单侧甲状腺叶切除术"], 3, np.random.default_rng(0))[0]
    assert set(negs) == {"甲状腺病损切除术", "甲状腺部分切除术", "全甲状腺切除术"}  # every 06.x name


def test_keyword_replacing_swaps_one_keyword(data_dir: Path, terms: TermBase) -> None:
    mentions = [Mention("x", "右肾切除术", ("肾切除术",))]
    kw = Keywords(sites=("肾", "乳房", "脑膜"), types=("切除术", "切开术"))
    strat = make_strategy("keyword-replacing", mentions, terms, kw)
    negs = strat.sample(np.array([0]), ["肾切除术"], 3, np.random.default_rng(1))[0]
    assert set(negs) == {"乳房切除术", "脑膜切除术", "肾切开术"}


def test_tfidf_negatives_are_lexically_close(data_dir: Path, terms: TermBase) -> None:
    mentions = [Mention("x", "甲状腺叶切除术", ("单侧甲状腺叶切除术",))]
    strat = make_strategy("tfidf", mentions, terms, pool=3)
    negs = strat.sample(np.array([0]), ["单侧甲状腺叶切除术"], 3, np.random.default_rng(0))[0]
    assert all("甲状腺" in n for n in negs)


# -- the whole pipeline on a tiny model ---------------------------------------------------------------------


def test_mtcg_kar_train_normalize_evaluate(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from medrank.pipelines.procedures.evaluation import evaluate_procedures
    from medrank.pipelines.procedures.negatives import OnlineNegatives
    from medrank.pipelines.procedures.normalizer import ProcedureNormalizer
    from medrank.pipelines.procedures.training import train_kar, train_mtcg

    base = tmp_path / "tiny-zh"
    tiny_chinese_encoder(base)
    common = {"data_root": str(data_dir), "encoder": str(base), "max_length": 40, "train_layers": 1, "batch_size": 8,
              "epochs": 2, "lr": 1e-3, "threads": 1, "cache_dir": str(tmp_path / "cache"), "show_progress": False}
    mtcg_cfg = {"task": "procedures-mtcg", "negatives": "online", "n_negatives": 3, "term_prior": True,
                "count_class_weighting": "sqrt-inverse", "head_lr": 1e-2, **common}
    mtcg = train_mtcg(mtcg_cfg, tmp_path / "mtcg")
    assert (tmp_path / "mtcg" / "model" / "prior.json").exists() and "val_with_prior" in mtcg
    assert mtcg["term_prior"]["weight"] in mtcg["term_prior"]["train_valid_top1"]
    assert set(mtcg["val"]["recall"]) == {"recall@2", "recall@5", "recall@7", "recall@10"}
    assert mtcg["val"]["mentions_per_second"] > 0 and [h["epoch"] for h in mtcg["history"]] == [0, 1, 2]
    assert (tmp_path / "mtcg" / "model" / "mtcg.safetensors").exists()
    # resuming a finished run trains nothing more and gives the same model
    again = train_mtcg(mtcg_cfg, tmp_path / "mtcg")
    assert again["train_valid"] == mtcg["train_valid"]

    kar = train_kar({"task": "procedures-kar", "mtcg": str(tmp_path / "mtcg" / "model"), "k": 5, "kar_init": "mtcg", "head_lr": 1e-2,
                     "theta_grid": [0.5, 0.8], **common}, tmp_path / "kar")
    assert kar["theta"] in (0.5, 0.8) and set(kar["val"]) >= {"single", "multi", "total"}

    norm = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    assert norm.prior is not None and norm.prior.terms == {t for _, ts in TRAIN for t in ts.split("##")}
    # a missing training cache (moved, or an older cache key) is rebuilt by warm_up and written back
    import shutil

    assert norm.cache_dir and norm.mtcg.bi.cache_size() >= len(norm.terms.names)
    shutil.rmtree(Path(norm.cache_dir) / norm.mtcg.bi.cache_key())
    cold = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    assert cold.mtcg.bi.cache_size() == 0
    cold.predict(["左肾切除术"])  # a mention scored before warm_up: its states must not be written to disk
    cold.warm_up()
    warm = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    assert len(warm.mtcg.bi.caches["passage"]) >= len(norm.terms.names) and "query" not in warm.mtcg.bi.caches
    # a partial cache (KAR's training stores only the names it saw as candidates) is completed once, not at every start
    shutil.rmtree(Path(norm.cache_dir) / norm.mtcg.bi.cache_key())
    partial = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    partial.mtcg.bi.fill_cache(norm.terms.names[:-1], "passage")
    partial.mtcg.bi.save_cache(partial.cache_dir, kinds=("passage",))
    partial = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    assert partial._names_not_cached == [partial.mtcg.bi] and len(partial.mtcg.bi.caches["passage"]) == len(norm.terms.names) - 1
    partial.warm_up()
    completed = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    assert completed._names_not_cached == [] and not completed.mtcg.bi.caches["passage"].missing(norm.terms.names)
    # the names' MTCG embeddings are stored once per loaded weights and read back at the next load
    stored = warm._term_embeddings_file()
    assert stored is not None and stored.is_file() and stored.parent == Path(warm.cache_dir)
    reloaded = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    with monkeypatch.context() as patch:
        patch.setattr(reloaded.mtcg, "encode_terms", lambda *a, **k: pytest.fail("names re-encoded despite the stored file"))
        assert np.array_equal(reloaded.term_embeddings(), warm.term_embeddings())
    stored.write_bytes(b"not safetensors")  # a damaged file is ignored and re-written
    damaged = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    # re-computed, not read: equal up to float summation order (batch composition and BLAS kernels differ by host)
    assert np.allclose(damaged.term_embeddings(), warm.term_embeddings(), rtol=1e-5, atol=1e-5) and stored.stat().st_size > 100
    with torch.no_grad():  # weights changed in place (training): no longer the file's, so nothing is read or written
        next(damaged.mtcg.bi.trainable.parameters()).add_(0.1)
    assert damaged.mtcg.loaded_digest() is None and damaged._term_embeddings_file() is None
    assert not np.array_equal(damaged.term_embeddings(), warm.term_embeddings())
    # a run copied from another machine: its manifest's cache folder does not exist here
    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "here"))
    moved = ProcedureNormalizer(warm.mtcg, warm.kar, warm.terms)
    moved.load_cache(str(tmp_path / "elsewhere" / "procedures-frozen"))
    assert moved.cache_dir == str(tmp_path / "here" / "procedures-frozen")
    batch = norm.predict(["右甲状腺叶切除术", "左肾切除术"])
    one = norm.normalize_one("右甲状腺叶切除术")
    # the latency path (uncached mention) and the batched path give the same answer
    assert one.candidates == batch[0].candidates and one.terms == batch[0].terms
    assert np.allclose(one.final, batch[0].final, atol=1e-4)
    assert len(one.candidates) == 5 and one.codes[0] == norm.terms.codes[norm.terms.row[one.terms[0]]]
    # FB's confidence is KAR's probability of the weakest chosen name, on both paths
    assert one.confidence == pytest.approx(min(one.ranker_score[one.candidates.index(t)] for t in one.terms))
    assert one.confidence == pytest.approx(batch[0].confidence, abs=1e-4)
    assert one.to_dict()["low_confidence"] is (one.confidence < 0.5)
    # an empty mention is an error on both paths, not a confident answer for "[CLS] [SEP]"
    for bad in ("", "  \t"):
        with pytest.raises(ValueError, match="mention 0 must be a non-empty string"):
            norm.normalize_one(bad)
    with pytest.raises(ValueError, match="mention 1 must be a non-empty string"):
        norm.predict(["左肾切除术", " "])
    with pytest.raises(TypeError, match="mention 0 must be a string"):
        norm.predict([None])  # type: ignore[list-item]
    assert norm.predict([]) == []
    for fusion in ("recall", "ranker"):
        p = ProcedureNormalizer(norm.mtcg, norm.kar, norm.terms, k=5, fusion=fusion).predict(["左肾切除术"])[0]
        assert p.terms and p.terms[0] in p.candidates
        assert (p.confidence is None) is (fusion == "recall")  # recall scores are no probability
    bm25 = ProcedureNormalizer(norm.mtcg, norm.kar, norm.terms, k=5, recall="bm25").predict(["左肾切除术"])[0]
    assert "肾切除术" in bm25.candidates

    from medrank.pipelines.procedures.kar import KeywordAttentiveRanker

    assert norm.kar.interaction == "recall"
    # a service sees unbounded distinct mentions: their keyword flags are an LRU, names are kept
    import medrank.pipelines.procedures.kar as kar_module

    kar_module_limit, kar_module.MENTION_FLAG_CACHE = kar_module.MENTION_FLAG_CACHE, 2
    try:
        for text in ("左肾切除术", "右肾切除术", "左肾切除术", "脑膜切开术"):
            norm.kar.keyword_flags(text, "query")
        assert list(norm.kar._mention_flags) == ["左肾切除术", "脑膜切开术"]
    finally:
        kar_module.MENTION_FLAG_CACHE = kar_module_limit
    # the batched warm-up computes the same name flags as one name at a time
    names = list(norm.terms.names)
    one_by_one = {n: norm.kar.keyword_flags(n, "passage") for n in names}
    norm.kar._name_flags.clear()
    norm.warm_up()
    assert set(norm.kar._name_flags) == set(names)
    for n in names:
        assert all((a == b).all() for a, b in zip(norm.kar._name_flags[n], one_by_one[n], strict=True))
    with pytest.raises(ValueError, match="mention_vec"):
        norm.kar.score(["左肾切除术"], ["肾切除术"])
    with pytest.raises(ValueError, match="interaction"):
        KeywordAttentiveRanker(norm.mtcg.bi, SITES, TYPES, interaction="cosine")
    paper_head = KeywordAttentiveRanker(norm.mtcg.bi, SITES, TYPES, interaction=False)
    probs = paper_head.score(["左肾切除术", "左肾切除术"], ["肾切除术", "肾切开术"])
    assert probs.shape == (2,) and ((probs > 0) & (probs < 1)).all()
    # list context (not in the paper): starts as the point-wise head, then scores depend on the competitors
    # but not on their order, and score() never splits one mention's candidates across batches
    listed = KeywordAttentiveRanker(norm.mtcg.bi, SITES, TYPES, interaction=False, list_context=True)
    listed.load_state_dict(paper_head.state_dict(), strict=False)
    ms, cs = ["左肾切除术"] * 3 + ["脑膜切开术"] * 2, ["肾切除术", "肾切开术", "脑膜切开术", "脑膜切开术", "肾切除术"]
    assert np.allclose(listed.score(ms, cs), paper_head.score(ms, cs), atol=1e-6)
    torch.nn.init.normal_(listed.list_attn.out_proj.weight)
    before = listed.score(ms, cs)
    swapped = listed.score([ms[1], ms[0], ms[2], ms[3], ms[4]], [cs[1], cs[0], cs[2], cs[3], cs[4]])
    assert np.allclose(swapped[[1, 0, 2, 3, 4]], before, atol=1e-5) and not np.allclose(before, paper_head.score(ms, cs), atol=1e-4)
    assert np.allclose(listed.score(ms, cs, batch_size=2), before, atol=1e-5)  # whole lists per batch
    assert np.allclose(listed.score(ms[:3], cs[:3]), before[:3], atol=1e-5)  # the other mention's list does not leak in
    from medrank.pipelines.procedures.kar import _batches, mention_runs

    assert mention_runs(["a", "a", "b", "a"]) == [(0, 2), (2, 3), (3, 4)]
    assert _batches(["a", "a", "b", "b", "b", "c"], 3, whole_runs=True) == [slice(0, 2), slice(2, 5), slice(5, 6)]

    # the point-wise baseline: a plain cross-encoder trained and evaluated on BM25's candidates, ranked by s_r
    pw = train_kar({"task": "procedures-kar", "mtcg": str(tmp_path / "mtcg" / "model"), "k": 5, "kar_recall": "bm25", "kar_fusion": "ranker",
                    "kar_keyword_attention": False, "kar_interaction": "none", "theta_grid": [0.8], **common} | {"epochs": 1}, tmp_path / "pw")
    pointwise = ProcedureNormalizer.load(tmp_path / "pw", data_root=str(data_dir))
    assert (pointwise.recall, pointwise.fusion, pointwise.kar.keyword_attention) == ("bm25", "ranker", False)
    p = pointwise.predict(["左肾切除术"])[0]
    assert p.final == p.ranker_score and "肾切除术" in p.candidates and set(pw["val"]) >= {"single", "multi", "total"}
    with pytest.raises(ValueError, match="kar_recall"):
        train_kar({"task": "procedures-kar", "mtcg": str(tmp_path / "mtcg" / "model"), "kar_recall": "tfidf", **common}, tmp_path / "bad")

    # a listwise term (kar_listwise_weight > 0) trains on whole candidate lists: every mention's rows in one batch
    from medrank.pipelines.procedures.config import ProcedureConfig
    from medrank.pipelines.procedures.training import KARTask

    lw_cfg = {"task": "procedures-kar", "mtcg": str(tmp_path / "mtcg" / "model"), "k": 5, "kar_listwise_weight": 1.0,
              "theta_grid": [0.8], **common} | {"epochs": 1, "batch_size": 12}
    task = KARTask(ProcedureConfig.from_dict(lw_cfg), tmp_path / "lw")
    task.prepare_epoch(1)
    seen = [set(b[:, 0].astype(int).tolist()) for b in task.epoch_batches]
    assert sum(len(b) for b in seen) == len({int(e[0]) for e in task.examples}) == len(set().union(*seen))
    assert len(task.epoch_batches) == task.steps_per_epoch() and np.isfinite(task.loss_fn(task.epoch_batches[0]).item())
    assert set(train_kar(lw_cfg, tmp_path / "lw")["val"]) >= {"single", "multi", "total"}
    with pytest.raises(ValueError, match="kar_listwise_weight"):
        ProcedureConfig.from_dict({"task": "procedures-kar", "kar_listwise_weight": -1})
    with pytest.raises(ValueError, match="kar_list_context needs"):
        ProcedureConfig.from_dict({"task": "procedures-kar", "kar_list_context": True})

    # a deeper KAR (kar_train_layers > MTCG's train_layers) reads its own, shallower frozen bottom;
    # its last blocks start from MTCG's trained top, the ones below from the base blocks
    from medrank.encoders.blocks import encoder_blocks

    deep_cfg = {"task": "procedures-kar", "mtcg": str(tmp_path / "mtcg" / "model"), "k": 5, "kar_train_layers": 2, "kar_init": "mtcg",
                "theta_grid": [0.8], **common} | {"epochs": 1}
    deep_task = KARTask(ProcedureConfig.from_dict(deep_cfg), tmp_path / "deep")
    mtcg_blocks = encoder_blocks(deep_task.mtcg.bi.encoder.model)
    assert (deep_task.kar.bottom.n_frozen, deep_task.mtcg.bi.n_frozen, len(deep_task.kar.top)) == (1, 2, 2)
    for block, source in ((deep_task.kar.top[0], mtcg_blocks[1]), (deep_task.kar.top[1], mtcg_blocks[2])):
        assert all(torch.equal(a, b) for a, b in zip(block.state_dict().values(), source.state_dict().values(), strict=True))
    # MTCG's own blocks stay frozen (the deeper bottom must not flip them back to trainable)
    assert not any(p.requires_grad for p in deep_task.mtcg.parameters())
    train_kar(deep_cfg, tmp_path / "deep")
    deep = ProcedureNormalizer.load(tmp_path / "deep", data_root=str(data_dir))
    assert deep.kar.bottom is not deep.mtcg.bi and deep.kar.bottom.n_frozen == 1
    one, batch = deep.normalize_one("右甲状腺叶切除术"), deep.predict(["右甲状腺叶切除术"])[0]
    assert one.candidates == batch.candidates and one.terms == batch.terms and np.allclose(one.final, batch.final, atol=1e-4)
    with pytest.raises(ValueError, match="kar_train_layers"):
        ProcedureConfig.from_dict({"task": "procedures-kar", "kar_train_layers": 0})

    # a KAR shallower than MTCG reads MTCG's own trained bottom: one mention pass serves both,
    # and the names' cached states are filed under MTCG's weights
    from safetensors.torch import save_file

    from medrank.pipelines.procedures.mtcg import read_weights

    train_mtcg(mtcg_cfg | {"train_layers": 2, "epochs": 1}, tmp_path / "mtcg2")
    shallow_cfg = deep_cfg | {"mtcg": str(tmp_path / "mtcg2" / "model"), "kar_train_layers": 1}
    shallow_task = KARTask(ProcedureConfig.from_dict(shallow_cfg), tmp_path / "shallow")
    # kar_init: mtcg gives the one joint block MTCG's *last* trained block; MTCG stays frozen
    last = encoder_blocks(shallow_task.mtcg.bi.encoder.model)[2]
    assert all(torch.equal(a, b) for a, b in zip(shallow_task.kar.top[0].state_dict().values(), last.state_dict().values(), strict=True))
    assert not any(p.requires_grad for p in shallow_task.mtcg.parameters())
    train_kar(shallow_cfg, tmp_path / "shallow")
    shallow = ProcedureNormalizer.load(tmp_path / "shallow", data_root=str(data_dir))
    assert shallow.kar.bottom.encoder is shallow.mtcg.bi.encoder and (shallow.kar.bottom.n_frozen, shallow.mtcg.bi.n_frozen) == (2, 1)
    state, digest = read_weights(tmp_path / "mtcg2" / "model")
    assert shallow.mtcg.weights_digest == digest == shallow.kar.bottom.trained_key
    assert json.loads((tmp_path / "shallow" / "model" / "kar.json").read_text(encoding="utf-8"))["mtcg_weights"] == digest
    assert (tmp_path / "cache" / shallow.kar.bottom.cache_key()).is_dir()
    one, batch = shallow.normalize_one("右甲状腺叶切除术"), shallow.predict(["右甲状腺叶切除术"])[0]
    assert one.candidates == batch.candidates and one.terms == batch.terms and np.allclose(one.final, batch.final, atol=1e-4)
    assert np.allclose(one.recall_score, batch.recall_score, atol=1e-4)
    # MTCG re-trained into the same folder: the KAR trained over its old blocks refuses to load
    save_file({k: v + 0.01 for k, v in state.items()}, str(tmp_path / "mtcg2" / "model" / "mtcg.safetensors"))
    with pytest.raises(ValueError, match="MTCG re-trained since"):
        ProcedureNormalizer.load(tmp_path / "shallow", data_root=str(data_dir))

    # the learned fusion (not in the paper) extends the KAR run; its normaliser defaults to it
    from medrank.pipelines.procedures.training import train_fusion

    fused = train_fusion({"task": "procedures-fusion", "kar": str(tmp_path / "kar"), "memory_k": 3, "theta_grid": [0.5, 0.8],
                          "fusion_ranker": "logit", "data_root": str(data_dir), "threads": 1, "show_progress": False}, tmp_path / "fusion")
    assert set(fused["weights"]) == {"s_c", "logit(s_r)", "vote_sum", "vote_max", "vote_nn1"} and fused["theta"] in (0.5, 0.8)
    assert 0 <= fused["train_valid_learned_cv"] <= 100
    assert fused["val_fb"] == kar["val"]  # the same KAR and θ under FB
    learned = ProcedureNormalizer.load(tmp_path / "fusion", data_root=str(data_dir))
    assert learned.fusion == "learned" and len(learned.memory) == len(TRAIN) and learned.learned.ranker == "logit"
    one, batch = learned.normalize_one("左肾切除术"), learned.predict(["左肾切除术"])[0]
    assert one.terms == batch.terms and np.allclose(one.final, batch.final, atol=1e-4)
    assert all(0 < f < 1 for f in one.final)
    fb = ProcedureNormalizer.load(tmp_path / "fusion", data_root=str(data_dir), fusion="fb").predict(["左肾切除术"])[0]
    monkeypatch.chdir(tmp_path)  # run directories given relative to the working directory load too
    assert fb.final == ProcedureNormalizer.load("kar", data_root=str(data_dir)).predict(["左肾切除术"])[0].final
    assert ProcedureNormalizer.load("fusion", data_root=str(data_dir)).fusion == "learned"
    # the manifests name MTCG and KAR relative to the run, so a copied runs/ tree loads without the original
    import shutil

    manifest = json.loads((tmp_path / "fusion" / "normalizer.json").read_text(encoding="utf-8"))
    assert (manifest["mtcg"], manifest["kar_model"]) == (str(Path("..") / "mtcg" / "model"), str(Path("..") / "kar" / "model"))
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    for run in ("mtcg", "kar", "fusion"):
        shutil.move(str(tmp_path / run), str(moved / run))
    relocated = ProcedureNormalizer.load(moved / "fusion", data_root=str(data_dir)).predict(["左肾切除术"])[0]
    assert relocated.terms == batch.terms and np.allclose(relocated.final, batch.final, atol=1e-6)
    for run in ("mtcg", "kar", "fusion"):
        shutil.move(str(moved / run), str(tmp_path / run))
    with pytest.raises(ValueError, match="LearnedFusion"):
        ProcedureNormalizer(norm.mtcg, norm.kar, norm.terms, k=5, fusion="learned")
    with pytest.raises(FileNotFoundError, match="kar.yaml"):
        train_fusion({"task": "procedures-fusion", "kar": str(tmp_path / "mtcg"), "data_root": str(data_dir)}, tmp_path / "f2")

    report = evaluate_procedures(None, "val", tmp_path / "kar", {"data": str(data_dir), "baselines": "1"})
    assert {"tf-idf", "edit-distance"} <= set(report["systems"]) and report["n"] == len(VAL)
    assert report["systems"]["edit-distance"]["multi"] == 0.0  # one name per mention → every multi-term mention is wrong
    # the frozen bottom on ONNX Runtime: the same answers as torch, on both paths, and the evaluator takes the backend
    served = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir), backend="onnx")
    assert served.backend == "onnx" and served.mtcg.bi.cache_key() != norm.mtcg.bi.cache_key()
    torch_answers = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir)).predict([t for t, _ in VAL])
    onnx_answers = served.predict([t for t, _ in VAL])
    assert [p.terms for p in onnx_answers] == [p.terms for p in torch_answers]
    assert np.allclose([p.final for p in onnx_answers], [p.final for p in torch_answers], atol=1e-3)
    assert served.normalize_one(VAL[0][0]).terms == onnx_answers[0].terms
    onnx_report = evaluate_procedures(None, "val", tmp_path / "kar", {"data": str(data_dir), "backend": "onnx"})
    (name,) = onnx_report["systems"]
    assert "backend=onnx" in name and onnx_report["systems"][name]["total"] == next(
        v["total"] for k, v in report["systems"].items() if k.startswith("mtcg+kar"))
    with pytest.raises(ValueError, match="backend must be one of"):
        evaluate_procedures(None, "val", tmp_path / "kar", {"data": str(data_dir), "backend": "tpu"})

    # the online strategy mines with the current model and never returns gold
    mentions = load_mentions("train", data_dir)
    strat = OnlineNegatives(mentions, norm.terms, pool=4)
    strat.prepare(1, norm.mtcg)
    negs = strat.sample(np.arange(len(mentions)), [m.terms[0] for m in mentions], 4, np.random.default_rng(0))
    assert all(not set(n) & set(m.terms) for n, m in zip(negs, mentions, strict=True))


def test_continue_frozen_matches_a_deeper_frozen_bottom() -> None:
    from medrank.encoders.blocks import continue_frozen, frozen_bottom

    enc = tiny_chinese_encoder()
    features = enc.tokenize(["右甲状腺叶切除术", "肾切除术"], "query")
    shallow = frozen_bottom(enc.model, 1, features)
    deeper = continue_frozen(enc.model, shallow, features["attention_mask"], 1, 3)
    real = features["attention_mask"].bool()
    assert torch.allclose(deeper[real], frozen_bottom(enc.model, 3, features)[real], atol=1e-5)
    assert continue_frozen(enc.model, shallow, features["attention_mask"], 1, 1) is shallow
    with pytest.raises(ValueError, match="start <= end"):
        continue_frozen(enc.model, shallow, features["attention_mask"], 2, 1)


def test_kar_bottom_for_shares_or_builds_a_shallower_bottom() -> None:
    from medrank.pipelines.procedures.kar import kar_bottom_for
    from medrank.pipelines.procedures.mtcg import MTCG

    mtcg = MTCG(tiny_chinese_encoder(), train_layers=1)
    flags = [p.requires_grad for p in mtcg.parameters()]
    assert kar_bottom_for(mtcg, None) is mtcg.bi and kar_bottom_for(mtcg, 1) is mtcg.bi
    deeper = kar_bottom_for(mtcg, 3)
    assert deeper.n_frozen == 0 and deeper.encoder is mtcg.bi.encoder and deeper.cache_key() != mtcg.bi.cache_key()
    # a deeper KAR's bottom holds only base blocks: MTCG's weights digest stays out of its cache key
    assert kar_bottom_for(mtcg, 3, trained_key="x").cache_key() == deeper.cache_key() and deeper.trained_key is None
    assert [p.requires_grad for p in mtcg.parameters()] == flags
    with pytest.raises(ValueError, match="needs trained_key"):
        kar_bottom_for(MTCG(tiny_chinese_encoder(), train_layers=2), 1)


def test_a_shallower_kar_reads_mtcgs_trained_bottom() -> None:
    """KAR with fewer joint blocks than MTCG trains: its bottom is MTCG's first blocks, cached under their digest."""
    from medrank.encoders.blocks import frozen_bottom
    from medrank.pipelines.procedures.kar import kar_bottom_for
    from medrank.pipelines.procedures.mtcg import MTCG, bottom_states

    mtcg = MTCG(tiny_chinese_encoder(), train_layers=3)
    flags = [p.requires_grad for p in mtcg.parameters()]
    bottom = kar_bottom_for(mtcg, 1, trained_key="abc")
    assert bottom.encoder is mtcg.bi.encoder and bottom.n_frozen == 2 and [p.requires_grad for p in mtcg.parameters()] == flags
    assert bottom.trained_key == "abc" and kar_bottom_for(mtcg, 3, trained_key="abc") is mtcg.bi  # shared: no key of its own
    # another MTCG's trained weights (another key) never share the cached name states
    assert bottom.cache_key() != kar_bottom_for(mtcg, 1, trained_key="abd").cache_key()
    assert bottom.cache_key() != MTCG(tiny_chinese_encoder(), train_layers=1).bi.cache_key()
    # one mention pass serves both: MTCG continuing from KAR's states at block 2 equals MTCG's own pass
    mtcg.eval()
    with torch.no_grad():
        kar_hidden, mask = bottom_states(bottom, ["右甲状腺叶切除术"], "query", use_cache=False)
        shared = mtcg.mention_forward(kar_hidden, mask, start=bottom.n_frozen)
        own = mtcg.mention_forward(*bottom_states(mtcg.bi, ["右甲状腺叶切除术"], "query", use_cache=False))
        features = mtcg.bi.encoder.tokenize(["右甲状腺叶切除术"], "query")
        assert torch.allclose(kar_hidden, frozen_bottom(mtcg.bi.encoder.model, 2, features))
    assert torch.allclose(shared[0], own[0], atol=1e-5) and torch.allclose(shared[1], own[1], atol=1e-5)
    with pytest.raises(ValueError, match="between the frozen bottom"):
        MTCG(tiny_chinese_encoder(), train_layers=1).mention_forward(kar_hidden, mask, start=0)
    with pytest.raises(ValueError, match="between the frozen bottom"):
        mtcg.mention_forward(kar_hidden, mask, start=4)


def test_config_rejects_unknown_keys() -> None:
    from medrank.pipelines.procedures.config import ProcedureConfig

    with pytest.raises(ValueError, match="unknown config keys"):
        ProcedureConfig.from_dict({"task": "procedures-mtcg", "negativs": "online"})
    with pytest.raises(ValueError, match="fusion_ranker"):
        ProcedureConfig.from_dict({"task": "procedures-fusion", "fusion_ranker": "rank"})
    with pytest.raises(ValueError, match="unknown negative strategy"):
        make_strategy("nope", [], TermBase(["a"], [("1",)]))


def test_multitask_triplet_loss_scale() -> None:
    # unit vectors scaled by 5: d+ = 5 * 0.6 = 3, d- = 5 * 1.0 = 5 → max(0, 3 - 5 + 1) = 0; margin 3 → 1
    mention = torch.tensor([[1.0, 0.0]])
    positive = torch.tensor([[0.82, 0.0]])  # distance 0.18 → scaled 0.9
    negative = torch.tensor([[[0.0, 0.0]]])  # distance 1.0 → scaled 5
    zeros, label = torch.zeros((1, 3)), torch.tensor([0])
    loss = MultiTaskTripletLoss(margin=5.0, count_weight=0.0, scale=5.0)(mention, positive, negative, zeros, label)
    assert loss.item() == pytest.approx(0.9 - 5.0 + 5.0, abs=1e-5)
    with pytest.raises(ValueError, match="scale"):
        MultiTaskTripletLoss(scale=0.0)


def test_special_rows_block_matches_the_full_block() -> None:
    from transformers import BertConfig, BertModel

    from medrank.pipelines.procedures.kar import special_rows_block

    torch.manual_seed(1)
    cfg = BertConfig(vocab_size=10, hidden_size=16, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32)
    block = BertModel(cfg).eval().encoder.layer[0]
    valid = torch.tensor([[1] * 9, [1] * 6 + [0] * 3], dtype=torch.bool)
    site = torch.zeros((2, 9), dtype=torch.bool)
    site[:, 4] = True
    typ = torch.zeros((2, 9), dtype=torch.bool)
    typ[0, 7] = True
    mask = kar_attention_mask(valid, site, typ)
    h = torch.randn(2, 9, 16)
    with torch.no_grad():
        assert torch.allclose(special_rows_block(block, h, mask), block(h, mask)[:, :3], atol=1e-5)


def test_packed_block_matches_the_full_block_at_real_positions() -> None:
    from transformers import BertConfig, BertModel

    from medrank.pipelines.procedures.kar import packed_block

    torch.manual_seed(2)
    cfg = BertConfig(vocab_size=10, hidden_size=16, num_hidden_layers=1, num_attention_heads=4, intermediate_size=32)
    block = BertModel(cfg).eval().encoder.layer[0]
    # padding in the middle (a short mention) and at the end (a short candidate)
    valid = torch.tensor([[1] * 10, [1, 1, 1, 1, 1, 0, 0, 1, 1, 0], [1, 1, 1, 1, 0, 1, 1, 1, 1, 1]], dtype=torch.bool)
    site = torch.zeros((3, 10), dtype=torch.bool)
    site[:, 3] = True
    typ = torch.zeros((3, 10), dtype=torch.bool)
    typ[:, 8] = True
    mask = kar_attention_mask(valid, site, typ)
    h = torch.randn(3, 10, 16)
    with torch.no_grad():
        packed, full = packed_block(block, h, valid, mask), block(h, mask)
    assert torch.allclose(packed[valid], full[valid], atol=1e-5)
    assert (packed[~valid] == 0).all()
    # one mention against several candidates: positions 1:4 hold the same states in every row, and
    # projecting them once (shared) gives the per-row result
    h[:, 1:4] = h[0, 1:4]
    with torch.no_grad():
        shared, plain = packed_block(block, h, valid, mask, shared=(1, 4)), packed_block(block, h, valid, mask)
    assert torch.allclose(shared, plain, atol=1e-6) and not torch.equal(shared[0], shared[1])
    with pytest.raises(ValueError, match="shared positions"):
        packed_block(block, h, valid, mask, shared=(3, 5))  # position 4 is padding in row 2


def test_count_class_weights_and_weighted_count_loss() -> None:
    from medrank.pipelines.procedures.losses import count_class_weights

    w = count_class_weights([0] * 16 + [1] * 4)  # class 2 absent → weight 1; (20/16)^.5, (20/4)^.5 normalised to mean 1
    raw = torch.tensor([math.sqrt(20 / 16), math.sqrt(20 / 4)])
    assert torch.allclose(w[:2], raw / raw.mean()) and w[2].item() == 1.0
    logits = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    labels = torch.tensor([0, 1])
    z = torch.zeros((2, 2))
    far = torch.full((2, 1, 2), 10.0)  # negatives far beyond the margin: the triplet part is 0
    weight = torch.tensor([1.0, 3.0, 1.0])
    loss = MultiTaskTripletLoss(margin=1.0, class_weight=weight)(z, z, far, logits, labels)
    ce = -torch.log_softmax(logits, -1)[torch.arange(2), labels]
    assert loss.item() == pytest.approx(((ce[0] + 3 * ce[1]) / 4).item(), abs=1e-6)
    with pytest.raises(ValueError, match="class_weight"):
        MultiTaskTripletLoss(class_weight=torch.tensor([1.0, 0.0, 1.0]))


def test_term_prior_tuning_and_ranking(tmp_path: Path) -> None:
    from medrank.pipelines.procedures.normalizer import TermPrior, tune_prior

    terms = TermBase(["a", "b", "c"], [("1",), ("2",), ("3",)])
    term_emb = np.eye(3, dtype=np.float32)
    mentions = [Mention("0", "x", ("b",)), Mention("1", "y", ("c",))]
    # both mentions sit slightly closer to the unseen name "a"
    emb = np.array([[0.72, 0.69, 0.0], [0.72, 0.0, 0.69]], dtype=np.float32)
    weight, scores = tune_prior(emb, mentions, term_emb, terms, {"b", "c"}, grid=(0.0, 0.02, 0.1))
    assert scores == {0.0: 0.0, 0.02: 0.0, 0.1: 100.0} and weight == 0.1
    prior = TermPrior(frozenset({"b", "c"}), weight)
    prior.save(tmp_path)
    again = TermPrior.load(tmp_path)
    assert again == prior and TermPrior.load(tmp_path / "none") is None
    assert np.allclose(prior.bonus(terms), [0.0, 0.1, 0.1])


def test_mention_memory_votes_hand_computed(tmp_path: Path) -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    from medrank.pipelines.procedures.memory import MentionMemory

    texts = ["右肾切除术", "左肾切除术", "脑膜切开术"]
    memory = MentionMemory(texts, [["A"], ["A", "B"], ["C"]], k=2)
    vec = TfidfVectorizer(analyzer="char", ngram_range=(1, 2), sublinear_tf=True).fit(texts)
    m = vec.transform(texts)
    s = float((m[0] @ m[1].T).toarray()[0, 0])  # cosine of the two kidney mentions (rows are unit-norm)
    assert 0 < s < 1
    votes = memory.votes(["右肾切除术"], [["A", "B", "C", "D"]])
    # neighbours: itself (1.0), then 左肾切除术 (s); 脑膜切开术 is not among the k = 2
    expected = [[1 + s, 1.0, 1.0], [s, s, 0.0], [0, 0, 0], [0, 0, 0]]
    assert np.allclose(votes[0], expected)
    # the per-query fast path equals sklearn's transform + dot product, unseen characters included
    queries = ["右肾切除术", "左肾切开术", "乳房切除术", "xyz", "肾肾肾切"]
    assert np.allclose(memory.similarities(queries), (vec.transform(queries) @ m.T).toarray())
    assert not memory.similarities(["xyz"]).any()
    memory.save(tmp_path)
    again = MentionMemory.load(tmp_path)
    assert again is not None and again.k == 2 and np.allclose(again.votes(["右肾切除术"], [["A", "B", "C", "D"]]), votes)
    assert MentionMemory.load(tmp_path / "missing") is None
    with pytest.raises(ValueError, match="no gold"):
        MentionMemory(["右肾切除术"], [[]])
    with pytest.raises(ValueError, match="label sets"):
        MentionMemory(["右肾切除术"], [["A"], ["B"]])
    with pytest.raises(ValueError, match="candidate lists"):
        memory.votes(["右肾切除术"], [])


def test_learned_fusion_fit_score_and_save(tmp_path: Path) -> None:
    from medrank.pipelines.procedures.fusion import LearnedFusion

    rng = np.random.default_rng(0)
    n, k = 200, 5
    s_c, s_r = rng.random((n, k)), rng.random((n, k))
    gold = rng.integers(0, k, n)
    votes = np.zeros((n, k, 3))
    votes[np.arange(n), gold] = rng.uniform(0.5, 1.0, (n, 3))  # only the gold candidate gets votes
    feats = LearnedFusion.features(s_c, s_r, votes)
    labels = np.zeros((n, k), dtype=bool)
    labels[np.arange(n), gold] = True
    fusion = LearnedFusion.fit(feats.reshape(-1, 5), labels.reshape(-1)).with_theta(0.7)
    probs = fusion.score(s_c, s_r, votes)
    assert probs.shape == (n, k) and (probs.argmax(1) == gold).all()
    assert fusion.coef[2] > 0 and abs(fusion.coef[0]) < fusion.coef[2]  # votes carry the signal, s_c is noise
    fusion.save(tmp_path)
    again = LearnedFusion.load(tmp_path)
    assert again == fusion and np.allclose(again.score(s_c, s_r, votes), probs)
    with pytest.raises(ValueError, match="both gold"):
        LearnedFusion.fit(feats.reshape(-1, 5), np.zeros(n * k))
    with pytest.raises(ValueError, match="do not match"):
        LearnedFusion.features(s_c, s_r, votes[:, :, :2])
    import json

    raw = json.loads((tmp_path / LearnedFusion.FILE).read_text())
    (tmp_path / LearnedFusion.FILE).write_text(json.dumps(raw | {"features": ["s_c"]}))
    with pytest.raises(ValueError, match="features"):
        LearnedFusion.load(tmp_path)

    # ranker="logit": the regression reads log(s_r / (1 - s_r)), clipped away from 0 and 1, and reloads as such
    logit_feats = LearnedFusion.features(s_c, s_r, votes, "logit")
    assert np.allclose(logit_feats[..., 1], np.log(np.clip(s_r, 1e-6, 1 - 1e-6) / (1 - np.clip(s_r, 1e-6, 1 - 1e-6))))
    assert np.isfinite(LearnedFusion.features(np.zeros((1, 2)), np.array([[0.0, 1.0]]), np.zeros((1, 2, 3)), "logit")).all()
    by_logit = LearnedFusion.fit(logit_feats.reshape(-1, 5), labels.reshape(-1), ranker="logit").with_theta(0.6)
    assert by_logit.ranker == "logit" and by_logit.feature_names[1] == "logit(s_r)"
    by_logit.save(tmp_path)
    assert LearnedFusion.load(tmp_path) == by_logit
    assert np.allclose(by_logit.score(s_c, s_r, votes), 1 / (1 + np.exp(-(((logit_feats - by_logit.mean) / by_logit.scale) @ by_logit.coef + by_logit.intercept))))
    with pytest.raises(ValueError, match="ranker must be one of"):
        LearnedFusion.features(s_c, s_r, votes, "rank")


def test_fusion_cv_accuracy_hand_computed() -> None:
    """Out-of-fold exact-set accuracy: 100 when s_r marks the gold, 50 when half the mentions lack it among their candidates."""
    from types import SimpleNamespace

    from medrank.pipelines.procedures.config import ProcedureConfig
    from medrank.pipelines.procedures.training import _fusion_cv_accuracy

    rng = np.random.default_rng(0)
    n, k = 40, 4
    names = [[f"m{i}c{j}" for j in range(k)] for i in range(n)]
    gold_col = rng.integers(0, k, n)
    labels = np.zeros((n, k), dtype=bool)
    labels[np.arange(n), gold_col] = True
    s_c = rng.random((n, k))
    s_r = np.where(labels, 0.9, 0.1) + 0.01 * rng.random((n, k))
    votes = np.zeros((n, k, 3))
    preds = [SimpleNamespace(candidates=names[i], count_class=0) for i in range(n)]
    cfg = ProcedureConfig.from_dict({"task": "procedures-fusion", "theta_grid": [0.8]})
    valid = [SimpleNamespace(terms=(names[i][gold_col[i]],)) for i in range(n)]
    assert _fusion_cv_accuracy(cfg, valid, preds, s_c, s_r, votes, labels) == 100.0
    absent = [SimpleNamespace(terms=(names[i][gold_col[i]] if i % 2 else "elsewhere",)) for i in range(n)]
    assert _fusion_cv_accuracy(cfg, absent, preds, s_c, s_r, votes, labels) == 50.0


def test_kar_listwise_lists_hand_computed() -> None:
    import torch

    from medrank.pipelines.procedures.training import _as_lists

    # pair rows of three mentions in batch order 7, 3, 7, 3, 3, 9
    group = np.array([7, 3, 7, 3, 3, 9])
    scores = torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    labels = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 1.0])
    s, y, mask = _as_lists(group, scores, labels)
    # lists in mention order 3, 7, 9, each in batch order, padded to 3
    assert torch.equal(s, torch.tensor([[0.2, 0.4, 0.5], [0.1, 0.3, 0.0], [0.6, 0.0, 0.0]]))
    assert torch.equal(y, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
    assert mask.tolist() == [[True, True, True], [True, True, False], [True, False, False]]
    # gradients flow back to the pair scores
    leaf = scores.clone().requires_grad_(True)
    _as_lists(group, leaf, labels)[0].sum().backward()
    assert torch.equal(leaf.grad, torch.ones(6))


def test_theta_and_evaluator_inputs_are_checked(tmp_path):
    import math

    from medrank.pipelines.procedures.evaluation import evaluate_procedures
    from medrank.pipelines.procedures.fusion import check_theta

    assert check_theta(0.0) == 0.0 and check_theta(1.0) == 1.0
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="theta must be in"):
            check_theta(bad)
    with pytest.raises(ValueError, match="unknown options"):
        evaluate_procedures(None, None, None, {"thetta": 0.8})
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(ValueError, match="no mentions"):
        evaluate_procedures(empty, None, None, {})


def test_a_single_string_is_not_a_list_of_mentions():
    from medrank.pipelines.procedures.normalizer import check_mentions

    with pytest.raises(TypeError, match="list of mentions"):
        check_mentions("阑尾切除术")


def test_term_confidence_reads_the_probability_of_each_fusion() -> None:
    from medrank.pipelines.procedures.normalizer import LOW_CONFIDENCE, term_confidence

    final, s_r = [0.9, 0.4, 0.1], [0.95, 0.6, 0.2]
    assert term_confidence("learned", [0, 1], final, s_r) == 0.4  # the weakest chosen name
    assert term_confidence("fb", [0, 1], final, s_r) == 0.6  # FB's mean with s_c is no probability: KAR's
    assert term_confidence("ranker", [2], final, s_r) == 0.2
    assert term_confidence("recall", [0], final, None) is None
    assert term_confidence("fb", [0], final, None) is None
    assert term_confidence("learned", [], final, s_r) is None
    assert LOW_CONFIDENCE == 0.5


def test_block_forward_is_the_block_and_submodules_are_its_modules() -> None:
    from medrank.encoders.blocks import block_forward, model_attention_mask, submodules
    from tests.conftest import make_tiny_bert

    model, tok = make_tiny_bert(seed=5)
    features = tok(["左肾切除术", "脑膜切开术 fever"], padding=True, return_tensors="pt")
    hidden = model.embeddings(input_ids=features["input_ids"])
    mask = model_attention_mask(model, hidden, features["attention_mask"])
    block = model.encoder.layer[0]
    with torch.no_grad():
        assert torch.allclose(block_forward(block, hidden, mask), block(hidden, mask), atol=1e-6)
        seen = []
        handle = block.register_forward_hook(lambda module, args, out: seen.append(module))
        block_forward(block, hidden, mask)  # a hooked block is called as a whole, so its hooks run
        handle.remove()
    assert seen == [block]
    assert {id(m) for m in submodules(model)} == {id(m) for m in model.modules()}
    assert len(submodules(model)) == len(list(model.modules()))  # each module once
    # training: same dropout draws, same gradients; and the plain path never calls the block itself
    block.train()
    grads = []
    hidden = hidden.detach()
    for run in (lambda: block(hidden, mask), lambda: block_forward(block, hidden, mask)):
        torch.manual_seed(7)
        model.zero_grad()
        out = run()
        out.sum().backward()
        grads.append((out.detach(), block.intermediate.dense.weight.grad.clone()))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])

    def whole_block(*args, **kwargs):
        raise AssertionError("the plain path must not call the block")

    block.forward = whole_block
    block_forward(block, hidden, mask)


def test_unknown_characters_get_tokens_rows_and_travel_with_mtcg(data_dir: Path, tmp_path: Path) -> None:
    """肾 and 腺 missing from the vocabulary: 肾切除术 and 腺切除术 would be one token sequence."""
    from medrank.encoders.vocab import unknown_characters
    from medrank.pipelines.procedures.mtcg import MTCG, add_saved_characters, read_weights
    from medrank.pipelines.procedures.normalizer import ProcedureNormalizer
    from medrank.pipelines.procedures.training import train_kar, train_mtcg

    enc = tiny_chinese_encoder(missing="肾腺")
    assert unknown_characters(enc.tokenizer, ["左肾切除术", "甲状腺", "肾"]) == ["肾", "腺"]
    before = enc.tokenize(["左肾切除术"])["input_ids"][0].tolist()
    key = MTCG(enc, train_layers=1).bi.cache_key()
    rows = enc.add_characters(["肾", "腺"], seed=13)
    after = enc.tokenize(["左肾切除术"])["input_ids"][0].tolist()
    new_id = enc.tokenizer.convert_tokens_to_ids("肾")
    # the same tokenisation, the unknown token replaced by the character's own id, with the drawn row
    assert len(after) == len(before) and [a if a != new_id else enc.tokenizer.unk_token_id for a in after] == before
    assert torch.equal(enc.model.get_input_embeddings().weight[new_id], rows[0]) and not torch.equal(rows[0], rows[1])
    # each row is seeded by its character: adding 腺 alone draws the same row for it
    alone = tiny_chinese_encoder(missing="肾腺")
    assert torch.equal(alone.add_characters(["腺"], seed=13)[0], rows[1])
    # cached frozen-bottom states of the old tokenisation are never reused
    assert MTCG(enc, train_layers=1).bi.cache_key() != key
    with pytest.raises(ValueError, match="already has tokens"):
        enc.add_characters(["肾"])
    with pytest.raises(ValueError, match="single non-space"):
        enc.add_characters(["肾切"])
    assert enc.add_characters([]).shape == (0, 32) and enc.added_characters == ("肾", "腺")
    late = tiny_chinese_encoder(missing="肾")
    model = MTCG(late, train_layers=1)
    late.add_characters(["肾"])
    with pytest.raises(RuntimeError, match="after this model was built"):
        model.bi.cache_key()
    with pytest.raises(RuntimeError, match="after this model was built"):
        model.bi.fill_cache(["肾切除术"], "passage")

    base = tmp_path / "tiny-zh"
    tiny_chinese_encoder(base, missing="肾腺")
    common = {"data_root": str(data_dir), "encoder": str(base), "max_length": 40, "train_layers": 1, "batch_size": 8,
              "epochs": 1, "lr": 1e-3, "threads": 1, "cache_dir": str(tmp_path / "cache"), "show_progress": False}
    train_mtcg({"task": "procedures-mtcg", "n_negatives": 3, "add_unknown_characters": True, **common}, tmp_path / "mtcg")
    spec = json.loads((tmp_path / "mtcg" / "model" / "mtcg.json").read_text(encoding="utf-8"))
    assert spec["added_characters"] == "肾腺"
    # resuming over other data (data_root is not a compared setting) under another vocabulary is refused, not mixed
    import shutil

    other = tmp_path / "other-data"
    shutil.copytree(data_dir, other)
    for f in (other / "chip2019-procedures").rglob("*.t*"):
        f.write_text(f.read_text(encoding="utf-8").replace("腺", "膜"), encoding="utf-8")
    with pytest.raises(ValueError, match="started with added characters '肾腺'"):
        train_mtcg({"task": "procedures-mtcg", "n_negatives": 3, "add_unknown_characters": True, **common, "data_root": str(other)}, tmp_path / "mtcg")
    loaded = MTCG.load(tmp_path / "mtcg" / "model")
    assert loaded.bi.encoder.added_characters == ("肾", "腺")
    names = ["肾切除术", "单侧肾上腺切除术"]
    assert np.allclose(loaded.encode_terms(names), MTCG.load(tmp_path / "mtcg" / "model").encode_terms(names), atol=1e-6)
    # weights trained with added characters do not load into an encoder without them
    state, digest = read_weights(tmp_path / "mtcg" / "model")
    with pytest.raises(ValueError, match="other characters"):
        MTCG(tiny_chinese_encoder(missing="肾腺"), train_layers=1).load_state(state, digest)
    plain = tiny_chinese_encoder(missing="肾腺")
    add_saved_characters(plain, spec, state)
    MTCG(plain, train_layers=1).load_state(state, digest)

    train_kar({"task": "procedures-kar", "mtcg": str(tmp_path / "mtcg" / "model"), "k": 5, "theta_grid": [0.8], **common}, tmp_path / "kar")
    norm = ProcedureNormalizer.load(tmp_path / "kar", data_root=str(data_dir))
    assert norm.kar.bottom.encoder.added_characters == ("肾", "腺")
    one, batch = norm.normalize_one("左肾切除术"), norm.predict(["左肾切除术"])[0]
    assert one.candidates == batch.candidates and np.allclose(one.final, batch.final, atol=1e-4)
