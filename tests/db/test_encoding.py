"""Parameters sent as one array literal come back from PostgreSQL as the values they encode;
shingles in their stored 32-bit form come out sorted row by row."""

from __future__ import annotations

import dataclasses

import numpy as np
from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs, license_docs
from dedup_store.core.arrays import I64
from dedup_store.core.fingerprint import FingerprintBatch, fingerprint_batch
from dedup_store.db.schema.encoding import (
    array_literal,
    bytea_array_literal,
    excerpt_stride,
    excerpt_strides,
    sorted_top32,
    top32,
)


def test_byte_strings_survive_the_bytea_array_literal(engine: Engine) -> None:
    values = [b"", b"\x00", b'\\"{},', bytes(range(256)), b"\xff" * 16]
    with engine.connect() as conn:
        back = conn.execute(
            text("SELECT CAST(:v AS bytea[])"), {"v": bytea_array_literal(values)}
        ).scalar_one()
        empty = conn.execute(text("SELECT CAST(:v AS bytea[])"), {"v": bytea_array_literal([])})
        assert empty.scalar_one() == []
    assert [bytes(v) for v in back] == values


def test_integers_survive_the_array_literal(engine: Engine) -> None:
    values = [0, -1, 2**63 - 1, -(2**63)]
    with engine.connect() as conn:
        back = conn.execute(
            text("SELECT CAST(:v AS bigint[])"), {"v": array_literal(values)}
        ).scalar_one()
    assert back == values


def _rows_sorted_one_by_one(batch: FingerprintBatch, rows: I64) -> list[list[int]]:
    offsets = batch.shingle_offsets
    return [sorted(top32(batch.shingles[offsets[r] : offsets[r + 1]]).tolist()) for r in rows]


def test_stored_shingles_come_back_sorted_row_by_row() -> None:
    texts = [doc.text for doc in license_docs() + copyright_docs()[:40]]
    batch = fingerprint_batch(texts)
    # real licence and copyright texts; rows out of order, one twice
    rows = np.array([5, 0, 39, 5, 17, 2, len(texts) - 1], dtype=np.int64)
    offsets, values = sorted_top32(batch, rows)
    got = [values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(rows))]
    assert got == _rows_sorted_one_by_one(batch, rows)


def test_stored_shingles_sort_rows_of_only_high_or_low_halves_and_equal_halves() -> None:
    batch = fingerprint_batch(["one two three four five six", "seven eight nine ten eleven"])
    high, low = 0xFFFF_0000_0000_0001, 0x0000_0001_0000_0000
    rows_of = [
        [],  # an empty row
        [low, low + 1, high, high + 1],  # equal high halves on both sides of the sign bit
        [high, high + 2**32, 2**64 - 1],  # negative only
        [0, 1, (2**31 - 1) << 32],  # non-negative only
    ]
    shingles = np.array([v for row in rows_of for v in row], dtype=np.uint64)
    counts = [len(row) for row in rows_of]
    crafted = dataclasses.replace(
        batch,
        shingles=shingles,
        shingle_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
    )
    rows = np.arange(len(rows_of), dtype=np.int64)
    offsets, values = sorted_top32(crafted, rows)
    assert offsets.tolist() == [0, 0, 4, 7, 10]
    got = [values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(rows))]
    assert got == _rows_sorted_one_by_one(crafted, rows)


def test_one_documents_excerpt_stride_is_the_batch_rule() -> None:
    # a single check or add thins its excerpt keys by the integer rule, a batch by the array
    # one: both must keep the same keys, or a document would miss the excerpts it shares
    counts = np.arange(0, 5000, dtype=np.int64)
    for budget in (0, 1, 3, 16, 63, 64, 65, 127, 1000):
        strides = excerpt_strides(counts, budget).tolist()
        assert [excerpt_stride(int(c), budget) for c in counts] == strides, budget
