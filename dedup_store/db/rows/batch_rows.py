"""The rows a batch writes: its new documents with their ids, their COPY rows, and a bulk load's
held rows of the key tables.

Everything here is computed before a batch's statements run (a bulk load makes a batch's rows
while the batches before it are written) and imports nothing of the writers or the lookups, which
use it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I32, I64, ranges, stable_order
from dedup_store.core.fingerprint import FingerprintBatch
from dedup_store.core.metadata import MetaSignatures
from dedup_store.db.rows import key_rows
from dedup_store.db.schema.encoding import StoredShingles, sample_columns, sorted_top32, top32
from dedup_store.db.schema.names import qualified
from dedup_store.db.server import binary_copy


@dataclasses.dataclass(frozen=True)
class NewRows:
    """The rows of a fingerprint batch that a transaction inserts, with their new ids.

    Attributes:
        batch: the fingerprints.
        rows: the batch rows inserted.
        ids: their new internal ids.
        exact_of: per row, the id of the first document of its exact group (stored, or an
            earlier row of this batch), 0 for the first itself.
    """

    batch: FingerprintBatch
    rows: I64
    ids: I64
    exact_of: I64
    stored_shingles: StoredShingles | None = None

    @property
    def firsts(self) -> I64:
        """Positions (in ``rows``) of the documents that are the first of their exact group."""
        return np.flatnonzero(self.exact_of == 0)

    def shingles_of(self, rows: I64) -> StoredShingles:
        """The shingles as stored of the batch rows ``rows``
        (:func:`~dedup_store.db.schema.encoding.sorted_top32`): taken from :attr:`stored_shingles`,
        made for every row of the batch with its fingerprints, when there are."""
        if self.stored_shingles is None:
            return sorted_top32(self.batch, rows)
        offsets, values = self.stored_shingles
        starts, ends = offsets[rows], offsets[rows + 1]
        chosen = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=chosen[1:])
        return chosen, values[ranges(starts, ends)]


# the columns of a document row encoded before it is written (:func:`encode_rows`: fixed-width
# columns first, encoded for the whole batch with numpy), then those it gets when it is written
# (the SimHash too: a store with weighted SimHash features weighs them then); its band and block
# keys go to ``slot_keys`` (:func:`document_rows`)
ENCODED_COLUMNS = (
    "exact_hash", "signature", "shingle_count", "token_count", "length", "external_id",
    "language", "meta", "body", "shingles",
)  # fmt: skip
WRITTEN_COLUMNS = ("id", "cluster_id", "simhash", "exact_of")
#: Every column of a document row (the order the Spark load writes them in).
DOCUMENT_COLUMNS = (
    "id", "cluster_id", "simhash", "exact_hash", "signature", "shingle_count", "token_count",
    "length", "external_id", "language", "meta", "body", "shingles", "exact_of",
)  # fmt: skip


def allocate_ids(conn: Connection, schema: str, count: int, shared: bool = False) -> I64:
    """``count`` new document ids, ascending (so "older" means "smaller id").

    Holding the store's lock exclusively (``shared`` false) nobody else draws ids, so the ids
    are consecutive: the sequence moves past the whole range at once. Under the shared lock,
    other adds draw ids meanwhile, so each id is drawn on its own.
    """
    if count == 0:
        return np.empty(0, dtype=np.int64)
    if shared:
        drawn = conn.execute(
            text("SELECT nextval(CAST(:seq AS regclass)) FROM generate_series(1, :n)"),
            {"seq": qualified(schema, "document_ids"), "n": count},
        ).scalars()
        return np.sort(np.fromiter(drawn, dtype=np.int64, count=count))
    last = conn.execute(
        text("SELECT setval(CAST(:seq AS regclass), nextval(CAST(:seq AS regclass)) + :n - 1)"),
        {"seq": qualified(schema, "document_ids"), "n": count},
    ).scalar_one()
    first = last - count + 1
    return np.arange(first, first + count, dtype=np.int64)


def next_id(conn: Connection, schema: str) -> int:
    """The id :func:`allocate_ids` would draw next (without drawing it)."""
    last, called = conn.execute(
        text(f"SELECT last_value, is_called FROM {qualified(schema, 'document_ids')}")
    ).one()
    return int(last) + 1 if called else int(last)


def catch_up_ids(conn: Connection, schema: str) -> None:
    """Move the id sequence past the largest stored id: a bulk load draws its ids in memory
    (:meth:`dedup_store.db.bulk.load.LoadedKeys.allocate`) and calls this before it commits, holding
    the store's lock exclusively."""
    conn.execute(
        text(
            "SELECT setval(CAST(:seq AS regclass), m.id) "
            f"FROM (SELECT max(id) AS id FROM {qualified(schema, 'documents')}) m "
            "WHERE m.id >= :next"
        ),
        {"seq": qualified(schema, "document_ids"), "next": next_id(conn, schema)},
    )


