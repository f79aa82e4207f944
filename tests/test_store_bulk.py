"""Bulk encoding on a dask.distributed LocalCluster bound to 127.0.0.1, with a tiny random-weight encoder."""

from __future__ import annotations

import numpy as np
import pytest

from medrank.store import open_store
from medrank.store.bulk import encode_into_store

TEXTS = [f"{a} {b}" for a in ("fever", "cough", "headache", "rash", "nausea") for b in ("pain", "chest", "back")]


@pytest.fixture
def saved_encoder(tmp_path, tiny_encoder):
    path = tmp_path / "tiny-encoder"
    tiny_encoder.save(path)
    return str(path)


def local_cluster(processes: bool):
    distributed = pytest.importorskip("distributed")
    # processes=False would default to the in-process transport, which takes no host: use TCP on loopback.
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=processes,
        protocol="tcp://",
        host="127.0.0.1",
        dashboard_address=None,
    )
    return cluster, distributed.Client(cluster)


def test_encode_into_embedded_store_on_local_cluster(tmp_path, saved_encoder):
    from medrank.encoders import load_encoder

    cluster, client = local_cluster(processes=False)
    try:
        ids = [f"t{i}" for i in range(len(TEXTS))]
        metadata = [{"i": i} for i in range(len(TEXTS))]
        uri = f"embedded:{tmp_path / 'store'}"
        written = encode_into_store(
            TEXTS, ids, saved_encoder, uri, client=client, shards=4, metadata=metadata, show_progress=False
        )
        assert written == len(TEXTS)
        assert len(client.scheduler_info()["workers"]) == 2
    finally:
        client.close()
        cluster.close()
    expected = load_encoder(saved_encoder).encode(TEXTS, kind="passage", show_progress=False)
    with open_store(uri) as store:
        assert store.count() == len(TEXTS) and store.dim == expected.shape[1]
        for i in (0, 7, 14):
            hit = store.search(expected[i], None, k=1, mode="dense")[0]
            assert (hit.id, hit.text, hit.metadata) == (ids[i], TEXTS[i], {"i": i})
            assert hit.score == pytest.approx(1.0, abs=1e-4)


def test_encode_into_store_validates(tmp_path, saved_encoder):
    with pytest.raises(ValueError, match="ids but"):
        encode_into_store(TEXTS, ["a"], saved_encoder, f"embedded:{tmp_path}/s", client=object())
    with pytest.raises(ValueError, match="only a PostgreSQL store"):
        encode_into_store(TEXTS, TEXTS, saved_encoder, f"embedded:{tmp_path}/s", client=object(), workers_write=True)


@pytest.mark.slow
def test_workers_write_into_pgvector_from_process_cluster(saved_encoder):
    from store_support import start_postgres_or_skip

    from medrank.encoders import load_encoder

    server = start_postgres_or_skip()
    cluster, client = local_cluster(processes=True)
    try:
        ids = [f"t{i}" for i in range(len(TEXTS))]
        uri = f"{server.dsn}?collection=bulk"
        assert encode_into_store(TEXTS, ids, saved_encoder, uri, client=client, shards=3, bulk=True) == len(TEXTS)
        expected = load_encoder(saved_encoder).encode(TEXTS, kind="passage", show_progress=False)
        with open_store(uri) as store:
            assert store.count() == len(TEXTS) and store.has_index()
            hits = store.search_batch(expected[:5], None, k=1, mode="dense")
            assert [h[0].id for h in hits] == ids[:5]
            assert np.allclose([h[0].score for h in hits], 1.0, atol=1e-4)
    finally:
        client.close()
        cluster.close()
        server.stop()
