"""``add`` (one statement) and the batch path give the same results, edges and clusters."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from dedup_store import AddResult, DedupStore, Document, Status
from tests.conftest import drop_schema
from tests.db.test_clusters import build_corpus


@pytest.fixture
def two_schemas(engine: Engine) -> Iterator[tuple[str, str]]:
    names = (f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}")
    yield names
    for name in names:
        drop_schema(engine, name)


def _documents() -> list[Document]:
    first, rest = build_corpus()
    docs = first + rest
    long_text = " ".join(d.text for d in docs[:3])
    docs += [
        Document("copy-of-first", docs[0].text),  # an exact duplicate
        Document("copy-again", docs[0].text),
        Document("long", long_text),  # holds the first documents as excerpts
        Document(docs[5].id, docs[6].text),  # a known id: skipped
    ]
    return docs


def _tables(engine: Engine, schema: str) -> tuple[list[tuple[object, ...]], ...]:
    with engine.connect() as conn:
        documents = conn.execute(
            text(
                f"SELECT d.id, external_id, cluster_id, simhash, exact_hash, signature, shingles, "
                f"shingle_count, token_count, length, language, meta, "
                f"(SELECT array_agg(k.key ORDER BY k.kind, k.slot) "
                f'FROM (SELECT * FROM "{schema}".slot_keys UNION ALL '
                f'SELECT * FROM "{schema}".recent_slot_keys) k WHERE k.doc_id = d.id) '
                f'FROM "{schema}".documents d ORDER BY d.id'
            )
        ).all()
        edges = conn.execute(
            text(
                f"SELECT a, b, method, round(jaccard::numeric, 9), round(containment::numeric, 9), "
                f'hamming FROM "{schema}".edges ORDER BY a, b'
            )
        ).all()
        samples = conn.execute(
            text(f'SELECT key, doc_id FROM "{schema}".sample_keys ORDER BY doc_id, key')
        ).all()
    return [tuple(r) for r in documents], [tuple(r) for r in edges], [tuple(r) for r in samples]


def _shown(result: AddResult) -> tuple[object, ...]:
    matches = [(m.external_id, m.method, round(m.jaccard, 9), m.hamming) for m in result.matches]
    return (result.external_id, result.status, result.cluster_id, matches)


def test_single_adds_equal_the_batch_path(engine: Engine, two_schemas: tuple[str, str]) -> None:
    docs = _documents()
    with (
        DedupStore(engine, schema=two_schemas[0]) as single,
        DedupStore(engine, schema=two_schemas[1]) as batched,
    ):
        one_by_one = [single.add(d.id, d.text, {"n": i}) for i, d in enumerate(docs)]
        in_batches = batched.add_many(
            [Document(d.id, d.text, {"n": i}) for i, d in enumerate(docs)], batch_size=1
        )
    assert [_shown(r) for r in one_by_one] == [_shown(r) for r in in_batches]
    statuses = {r.status for r in one_by_one}
    assert {Status.NEW, Status.NEAR_DUPLICATE, Status.EXACT_DUPLICATE, Status.SKIPPED} <= statuses
    assert _tables(engine, two_schemas[0]) == _tables(engine, two_schemas[1])
