"""Batches over HTTP: JSON Lines streamed in, one answer per line streamed out; and what a
client may rely on when the server is killed, stopped, or loses its database."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import Engine, make_url, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document, FingerprintParams
from dedup_store.server.settings import APPLICATION_NAME
from tests.http_server import Server, TcpProxy

pytestmark = pytest.mark.db


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    """Debian's copyright files."""
    return [Document(d.id, d.text) for d in copyright_docs()]


@pytest.fixture
def store(engine: Engine, schema: str) -> Iterator[DedupStore]:
    with DedupStore(engine, FingerprintParams(), schema=schema) as s:
        yield s


def jsonl(documents: list[Document]) -> bytes:
    return b"".join(json.dumps({"id": d.id, "text": d.text}).encode() + b"\n" for d in documents)


def answers(response: httpx.Response) -> list[dict]:
    return [json.loads(line) for line in response.iter_lines() if line.strip()]


def test_a_batch_streams_in_and_every_line_is_answered(
    database_url: str, schema: str, store: DedupStore, corpus: list[Document], tmp_path: Path
) -> None:
    documents = corpus[:120]
    body = jsonl(documents[:60]) + b'{"id": "broken", "text": \n\n' + jsonl(documents[60:])
    body += b'{"id": "no-text"}\n' + jsonl(documents[:1])  # a known id at the end: skipped
    server = Server(database_url, schema, tmp_path / "log", "--batch-size", "25").wait_ready()
    try:
        with server.client() as client:

            def chunks() -> Iterator[bytes]:  # sent in pieces that cut lines in two
                for start in range(0, len(body), 997):
                    yield body[start : start + 997]

            with client.stream(
                "POST", "/documents/batch", params={"on_error": "skip"}, content=chunks()
            ) as response:
                assert response.status_code == 200
                assert response.headers["content-type"] == "application/x-ndjson"
                lines = answers(response)
    finally:
        assert server.stop() == 0
    last = lines.pop()
    assert last["done"] is True and last["errors"] == 2 and last["skipped"] == 1
    assert [line["line"] for line in lines] == [*range(1, 62), *range(63, 125)]
    bad = {line["line"]: line for line in lines if line["code"] >= 400}
    assert bad[61]["code"] == 400 and bad[61]["message"].startswith("body:61: malformed JSON")
    assert bad[123]["code"] == 422 and bad[123]["field"] == "text"
    assert lines[-1]["status"] == "skipped" and lines[-1]["code"] == 200
    stored = [line for line in lines if line["code"] == 201]
    assert [line["id"] for line in stored] == [d.id for d in documents]
    for line in stored:  # what the store says of each is what the line said
        assert store.cluster(line["id"]).cluster_id == line["cluster_id"] or line["status"] == "new"
    assert store.stats().documents == len(documents)


def test_a_bad_record_stops_the_batch_after_the_lines_before_it(
    database_url: str, schema: str, store: DedupStore, corpus: list[Document], tmp_path: Path
) -> None:
    body = jsonl(corpus[:30]) + b'{"id": "empty", "text": "!!! ..."}\n' + jsonl(corpus[30:60])
    server = Server(database_url, schema, tmp_path / "log", "--batch-size", "100").wait_ready()
    try:
        with server.client() as client:
            response = client.post("/documents/batch", content=body)
    finally:
        server.stop()
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["code"] for line in lines[:30]] == [201] * 30
    assert lines[30]["line"] == 31 and lines[30]["error"] == "EmptyDocumentError"
    assert lines[31] == {**lines[31], "done": False, "code": 422, "lines": 31}
    assert len(lines) == 32
    assert store.stats().documents == 30  # the lines before it, not those after


def test_reject_duplicates_in_a_batch_answers_409_per_line(
    database_url: str, schema: str, store: DedupStore, corpus: list[Document], tmp_path: Path
) -> None:
    distinct = unlike(corpus, 10)
    store.add_many(distinct[:5])
    copies = [Document(f"copy-{d.id}", d.text) for d in distinct[:5]]
    server = Server(database_url, schema, tmp_path / "log").wait_ready()
    try:
        with server.client() as client:
            response = client.post(
                "/documents/batch",
                params={"reject_duplicates": "true"},
                content=jsonl(copies + distinct[5:]),
            )
    finally:
        server.stop()
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert [line["code"] for line in lines[:10]] == [409] * 5 + [201] * 5
    assert lines[10]["done"] is True and lines[10]["rejected"] == 5
    assert store.stats().documents == 10


def unlike(corpus: list[Document], count: int) -> list[Document]:
    """``count`` documents whose words overlap little with each other's (none is a duplicate
    of another)."""
    chosen: list[tuple[Document, set[str]]] = []
    for doc in corpus:
        words = set(doc.text.lower().split())
        if all(len(words & w) / len(words | w) < 0.3 for _, w in chosen):
            chosen.append((doc, words))
        if len(chosen) == count:
            break
    return [doc for doc, _ in chosen]