def encode_rows(
    batch: FingerprintBatch,
    external_ids: Sequence[str],
    metas: Sequence[Mapping[str, Any] | None],
    bodies: Sequence[str | None],
    languages: Sequence[str],
    meta: MetaSignatures | None = None,
) -> list[bytes]:
    """Per fingerprint row of ``batch`` (other arguments per row too), its document row in
    binary COPY form up to the :data:`WRITTEN_COLUMNS`: the field count, then the
    :data:`ENCODED_COLUMNS` (and ``meta_signature`` with ``meta``), which depend neither on its
    id nor on what the store holds (nor on its document frequencies). Computed before the batch
    is written, in a worker process when there is one (:mod:`dedup_store.ingest.workers`)."""
    n = len(external_ids)
    if n == 0:
        return []
    count = len(ENCODED_COLUMNS) + len(WRITTEN_COLUMNS) + (meta is not None)
    offsets = batch.shingle_offsets
    lengths = np.fromiter((len(t) for t in batch.canonical_texts), np.int64, n)
    prefix = binary_copy.fixed_prefix(
        count,
        [
            (np.frombuffer(b"".join(batch.exact_hashes), dtype="V16"), "V16"),
            binary_copy.array_matrix(batch.signatures.view(np.int32)),
            (np.diff(offsets), ">i4"),
            (batch.token_counts, ">i4"),
            (lengths, ">i4"),
        ],
    )
    width = len(prefix) // n
    shingle_fields = binary_copy.int4_array_fields(top32(batch.shingles), offsets)
    extra = [b""] * n if meta is None else _meta_fields(meta, np.arange(n, dtype=np.int64))
    field, jsonb = binary_copy.field, binary_copy.jsonb
    return [
        b"".join(
            (
                prefix[width * i : width * (i + 1)],
                field(external_ids[i].encode("utf-8")),
                field(languages[i].encode("utf-8")),
                field(jsonb(metas[i])),
                field(_utf8(bodies[i])),
                shingle_fields[i],
                extra[i],
            )
        )
        for i in range(n)
    ]


def _utf8(text: str | None) -> bytes | None:
    return None if text is None else text.encode("utf-8")


@dataclasses.dataclass(frozen=True)
class DocumentRows:
    """A batch's new documents as :func:`insert_documents` writes them: their COPY rows, their
    sample keys (in index order), and their rows of the key table ``key_table`` (in index
    order)."""

    columns: tuple[str, ...]
    payload: bytes
    sample_keys: I32
    sample_docs: I64
    keys: key_rows.KeyRows
    key_table: str
    freeze: bool = False


