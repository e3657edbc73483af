"""Writes: a whole batch of documents in a handful of set-based statements.

Per batch (:func:`dedup_store.pipeline.write_batch`): take the store's lock and the batch's key
locks (:mod:`dedup_store.db.write.locks`: every batch sees all adds committed before it that could
match its documents, and concurrent writers end with the clusters a sequential run gives), allocate
ids, COPY the documents with their keys, and merge the clusters the new edges
(:func:`dedup_store.db.matches.scoring.store_edges`) join. Deletes split clusters again.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I32, I64, stable_order
from dedup_store.core.clustering import merge_labels
from dedup_store.core.fingerprint import FingerprintBatch
from dedup_store.core.metadata import MetaSignatures
from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates import hot, key_rows
from dedup_store.db.candidates.stored import NewRows
from dedup_store.db.matches.scoring import merging_methods
from dedup_store.db.schema.encoding import sample_columns, top32
from dedup_store.db.schema.names import qualified, quote
from dedup_store.db.server import binary_copy
from dedup_store.db.write import frequencies, locks, verdicts
from dedup_store.results import MatchRow

#: The tables ANALYZE'd by :func:`refresh_statistics`.
TABLES = ("documents", "edges", "sample_keys", "slot_keys", "secondary_keys")

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
    is written, in a worker process when there is one (:mod:`dedup_store.workers`)."""
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
    sample keys (in index order), and their rows of ``slot_keys`` (in index order)."""

    columns: tuple[str, ...]
    payload: bytes
    sample_keys: I32
    sample_docs: I64
    keys: key_rows.KeyRows
    freeze: bool = False


def document_rows(
    new: NewRows,
    encoded: Sequence[bytes],
    with_meta: bool = False,
    freeze: bool = False,
) -> DocumentRows:
    """The rows :func:`insert_documents` writes for the new documents of a batch; ``encoded``
    are the :func:`encode_rows` of their rows, ``with_meta`` whether those hold
    ``meta_signature`` (a store with ``meta_fields``), ``freeze`` whether they are written
    frozen (:func:`~dedup_store.db.server.binary_copy.copy_payload`: a bulk load into an empty
    store).

    Needs no connection: a bulk load makes them while the batch before is being written.
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
    firsts = new.firsts  # exact copies get no sample keys, nor rows of slot_keys
    chosen, first_ids = rows[firsts], new.ids[firsts]
    keys, docs = sample_columns(batch, chosen, first_ids)
    order = stable_order(keys)  # in index order: the b-tree is walked in order
    columns = ENCODED_COLUMNS + meta_column + WRITTEN_COLUMNS
    slotted = key_rows.KeyRows.of(first_ids, batch.band_keys[chosen], batch.block_keys[chosen])
    return DocumentRows(columns, b"".join(parts), keys[order], docs[order], slotted, freeze)


def insert_documents(
    conn: Connection,
    schema: str,
    rows: DocumentRows,
    secondary: hot.SecondaryRows | None = None,
    held: HeldRows | None = None,
) -> None:
    """COPY the new documents of a batch (:func:`document_rows`), their sample keys and their
    rows of ``slot_keys``; a bulk load has the last two ``held`` for a larger COPY.

    Call it after :func:`~dedup_store.db.candidates.hot.find_candidates`, whose lookups must only
    meet older documents' keys, and which gives the ``secondary`` keys of their hot slots.
    """
    binary_copy.copy_payload(conn, schema, "documents", rows.columns, rows.payload, rows.freeze)
    if held is not None:
        held.add(conn, schema, rows)
    else:
        _copy_keys(conn, schema, rows)
    if secondary is not None and len(secondary):
        hot.write_secondary(conn, schema, secondary)


def _copy_keys(conn: Connection, schema: str, rows: DocumentRows) -> None:
    """COPY the sample keys and the ``slot_keys`` rows of ``rows``."""
    samples: list[npt.NDArray[Any]] = [rows.sample_keys, rows.sample_docs]
    binary_copy.copy_fixed_rows(
        conn, schema, "sample_keys", ("key", "doc_id"), samples, rows.freeze
    )
    key_rows.copy_rows(conn, schema, rows.keys, rows.freeze)


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
            keys=key_rows.KeyRows.concat([r.keys for r in self._held]).sorted(),
        )
        _copy_keys(conn, schema, together)
        self._held, self._bytes = [], 0


