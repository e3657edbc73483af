"""Bulk loads on the embedded server, which the store reaches through a Unix socket and which
runs with ``wal_level = minimal``: COPY data goes straight to the socket, and a load into a new
store has the server checkpoint as it writes and while it builds its indexes. Both change only how
fast it goes."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from dedup_store import DedupStore, Document, FingerprintParams
from dedup_store.db.bulk import checkpoint
from dedup_store.db.server import binary_copy, embedded
from dedup_store.db.server.engine import driver_connection
from tests.db.test_bulk import _by_external_id, _load
from tests.spark.corpora import real_documents
from tests.test_embedded import data_dir as data_dir


def _checkpoints_requested(engine: Engine) -> int:
    with engine.connect() as conn:
        if conn.execute(sa.text("SELECT to_regclass('pg_stat_checkpointer') IS NOT NULL")).scalar():
            statement = "SELECT num_requested FROM pg_stat_checkpointer"
        else:  # before PostgreSQL 17
            statement = "SELECT checkpoints_req FROM pg_stat_bgwriter"
        return int(conn.execute(sa.text(statement)).scalar_one())


def _on_a_thread(function: Callable[..., Any], *args: Any) -> Any:
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(function, *args).result()


def _counting_sends(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each COPY from now on went straight to the socket."""
    sent: list[bool] = []
    original = binary_copy.send_copy_data

    def counted(*args: Any) -> bool:
        sent.append(original(*args))
        return sent[-1]

    monkeypatch.setattr(binary_copy, "send_copy_data", counted)
    return sent


@pytest.mark.usefixtures("data_dir")
def test_a_bulk_load_on_the_embedded_server_stores_what_it_stores_over_tcp(
    engine: Engine, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copyright files, licences and docstrings, loaded in bulk into a new store on the test
    server (TCP: psycopg writes the COPY data) and on a private embedded server (the socket
    takes it in one write; checkpoints run every few batches and during the index builds)."""
    docs = real_documents()
    sent = _counting_sends(monkeypatch)
    monkeypatch.setattr(checkpoint, "ROLLING_INTERVAL", 0.01)
    params = FingerprintParams()
    over_tcp = _load(engine, schema, docs, True, params, batch_size=500)
    assert sent and not any(sent)
    sent.clear()

    local = sa.create_engine(embedded.start())
    try:
        with local.connect() as conn:
            assert checkpoint.syncs_at_commit(conn)
        before = _checkpoints_requested(local)
        on_socket = _load(local, schema, docs, True, params, batch_size=500)
        assert _checkpoints_requested(local) > before + 2  # during the load, and after it
        assert on_socket == over_tcp
        assert _by_external_id(local, schema) == _by_external_id(engine, schema)
    finally:
        local.dispose()
    # each batch's documents went down the socket; the sample keys and tier rows were held and
    # written at the load's end, from the calling thread (whose COPYs are left to psycopg)
    assert sum(sent) >= len(docs) // 500 and len(sent) >= sum(sent) + 2


@pytest.mark.usefixtures("data_dir")
def test_a_bulk_load_leaves_its_key_tables_without_empty_pages() -> None:
    """PostgreSQL 16 and later extend a table by up to 64 pages at a time for a COPY and leave
    the pages it does not fill empty. Written one COPY a batch, a quarter of the pages of the
    settled tier and of ``sample_keys`` were empty, and each key index build scanned them."""
    rng = random.Random(5)
    words = [f"w{i}" for i in range(5000)]
    docs = [Document(f"d{i}", " ".join(rng.choices(words, k=40))) for i in range(60_000)]
    local = sa.create_engine(embedded.start())
    try:
        with DedupStore(local, FingerprintParams(), schema="s") as store:
            assert store.ingest(docs, bulk=True, batch_size=5000).bulk
        with local.connect() as conn:
            for table in ("slot_keys", "sample_keys"):
                pages, used = conn.execute(
                    sa.text(
                        f"SELECT pg_relation_size('s.{table}') / 8192, "
                        f"(SELECT count(DISTINCT (ctid::text::point)[0]) FROM s.{table})"
                    )
                ).one()
                assert used >= 0.9 * pages, (table, used, pages)
    finally:
        local.dispose()


@pytest.mark.usefixtures("data_dir")
def test_a_copy_sent_down_the_socket_fails_as_psycopg_would_and_leaves_the_connection_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A duplicate key at the end of 26 MB of rows, sent from a thread: the server's error comes
    back when the COPY ends; the same connection then takes rows sent by psycopg (the main
    thread) and from a thread again, and its socket is left non-blocking, as libpq needs it."""
    sent = _counting_sends(monkeypatch)
    local = sa.create_engine(embedded.start())
    ids = np.arange(1_000_001, dtype=np.int64)
    ids[-1] = 7
    try:
        with local.begin() as conn:
            conn.execute(sa.text("CREATE TABLE t (id bigint PRIMARY KEY, v bigint NOT NULL)"))
            conn.execute(sa.text("CREATE TABLE u (id bigint, v bigint)"))
            backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        with pytest.raises(psycopg.errors.UniqueViolation), local.begin() as conn:
            _on_a_thread(binary_copy.copy_fixed_rows, conn, "public", "t", ("id", "v"), [ids, ids])
        with local.begin() as conn:
            assert conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() == backend
            binary_copy.copy_fixed_rows(conn, "public", "t", ("id", "v"), [ids[:-1], ids[:-1]])
            _on_a_thread(binary_copy.copy_fixed_rows, conn, "public", "u", ("id", "v"), [ids, ids])
            assert conn.execute(sa.text("SELECT count(*), sum(v) FROM t")).one() == (
                1_000_000,
                sum(range(1_000_000)),
            )
            assert conn.execute(sa.text("SELECT count(*), sum(v) FROM u")).one() == (
                1_000_001,
                sum(range(1_000_000)) + 7,
            )
            assert not os.get_blocking(driver_connection(conn).pgconn.socket)  # as libpq left it
    finally:
        local.dispose()
    assert sent == [True, False, True]  # psycopg writes on the main thread
