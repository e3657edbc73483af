"""Writes: a whole batch of documents in a handful of set-based statements.

Per batch: lock out other writers of the store (so every batch sees all batches committed before
it, and concurrent writers end with the clusters a sequential run gives), allocate ids, look up
the candidates of the new keys (:mod:`dedup_store.db.candidates`), COPY the documents with their
keys, verify + store the match edges in one statement, then merge the clusters the new edges
join.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, text

from dedup_store.clustering import components, merge_labels
from dedup_store.core.fingerprint import FingerprintBatch
from dedup_store.core.overlap import intersection_sizes
from dedup_store.core.params import FingerprintParams
from dedup_store.db import copy, hot
from dedup_store.db.candidates import (
    Candidates,
    KeyGroup,
    key_groups,
    ranges,
    sample_columns,
    top32,
)
from dedup_store.db.names import qualified
from dedup_store.db.verify import (
    EXACT_INTERSECTION,
    fetch_document,
    merging_methods,
    score_parameters,
    scored_pairs_sql,
)

I64 = npt.NDArray[np.int64]
#: The tables ANALYZE'd by :func:`refresh_statistics`.
TABLES = ("documents", "edges", "sample_keys", "secondary_keys")

# fixed-width columns first (encoded for the whole batch with numpy), then variable ones
DOCUMENT_COLUMNS = (
    "id", "cluster_id", "simhash", "exact_hash", "signature", "band_keys", "block_keys",
    "shingle_count", "token_count", "length", "external_id", "language", "meta", "body",
    "shingles", "exact_of",
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


def lock_name(schema: str) -> str:
    """The name of the advisory lock that serializes the writers of the store in ``schema``."""
    return f"dedup:{schema}"


def lock_writers(conn: Connection, schema: str) -> None:
    """Serialize writers of this store until the transaction ends."""
    conn.execute(text("SELECT pg_advisory_xact_lock(hashtext(:name))"), {"name": lock_name(schema)})


def allocate_ids(conn: Connection, schema: str, count: int) -> I64:
    """``count`` consecutive new document ids (so "older" means "smaller id").

    Only writers draw ids, and only while they hold the writers' lock, so moving the sequence
    past the whole range at once leaves nobody else a number inside it.
    """
    if count == 0:
        return np.empty(0, dtype=np.int64)
    last = conn.execute(
        text("SELECT setval(CAST(:seq AS regclass), nextval(CAST(:seq AS regclass)) + :n - 1)"),
        {"seq": qualified(schema, "document_ids"), "n": count},
    ).scalar_one()
    first = last - count + 1
    return np.arange(first, first + count, dtype=np.int64)


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

    @property
    def firsts(self) -> I64:
        """Positions (in ``rows``) of the documents that are the first of their exact group."""
        return np.flatnonzero(self.exact_of == 0)

    def key_groups(self) -> list[KeyGroup]:
        """The keys of the documents that are the first of their exact group."""
        firsts = self.firsts
        return key_groups(self.batch, self.rows[firsts], self.ids[firsts])


def new_rows(conn: Connection, schema: str, batch: FingerprintBatch, rows: I64) -> NewRows:
    """Allocate ids for ``rows`` and find the first document of each one's exact group."""
    ids = allocate_ids(conn, schema, len(rows))
    hashes = [batch.exact_hashes[r] for r in rows.tolist()]
    rows_found = conn.execute(
        text(
            f"SELECT exact_hash, id FROM {qualified(schema, 'documents')} "
            "WHERE exact_hash = ANY(:hashes) AND exact_of IS NULL"
        ),
        {"hashes": list(set(hashes))},
    )
    first_of: dict[bytes, int] = {bytes(row[0]): int(row[1]) for row in rows_found}
    exact_of = np.zeros(len(rows), dtype=np.int64)
    for position, (digest, doc_id) in enumerate(zip(hashes, ids.tolist(), strict=True)):
        first = first_of.setdefault(digest, doc_id)
        if first != doc_id:
            exact_of[position] = first
    return NewRows(batch, rows, ids, exact_of)