def _meta_fields(meta: MetaSignatures, rows: I64) -> list[bytes]:
    """The ``meta_signature`` field of each of the batch's ``rows`` (NULL: no metadata set)."""
    signatures = meta.signatures[rows].view(np.int32)
    offsets = np.arange(len(rows) + 1, dtype=np.int64) * signatures.shape[1]
    fields = binary_copy.int4_array_fields(signatures.ravel(), offsets)
    null = binary_copy.field(None)
    return [f if present else null for f, present in zip(fields, meta.present[rows], strict=True)]


def merge_clusters(
    conn: Connection,
    schema: str,
    edges: Sequence[MatchRow],
    params: FingerprintParams,
    shared: bool = False,
) -> dict[int, int]:
    """Merge the clusters joined by new edges of merging methods; returns ``{old: new label}``.

    Holding the store's lock ``shared``, concurrent adds may move the clusters' members: their
    labels are locked and read again first (:func:`~dedup_store.db.write.locks.lock_labels`).
    """
    merging = merging_methods(params)
    pairs = [(e.doc_id, e.new_id) for e in edges if e.method in merging and e.new_id is not None]
    if not pairs:
        return {}
    label_of = {e.doc_id: e.cluster_id for e in edges if e.method in merging}
    if shared:
        older = {a: label for a, label in label_of.items() if a not in {b for _, b in pairs}}
        ids = sorted(older)
        label_of.update(
            locks.lock_labels(conn, schema, lambda: labels_of(conn, schema, ids), older)
        )
    label_of.update({b: b for _, b in pairs})
    labels = sorted(set(label_of.values()))
    sizes = conn.execute(
        text(
            f"SELECT cluster_id, count(*) FROM {qualified(schema)}.documents "
            "WHERE cluster_id = ANY(:labels) GROUP BY cluster_id"
        ),
        {"labels": labels},
    )
    size_of: dict[int, int] = {row[0]: row[1] for row in sizes}
    mapping = merge_labels(pairs, label_of, size_of)
    relabel(conn, schema, mapping)
    return mapping


def labels_of(conn: Connection, schema: str, doc_ids: Sequence[int]) -> dict[int, int]:
    """``{id: cluster label}`` of the stored documents ``doc_ids``."""
    rows = conn.execute(
        text(f"SELECT id, cluster_id FROM {qualified(schema, 'documents')} WHERE id = ANY(:ids)"),
        {"ids": list(doc_ids)},
    )
    return {int(row[0]): int(row[1]) for row in rows}


def refresh_statistics(
    conn: Connection,
    schema: str,
    newest_id: int,
    tables: Sequence[str] = TABLES,
    growth: int = 2,
) -> bool:
    """ANALYZE the store's ``tables`` when they have grown ``growth`` times since the planner
    last looked.

    Servers with autovacuum off (or slow to catch up during a bulk load) would otherwise plan
    every statement for empty tables. Growing by a factor keeps the total cost logarithmic
    (between two ANALYZEs the planner scales its row counts by the tables' pages).
    """
    s = qualified(schema)
    known = conn.execute(
        text("SELECT reltuples FROM pg_class WHERE oid = CAST(:t AS regclass)"),
        {"t": f"{s}.documents"},
    ).scalar_one()
    if newest_id < 1000 or 0 < newest_id <= growth * known:
        return False
    for table in tables:
        conn.execute(text(f"ANALYZE {s}.{quote(table)}"))
    return True


def relabel(conn: Connection, schema: str, mapping: Mapping[int, int]) -> None:
    """Move every member of cluster ``old`` to cluster ``new`` for each item of ``mapping``."""
    if mapping:
        conn.execute(
            text(
                f"UPDATE {qualified(schema)}.documents d SET cluster_id = m.new "
                "FROM unnest(CAST(:old AS bigint[]), CAST(:new AS bigint[])) AS m(old, new) "
                "WHERE d.cluster_id = m.old"
            ),
            {"old": list(mapping), "new": list(mapping.values())},
        )


