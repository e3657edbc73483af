"""Bad input gets a clear error and loses nothing; a failed batch writes no rows."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from dedup_store import (
    DedupStore,
    Document,
    EmptyDocumentError,
    InvalidDocumentError,
    Status,
)

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
    assert _rows(engine, store.schema) == dict.fromkeys(
        ("documents", "sample_keys", "edges"), 0
    )


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
