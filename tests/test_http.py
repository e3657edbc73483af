"""``dedup-store serve`` as a client sees it: the real server in a subprocess, on a fresh
schema of the test database, spoken to over HTTP; the store's own reads say what was stored."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import Engine

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document, errors
from dedup_store.server.errors import STATUS_OF_EXIT_CODE, status_of
from tests.http_server import Server

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    """Debian's copyright files: templated, so many of them are near duplicates."""
    return [Document(d.id, d.text) for d in copyright_docs()][:300]


@pytest.fixture(scope="module")
def module_schema(engine: Engine) -> Iterator[str]:
    """A schema for the module's shared store."""
    from tests.conftest import drop_schema

    name = f"t_http_{os.getpid()}"
    drop_schema(engine, name)
    yield name
    drop_schema(engine, name)


@pytest.fixture(scope="module")
def loaded(engine: Engine, module_schema: str, corpus: list[Document]) -> Iterator[DedupStore]:
    """The copyright files in a store that keeps their texts."""
    with DedupStore(engine, schema=module_schema, keep_text=True) as store:
        store.ingest(corpus, bulk=False)
        yield store


@pytest.fixture(scope="module")
def server(
    database_url: str,
    module_schema: str,
    loaded: DedupStore,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Server]:
    """The server of the shared store, with a token, a small document limit and body limit."""
    log = tmp_path_factory.mktemp("http") / "server.log"
    served = Server(
        database_url,
        module_schema,
        log,
        "--max-bytes",
        "200000",
        "--max-request-bytes",
        "1MB",
        "--threads",
        "4",
        token=TOKEN,
    ).wait_ready()
    yield served
    assert served.stop() == 0, served.text()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def edited(text: str) -> str:
    """A copy of ``text`` with one word in fifty replaced: a near duplicate."""
    words = text.split()
    return " ".join("changed" if i % 50 == 7 else w for i, w in enumerate(words))


# -- the 409 flow -----------------------------------------------------------------------------


def test_a_near_duplicate_is_refused_with_its_matches_and_stored_when_confirmed(
    client: httpx.Client, loaded: DedupStore, corpus: list[Document]
) -> None:
    source = max((d for d in corpus if len(d.text) < 20_000), key=lambda d: len(d.text))
    draft = {"id": "draft-1", "text": edited(source.text), "section": "news"}
    before = loaded.stats().documents

    refused = client.post("/documents", params={"reject_duplicates": "true"}, json=draft)
    assert refused.status_code == 409
    body = refused.json()
    assert body["status"] == "near_duplicate" and body["stored"] is False
    assert source.id in [m["external_id"] for m in body["matches"]]
    assert "confirm=true" in body["message"]
    assert loaded.stats().documents == before  # nothing of it was stored
    assert client.get("/documents/draft-1/cluster").status_code == 404
    assert client.post("/check", json=draft).json()["status"] == "near_duplicate"

    confirmed = client.post(
        "/documents", params={"reject_duplicates": "true", "confirm": "true"}, json=draft
    )
    assert confirmed.status_code == 201
    assert confirmed.json()["status"] == "near_duplicate"
    assert loaded.cluster("draft-1").cluster_id == loaded.cluster(source.id).cluster_id

    again = client.post("/documents", json=draft)
    assert (again.status_code, again.json()["status"], again.json()["stored"]) == (
        200,
        "skipped",
        False,
    )


