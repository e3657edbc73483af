"""Bad input gets a clear error and loses nothing; a failed batch writes no rows."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Engine, text

from dedup_store import (
    DedupStore,
    Document,
    EmptyDocumentError,
    InvalidDocumentError,
    RecordError,
    Status,
)
from dedup_store.ingest.records import describe

GOOD = "Quarterly revenue rose eight percent as subscriptions grew in every region we serve."


def _rows(engine: Engine, schema: str) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            table: conn.execute(text(f'SELECT count(*) FROM "{schema}".{table}')).scalar_one()
            for table in ("documents", "sample_keys", "edges")
        }


@pytest.mark.parametrize(
    ("text_value", "error", "message"),
    [
        ("bad \x00 byte", InvalidDocumentError, "NUL"),
        (b"\xff\xfe".decode("utf-8", "surrogateescape"), InvalidDocumentError, "UTF-8"),
        ("", EmptyDocumentError, "empty"),
        ("  ... !!! ---  ", EmptyDocumentError, "empty"),
        ("<script>var x = 1;</script><style>p {}</style>", EmptyDocumentError, "empty"),
    ],
)
def test_add_rejects_bad_text(
    store: DedupStore, text_value: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        store.add("doc", text_value)
    assert store.stats().documents == 0


def test_huge_document_is_refused(engine: Engine, schema: str) -> None:
    store = DedupStore(engine, schema=schema, max_bytes=1000)
    with store, pytest.raises(InvalidDocumentError, match="larger than the limit"):
        store.add("big", "word " * 1000)


def test_bad_ids_and_meta(store: DedupStore) -> None:
    with pytest.raises(InvalidDocumentError, match="id"):
        store.add("", GOOD)
    with pytest.raises(InvalidDocumentError, match="JSON"):
        store.add("doc", GOOD, {"when": object()})


def test_failed_batch_leaves_no_rows(engine: Engine, store: DedupStore) -> None:
    batch = [Document("ok-1", GOOD), Document("bad", "x\x00y", source="in.jsonl", line=2)]
    with pytest.raises(InvalidDocumentError, match=r"in.jsonl:2: document 'bad'"):
        store.add_many(batch)
    assert _rows(engine, store.schema) == dict.fromkeys(("documents", "sample_keys", "edges"), 0)


def test_ingest_skip_reports_bad_records(store: DedupStore) -> None:
    errors = []
    summary = store.ingest(
        [Document("ok", GOOD), Document("empty", "?!", source="f.csv", line=3)],
        on_error="skip",
        on_batch=lambda _results, bad: errors.extend(bad),
    )
    assert (summary.new, summary.errors) == (1, 1)
    assert str(errors[0]).startswith("f.csv:3: document 'empty': ")
    assert store.add("ok", GOOD).status is Status.SKIPPED


CJK_ID = "文" * 1000  # 3,000 bytes in UTF-8: over the 1,024-byte id limit
DEEP_META: dict[str, object] = {}
_level = DEEP_META
for _ in range(100_000):
    _level["m"] = {}
    _level = _level["m"]  # type: ignore[assignment]

BAD_RECORDS = [
    pytest.param("lone\ud800", None, "not valid Unicode", id="surrogate-id"),
    pytest.param("m-surrogate", {"k": "\udc80"}, "lone surrogate", id="surrogate-meta"),
    pytest.param(CJK_ID, None, r"\(3000 bytes\) is longer than the limit of 1024", id="long-id"),
    pytest.param("nan", {"score": float("nan")}, "NaN or Infinity", id="nan-meta"),
    pytest.param("inf", {"score": [float("inf")]}, "NaN or Infinity", id="inf-meta"),
    pytest.param("deep", DEEP_META, "nested deeper than 100", id="deep-meta"),
    pytest.param("esc", {"k": "\x00"}, "NUL", id="nul-meta"),
]


def good(n: int) -> str:
    return f"{GOOD} Record number {n} of the batch adds its own words: " + " ".join(
        f"w{n}x{i}" for i in range(12)
    )


@pytest.mark.parametrize(("doc_id", "meta", "message"), BAD_RECORDS)
def test_add_rejects_bad_ids_and_metadata(
    store: DedupStore, doc_id: str, meta: dict[str, object] | None, message: str
) -> None:
    with pytest.raises(InvalidDocumentError, match=message) as info:
        store.add(doc_id, GOOD, meta)
    assert len(str(info.value)) < 300  # a long id is shortened
    with pytest.raises(InvalidDocumentError, match=message):
        store.add_many([("fine", good(1)), (doc_id, GOOD, meta)])
    assert store.stats().documents == 0  # the batch failed as a whole


def test_ingest_skip_reports_every_bad_record_by_number(store: DedupStore) -> None:
    records: list[tuple[str, str, object]] = []
    for n, param in enumerate(BAD_RECORDS):
        records.append((f"good-{n}", good(n), None))
        records.append((param.values[0], GOOD, param.values[1]))
    reported: list[RecordError] = []
    summary = store.ingest(
        records, on_error="skip", on_batch=lambda _r, bad: reported.extend(bad), batch_size=3
    )
    assert (summary.new, summary.errors) == (len(BAD_RECORDS), len(BAD_RECORDS))
    assert [e.line for e in reported] == [2 * n + 2 for n in range(len(BAD_RECORDS))]
    for error, param in zip(reported, BAD_RECORDS, strict=True):
        assert re.search(str(param.values[2]), error.message)
        assert error.source is None
    # an id that is itself invalid is not repeated whole in the report
    assert reported[0].external_id is None and reported[2].external_id is None
    assert reported[3].external_id == "nan"
    assert "文" * 100 not in describe(reported[2])
    stored = {d["id"] for d in store.export()}
    assert stored == {f"good-{n}" for n in range(len(BAD_RECORDS))}


def test_ingest_stop_names_the_record(store: DedupStore) -> None:
    batch = [Document("a", good(1)), Document("b", good(2), {"x": float("nan")})]
    with pytest.raises(InvalidDocumentError, match=r"^record 2: document 'b': metadata holds"):
        store.ingest(batch)


def test_id_limit_is_in_bytes(store: DedupStore) -> None:
    assert store.add("a" * 1024, good(1)).status is Status.NEW
    assert store.add("文" * 341, good(2)).status is Status.NEW  # 1,023 bytes
    with pytest.raises(InvalidDocumentError, match="1026 bytes"):
        store.add("文" * 342, good(3))


def test_update_lets_the_last_copy_of_an_id_win(store: DedupStore) -> None:
    first = [Document("x", good(1), {"v": 1}), Document("x", good(2), {"v": 2})]
    results = store.add_many(first, update=True)
    assert [r.status for r in results] == [Status.SKIPPED, Status.NEW]
    assert [d["meta"] for d in store.export()] == [{"v": 2}]
    again = [Document("x", good(3), {"v": 3}), Document("x", good(4), {"v": 4})]
    assert [r.status for r in store.add_many(again, update=True)] == [
        Status.SKIPPED,
        Status.UPDATED,
    ]
    assert [d["meta"] for d in store.export()] == [{"v": 4}]
    plain = store.add_many([Document("y", good(5), {"v": 5}), Document("y", good(6), {"v": 6})])
    assert [r.status for r in plain] == [Status.NEW, Status.SKIPPED]
    assert {d["id"]: d["meta"] for d in store.export()}["y"] == {"v": 5}
