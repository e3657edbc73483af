"""Fingerprints of a DataFrame of documents, computed on the executors over Arrow batches.

Each Arrow batch of ``(id, text[, meta])`` rows is fingerprinted by
:func:`~dedup_store.core.fingerprint.fingerprint_batch`, the function the local ingest calls, so
every value is the one the local path computes. 64-bit values are Spark ``bigint`` (the same
bits, signed), 32-bit ones ``int``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pyspark.sql import DataFrame

from dedup_store.core.fingerprint import fingerprint_batch
from dedup_store.core.params import FingerprintParams
from dedup_store.core.scripts import guess_language
from dedup_store.db.schema.encoding import sample_columns, top32

#: The columns :func:`fingerprint_dataframe` adds (``full`` adds the last three).
FINGERPRINT_COLUMNS = (
    "empty boolean, language string, length int, exact_hash binary, token_count int, "
    "simhash bigint, signature array<int>, band_keys array<bigint>, block_keys array<bigint>, "
    "shingle_count int, shingles array<int>, sample_keys array<int>"
)
FULL_COLUMNS = "canonical_text string, shingles64 array<bigint>, sample_keys64 array<bigint>"


def fingerprint_dataframe(
    df: DataFrame,
    params: FingerprintParams,
    *,
    text_column: str = "text",
    keep: tuple[str, ...] | None = None,
    full: bool = False,
) -> DataFrame:
    """Fingerprint every row of ``df``; one output row per input row.

    Output columns: the ``keep`` columns of ``df`` (default: all but the text), then ``empty``
    (no words left after canonicalization: the other fingerprint columns are null), the
    language guess, the canonical text's length, the exact hash, token count, SimHash, MinHash
    signature, band and block keys, the shingle count, ``shingles`` (the stored form: the high
    32 bits of each shingle hash) and ``sample_keys`` (the excerpt keys the store indexes: high
    32 bits, thinned to about ``max_excerpt_keys``).

    Args:
        df: the documents.
        params: the store's fingerprint parameters.
        text_column: the column holding the text.
        keep: input columns passed through.
        full: also ``canonical_text``, ``shingles64`` and ``sample_keys64`` (every 64-bit
            shingle and excerpt key), for comparisons with the local path.
    """
    kept = [c for c in df.columns if c != text_column] if keep is None else list(keep)
    input_types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    passed = ", ".join(f"`{c}` {input_types[c]}" for c in kept)
    columns = FINGERPRINT_COLUMNS + (f", {FULL_COLUMNS}" if full else "")
    schema = f"{passed}, {columns}" if passed else columns
    settings = params.to_dict()

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fp_params = FingerprintParams.from_dict(settings)
        for batch in batches:
            yield fingerprint_arrow(batch, fp_params, text_column, kept, full)

    return df.select(*kept, text_column).mapInArrow(run, schema)


def fingerprint_arrow(
    batch: pa.RecordBatch,
    params: FingerprintParams,
    text_column: str,
    kept: list[str],
    full: bool = False,
) -> pa.RecordBatch:
    """The fingerprint columns of one Arrow batch (see :func:`fingerprint_dataframe`)."""
    texts = batch.column(text_column).to_pylist()
    fb = fingerprint_batch(texts, params)
    n, rows = len(texts), len(fb)
    where = fb.source_index.astype(np.int64)
    present = np.zeros(n, dtype=bool)
    present[where] = True
    # each output list has a row per input row: an empty document gets a null there
    mask = pa.array(~present)

    def scalar(values: npt.NDArray[Any], kind: pa.DataType) -> pa.Array:
        full_values = np.zeros(n, dtype=values.dtype)
        full_values[where] = values
        return pa.array(full_values, type=kind, mask=~present)

    def matrix(values: npt.NDArray[Any], kind: pa.DataType) -> pa.Array:
        width = values.shape[1] if values.ndim == 2 else 0
        counts = np.zeros(n, dtype=np.int64)
        counts[where] = width
        order = np.argsort(where, kind="stable")
        flat = np.ascontiguousarray(values[order]).reshape(-1)
        return _lists(flat, counts, kind, mask)

    def ragged(
        values: npt.NDArray[Any], offsets: npt.NDArray[np.int64], kind: pa.DataType
    ) -> pa.Array:
        # rows of fb are in input order (source_index increases)
        counts = np.zeros(n, dtype=np.int64)
        counts[where] = np.diff(offsets)
        return _lists(values, counts, kind, mask)

    row_ids = np.arange(rows, dtype=np.int64)
    samples, owners = sample_columns(fb, row_ids, row_ids)
    sample_offsets = np.searchsorted(owners, np.arange(rows + 1), side="left").astype(np.int64)
    canonical = [""] * n
    hashes: list[bytes | None] = [None] * n
    languages: list[str | None] = [None] * n
    for row, position in enumerate(where.tolist()):
        canonical[position] = fb.canonical_texts[row]
        hashes[position] = fb.exact_hashes[row]
        languages[position] = guess_language(fb.canonical_texts[row])
    lengths = np.array([len(fb.canonical_texts[r]) for r in range(rows)], dtype=np.int32)
    arrays = [batch.column(c) for c in kept] + [
        pa.array(~present),
        pa.array(languages, type=pa.string()),
        scalar(lengths, pa.int32()),
        pa.array(hashes, type=pa.binary()),
        scalar(fb.token_counts.astype(np.int32), pa.int32()),
        scalar(fb.simhashes.view(np.int64), pa.int64()),
        matrix(fb.signatures.view(np.int32), pa.int32()),
        matrix(fb.band_keys.astype(np.int64), pa.int64()),
        matrix(fb.block_keys.astype(np.int64), pa.int64()),
        scalar(np.diff(fb.shingle_offsets).astype(np.int32), pa.int32()),
        ragged(top32(fb.shingles), fb.shingle_offsets, pa.int32()),
        ragged(samples, sample_offsets, pa.int32()),
    ]
    names = [
        *kept,
        "empty",
        "language",
        "length",
        "exact_hash",
        "token_count",
        "simhash",
        "signature",
        "band_keys",
        "block_keys",
        "shingle_count",
        "shingles",
        "sample_keys",
    ]
    if full:
        arrays += [
            pa.array(
                [c if p else None for c, p in zip(canonical, present.tolist(), strict=True)],
                type=pa.string(),
            ),
            ragged(fb.shingles.view(np.int64), fb.shingle_offsets, pa.int64()),
            ragged(fb.sample_keys.view(np.int64), fb.sample_offsets, pa.int64()),
        ]
        names += ["canonical_text", "shingles64", "sample_keys64"]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _lists(
    values: npt.NDArray[Any], counts: npt.NDArray[np.int64], kind: pa.DataType, mask: pa.Array
) -> pa.Array:
    """A list array of ``counts[i]`` consecutive ``values`` per row, null where ``mask``."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(
        pa.array(offsets, type=pa.int32()), pa.array(values, type=kind), mask=mask
    )