def insert_documents(
    conn: Connection,
    schema: str,
    new: NewRows,
    external_ids: Sequence[str],
    metas: Sequence[Mapping[str, Any] | None],
    bodies: Sequence[str | None],
    languages: Sequence[str],
    secondary: hot.SecondaryRows | None = None,
) -> None:
    """COPY the selected documents of a batch with their keys (other arguments per row).

    Call it after :func:`~dedup_store.db.hot.find_candidates`, whose lookups must only meet
    older documents' keys, and which gives the ``secondary`` keys of their hot slots.
    """
    batch, rows = new.batch, new.rows
    starts, ends = batch.shingle_offsets[rows], batch.shingle_offsets[rows + 1]
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
            copy.array_matrix(batch.signatures[rows].view(np.int32)),
            copy.array_matrix(batch.band_keys[rows]),
            copy.array_matrix(batch.block_keys[rows]),
            (ends - starts, ">i4"),
            (batch.token_counts[rows], ">i4"),
            (lengths, ">i4"),
        ],
    )
    width = len(prefix) // max(1, len(rows))
    shingle_offsets = np.concatenate([[0], np.cumsum(ends - starts)]).astype(np.int64)
    shingle_fields = copy.int4_array_fields(
        top32(batch.shingles[ranges(starts, ends)]), shingle_offsets
    )
    exact_of = new.exact_of.tolist()
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
            copy.field(struct.pack("!q", exact_of[i]) if exact_of[i] else None),
        ]
    copy.copy_payload(conn, schema, "documents", DOCUMENT_COLUMNS, b"".join(parts))
    firsts = new.firsts  # exact copies get no sample keys
    keys, docs = sample_columns(batch, rows[firsts], new.ids[firsts])
    order = np.argsort(keys, kind="stable")  # in index order: the b-tree is walked in order
    copy.copy_fixed_rows(conn, schema, "sample_keys", ("key", "doc_id"), [keys[order], docs[order]])
    if secondary is not None and len(secondary):
        hot.write_secondary(conn, schema, secondary)


def store_edges(
    conn: Connection, schema: str, new: NewRows, candidates: Candidates
) -> list[EdgeRow]:
    """Verify and store the matches of the new documents with older documents.

    One statement: the candidates found by their keys, plus each exact copy's link to the first
    document of its group (``exact_of``), scored in SQL.
    """
    s = qualified(schema)
    found = f"""
        ne AS (SELECT nd.exact_of AS a, nd.id AS b
               FROM {s}.documents nd
               WHERE nd.id = ANY(:ids) AND nd.exact_of IS NOT NULL),
        cand AS (SELECT a, b, bool_and(block_only) AS block_only,
                        bool_or(sampled) AS sampled, max(inter) AS inter FROM (
                     SELECT a, b, block_only = 1 AS block_only, sampled = 1 AS sampled, inter
                     FROM unnest(CAST(:cand_a AS bigint[]), CAST(:cand_b AS bigint[]),
                                 CAST(:cand_block_only AS integer[]),
                                 CAST(:cand_sampled AS integer[]),
                                 CAST(:cand_inter AS float8[]))
                          AS p(a, b, block_only, sampled, inter)
                     UNION ALL SELECT a, b, false, false, NULL FROM ne
                 ) all_found GROUP BY a, b)
    """
    scored = scored_pairs_sql(
        f"cand {fetch_document(s, 'x', 'cand.a')} {fetch_document(s, 'y', 'cand.b')}",
        f"coalesce(cand.inter, {EXACT_INTERSECTION})",
    )
    statement = f"""
        WITH {found},
        judged AS ({scored}),
        ins AS (INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming)
                SELECT a, b, method, jaccard, containment, hamming FROM judged
                WHERE method IS NOT NULL
                ON CONFLICT DO NOTHING
                RETURNING a, b, method, jaccard, containment, hamming)
        SELECT ins.*, d.external_id, d.cluster_id FROM ins JOIN {s}.documents d ON d.id = ins.a
    """
    inter, possible = batch_intersections(conn, schema, new, candidates)
    inter = inter[possible]
    parameters = {
        "ids": new.ids.tolist(),
        **candidates.subset(possible).parameters(),
        "cand_inter": "{" + ",".join("NULL" if v < 0 else str(v) for v in inter.tolist()) + "}",
        **score_parameters(new.batch.params),
    }
    return [EdgeRow(*row) for row in conn.execute(text(statement), parameters)]