def server_backend_in_write(url: str, schema: str) -> bool:
    """Whether a connection of the server holds the store's writers' lock (a write is open)."""
    query = """
        SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = %s
    """
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(query, [APPLICATION_NAME]).fetchone()
    return bool(row and row[0])


def test_kill_9_during_a_batch_leaves_every_answered_document_and_nothing_half_written(
    database_url: str,
    schema: str,
    store: DedupStore,
    engine: Engine,
    corpus: list[Document],
    tmp_path: Path,
) -> None:
    documents = corpus[:600]
    server = Server(database_url, schema, tmp_path / "log", "--batch-size", "20").wait_ready()
    answered: list[dict] = []
    killed = threading.Event()

    def kill_during_a_write() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed.is_set():
            if len(answered) >= 60 and server_backend_in_write(database_url, schema):
                server.process.send_signal(signal.SIGKILL)
                killed.set()
                return
            time.sleep(0.001)

    killer = threading.Thread(target=kill_during_a_write)
    killer.start()
    try:
        with (
            server.client() as client,
            client.stream("POST", "/documents/batch", content=jsonl(documents)) as response,
        ):
            for line in response.iter_lines():
                answered.append(json.loads(line))
    except httpx.HTTPError:
        pass
    killer.join()
    server.stop()
    assert killed.is_set(), "the server was not killed during a write"
    assert not any("done" in line for line in answered)
    answered_ids = [line["id"] for line in answered if line["code"] == 201]
    assert len(answered_ids) >= 60

    with engine.begin() as conn:  # the server's transaction is gone with its connection
        conn.execute(text("SELECT 1"))
    stored = {p["id"] for p in store.export()}
    assert set(answered_ids) <= stored
    order = [d.id for d in documents]
    assert stored == set(order[: len(stored)])  # whole batches, in order: a prefix
    assert len(stored) - len(answered_ids) <= 20  # at most the batch being answered
    kept = [d for d in documents if d.id in stored]
    for doc in kept:  # each with its keys: its text is found again, in its cluster
        found = store.check(doc.text)
        assert found.status.value == "exact_duplicate"
        assert found.cluster_id == store.cluster(doc.id).cluster_id
    with DedupStore(engine, schema=f"{schema}_replay") as replay:
        try:
            for start in range(0, len(kept), 20):
                replay.add_many(kept[start : start + 20])
            ours = {frozenset(c.members) for c in store.clusters()}
            assert ours == {frozenset(c.members) for c in replay.clusters()}
            assert store.stats().edges > 0
        finally:
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}_replay" CASCADE'))


def test_sigterm_finishes_the_batch_being_written_and_answers_it(
    database_url: str, schema: str, store: DedupStore, corpus: list[Document], tmp_path: Path
) -> None:
    documents = corpus[:600]
    server = Server(database_url, schema, tmp_path / "log", "--batch-size", "20").wait_ready()
    lines: list[dict] = []
    with (
        server.client() as client,
        client.stream("POST", "/documents/batch", content=jsonl(documents)) as response,
    ):
        for line in response.iter_lines():
            lines.append(json.loads(line))
            if len(lines) == 40:
                server.process.send_signal(signal.SIGTERM)
    assert server.stop() == 0
    last = lines.pop()
    assert (last["done"], last["code"], last["error"]) == (False, 503, "ShuttingDown")
    assert 40 <= len(lines) < len(documents)
    assert {p["id"] for p in store.export()} == {line["id"] for line in lines}
    logged = [line["message"] for line in server.log_lines()]
    assert "stopped" in logged


def test_the_database_down_is_503_and_ready_again_when_it_is_back(
    database_url: str, schema: str, store: DedupStore, tmp_path: Path
) -> None:
    url = make_url(database_url)
    proxy = TcpProxy((url.host or "127.0.0.1", url.port or 5432))
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    server = Server(through, schema, tmp_path / "log", "--timeout", "5").wait_ready()
    try:
        with server.client() as client:
            assert (
                client.post("/documents", json={"id": "a", "text": "words " * 9 + "a"}).status_code
                == 201
            )
            proxy.cut()
            down = client.post("/check", json={"text": "some words to check while it is down"})
            assert (down.status_code, down.json().get("error")) == (503, "DatabaseError"), down.text
            assert down.json()["exit_code"] == 7
            assert client.get("/readyz").status_code == 503
            added = client.post("/documents", json={"id": "b", "text": "other words " * 5})
            assert added.status_code == 503
            proxy.restore()
            deadline = time.monotonic() + 30
            while client.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "not ready again"
                time.sleep(0.2)
            assert client.get("/documents/a/cluster").status_code == 200
    finally:
        proxy.cut()
        server.stop()