def test_a_new_document_passes_reject_duplicates(client: httpx.Client, loaded: DedupStore) -> None:
    text = "A press release about the opening of a new municipal library in the old harbour."
    answer = client.post(
        "/documents", params={"reject_duplicates": "true"}, json={"id": "press-1", "text": text}
    )
    assert answer.status_code == 201
    assert answer.json() == {
        "id": "press-1",
        "status": "new",
        "cluster_id": answer.json()["cluster_id"],
        "matches": [],
        "stored": True,
    }
    assert loaded.cluster("press-1").members == ["press-1"]
    exact = client.post(
        "/documents",
        params={"reject_duplicates": "true"},
        json={"id": "press-1-copy", "text": text.upper()},
    )
    assert exact.status_code == 409 and exact.json()["status"] == "exact_duplicate"
    with pytest.raises(errors.UnknownDocumentError):
        loaded.cluster("press-1-copy")


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "error", "field"),
    [
        (b'{"id": "x", "text": ', 400, "MalformedJSON", None),
        (b'{"id": "x", "text": NaN}', 400, "MalformedJSON", None),
        (b"[1, 2]", 400, "MalformedJSON", None),
        (b"\xff\xfe", 400, "MalformedJSON", None),
        (b'{"id": "x"}', 422, "InputFormatError", "text"),
        (b'{"text": "some words here"}', 422, "InputFormatError", "id"),
        (b'{"id": true, "text": "some words here"}', 422, "InputFormatError", "id"),
        (b'{"id": "x", "text": 5}', 422, "InputFormatError", "text"),
        (b'{"id": "x", "text": "nul \\u0000 here"}', 422, "InvalidDocumentError", "text"),
        (b'{"id": "x", "text": "lone \\ud800"}', 422, "InvalidDocumentError", "text"),
        (b'{"id": "", "text": "some words here"}', 422, "InvalidDocumentError", "id"),
        (b'{"id": "x", "text": "...!!! ???"}', 422, "EmptyDocumentError", "text"),
    ],
)
def test_bad_bodies_are_answered_with_the_status_and_the_field(
    client: httpx.Client, body: bytes, status: int, error: str, field: str | None
) -> None:
    answer = client.post("/documents", content=body)
    assert answer.status_code == status, answer.text
    found = answer.json()
    assert found["error"] == error
    assert found.get("field") == field
    assert found["exit_code"] == 4


def test_errors_carry_the_command_line_messages(client: httpx.Client) -> None:
    missing = client.get("/documents/no such id/similar")
    assert (missing.status_code, missing.json()["message"]) == (
        404,
        "unknown document id: 'no such id'",
    )
    assert missing.json()["exit_code"] == 5
    assert client.get("/documents/no-such/cluster").status_code == 404
    assert client.delete("/documents/no-such").status_code == 404
    deleted = client.post("/documents/delete", json={"ids": ["press-1", "no-such"]})
    assert deleted.status_code == 404  # all or nothing: press-1 stays
    assert client.get("/documents/press-1/cluster").status_code == 200
    both = client.get("/pairs", params={"pending": "true", "expand": "true"})
    assert (both.status_code, both.json()["error"], both.json()["exit_code"]) == (
        400,
        "InvalidParamsError",
        2,
    )
    negative = client.get("/clusters", params={"limit": -1})
    assert (negative.status_code, negative.json()["field"]) == (400, "limit")
    rule = client.put("/canonical-rule", json={"rule": "newest"})
    assert rule.status_code == 400 and "newest" in rule.json()["message"]
    assert client.get("/no/such/route").json()["error"] == "NotFound"


def test_too_large_is_413(client: httpx.Client) -> None:
    big_text = "word " * 50_000  # 250,000 bytes: over --max-bytes 200000, under the body limit
    answer = client.post("/documents", json={"id": "big", "text": big_text})
    assert (answer.status_code, answer.json()["field"]) == (413, "text")
    assert "larger than the limit of 200000 bytes" in answer.json()["message"]
    body = json.dumps({"id": "huge", "text": "word " * 300_000})  # 1.5 MB: over --max-request-bytes
    refused = client.post("/documents", content=body)
    assert (refused.status_code, refused.json()["error"]) == (413, "RequestTooLarge")

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused when the limit is reached
        yield b'{"id": "huge", "text": "'
        for _ in range(30):
            yield b"word " * 10_000
        yield b'"}'

    streamed = client.post("/documents", content=chunks())
    assert streamed.status_code == 413


# -- the token --------------------------------------------------------------------------------


