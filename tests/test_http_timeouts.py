"""The server's time limits: a body that stalls, a statement that waits too long (a write
rolled back, not half done), every thread taken; and several worker processes."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from dedup_store import DedupStore, FingerprintParams
from dedup_store.db.write.locks import lock_store
from dedup_store.server.calls import StoreCalls
from dedup_store.server.errors import RequestError
from tests.http_server import Server

pytestmark = pytest.mark.db

TEXT = "The harbour library opened on Monday with a reading room for the whole town."


@pytest.fixture
def store(engine: Engine, schema: str) -> Iterator[DedupStore]:
    with DedupStore(engine, FingerprintParams(), schema=schema) as s:
        yield s


@pytest.fixture
def server(database_url: str, schema: str, store: DedupStore, tmp_path: Path) -> Iterator[Server]:
    """A server with one store thread and a timeout of one second."""
    served = Server(
        database_url, schema, tmp_path / "log", "--threads", "1", "--timeout", "1"
    ).wait_ready()
    yield served
    served.stop()


def test_a_stalled_body_is_answered_408(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            b"POST /documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"id": "slow", '
        )
        answer = ""
        while "}" not in answer:  # the headers, then the JSON body
            answer += sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 408")
    assert '"error": "RequestTimeout"' in answer


def test_a_write_kept_waiting_past_the_timeout_is_rolled_back_and_answered_503(
    server: Server, store: DedupStore, engine: Engine
) -> None:
    with engine.connect() as holder, server.client() as client:
        lock_store(holder, store.schema)
        answer = client.post("/documents", json={"id": "late", "text": TEXT})
        holder.rollback()
    assert answer.status_code == 503
    assert answer.json()["error"] == "DatabaseError"
    assert "statement timeout" in answer.json()["message"]
    assert store.stats().documents == 0
    with server.client() as client:  # the connection is fine afterwards
        assert client.post("/documents", json={"id": "late", "text": TEXT}).status_code == 201


def test_a_call_that_finds_no_free_thread_in_time_is_answered_503_busy() -> None:
    """The store's threads: a call waits for one at most the timeout, and a call still
    running when its request is cancelled holds its thread until it ends."""
    release = threading.Event()

    async def scenario() -> tuple[int, str, bool]:
        calls = StoreCalls(threads=1, wait=0.2)
        first = asyncio.ensure_future(calls.run(release.wait, 30))
        await asyncio.sleep(0.05)
        with pytest.raises(RequestError) as refused:
            await calls.run(lambda: None)
        first.cancel()  # its client went away: the call goes on, and keeps the thread
        with pytest.raises(RequestError):
            await calls.run(lambda: None)
        release.set()
        await asyncio.sleep(0.1)
        done = await calls.run(lambda: True)
        calls.close()
        return refused.value.status, refused.value.error, done

    assert asyncio.run(scenario()) == (503, "Busy", True)


def test_several_workers_serve_one_store_and_add_up_their_metrics(
    database_url: str, schema: str, store: DedupStore, tmp_path: Path
) -> None:
    server = Server(database_url, schema, tmp_path / "log", "--workers", "2").wait_ready()
    try:
        with server.client() as client:
            for k in range(12):  # new connections spread over the workers
                with server.client() as fresh:
                    text_k = f"{TEXT} Edition number {k} of the morning paper, page {k * 7}."
                    assert (
                        fresh.post("/documents", json={"id": f"n{k}", "text": text_k}).status_code
                        == 201
                    )
            metrics = client.get("/metrics").text
    finally:
        assert server.stop() == 0
    counted = re.findall(
        r'dedup_store_http_requests_total\{method="POST",route="/documents",status="201"\} (\S+)',
        metrics,
    )
    assert [float(c) for c in counted] == [12.0]
    assert "dedup_store_documents 12.0" in metrics
    pids = {line.get("pid") for line in server.log_lines() if line["message"] == "serving"}
    assert len(pids) == 2