def document_rows(
    new: NewRows,
    encoded: Sequence[bytes],
    with_meta: bool = False,
    freeze: bool = False,
    settled: bool = False,
) -> DocumentRows:
    """The rows :func:`insert_documents` writes for the new documents of a batch; ``encoded``
    are the :func:`encode_rows` of their rows, ``with_meta`` whether those hold
    ``meta_signature`` (a store with ``meta_fields``), ``freeze`` whether they are written
    frozen (:func:`~dedup_store.db.server.binary_copy.copy_payload`: a bulk load into an empty
    store), ``settled`` whether their keys enter the settled tier at once (a bulk load) rather
    than the recent one.

    Needs no connection: a bulk load makes them while the batches before are being written.
    """
    batch, rows = new.batch, new.rows
    meta_column = ("meta_signature",) if with_meta else ()
    written = binary_copy.fixed_prefix(
        None,
        [
            (new.ids, ">i8"),
            (new.ids, ">i8"),
            (batch.simhashes[rows].view(np.int64), ">i8"),
        ],
    )
    width = len(written) // max(1, len(rows))
    null, link = binary_copy.field(None), struct.Struct("!iq").pack
    parts: list[bytes] = []
    for i, exact_of in enumerate(new.exact_of.tolist()):
        parts += [
            encoded[i],
            written[width * i : width * (i + 1)],
            link(8, exact_of) if exact_of else null,
        ]
    firsts = new.firsts  # exact copies get no sample keys, nor rows of the key tables
    chosen, first_ids = rows[firsts], new.ids[firsts]
    keys, docs = sample_columns(batch, chosen, first_ids)
    order = stable_order(keys)  # in index order: the b-tree is walked in order
    columns = ENCODED_COLUMNS + meta_column + WRITTEN_COLUMNS
    slotted = key_rows.KeyRows.of(first_ids, batch.band_keys[chosen], batch.block_keys[chosen])
    table = key_rows.SETTLED if settled else key_rows.RECENT
    return DocumentRows(columns, b"".join(parts), keys[order], docs[order], slotted, table, freeze)


def copy_keys(conn: Connection, schema: str, rows: DocumentRows) -> None:
    """COPY the sample keys and the key rows of ``rows``."""
    samples: list[npt.NDArray[Any]] = [rows.sample_keys, rows.sample_docs]
    binary_copy.copy_fixed_rows(
        conn, schema, "sample_keys", ("key", "doc_id"), samples, rows.freeze
    )
    key_rows.copy_rows(conn, schema, rows.keys, rows.key_table, rows.freeze)


class HeldRows:
    """A bulk load's sample keys and ``slot_keys`` rows, held and written in COPYs of about
    :data:`FLUSH_BYTES`: nothing reads them before the load's end, which builds their indexes.

    PostgreSQL 16 and later extend a table by up to 64 pages at a time for a COPY, and leave
    empty the pages a statement did not fill. With a COPY per batch of 5,000 documents, a 3M
    load left 26 % of the key table's pages and 25 % of ``sample_keys``' empty, and each of
    the 22 key index builds scanned them. A COPY of 16 MB leaves at most 64 pages of 2,048
    empty; larger ones are written while the calling thread waits, with no batch to stage
    meanwhile (100k ~600-word loads took 11.5-11.9 s with 16 MB, 12.3-12.4 s with 64 MB).
    """

    FLUSH_BYTES = 16 << 20

    def __init__(self) -> None:
        self._held: list[DocumentRows] = []
        self._bytes = 0

    def add(self, conn: Connection, schema: str, rows: DocumentRows) -> None:
        """Hold the sample keys and ``slot_keys`` rows of ``rows``; write all that is held once it
        reaches :data:`FLUSH_BYTES`."""
        self._held.append(dataclasses.replace(rows, payload=b""))  # the documents are written
        self._bytes += rows.sample_keys.nbytes + rows.sample_docs.nbytes + rows.keys.nbytes
        if self._bytes >= self.FLUSH_BYTES:
            self.flush(conn, schema)

    def flush(self, conn: Connection, schema: str) -> None:
        """Write all that is held (one COPY per table)."""
        if not self._held:
            return
        last = self._held[-1]  # a load's batches share the table, its columns and freeze
        together = dataclasses.replace(
            last,
            sample_keys=np.concatenate([r.sample_keys for r in self._held]),
            sample_docs=np.concatenate([r.sample_docs for r in self._held]),
            keys=key_rows.KeyRows.merged([r.keys for r in self._held]),
        )
        copy_keys(conn, schema, together)
        self._held, self._bytes = [], 0


def _meta_fields(meta: MetaSignatures, rows: I64) -> list[bytes]:
    """The ``meta_signature`` field of each of the batch's ``rows`` (NULL: no metadata set)."""
    signatures = meta.signatures[rows].view(np.int32)
    offsets = np.arange(len(rows) + 1, dtype=np.int64) * signatures.shape[1]
    fields = binary_copy.int4_array_fields(signatures.ravel(), offsets)
    null = binary_copy.field(None)
    return [f if present else null for f, present in zip(fields, meta.present[rows], strict=True)]