def delete_documents(
    conn: Connection, schema: str, doc_ids: Sequence[int], params: FingerprintParams
) -> None:
    """Delete documents with their keys and edges, and split the clusters they held together.

    A deleted document that was the first of its exact group hands its place to the oldest
    remaining copy (:func:`promote_copies`) first. Sample key rows are found through their
    lookup index: they are a subset of the stored shingles. Hot keys stay hot.
    """
    s = qualified(schema)
    labels = conn.execute(
        text(f"SELECT cluster_id FROM {s}.documents WHERE id = ANY(:ids)"), {"ids": list(doc_ids)}
    ).scalars()
    clusters = set(labels)
    if not clusters:
        return
    heirs = promote_copies(conn, schema, doc_ids)
    key_rows.delete_keys(conn, schema, params, doc_ids)
    if heirs:  # copies now first: they own the keys of their group
        key_rows.add_stored_keys(conn, schema, params, heirs)
    conn.execute(
        text(
            f"DELETE FROM {s}.sample_keys t USING (SELECT d.id, unnest(d.shingles) AS key "
            f"FROM {s}.documents d WHERE d.id = ANY(:ids)) g "
            "WHERE t.key = g.key AND t.doc_id = g.id"
        ),
        {"ids": list(doc_ids)},
    )
    hot.delete_secondary(conn, schema, doc_ids)
    if params.weighted:
        frequencies.remove(conn, schema, list(doc_ids))
    conn.execute(text(f"DELETE FROM {s}.documents WHERE id = ANY(:ids)"), {"ids": list(doc_ids)})
    verdicts.recluster(conn, schema, clusters)


def promote_copies(conn: Connection, schema: str, doc_ids: Sequence[int]) -> list[int]:
    """Make the oldest surviving copy of each deleted first document the first of its group;
    returns their ids.

    The heir takes over the deleted document's sample keys and secondary keys (equal texts
    have equal keys), its edges with documents outside the group with their scores (copies
    share their metadata set too), and the other copies' links;
    the caller adds its rows of ``slot_keys``.
    """
    s = qualified(schema)
    rows = conn.execute(
        text(f"""
        WITH gone AS (SELECT unnest(CAST(:ids AS bigint[])) AS id),
        heirs AS (
            SELECT c.exact_of AS old, min(c.id) AS heir FROM {s}.documents c
            WHERE c.exact_of IN (SELECT id FROM gone) AND c.id NOT IN (SELECT id FROM gone)
            GROUP BY c.exact_of
        ),
        keys AS (
            UPDATE {s}.sample_keys k SET doc_id = h.heir FROM heirs h WHERE k.doc_id = h.old
        ),
        secondary AS (
            UPDATE {s}.secondary_keys k SET doc_id = h.heir FROM heirs h WHERE k.doc_id = h.old
        ),
        copied AS (
            INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming, meta_score,
                                   found_at)
            SELECT least(o.other, h.heir), greatest(o.other, h.heir), e.method, e.jaccard,
                   e.containment, e.hamming, e.meta_score, e.found_at
            FROM heirs h
            JOIN {s}.edges e ON h.old IN (e.a, e.b)
            CROSS JOIN LATERAL (SELECT CASE WHEN e.a = h.old THEN e.b ELSE e.a END AS other) o
            JOIN {s}.documents od ON od.id = o.other
            WHERE o.other <> h.heir AND od.exact_of IS DISTINCT FROM h.old
              AND o.other NOT IN (SELECT id FROM gone)
            ON CONFLICT DO NOTHING
        ),
        relinked AS (
            INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming, meta_score)
            SELECT h.heir, c.id, 'exact', 1.0, 1.0, 0,
                   CASE WHEN c.meta_signature IS NOT NULL THEN 1.0 END
            FROM heirs h
            JOIN {s}.documents c ON c.exact_of = h.old
            WHERE c.id <> h.heir AND c.id NOT IN (SELECT id FROM gone)
            ON CONFLICT DO NOTHING
        )
        UPDATE {s}.documents c SET exact_of = nullif(h.heir, c.id)
        FROM heirs h WHERE c.exact_of = h.old
        RETURNING CASE WHEN c.id = h.heir THEN c.id END
        """),
        {"ids": list(doc_ids)},
    )
    return [int(heir) for heir in rows.scalars() if heir is not None]
