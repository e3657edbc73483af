"""Writes: a whole batch of documents in a handful of set-based statements.

Per batch: lock out other writers of the store (so every batch sees all batches committed before
it, and concurrent writers end with the clusters a sequential run gives), allocate ids, COPY the
documents and their keys, find + verify + store the match edges in one statement, then merge the
clusters the new edges join.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.clustering import components, merge_labels
from dedup_store.core.fingerprint import FingerprintBatch
from dedup_store.core.lsh import band_keys
from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import block_keys
from dedup_store.db import copy
from dedup_store.db.verify import (
    array_literal,
    fetch_document,
    score_parameters,
    scored_pairs_sql,
)

I64 = npt.NDArray[np.int64]
#: Per-session temporary table holding the keys of the batch being written.
STAGING_TABLE = "dedup_store_new_keys"
#: The key tables, in the order of the staging table's ``kind`` numbers, with their slot column.
KEY_TABLES = (("band_keys", "band"), ("block_keys", "block"), ("sample_keys", None))

# fixed-width columns first (encoded for the whole batch with numpy), then variable ones
DOCUMENT_COLUMNS = (
    "id", "cluster_id", "simhash", "exact_hash", "signature", "shingle_count", "token_count",
    "length", "external_id", "language", "meta", "body", "shingles",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class EdgeRow:
    """A match edge stored by a batch: ``a`` (older) matched ``b`` (newer)."""

    a: int
    b: int
    method: str
    jaccard: float
    containment: float
    hamming: int
    a_external_id: str
    a_cluster_id: int


def lock_writers(conn: Connection, schema: str) -> None:
    """Serialize writers of this store until the transaction ends."""
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": f"dedup:{schema}"})


def allocate_ids(conn: Connection, schema: str, count: int) -> I64:
    """``count`` new document ids, increasing (so "older" means "smaller id")."""
    rows = conn.execute(
        text(f"SELECT nextval('\"{schema}\".document_ids') FROM generate_series(1, :n)"),
        {"n": count},
    )
    return np.sort(np.fromiter((r[0] for r in rows), dtype=np.int64, count=count))


def _top32(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int32]:
    return (values >> np.uint64(32)).astype(np.uint32).view(np.int32)


@dataclasses.dataclass(frozen=True)
class NewRows:
    """The rows of a fingerprint batch that a transaction inserts, with their new ids."""

    batch: FingerprintBatch
    rows: I64
    ids: I64

    def key_columns(self) -> dict[str, npt.NDArray[Any]]:
        """Band, block and sample key rows of the selected documents, as columns."""
        bands, band_docs, band_values = _key_columns(self.ids, self.batch.band_keys[self.rows])
        blocks, block_docs, block_values = _key_columns(self.ids, self.batch.block_keys[self.rows])
        offsets = self.batch.sample_offsets
        starts, ends = offsets[self.rows], offsets[self.rows + 1]
        take = _ranges(starts, ends)
        return {
            "bb": bands, "bk": band_values, "bd": band_docs,
            "kb": blocks, "kk": block_values, "kd": block_docs,
            "sk": _top32(self.batch.sample_keys[take]),
            "sd": np.repeat(self.ids, ends - starts),
        }  # fmt: skip


def insert_documents(
    conn: Connection,
    schema: str,
    new: NewRows,
    external_ids: Sequence[str],
    metas: Sequence[Mapping[str, Any] | None],
    bodies: Sequence[str | None],
    languages: Sequence[str],
) -> None:
    """COPY the selected documents of a batch, and stage their keys (other arguments per row).

    The staged keys go into the key tables with :func:`file_staged_keys` once
    :func:`store_edges` has looked them up, so its probes into the key tables only meet older
    documents' keys.
    """
    batch, rows = new.batch, new.rows
    starts, ends = batch.shingle_offsets[rows], batch.shingle_offsets[rows + 1]
    signatures, signature_dtype = copy.int4_matrix(batch.signatures[rows].view(np.int32))
    exact = np.frombuffer(b"".join(batch.exact_hashes[r] for r in rows.tolist()), dtype="V16")
    lengths = np.fromiter(
        (len(batch.canonical_texts[r]) for r in rows.tolist()), np.int64, len(rows)
    )
    prefix = copy.fixed_prefix(
        len(DOCUMENT_COLUMNS),
        [
            (new.ids, ">i8"),
            (new.ids, ">i8"),
            (batch.simhashes[rows].view(np.int64), ">i8"),
            (exact, "V16"),
            (signatures, signature_dtype),
            (ends - starts, ">i4"),
            (batch.token_counts[rows], ">i4"),
            (lengths, ">i4"),
        ],
    )
    width = len(prefix) // max(1, len(rows))
    shingle_offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64)
    shingle_fields = copy.int4_array_fields(
        _top32(batch.shingles[_ranges(starts, ends)]), shingle_offsets
    )
    parts: list[bytes] = []
    for i in range(len(rows)):
        body = bodies[i]
        parts += [
            prefix[width * i : width * (i + 1)],
            copy.field(external_ids[i].encode("utf-8")),
            copy.field(languages[i].encode("utf-8")),
            copy.field(copy.jsonb(metas[i])),
            copy.field(None if body is None else body.encode("utf-8")),
            shingle_fields[i],
        ]
    copy.copy_payload(conn, schema, "documents", DOCUMENT_COLUMNS, b"".join(parts))
    _stage_keys(conn, new)


def file_staged_keys(conn: Connection, schema: str) -> None:
    """Move the staged keys of the batch into the key tables (after :func:`store_edges`)."""
    s = f'"{schema}"'
    for kind, (table, slot) in enumerate(KEY_TABLES):
        columns = f"{slot}, key, doc_id" if slot else "key, doc_id"
        values = "slot, key, doc_id" if slot else "key::integer, doc_id"
        conn.execute(
            text(
                f"INSERT INTO {s}.{table} ({columns}) "
                f"SELECT {values} FROM pg_temp.{STAGING_TABLE} WHERE kind = {kind}"
            )
        )


def _stage_keys(conn: Connection, new: NewRows) -> None:
    """COPY the batch's keys of every kind into the session's staging table.

    The candidate query reads the new keys from there (an index probe into the key tables per
    row), and the key tables are filled from there with ``INSERT ... SELECT``.
    """
    conn.execute(
        text(
            f"CREATE TEMP TABLE IF NOT EXISTS {STAGING_TABLE} (kind smallint NOT NULL, "
            "slot smallint NOT NULL, key bigint NOT NULL, doc_id bigint NOT NULL)"
        )
    )
    conn.execute(text(f"TRUNCATE pg_temp.{STAGING_TABLE}"))
    k = new.key_columns()
    sizes = (len(k["bk"]), len(k["kk"]), len(k["sk"]))
    kinds = np.repeat(np.arange(3, dtype=np.int16), sizes)
    slots = np.concatenate([k["bb"], k["kb"], np.zeros(sizes[2], dtype=np.int16)])
    keys = np.concatenate([k["bk"], k["kk"], k["sk"].astype(np.int64)])
    docs = np.concatenate([k["bd"], k["kd"], k["sd"]])
    # in index order: the probes and index insertions that follow walk the b-trees in order
    order = np.lexsort((keys, slots, kinds))
    columns = ("kind", "slot", "key", "doc_id")
    values = [kinds[order], slots[order], keys[order], docs[order]]
    copy.copy_fixed_rows(conn, "pg_temp", STAGING_TABLE, columns, values)
    # row counts for the planner: the staged keys are joined back to the matches they find
    conn.execute(text(f"ANALYZE pg_temp.{STAGING_TABLE}"))


def _ranges(starts: I64, ends: I64) -> I64:
    """``concatenate([arange(s, e) for s, e in zip(starts, ends)])``, vectorized."""
    lengths = ends - starts
    firsts = np.cumsum(lengths) - lengths
    positions: I64 = np.arange(int(lengths.sum()), dtype=np.int64)
    positions += np.repeat(starts - firsts, lengths)
    return positions


def _key_columns(ids: I64, keys: I64) -> tuple[npt.NDArray[np.int16], I64, I64]:
    """Flatten an ``(n, slots)`` key matrix into (slot, doc id, key) columns."""
    n, slots = keys.shape
    slot = np.tile(np.arange(slots, dtype=np.int16), n)
    return slot, np.repeat(ids, slots), keys.reshape(-1)


def _probe(s: str, kind: int) -> str:
    """Stored documents sharing a staged key of ``kind`` with new documents.

    Per slot (band or block), one index scan looks up all the batch's keys of that slot at
    once (``key = ANY(...)``); the matches are joined back to the new documents that own them.
    The ``OFFSET 0`` keeps each scan an index scan, so the cost follows the number of new keys,
    never the size of the key table.
    """
    table, slot = KEY_TABLES[kind]
    staged = f"pg_temp.{STAGING_TABLE}"
    if slot:
        groups = (
            f"SELECT slot, array_agg(key) AS keys FROM {staged} WHERE kind = {kind} GROUP BY slot"
        )
        scan = f"k.{slot} = g.slot AND k.key = ANY(g.keys)"
        owner = "n.slot = g.slot AND n.key = m.key"
    else:
        groups = f"SELECT array_agg(key::integer) AS keys FROM {staged} WHERE kind = {kind}"
        scan = "k.key = ANY(g.keys)"
        owner = "n.key = m.key"
    return f"""SELECT m.doc_id AS a, n.doc_id AS b, {kind} AS kind
               FROM ({groups}) g
               CROSS JOIN LATERAL (SELECT k.doc_id, k.key FROM {s}.{table} k
                                   WHERE {scan} OFFSET 0) m
               JOIN {staged} n ON n.kind = {kind} AND {owner}"""


def _pairs_within(new: NewRows) -> dict[str, str]:
    """Pairs of new documents sharing a key, found in numpy (as array literals)."""
    k = new.key_columns()
    kinds = np.repeat(np.arange(3), (len(k["bk"]), len(k["kk"]), len(k["sk"])))
    slots = np.concatenate([k["bb"], k["kb"], np.zeros(len(k["sk"]), dtype=np.int16)])
    keys = np.concatenate([k["bk"], k["kk"], k["sk"].astype(np.int64)])
    docs = np.concatenate([k["bd"], k["kd"], k["sd"]])
    order = np.lexsort((docs, keys, slots, kinds))
    kinds, slots, keys, docs = kinds[order], slots[order], keys[order], docs[order]
    same = (kinds[1:] == kinds[:-1]) & (slots[1:] == slots[:-1]) & (keys[1:] == keys[:-1])
    edges = np.diff(np.concatenate([[0], same.astype(np.int8), [0]]))
    a: list[int] = []
    b: list[int] = []
    kind: list[int] = []
    # each run of equal keys (documents ascending) pairs every older with every newer member
    for start, end in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True):
        group = docs[start : end + 1].tolist()
        for i, older in enumerate(group):
            for newer in group[i + 1 :]:
                if older != newer:
                    a.append(older)
                    b.append(newer)
                    kind.append(int(kinds[start]))
    return {
        "pair_a": array_literal(a),
        "pair_b": array_literal(b),
        "pair_kind": array_literal(kind),
    }


def store_edges(conn: Connection, schema: str, new: NewRows) -> list[EdgeRow]:
    """Find, verify and store the matches of the documents ``ids`` with older documents.

    One statement: candidates are the union of equal exact hashes, band keys, block keys and
    sample keys (each an index probe per key of the new documents), scored in SQL.
    """
    s = f'"{schema}"'
    new_keys = f"""
        nb AS ({_probe(s, 0)}),
        nk AS ({_probe(s, 1)}),
        ns AS ({_probe(s, 2)}),
        nn AS (SELECT * FROM unnest(CAST(:pair_a AS bigint[]), CAST(:pair_b AS bigint[]),
                                    CAST(:pair_kind AS integer[])) AS p(a, b, kind)),
        ne AS (SELECT o.id AS a, nd.id AS b
               FROM {s}.documents nd
               CROSS JOIN LATERAL (SELECT id FROM {s}.documents o
                                   WHERE o.exact_hash = nd.exact_hash OFFSET 0) o
               WHERE nd.id = ANY(:ids) AND o.id < nd.id),
        cand AS (SELECT a, b, bool_and(kind = 1) AS block_only FROM (
                     SELECT * FROM nb UNION ALL SELECT * FROM nk UNION ALL SELECT * FROM ns
                     UNION ALL SELECT * FROM nn UNION ALL SELECT a, b, -1 FROM ne
                 ) found GROUP BY a, b)
    """
    scored = scored_pairs_sql(
        f"cand {fetch_document(s, 'x', 'cand.a')} {fetch_document(s, 'y', 'cand.b')}"
    )
    statement = f"""
        WITH {new_keys},
        judged AS ({scored}),
        ins AS (INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming)
                SELECT a, b, method, jaccard, containment, hamming FROM judged
                WHERE method IS NOT NULL
                ON CONFLICT DO NOTHING
                RETURNING a, b, method, jaccard, containment, hamming)
        SELECT ins.*, d.external_id, d.cluster_id FROM ins JOIN {s}.documents d ON d.id = ins.a
    """
    return [
        EdgeRow(*row)
        for row in conn.execute(
            text(statement),
            {"ids": new.ids.tolist(), **_pairs_within(new), **score_parameters(new.batch.params)},
        )
    ]


def merge_clusters(conn: Connection, schema: str, edges: Sequence[EdgeRow]) -> dict[int, int]:
    """Merge the clusters joined by new edges; returns ``{old label: new label}``."""
    if not edges:
        return {}
    label_of = {e.a: e.a_cluster_id for e in edges}
    label_of.update({e.b: e.b for e in edges})
    labels = sorted(set(label_of.values()))
    sizes = conn.execute(
        text(
            f'SELECT cluster_id, count(*) FROM "{schema}".documents '
            "WHERE cluster_id = ANY(:labels) GROUP BY cluster_id"
        ),
        {"labels": labels},
    )
    size_of: dict[int, int] = {row[0]: row[1] for row in sizes}
    mapping = merge_labels(((e.a, e.b) for e in edges), label_of, size_of)
    relabel(conn, schema, mapping)
    return mapping


def refresh_statistics(conn: Connection, schema: str, newest_id: int) -> bool:
    """ANALYZE the store's tables when they have doubled since the planner last looked.

    Servers with autovacuum off (or slow to catch up during a bulk load) would otherwise plan
    every statement for empty tables. Doubling keeps the total cost logarithmic.
    """
    s = f'"{schema}"'
    known = conn.execute(
        text("SELECT reltuples FROM pg_class WHERE oid = CAST(:t AS regclass)"),
        {"t": f"{s}.documents"},
    ).scalar_one()
    if newest_id < 1000 or 0 < newest_id <= 2 * known:
        return False
    for table in ("documents", "edges", *(t for t, _ in KEY_TABLES)):
        conn.execute(text(f"ANALYZE {s}.{table}"))
    return True


def relabel(conn: Connection, schema: str, mapping: Mapping[int, int]) -> None:
    """Move every member of cluster ``old`` to cluster ``new`` for each item of ``mapping``."""
    if mapping:
        conn.execute(
            text(
                f'UPDATE "{schema}".documents d SET cluster_id = m.new '
                "FROM unnest(CAST(:old AS bigint[]), CAST(:new AS bigint[])) AS m(old, new) "
                "WHERE d.cluster_id = m.old"
            ),
            {"old": list(mapping), "new": list(mapping.values())},
        )


def delete_documents(
    conn: Connection, schema: str, params: FingerprintParams, doc_ids: Sequence[int]
) -> None:
    """Delete documents with their keys and edges, and split the clusters they held together.

    Key rows are found through their lookup indexes: band and block keys are recomputed from the
    stored signature and SimHash, sample keys are a subset of the stored shingles.
    """
    s = f'"{schema}"'
    rows = conn.execute(
        text(f"SELECT id, signature, simhash, cluster_id FROM {s}.documents WHERE id = ANY(:ids)"),
        {"ids": list(doc_ids)},
    ).all()
    if not rows:
        return
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    signatures = np.array([r[1] for r in rows], dtype=np.int32).view(np.uint32)
    simhashes = np.array([r[2] for r in rows], dtype=np.int64).view(np.uint64)
    _delete_keys(conn, s, "band_keys", "band", ids, band_keys(signatures, params))
    blocks = block_keys(simhashes, params.simhash_blocks, params.simhash_k)
    _delete_keys(conn, s, "block_keys", "block", ids, blocks)
    conn.execute(
        text(
            f"DELETE FROM {s}.sample_keys t USING (SELECT d.id, unnest(d.shingles) AS key "
            f"FROM {s}.documents d WHERE d.id = ANY(:ids)) g "
            "WHERE t.key = g.key AND t.doc_id = g.id"
        ),
        {"ids": ids.tolist()},
    )
    conn.execute(text(f"DELETE FROM {s}.documents WHERE id = ANY(:ids)"), {"ids": ids.tolist()})
    split_clusters(conn, schema, {r[3] for r in rows})


def _delete_keys(conn: Connection, s: str, table: str, slot: str, ids: I64, keys: I64) -> None:
    """Delete the ``(n, slots)`` key matrix of documents ``ids`` through the lookup index."""
    slots, docs, values = _key_columns(ids, keys)
    conn.execute(
        text(
            f"DELETE FROM {s}.{table} t USING unnest(CAST(:slot AS smallint[]), "
            "CAST(:key AS bigint[]), CAST(:doc AS bigint[])) AS g(slot, key, doc) "
            f"WHERE t.{slot} = g.slot AND t.key = g.key AND t.doc_id = g.doc"
        ),
        {"slot": slots.tolist(), "key": values.tolist(), "doc": docs.tolist()},
    )


def split_clusters(conn: Connection, schema: str, labels: set[int]) -> None:
    """Recompute the connected components of clusters ``labels`` from their remaining edges.

    A component that still holds the document whose id is the cluster's label keeps it; any
    other component is labelled by its oldest member.
    """
    s = f'"{schema}"'
    members = conn.execute(
        text(f"SELECT id, cluster_id FROM {s}.documents WHERE cluster_id = ANY(:labels)"),
        {"labels": sorted(labels)},
    ).all()
    if not members:
        return
    label_of: dict[int, int] = {row[0]: row[1] for row in members}
    edges = conn.execute(
        text(f"SELECT a, b FROM {s}.edges WHERE a = ANY(:ids)"), {"ids": list(label_of)}
    ).all()
    changed: dict[int, int] = {}
    for component in components(label_of, [(row[0], row[1]) for row in edges]):
        old = label_of[component[0]]
        label = old if old in component else component[0]
        changed.update({doc: label for doc in component if label_of[doc] != label})
    if changed:
        conn.execute(
            text(
                f"UPDATE {s}.documents d SET cluster_id = m.label "
                "FROM unnest(CAST(:ids AS bigint[]), CAST(:labels AS bigint[])) AS m(id, label) "
                "WHERE d.id = m.id"
            ),
            {"ids": list(changed), "labels": list(changed.values())},
        )
