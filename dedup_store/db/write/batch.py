"""Writes: a whole batch of documents in a handful of set-based statements.

Per batch (:func:`dedup_store.ingest.pipeline.write_batch`): take the store's lock and the batch's
key locks (:mod:`dedup_store.db.write.locks`: every batch sees all adds committed before it that
could match its documents, and concurrent writers end with the clusters a sequential run gives),
allocate ids, COPY the documents with their keys, and merge the clusters the new edges
(:func:`dedup_store.db.matches.scoring.store_edges`) join. Deletes split clusters again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, text

from dedup_store.core.clustering import merge_labels
from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates import hot
from dedup_store.db.matches.scoring import merging_methods
from dedup_store.db.rows import batch_rows, key_rows
from dedup_store.db.schema.names import qualified, quote
from dedup_store.db.server import binary_copy
from dedup_store.db.write import frequencies, locks, reclustering
from dedup_store.results import MatchRow

#: The tables ANALYZE'd by :func:`refresh_statistics`.
TABLES = ("documents", "edges", "sample_keys", "secondary_keys")


def insert_documents(
    conn: Connection,
    schema: str,
    rows: batch_rows.DocumentRows,
    secondary: key_rows.KeyRows | None = None,
    held: batch_rows.HeldRows | None = None,
) -> None:
    """COPY the new documents of a batch (:func:`~dedup_store.db.rows.batch_rows.document_rows`),
    their sample keys and their rows of a key table; a bulk load has the last two ``held`` for a
    larger COPY.

    Call it after :func:`~dedup_store.db.candidates.hot.find_candidates`, whose lookups must only
    meet older documents' keys, and which gives the ``secondary`` keys of their hot slots.
    """
    binary_copy.copy_payload(conn, schema, "documents", rows.columns, rows.payload, rows.freeze)
    if held is not None:
        held.add(conn, schema, rows)
    else:
        batch_rows.copy_keys(conn, schema, rows)
    if secondary is not None and len(secondary):
        hot.write_secondary(conn, schema, secondary)


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


def unchanged(
    conn: Connection,
    schema: str,
    replacements: Sequence[tuple[str, bytes, Any, str]],
    keep_text: bool,
) -> set[str]:
    """The external ids among ``replacements`` (``(external id, exact hash, metadata, text)``)
    whose stored document is the same: same exact hash (canonical text and metadata set), same
    metadata, and (``keep_text``) the same stored text. Replacing them would change nothing but
    their internal ids, so an update leaves them, their edges and their clusters alone."""
    if not replacements:
        return set()
    rows = conn.execute(
        text(
            f"SELECT d.external_id FROM {qualified(schema)}.documents d "
            "JOIN unnest(CAST(:ids AS text[]), CAST(:hashes AS bytea[]), CAST(:metas AS text[]), "
            "CAST(:bodies AS text[])) AS n(external_id, exact_hash, meta, body) "
            "ON d.external_id = n.external_id "
            "WHERE d.exact_hash = n.exact_hash "
            "AND d.meta IS NOT DISTINCT FROM CAST(n.meta AS jsonb) "
            "AND (NOT :keep_text OR d.body IS NOT DISTINCT FROM n.body)"
        ),
        {
            "ids": [r[0] for r in replacements],
            "hashes": [r[1] for r in replacements],
            "metas": [None if r[2] is None else json.dumps(r[2]) for r in replacements],
            "bodies": [r[3] for r in replacements],
            "keep_text": keep_text,
        },
    )
    return set(rows.scalars())


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
    reclustering.recluster(conn, schema, clusters)


def promote_copies(conn: Connection, schema: str, doc_ids: Sequence[int]) -> list[int]:
    """Make the oldest surviving copy of each deleted first document the first of its group;
    returns their ids.

    The heir takes over the deleted document's sample keys and secondary keys (equal texts
    have equal keys), its edges with documents outside the group with their scores (copies
    share their metadata set too), and the other copies' links;
    the caller adds its rows of the key tables.
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
