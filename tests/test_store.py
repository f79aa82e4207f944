"""Store behaviour shared by both backends (embedded: fast; pgvector: slow, real server), plus embedded
specifics: snapshots, catch-up from SQLite, format versions, atomic saves, the writer lock."""

from __future__ import annotations

import itertools
import json
import shutil

import numpy as np
import pytest
from store_support import start_postgres_or_skip

from medrank.store import EmbeddedStore, Hit, Store, StoreFormatError, open_store
from medrank.store.base import RRF_K

DIM = 16
TEXTS = [
    "fever and cough",
    "chest pain on exertion",
    "severe headache with nausea",
    "lower back pain",
    "itchy rash on arms",
    "abdominal pain and vomiting",
    "dizziness and fatigue",
    "头痛 伴 恶心",
]


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def corpus(seed: int = 0):
    rng = np.random.default_rng(seed)
    ids = [f"d{i}" for i in range(len(TEXTS))]
    vectors = unit(rng, len(TEXTS))
    metadata = [
        {"source": "hpo" if i % 2 == 0 else "icd", "lang": "zh" if "头" in t else "en", "rank": i, "core": i < 3}
        for i, t in enumerate(TEXTS)
    ]
    return ids, list(TEXTS), vectors, metadata


_collections = itertools.count()


@pytest.fixture(scope="module")
def pg_server():
    server = start_postgres_or_skip()
    yield server
    server.stop()


@pytest.fixture(params=["embedded", pytest.param("pgvector", marks=pytest.mark.slow)])
def make_store(request, tmp_path):
    """``make_store(**options) -> Store`` for each backend; every call opens a new empty store."""
    opened: list[Store] = []

    def make(**options) -> Store:
        if request.param == "embedded":
            uri = f"embedded:{tmp_path / f'store{len(opened)}'}"
        else:
            server = request.getfixturevalue("pg_server")
            options.pop("index", None)
            uri = f"{server.dsn}?collection=t{next(_collections)}"
        store = open_store(uri, dim=DIM, language=options.pop("language", "auto"), **options)
        opened.append(store)
        return store

    make.backend = request.param
    yield make
    for store in opened:
        store.close()


def ids_of(hits: list[Hit]) -> list[str]:
    return [h.id for h in hits]