def batch_intersections(
    conn: Connection, schema: str, new: NewRows, candidates: Candidates
) -> tuple[I64, npt.NDArray[np.bool_]]:
    """``|X ∩ Y|`` of the candidate pairs the scoring needs it for, computed here (-1: none),
    and whether each pair can still be a match.

    In SQL every pair unnests both shingle arrays again, so a document paired with many
    others (a long file quoting a licence, a template's pages) costs its full length for each.
    Here each document is read once per batch, and each pair costs a search of the shorter
    sorted array in the longer one. A pair needs it when it was found by an excerpt key, or
    when its sizes allow the Jaccard of a match (min/max >= the lowest threshold); a pair that
    meets no method's bar on its sizes or its intersection is no match, and is not sent back.
    """
    count = len(candidates.a)
    result = np.full(count, -1, dtype=np.int64)
    params = new.batch.params
    if params.verify != "exact" or count == 0:
        return result, np.ones(count, dtype=bool)
    counts = np.diff(new.batch.shingle_offsets)[new.rows]
    sizes = dict(zip(new.ids.tolist(), counts.tolist(), strict=True))
    stored_ids = sorted(set(candidates.a.tolist()) - set(sizes))
    sizes.update(_stored_sizes(conn, schema, stored_ids))
    a_sizes = np.array([sizes[a] for a in candidates.a.tolist()], dtype=np.float64)
    b_sizes = np.array([sizes[b] for b in candidates.b.tolist()], dtype=np.float64)
    ratio = np.minimum(a_sizes, b_sizes) / np.maximum(np.maximum(a_sizes, b_sizes), 1)
    min_jaccard = min(params.threshold, params.simhash_min_jaccard)
    wanted = np.flatnonzero(candidates.sampled | (ratio >= min_jaccard))
    ends = sorted(set(candidates.a[wanted].tolist()) | set(candidates.b[wanted].tolist()))
    arrays = _new_shingles(new, set(ends))
    arrays.update(_stored_shingles(conn, schema, [e for e in ends if e not in arrays]))
    offsets = np.zeros(len(ends) + 1, dtype=np.int64)
    np.cumsum([len(arrays[e]) for e in ends], out=offsets[1:])
    values = np.concatenate([arrays[e] for e in ends]) if ends else np.empty(0, dtype=np.int32)
    position = np.asarray(ends, dtype=np.int64)
    left = np.searchsorted(position, candidates.a[wanted])
    right = np.searchsorted(position, candidates.b[wanted])
    result[wanted] = intersection_sizes(values, offsets, left, right)
    inter = result[wanted].astype(np.float64)
    x, y = a_sizes[wanted], b_sizes[wanted]
    jaccard = inter / np.maximum(x + y - inter, 1)
    containment = inter / np.maximum(np.minimum(x, y), 1)
    excerpt = candidates.sampled[wanted] & (params.containment > 0)
    possible = np.zeros(count, dtype=bool)
    possible[wanted] = (jaccard >= min_jaccard) | (excerpt & (containment >= params.containment))
    return result, possible


def _new_shingles(new: NewRows, ids: set[int]) -> dict[int, npt.NDArray[np.int32]]:
    """The sorted stored form (top 32 bits) of the shingles of the new documents ``ids``."""
    offsets = new.batch.shingle_offsets
    return {
        doc_id: np.sort(top32(new.batch.shingles[offsets[row] : offsets[row + 1]]))
        for doc_id, row in zip(new.ids.tolist(), new.rows.tolist(), strict=True)
        if doc_id in ids
    }


def _stored_sizes(conn: Connection, schema: str, ids: Sequence[int]) -> dict[int, int]:
    rows = conn.execute(
        text(f"SELECT id, shingle_count FROM {qualified(schema, 'documents')} WHERE id = ANY(:i)"),
        {"i": list(ids)},
    )
    return {row[0]: row[1] for row in rows}


def _stored_shingles(
    conn: Connection, schema: str, ids: Sequence[int]
) -> dict[int, npt.NDArray[np.int32]]:
    """Sorted shingle arrays of stored documents, read in PostgreSQL's binary array form."""
    if not ids:
        return {}
    rows = conn.execute(
        text(
            f"SELECT id, array_send(shingles) FROM {qualified(schema, 'documents')} "
            "WHERE id = ANY(:i)"
        ),
        {"i": list(ids)},
    )
    return {row[0]: np.sort(_int4_array(row[1])) for row in rows}


def _int4_array(data: bytes) -> npt.NDArray[np.int32]:
    """The elements of a one-dimensional ``integer[]`` in binary form (no NULLs)."""
    if len(data) <= 12:  # an empty array: dimensions 0, no bounds
        return np.empty(0, dtype=np.int32)
    pairs = np.frombuffer(data, dtype=">i4", offset=20).reshape(-1, 2)  # (length 4, value)
    return pairs[:, 1].astype(np.int32)