def test_every_endpoint_but_the_probes_needs_the_token(server: Server) -> None:
    with server.client(token="") as anonymous, server.client(token="wrong") as wrong:
        for path in ("/stats", "/clusters", "/metrics", "/verdicts"):
            assert anonymous.get(path).status_code == 401
            assert wrong.get(path).status_code == 401
        refused = anonymous.post("/check", json={"text": "a few words to check"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"] == "Unauthorized"
        for path in ("/healthz", "/readyz", "/openapi.json", "/docs"):
            assert anonymous.get(path).status_code == 200
    with server.client() as right:
        assert right.get("/stats").status_code == 200


def test_a_non_loopback_address_without_a_token_is_refused(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DEDUP_STORE_TOKEN"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dedup_store",
            "--db-url",
            database_url,
            "serve",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: --host 0.0.0.0 is not a loopback address")
    assert len(done.stderr.strip().splitlines()) == 1


def test_without_the_server_extra_serve_says_what_to_install(
    database_url: str, tmp_path: Path
) -> None:
    shadow = tmp_path / "fastapi"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'fastapi'\")\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-m", "dedup_store", "--db-url", database_url, "serve"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "error: serve needs the server extra: pip install 'dedup-store[server]' "
        "(No module named 'fastapi')\n"
    )


def test_a_schema_without_a_store_stops_serve_with_exit_code_6(
    database_url: str, schema: str
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dedup_store",
            "--db-url",
            database_url,
            "--schema",
            schema,
            "serve",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 6, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1


# -- reading: paging, similar, clusters, pairs ------------------------------------------------


def pages(client: httpx.Client, path: str, limit: int, **params: str) -> Iterator[dict]:
    offset: int | None = 0
    while offset is not None:
        answer = client.get(path, params={**params, "limit": limit, "offset": offset})
        assert answer.status_code == 200, answer.text
        page = answer.json()
        assert len(page["items"]) <= limit
        yield from page["items"]
        offset = page["next_offset"]


def test_clusters_and_pairs_come_in_pages_as_the_library_lists_them(
    client: httpx.Client, loaded: DedupStore
) -> None:
    clusters = [c.to_dict() for c in loaded.clusters()]
    assert len(clusters) > 7
    assert list(pages(client, "/clusters", 7)) == clusters
    pairs = [p.to_dict() for p in loaded.pairs(min_similarity=0.5)]
    for pair in pairs:
        del pair["via_exact_of"]
    assert list(pages(client, "/pairs", 10, min_similarity="0.5")) == pairs
    expanded = [p.to_dict() for p in loaded.pairs(expand=True)]
    assert list(pages(client, "/pairs", 50, expand="true")) == expanded


def test_similar_pages_through_the_matches_best_first(
    client: httpx.Client, loaded: DedupStore
) -> None:
    largest = max(loaded.clusters(), key=lambda c: c.size)
    member = largest.members[0]
    everything = [m.to_dict() for m in loaded.similar(member)]
    assert len(everything) >= 3
    assert list(pages(client, f"/documents/{member}/similar", 2)) == everything
    cluster = client.get(f"/documents/{member}/cluster").json()
    assert cluster == loaded.cluster(member).to_dict()


def test_ids_with_slashes_spaces_and_other_scripts_are_addressed(client: httpx.Client) -> None:
    doc_id = "articles/2024/новости и заметки?.txt"
    text = "Статья о городской библиотеке, которая открылась в старой гавани этой весной."
    assert client.post("/documents", json={"id": doc_id, "text": text}).status_code == 201
    path = "/documents/" + quote(doc_id, safe="/")
    assert client.get(f"{path}/cluster").json()["members"] == [doc_id]
    encoded = "/documents/" + quote(doc_id, safe="")  # its slashes encoded too: the same id
    assert client.get(f"{encoded}/similar").json()["items"] == []
    assert client.delete(path).json() == {"deleted": 1}


# -- reviewing --------------------------------------------------------------------------------


def test_a_verdict_splits_a_cluster_and_taking_it_back_joins_it(
    client: httpx.Client, loaded: DedupStore
) -> None:
    pair = next(p for p in loaded.pairs() if p.method.value == "minhash")
    explained = client.post("/explain", json={"a": pair.a, "b": pair.b}).json()
    assert explained["method"] == "minhash" and explained["alignment"] is not None
    assert explained["jaccard"] == pytest.approx(pair.jaccard)

    said = client.post(
        "/verdicts", json={"a": pair.a, "b": pair.b, "verdict": "not_duplicate", "by": "ana"}
    )
    assert said.status_code == 200
    assert said.json()["verdict"] == "not_duplicate" and said.json()["reviewer"] == "ana"
    listed = client.get("/verdicts").json()["items"]
    assert [(v["a"], v["b"]) for v in listed] == [(v.a, v.b) for v in loaded.verdicts()]
    assert said.json()["cluster_a"] == loaded.cluster(pair.a).cluster_id
    bad = client.post("/verdicts", json={"a": pair.a, "b": pair.b, "verdict": "maybe"})
    assert (bad.status_code, bad.json()["field"]) == (422, "verdict")

    cleared = client.delete("/verdicts", params={"a": pair.a, "b": pair.b}).json()
    assert cleared["cleared"] is True
    assert cleared["cluster_a"] == cleared["cluster_b"]


def test_canonical_documents_are_declared_and_ruled(
    client: httpx.Client, loaded: DedupStore
) -> None:
    largest = max(loaded.clusters(), key=lambda c: c.size)
    chosen = largest.members[-1]
    answer = client.put(f"/documents/{chosen}/canonical", json={"by": "ana"}).json()
    assert answer == {"cluster_id": largest.cluster_id, "canonical": chosen}
    assert loaded.cluster(chosen).canonical == chosen
    assert client.put("/canonical-rule", json={"rule": "longest"}).status_code == 200
    assert client.get("/canonical-rule").json() == {"canonical_rule": "longest"}
    client.put("/canonical-rule", json={"rule": "oldest"})


def test_the_report_is_written_on_demand_within_its_budget(
    client: httpx.Client, loaded: DedupStore
) -> None:
    member = max(loaded.clusters(), key=lambda c: c.size).members[0]
    one = client.get("/report", params={"cluster": member})
    assert one.status_code == 200 and one.headers["content-type"].startswith("text/html")
    assert one.text.lstrip().lower().startswith("<!doctype html>")
    assert int(one.headers["x-report-pairs"]) >= 1
    whole = client.get("/report", params={"max_bytes": 300_000})
    assert len(whole.content) <= 300_000 + 200_000  # the budget covers the texts
    assert int(whole.headers["x-report-pairs-over-budget"]) > 0
    over = client.get("/report", params={"max_bytes": 10**12})
    assert over.status_code == 400
    assert client.get("/report", params={"cluster": "no-such"}).status_code == 404


# -- operations -------------------------------------------------------------------------------


def test_metrics_count_requests_and_the_store(client: httpx.Client, loaded: DedupStore) -> None:
    client.post("/check", json={"text": "words that are checked for the metrics"})
    text = client.get("/metrics").text
    assert re.search(
        r'dedup_store_http_requests_total\{method="POST",route="/check",status="200"\} [1-9]', text
    )
    assert (
        'dedup_store_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/check"}'
        in text
    )
    assert f"dedup_store_documents {float(loaded.stats().documents)}" in text
    assert 'dedup_store_edges{method="minhash"}' in text
    assert re.search(r'dedup_store_bytes\{kind="indexes"\} [1-9]', text)
    assert re.search(r"dedup_store_server_shared_buffers_bytes [1-9]", text)
    assert re.search(r'dedup_store_documents_added_total\{status="rejected"\} [1-9]', text)


def test_access_logs_are_json_lines(client: httpx.Client, server: Server) -> None:
    answer = client.get("/stats", headers={"X-Request-ID": "trace-42"})
    assert answer.headers["x-request-id"] == "trace-42"
    found: list[dict] = []
    deadline = time.monotonic() + 10
    while not found and time.monotonic() < deadline:  # logged once the answer is sent
        lines = server.log_lines()
        access = [line for line in lines if line["logger"] == "dedup_store.access"]
        found = [line for line in access if line["request_id"] == "trace-42"]
        time.sleep(0.05)
    assert len(found) == 1
    assert found[0]["route"] == "/stats" and found[0]["status"] == 200
    assert found[0]["ms"] > 0 and found[0]["bytes_out"] > 0
    assert {"ts", "level", "method", "path", "client"} <= set(found[0])


def test_the_api_is_described(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/documents", "/documents/batch", "/check", "/pairs", "/report"} <= set(spec["paths"])
    add = spec["paths"]["/documents"]["post"]
    assert {"201", "409", "422", "413"} <= set(add["responses"])
    assert "text" in add["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert "swagger" in client.get("/docs").text.lower()


def test_the_docs_page_needs_nothing_beyond_the_server(server: Server) -> None:
    """/docs loaded Swagger UI from a CDN: blank on a host without a way out."""
    import re

    with server.client(token="") as anonymous:
        page = anonymous.get("/docs")
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/") for s in sources), sources
        for source in sources:
            answer = anonymous.get(source)
            assert answer.status_code == 200 and len(answer.content) > 100, source


# -- the statuses of the error classes ---------------------------------------------------------


def error_classes() -> list[type[errors.DedupStoreError]]:
    found = [errors.DedupStoreError]
    for cls in found:
        found.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_has_its_documented_status(cls: type[errors.DedupStoreError]) -> None:
    reference = (ROOT / "docs" / "http.md").read_text(encoding="utf-8")
    status = STATUS_OF_EXIT_CODE[cls.exit_code]
    row = re.compile(
        rf"^\|\s*{status}\s*\|[^\n]*`{cls.__name__}`[^\n]*\|\s*{cls.exit_code}\s*\|", re.M
    )
    assert row.search(reference), f"docs/http.md lacks {cls.__name__} as {status}"
    instance = cls.__new__(cls)
    assert status_of(instance) == status


# -- bad input never answers a server error ---------------------------------------------------


def test_offsets_past_bigint_are_bad_parameters(
    client: httpx.Client, corpus: list[Document]
) -> None:
    huge = str(2**63 - 1)
    for path in ("/clusters", "/pairs", f"/documents/{quote(corpus[0].id, safe='')}/similar"):
        answer = client.get(path, params={"offset": huge})
        assert answer.status_code == 400, (path, answer.text)
        assert answer.json()["field"] == "offset"
    # the largest offset taken reads past the end: an empty page
    assert client.get("/clusters", params={"offset": str(2**62)}).json()["items"] == []


def test_ids_with_a_nul_are_unknown_not_a_database_failure(
    client: httpx.Client, database_url: str
) -> None:
    for answer in (
        client.get("/documents/a%00b/similar"),
        client.get("/documents/a%00b/cluster"),
        client.delete("/documents/a%00b"),
    ):
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"] == "UnknownDocumentError"
    cleared = client.delete("/verdicts", params={"a": "a\x00", "b": "b"})
    assert cleared.status_code in (404, 422), cleared.text
    for answer in (cleared, client.get("/documents/a%00b/similar")):
        assert "127.0.0.1" not in answer.text and "postgresql" not in answer.text


def test_the_auth_scheme_is_case_insensitive(server: Server) -> None:
    for scheme in ("bearer", "BEARER", "Bearer"):
        with httpx.Client(
            base_url=server.base, headers={"Authorization": f"{scheme} {TOKEN}"}
        ) as c:
            assert c.get("/stats").status_code == 200, scheme
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Basic {TOKEN}"}) as c:
        assert c.get("/stats").status_code == 401


def test_a_body_with_a_byte_order_mark_is_read_as_ingest_reads_a_file(
    client: httpx.Client,
) -> None:
    body = "\ufeff" + json.dumps({"text": "a few plain words about rivers and bridges"})
    answer = client.post(
        "/check", content=body.encode("utf-8"), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 200, answer.text


def test_an_error_no_handler_answers_is_a_500_that_closes_the_connection() -> None:
    """The server would otherwise reset a keep-alive connection after a 500, and the client's
    next request on it would fail."""
    import asyncio

    from dedup_store.server.metrics import metrics
    from dedup_store.server.middleware import Guard

    async def failing(scope: object, receive: object, send: object) -> None:
        raise RuntimeError("a bug")

    sent: list[dict[str, object]] = []

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    guard = Guard(failing, token=None, max_request_bytes=1000, metrics=metrics())
    scope = {"type": "http", "method": "GET", "path": "/stats", "headers": []}
    asyncio.run(guard(scope, receive, send))  # type: ignore[arg-type]
    start, body = sent[0], sent[1]
    assert start["status"] == 500
    assert (b"connection", b"close") in start["headers"]  # type: ignore[operator]
    assert json.loads(body["body"])["error"] == "InternalError"  # type: ignore[arg-type]