def test_dense_search_is_exact_inner_product(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    assert store.add(ids, texts, vectors, metadata) == len(ids)
    assert store.count() == len(ids)
    query = unit(np.random.default_rng(7), 1)[0]
    hits = store.search(query, None, k=3, mode="dense")
    expected = np.argsort(-(vectors @ query))[:3]
    assert ids_of(hits) == [ids[i] for i in expected]
    np.testing.assert_allclose([h.score for h in hits], (vectors @ query)[expected], rtol=1e-5, atol=1e-5)
    top = hits[0]
    assert top.text == texts[expected[0]] and top.metadata == metadata[expected[0]]


def test_upsert_replaces_and_delete_removes(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    store.add(ids, texts, vectors, metadata)
    new_vec = -vectors[3:4]
    assert store.add(["d0"], ["replaced text about migraine"], new_vec, [{"source": "new"}]) == 1
    assert store.count() == len(ids)
    hit = store.search(new_vec[0], None, k=1, mode="dense")[0]
    assert (hit.id, hit.text, hit.metadata) == ("d0", "replaced text about migraine", {"source": "new"})
    scores = {h.id: h.score for h in store.search(vectors[0], None, k=len(ids), mode="dense")}
    assert scores["d0"] == pytest.approx(float(new_vec[0] @ vectors[0]), abs=1e-5)  # the old vector is gone
    assert store.delete(["d1", "d2", "missing"]) == 2
    assert store.count() == len(ids) - 2
    found = ids_of(store.search(vectors[1], "chest pain headache", k=10))
    assert "d1" not in found and "d2" not in found
    # duplicate ids inside one add: the last occurrence wins
    store.add(["x", "x"], ["first", "second"], vectors[:2])
    assert store.search(vectors[1], None, k=1, mode="dense")[0].text == "second"


def test_metadata_filters(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    store.add(ids, texts, vectors, metadata)
    q = vectors[0]
    hpo = {i for i, m in zip(ids, metadata, strict=True) if m["source"] == "hpo"}
    assert set(ids_of(store.search(q, None, k=10, mode="dense", filter={"source": "hpo"}))) == hpo
    assert ids_of(store.search(q, None, k=10, mode="dense", filter={"source": "icd", "lang": "zh"})) == ["d7"]
    assert set(ids_of(store.search(q, None, k=10, mode="dense", filter={"rank": [1, 2]}))) == {"d1", "d2"}
    assert set(ids_of(store.search(q, None, k=10, mode="dense", filter={"core": True}))) == {"d0", "d1", "d2"}
    # an int never matches a bool (JSON types differ), a missing key never matches
    assert store.search(q, None, k=10, mode="dense", filter={"rank": True}) == []
    assert store.search(q, None, k=10, mode="dense", filter={"nope": "x"}) == []
    assert ids_of(store.search(None, "pain", k=10, mode="bm25", filter={"source": "icd"})) == ["d1", "d3", "d5"]
    assert set(ids_of(store.search(q, "pain", k=10, mode="hybrid", filter={"lang": "zh"}))) == {"d7"}


def test_lexical_and_hybrid_rrf(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    store.add(ids, texts, vectors, metadata)
    lexical = store.search(None, "back pain", k=10, mode="bm25")
    assert lexical[0].id == "d3"  # both query words
    assert set(ids_of(lexical)) == {"d1", "d3", "d5"}  # only texts sharing a token
    assert all(h.score > 0 for h in lexical)
    assert ids_of(store.search(None, "头痛", k=3, mode="bm25")) == ["d7"]
    # the top k of those, as over every entry: by score, ties in the order the entries were added
    assert ids_of(store.search(None, "back pain", k=2, mode="bm25")) == ids_of(lexical)[:2]
    assert [h.score for h in lexical] == sorted((h.score for h in lexical), reverse=True)
    store.add(["t1", "t2", "t3"], ["cough", "cough", "cough"], vectors[:3])
    assert ids_of(store.search(None, "cough", k=2, mode="bm25")) == ["t1", "t2"]
    store.delete(["t1", "t2", "t3"])
    # hybrid = reciprocal rank fusion of the dense and lexical rankings
    q = vectors[5]
    dense = ids_of(store.search(q, None, k=100, mode="dense"))
    hybrid = store.search(q, "back pain", k=len(ids), mode="hybrid")
    lex = ids_of(lexical)
    for hit in hybrid:
        expected = 1 / (RRF_K + dense.index(hit.id) + 1)
        if hit.id in lex:
            expected += 1 / (RRF_K + lex.index(hit.id) + 1)
        assert hit.score == pytest.approx(expected)
    assert [h.score for h in hybrid] == sorted((h.score for h in hybrid), reverse=True)
    # a missing side is skipped
    assert ids_of(store.search(q, None, k=3)) == dense[:3]
    assert ids_of(store.search(None, "back pain", k=3)) == lex[:3]


def test_search_batch_matches_single_queries(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    store.add(ids, texts, vectors, metadata)
    qtexts = ["pain", None, "fever cough"]
    batch = store.search_batch(vectors[:3], qtexts, k=4, mode="hybrid")
    for v, t, hits in zip(vectors[:3], qtexts, batch, strict=True):
        assert hits == store.search(v, t, k=4, mode="hybrid")
    # a few queries at once are one matrix product over the flat vectors: the same hits and scores as one by one,
    # also when more are asked for than the store holds
    many = len(ids) + 3
    batch = store.search_batch(vectors[:3], [None] * 3, k=many, mode="dense")
    for v, hits in zip(vectors[:3], batch, strict=True):
        one = store.search(v, None, k=many, mode="dense")
        assert ids_of(hits) == ids_of(one) and len(hits) == len(ids)
        np.testing.assert_allclose([h.score for h in hits], [h.score for h in one], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("native", [True, False])
def test_a_large_flat_store_scanned_in_bf16_answers_exactly(tmp_path, monkeypatch, native):
    # above BF16_SCAN_MIN vectors a CPU with native bf16 scans a bf16 copy and rescores its candidates in float32:
    # the hits and scores must be the float32 scan's (forced here either way: bf16 also runs where it is emulated)
    import medrank.store.embedded as embedded

    monkeypatch.setattr(embedded, "native_bf16", lambda: native)
    rng = np.random.default_rng(11)
    n, dim = embedded.BF16_SCAN_MIN + 500, 48
    vectors = unit(rng, n, dim)
    vectors[7] = vectors[3]  # an exact tie: kept in index order, as by the float32 scan
    store = open_store(f"embedded:{tmp_path / 's'}", dim=dim, language="en")
    store.add([f"e{i}" for i in range(n)], [f"entry {i}" for i in range(n)], vectors, [{} for _ in range(n)])
    queries = np.concatenate([unit(rng, 4, dim), vectors[3:4]])
    batch = store.search_batch(queries, [None] * len(queries), k=25, mode="dense")
    for q, hits in zip(queries, batch, strict=True):
        exact = vectors @ q
        order = np.argsort(-exact, kind="stable")[:25]
        assert ids_of(hits) == [f"e{i}" for i in order]
        np.testing.assert_allclose([h.score for h in hits], exact[order], rtol=1e-5, atol=1e-6)
    assert ids_of(batch[-1])[:2] == ["e3", "e7"]
    assert (store._bf16_vectors is not None) is native
    store.add(["new"], ["new entry"], queries[:1], [{}])  # a changed store gets a new bf16 copy
    assert ids_of(store.search_batch(queries[:2], [None, None], k=1, mode="dense")[0]) == ["new"]
    store.close()


def test_input_validation(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    with pytest.raises(ValueError, match="shape"):
        store.add(ids, texts, vectors[:, :4])
    with pytest.raises(ValueError, match="ids but"):
        store.add(ids[:2], texts, vectors)
    with pytest.raises(ValueError, match="non-empty string"):
        store.add([""], ["x"], vectors[:1])
    with pytest.raises(ValueError, match="NaN"):
        store.add(["a"], ["x"], np.full((1, DIM), np.nan, dtype=np.float32))
    store.add(ids, texts, vectors, metadata)
    with pytest.raises(ValueError, match="mode"):
        store.search(vectors[0], None, mode="sparse")
    with pytest.raises(ValueError, match="needs a query vector"):
        store.search(None, "pain", mode="dense")
    with pytest.raises(ValueError, match="needs a non-empty query text"):
        store.search(vectors[0], None, mode="bm25")
    with pytest.raises(ValueError, match="k must"):
        store.search(vectors[0], None, k=0)
    with pytest.raises(ValueError, match="dimensions"):
        store.search(vectors[0][:3], None)
    with pytest.raises(ValueError, match="filter key"):
        store.search(vectors[0], None, filter={"bad key'": 1})
    with pytest.raises(TypeError, match="values must be"):
        store.search(vectors[0], None, filter={"x": 1.5})


def test_reload_gives_identical_results(make_store):
    store = make_store()
    ids, texts, vectors, metadata = corpus()
    store.add(ids, texts, vectors, metadata)
    queries = unit(np.random.default_rng(3), 4)
    before = store.search_batch(queries, ["pain", "fever", "头痛", "rash"], k=5)
    store.save()
    uri = f"embedded:{store.path}" if make_store.backend == "embedded" else None
    if uri is None:
        from medrank.store.pgvector import PgVectorStore

        assert isinstance(store, PgVectorStore)
        uri = f"{store._pool.dsn}?collection={store.collection}"
    store.close()
    reopened = Store.load(uri)
    try:
        assert reopened.count() == len(ids)
        assert reopened.search_batch(queries, ["pain", "fever", "头痛", "rash"], k=5) == before
    finally:
        reopened.close()


# -- embedded specifics ------------------------------------------------------------------------------


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_embedded_catches_up_from_sqlite_after_crash(tmp_path, index):
    """Writes after the last snapshot live only in SQLite; reopening without save() must recover them."""
    ids, texts, vectors, metadata = corpus()
    store = open_store(f"embedded:{tmp_path}/s", dim=DIM, index=index)
    store.add(ids[:4], texts[:4], vectors[:4], metadata[:4])
    store.save()
    store.add(ids[4:], texts[4:], vectors[4:], metadata[4:])
    store.add(["d0"], ["replaced"], vectors[7:8])
    store.delete(["d1"])
    expected = store.search_batch(vectors, list(texts), k=4)
    store._release()  # simulate kill -9: no save, no close
    reopened = EmbeddedStore(tmp_path / "s")
    try:
        assert reopened.count() == len(ids) - 1
        assert reopened.search_batch(vectors, list(texts), k=4) == expected
        assert reopened.manifest["snapshot_seq"] < reopened._seq  # the snapshot really was older
    finally:
        reopened.close()


def test_embedded_hnsw_masks_deleted_nodes_and_compacts(tmp_path):
    rng = np.random.default_rng(1)
    vectors = unit(rng, 200)
    ids = [f"v{i}" for i in range(200)]
    store = open_store(f"embedded:{tmp_path}/h", dim=DIM, index="hnsw", hnsw_m=8)
    store.add(ids, ["t"] * 200, vectors)
    store.delete(ids[:50])
    assert store.faiss_index.ntotal == 200 and len(store._tombstones) == 50
    hits = store.search(vectors[0], None, k=10, mode="dense")
    assert all(int(h.id[1:]) >= 50 for h in hits) and len(hits) == 10
    store.save()  # >10% masked: the graph is rebuilt without them
    assert store.faiss_index.ntotal == 150 and len(store._tombstones) == 0
    assert store.search(vectors[60], None, k=1, mode="dense")[0].id == "v60"
    store.close()


def test_embedded_format_version_mismatch(tmp_path):
    ids, texts, vectors, metadata = corpus()
    with open_store(f"embedded:{tmp_path}/s", dim=DIM) as store:
        store.add(ids, texts, vectors, metadata)
    manifest_path = tmp_path / "s" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = 99
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(StoreFormatError, match="format version 99 is not supported"):
        Store.load(f"embedded:{tmp_path}/s")
    with pytest.raises(StoreFormatError, match="not a medrank store"):
        Store.load(f"embedded:{tmp_path}/nothing")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("x")
    with pytest.raises(StoreFormatError, match="not empty"):
        open_store(f"embedded:{tmp_path}/junk", dim=DIM)
    manifest["format_version"] = 1
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(StoreFormatError, match="dim 16, asked for 8"):
        open_store(f"embedded:{tmp_path}/s", dim=8)


def test_embedded_failed_save_leaves_old_store_readable(tmp_path, monkeypatch):
    import faiss

    ids, texts, vectors, metadata = corpus()
    store = open_store(f"embedded:{tmp_path}/s", dim=DIM)
    store.add(ids[:4], texts[:4], vectors[:4], metadata[:4])
    store.save()
    old_snapshot = store.manifest["snapshot"]
    store.add(ids[4:], texts[4:], vectors[4:], metadata[4:])

    def failing_write(index, path):
        with open(path, "wb") as fh:
            fh.write(b"half a faiss file")
        raise OSError("disk full")

    monkeypatch.setattr(faiss, "write_index", failing_write)
    with pytest.raises(OSError, match="disk full"):
        store.save()
    monkeypatch.undo()
    assert json.loads((tmp_path / "s" / "manifest.json").read_text())["snapshot"] == old_snapshot
    assert [p.name for p in (tmp_path / "s" / "snapshots").iterdir()] == [old_snapshot.split("/")[1]]
    store._release()
    with EmbeddedStore(tmp_path / "s") as reopened:  # old snapshot + SQLite catch-up
        assert reopened.count() == len(ids)
        assert reopened.search(vectors[6], None, k=1, mode="dense")[0].id == "d6"


def test_embedded_rebuilds_from_sqlite_when_snapshot_is_damaged(tmp_path):
    ids, texts, vectors, metadata = corpus()
    with open_store(f"embedded:{tmp_path}/s", dim=DIM, index="hnsw") as store:
        store.add(ids, texts, vectors, metadata)
    snapshot = tmp_path / "s" / store.manifest["snapshot"]  # written by close()
    (snapshot / "vectors.faiss").write_bytes(b"garbage")
    shutil.rmtree(snapshot / "bm25", ignore_errors=True)
    with EmbeddedStore(tmp_path / "s") as reopened:
        assert reopened.faiss_index.ntotal == len(ids)
        assert reopened.search(vectors[2], None, k=1, mode="dense")[0].id == "d2"
        assert reopened.search(None, "rash", k=1, mode="bm25")[0].id == "d4"


def test_embedded_single_writer_and_read_only(tmp_path):
    ids, texts, vectors, metadata = corpus()
    store = open_store(f"embedded:{tmp_path}/s", dim=DIM)
    store.add(ids, texts, vectors, metadata)
    with pytest.raises(RuntimeError, match="open for writing elsewhere"):
        open_store(f"embedded:{tmp_path}/s")
    reader = open_store(f"embedded:{tmp_path}/s", read_only=True)
    assert reader.count() == len(ids)
    assert reader.search(vectors[1], None, k=1, mode="dense")[0].id == "d1"
    with pytest.raises(RuntimeError, match="read-only"):
        reader.add(["z"], ["z"], vectors[:1])
    reader.close()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.add(["z"], ["z"], vectors[:1])


def test_open_store_uri_validation(tmp_path):
    with pytest.raises(ValueError, match="unknown store uri scheme"):
        open_store("redis://localhost/0", dim=4)
    with pytest.raises(ValueError, match="dim"):
        open_store(f"embedded:{tmp_path}/x")
    with pytest.raises(ValueError, match="language"):
        open_store(f"embedded:{tmp_path}/y", dim=4, language="fr")
    store = open_store(str(tmp_path / "plain"), dim=4, language="en")  # a bare path means embedded
    assert isinstance(store, EmbeddedStore) and store.count() == 0
    assert store.search(np.ones(4, dtype=np.float32) / 2, "anything", k=3) == []  # empty store: no hits
    store.close()


# -- pgvector pieces that need no server ------------------------------------------------------------


def test_pg_literals_and_dsn():
    from medrank.store.pgvector import parse_dsn, tsquery_literal, tsvector_literal

    assert tsvector_literal(["pain", "chest", "pain", "it's"]) == "'pain':1,3 'chest':2"
    assert tsquery_literal(["pain", "pain", "头痛", "a|b"]) == "'pain' | '头痛'"
    dsn, opts = parse_dsn("postgresql://u@127.0.0.1:5432/db?collection=kb&sslmode=disable&ef_search=200")
    assert dsn == "postgresql://u@127.0.0.1:5432/db?sslmode=disable"
    assert opts == {"collection": "kb", "ef_search": 200}
    with pytest.raises(ValueError, match="ef_search"):
        parse_dsn("postgresql://u@h/db?ef_search=lots")
    dsn, _ = parse_dsn("postgresql://u@h/db?collection=kb&options=-c%20statement_timeout%3D5000")
    assert dsn == "postgresql://u@h/db?options=-c%20statement_timeout%3D5000"


def test_pg_copy_binary_layout():
    import struct

    from medrank.store.pgvector import _COPY_HEADER, copy_binary_rows

    data = copy_binary_rows(["a"], ["t"], ["'t':1"], ["{}"], np.array([[1.0, -2.0]], dtype=np.float32))
    assert data.startswith(_COPY_HEADER) and data.endswith(struct.pack("!h", -1))
    body = data[len(_COPY_HEADER) : -2]
    assert struct.unpack("!h", body[:2]) == (5,)
    # last field: length 4 + 4*2, dim 2, unused 0, then big-endian floats
    assert body[-16:] == struct.pack("!ihhff", 12, 2, 0, 1.0, -2.0)