def merge_clusters(
    conn: Connection, schema: str, edges: Sequence[EdgeRow], params: FingerprintParams
) -> dict[int, int]:
    """Merge the clusters joined by new edges of merging methods; returns ``{old: new label}``."""
    merging = merging_methods(params)
    edges = [e for e in edges if e.method in merging]
    if not edges:
        return {}
    label_of = {e.a: e.a_cluster_id for e in edges}
    label_of.update({e.b: e.b for e in edges})
    labels = sorted(set(label_of.values()))
    sizes = conn.execute(
        text(
            f"SELECT cluster_id, count(*) FROM {qualified(schema)}.documents "
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
    s = qualified(schema)
    known = conn.execute(
        text("SELECT reltuples FROM pg_class WHERE oid = CAST(:t AS regclass)"),
        {"t": f"{s}.documents"},
    ).scalar_one()
    if newest_id < 1000 or 0 < newest_id <= 2 * known:
        return False
    for table in TABLES:
        conn.execute(text(f"ANALYZE {s}.{table}"))
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
    promote_copies(conn, schema, doc_ids)
    conn.execute(
        text(
            f"DELETE FROM {s}.sample_keys t USING (SELECT d.id, unnest(d.shingles) AS key "
            f"FROM {s}.documents d WHERE d.id = ANY(:ids)) g "
            "WHERE t.key = g.key AND t.doc_id = g.id"
        ),
        {"ids": list(doc_ids)},
    )
    hot.delete_secondary(conn, schema, doc_ids)
    # the band and block keys go with the rows (and their index entries with them)
    conn.execute(text(f"DELETE FROM {s}.documents WHERE id = ANY(:ids)"), {"ids": list(doc_ids)})
    split_clusters(conn, schema, clusters, merging_methods(params))


def promote_copies(conn: Connection, schema: str, doc_ids: Sequence[int]) -> None:
    """Make the oldest surviving copy of each deleted first document the first of its group.

    The heir takes over the deleted document's sample keys and secondary keys (equal texts
    have equal keys), its edges with documents outside the group, and the other copies' links;
    its own band and block keys enter the partial key indexes as its ``exact_of`` becomes NULL.
    """
    s = qualified(schema)
    conn.execute(
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
            INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming, found_at)
            SELECT least(o.other, h.heir), greatest(o.other, h.heir), e.method, e.jaccard,
                   e.containment, e.hamming, e.found_at
            FROM heirs h
            JOIN {s}.edges e ON h.old IN (e.a, e.b)
            CROSS JOIN LATERAL (SELECT CASE WHEN e.a = h.old THEN e.b ELSE e.a END AS other) o
            JOIN {s}.documents od ON od.id = o.other
            WHERE o.other <> h.heir AND od.exact_of IS DISTINCT FROM h.old
              AND o.other NOT IN (SELECT id FROM gone)
            ON CONFLICT DO NOTHING
        ),
        relinked AS (
            INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming)
            SELECT h.heir, c.id, 'exact', 1.0, 1.0, 0 FROM heirs h
            JOIN {s}.documents c ON c.exact_of = h.old
            WHERE c.id <> h.heir AND c.id NOT IN (SELECT id FROM gone)
            ON CONFLICT DO NOTHING
        )
        UPDATE {s}.documents c SET exact_of = nullif(h.heir, c.id)
        FROM heirs h WHERE c.exact_of = h.old
        """),
        {"ids": list(doc_ids)},
    )


def split_clusters(
    conn: Connection, schema: str, labels: set[int], merging: frozenset[str]
) -> None:
    """Recompute the connected components of clusters ``labels`` from their remaining edges.

    A component that still holds the document whose id is the cluster's label keeps it; any
    other component is labelled by its oldest member.
    """
    s = qualified(schema)
    members = conn.execute(
        text(f"SELECT id, cluster_id FROM {s}.documents WHERE cluster_id = ANY(:labels)"),
        {"labels": sorted(labels)},
    ).all()
    if not members:
        return
    label_of: dict[int, int] = {row[0]: row[1] for row in members}
    edges = conn.execute(
        text(f"SELECT a, b FROM {s}.edges WHERE a = ANY(:ids) AND method = ANY(:merging)"),
        {"ids": list(label_of), "merging": sorted(merging)},
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
