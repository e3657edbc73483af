"""The Spark fingerprints are the local ones, field by field."""

from __future__ import annotations

from typing import Any

import numpy as np

from dedup_store.core.fingerprint import fingerprint_batch
from dedup_store.core.params import FingerprintParams
from dedup_store.db.schema.encoding import sparse_excerpt_keys, top32
from dedup_store.spark import fingerprint_dataframe
from tests.core.golden import load_cases
from tests.spark.corpora import real_documents


def spark_rows(spark: Any, texts: list[str], params: FingerprintParams) -> list[Any]:
    frame = spark.createDataFrame(
        [(i, t) for i, t in enumerate(texts)], "position bigint, text string"
    ).repartition(3)
    rows = fingerprint_dataframe(frame, params, full=True).collect()
    return sorted(rows, key=lambda row: row["position"])


def assert_same(spark: Any, texts: list[str], params: FingerprintParams) -> int:
    """Compare every field of every text's fingerprint; returns the number compared."""
    local = fingerprint_batch(texts, params)
    rows = spark_rows(spark, texts, params)
    assert [r["position"] for r in rows] == list(range(len(texts)))
    assert [i for i, r in enumerate(rows) if r["empty"]] == local.empty_index
    compared = 0
    for row_number, position in enumerate(local.source_index.tolist()):
        fp, row = local.row(row_number), rows[position]
        assert row["canonical_text"] == fp.canonical_text
        assert row["length"] == len(fp.canonical_text)
        assert bytes(row["exact_hash"]) == fp.exact_hash
        assert row["token_count"] == fp.token_count
        assert row["simhash"] == np.uint64(fp.simhash).view(np.int64)
        assert row["signature"] == fp.signature.view(np.int32).tolist()
        assert row["band_keys"] == fp.band_keys.tolist()
        assert row["block_keys"] == fp.block_keys.tolist()
        assert row["shingle_count"] == len(fp.shingles)
        assert row["shingles64"] == fp.shingles.view(np.int64).tolist()
        assert row["shingles"] == top32(fp.shingles).tolist()
        assert row["sample_keys64"] == fp.sample_keys.view(np.int64).tolist()
        kept = sparse_excerpt_keys(top32(fp.sample_keys), params.max_excerpt_keys)
        assert row["sample_keys"] == kept.tolist()
        compared += 1
    return compared


def test_golden_vectors(spark: Any) -> None:
    by_params: dict[str, tuple[FingerprintParams, list[str]]] = {}
    for case in load_cases():
        params = FingerprintParams.from_dict(case["params"])
        by_params.setdefault(repr(params), (params, []))[1].append(case["text"])
    compared = sum(assert_same(spark, texts, params) for params, texts in by_params.values())
    assert compared == len(load_cases())


def test_real_documents(spark: Any) -> None:
    texts = [text for _, text in real_documents()[:600]]
    assert assert_same(spark, texts, FingerprintParams()) == 600


def test_empty_documents_get_a_row(spark: Any) -> None:
    rows = spark_rows(spark, ["one two three four five", "!!! ...", ""], FingerprintParams())
    assert [r["empty"] for r in rows] == [False, True, True]
    assert rows[1]["shingles"] is None
