"""The reads of the review report (:mod:`dedup_store.review.report`): the clusters with their
members, canonical document and pairs, and the pairs across clusters, in one streamed statement; and
the counts of its overview.

A report covers the clusters of two or more documents (or, given a cluster, that one), the
pairs inside them, and the pairs whose documents are in different clusters (excerpts that do
not merge, pairs a person declared not duplicates). Its pairs are the stored edges and the pairs
a person confirmed as duplicates that no edge links.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sqlalchemy import Connection, text

from dedup_store.core.params import FingerprintParams
from dedup_store.db.matches.scoring import combined_score_sql
from dedup_store.db.schema.names import qualified
from dedup_store.review.report.model import (
    Member,
    Overview,
    ReportCluster,
    ReportItem,
    ReportPair,
    Verdict,
)

#: Similarity buckets of the overview's histogram.
BUCKETS = 20
_STREAM = {"yield_per": 2000}
_SHOWN_PARAMS = ("threshold", "simhash_k", "containment")


def _selection(s: str, label: int | None) -> str:
    """The CTEs ``sizes`` (the clusters covered), ``pairs`` (edges and confirmed pairs without
    one, by document id, ``a < b``), ``judged`` (the verdict in force between two exact groups:
    copies of a text share its verdicts, ``not_duplicate`` first, as clusters apply them) and
    ``listed``: the pairs the report lists, with their external ids, clusters, the size of the
    covered cluster they are inside (if any), their verdict (the one given on the pair, else
    their groups') and texts."""
    cluster = "WHERE cluster_id = :label" if label is not None else ""
    across = "da.cluster_id <> db.cluster_id"
    if label is not None:
        across += " AND :label IN (da.cluster_id, db.cluster_id)"
    return f"""
    sizes AS (
        SELECT cluster_id, count(*) AS size FROM {s}.documents {cluster}
        GROUP BY cluster_id HAVING count(*) >= :min_size
    ),
    pairs AS (
        SELECT e.a, e.b, e.method, e.jaccard, e.containment, e.hamming, e.meta_score
        FROM {s}.edges e
        UNION ALL
        SELECT least(da.id, db.id), greatest(da.id, db.id), 'confirmed', NULL::float8,
               NULL::float8, NULL::smallint, NULL::float8
        FROM {s}.verdicts v
        JOIN {s}.documents da ON da.external_id = v.a
        JOIN {s}.documents db ON db.external_id = v.b
        WHERE v.verdict = 'duplicate' AND NOT EXISTS (
            SELECT 1 FROM {s}.edges e
            WHERE e.a = least(da.id, db.id) AND e.b = greatest(da.id, db.id)
        )
    ),
    judged AS (
        SELECT DISTINCT ON (g1, g2) *
        FROM (
            SELECT least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g1,
                   greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)) AS g2,
                   v.verdict, v.note, v.reviewer, v.decided_at
            FROM {s}.verdicts v
            JOIN {s}.documents da ON da.external_id = v.a
            JOIN {s}.documents db ON db.external_id = v.b
        ) j
        WHERE g1 <> g2
        ORDER BY g1, g2, verdict = 'not_duplicate' DESC, decided_at DESC
    ),
    listed AS (
        SELECT p.*, da.external_id AS ext_a, db.external_id AS ext_b,
               da.cluster_id AS cluster_a, db.cluster_id AS cluster_b, z.size,
               coalesce(v.verdict, j.verdict) AS verdict,
               CASE WHEN v.verdict IS NULL THEN j.note ELSE v.note END AS note,
               CASE WHEN v.verdict IS NULL THEN j.reviewer ELSE v.reviewer END AS reviewer,
               coalesce(v.decided_at, j.decided_at) AS decided_at,
               da.body AS body_a, db.body AS body_b, ce.verdict_a AS cut_by_a,
               ce.verdict_b AS cut_by_b,
               (SELECT json_agg(json_build_array(xa.external_id, xb.external_id)
                                ORDER BY xa.external_id, xb.external_id)
                FROM {s}.cut_edges c
                JOIN {s}.documents xa ON xa.id = c.a
                JOIN {s}.documents xb ON xb.id = c.b
                WHERE c.verdict_a = v.a AND c.verdict_b = v.b) AS cut
        FROM pairs p
        JOIN {s}.documents da ON da.id = p.a
        JOIN {s}.documents db ON db.id = p.b
        LEFT JOIN sizes z ON z.cluster_id = da.cluster_id AND da.cluster_id = db.cluster_id
        LEFT JOIN {s}.cut_edges ce ON ce.a = p.a AND ce.b = p.b
        LEFT JOIN {s}.verdicts v
               ON v.a = least(da.external_id, db.external_id)
              AND v.b = greatest(da.external_id, db.external_id)
        LEFT JOIN judged j
               ON j.g1 = least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id))
              AND j.g2 = greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id))
        WHERE z.cluster_id IS NOT NULL OR ({across})
    )"""


def _items_statement(s: str, label: int | None) -> str:
    """Members (kind 0) and pairs (kind 1) of each covered cluster, largest cluster first, then
    the pairs across clusters (section 1); a cluster's pairs least similar first."""
    score = combined_score_sql("l.jaccard", "l.meta_score", ":meta_weight")
    return f"""
    WITH {_selection(s, label)}
    SELECT 0 AS section, z.size, z.cluster_id, 0 AS kind, NULL::float8 AS rank, d.id AS first,
           0::bigint AS second, d.external_id AS a, NULL::text AS b, d.created_at, d.length,
           d.token_count, d.id = c.canonical_doc_id AS is_canonical, c.canonical, c.chosen,
           NULL::text AS method, NULL::float8 AS jaccard, NULL::float8 AS containment,
           NULL::smallint AS hamming, NULL::float8 AS meta_score, NULL::float8 AS score,
           NULL::text AS verdict, NULL::text AS note, NULL::text AS reviewer,
           NULL::timestamptz AS decided_at, NULL::text AS body_a, NULL::text AS body_b,
           NULL::bigint AS cluster_b, NULL::text AS cut_by_a, NULL::text AS cut_by_b,
           NULL::json AS cut
    FROM sizes z
    JOIN {s}.documents d ON d.cluster_id = z.cluster_id
    LEFT JOIN {s}.cluster_canonical c ON c.cluster_id = z.cluster_id
    UNION ALL
    SELECT CASE WHEN l.size IS NULL THEN 1 ELSE 0 END, coalesce(l.size, 0), l.cluster_a, 1,
           l.jaccard, l.a, l.b, l.ext_a, l.ext_b, NULL, NULL, NULL, NULL, NULL, NULL,
           l.method, l.jaccard, l.containment, l.hamming, l.meta_score, {score},
           l.verdict, l.note, l.reviewer, l.decided_at, l.body_a, l.body_b, l.cluster_b,
           l.cut_by_a, l.cut_by_b, l.cut
    FROM listed l
    ORDER BY section, size DESC, cluster_id, kind, rank NULLS FIRST, first, second"""


def report_items(
    conn: Connection, schema: str, params: FingerprintParams, label: int | None
) -> Iterator[ReportItem]:
    """The clusters (of two or more documents, or the cluster ``label`` alone), largest first,
    then the pairs across clusters (those touching ``label`` when given), streamed."""
    result = conn.execute(
        text(_items_statement(qualified(schema), label)),
        {"label": label, "min_size": 1 if label is not None else 2, **_weight(params)},
        execution_options=_STREAM,
    )
    try:
        yield from _grouped(result)
    finally:
        result.close()


def _grouped(rows: Iterable[Any]) -> Iterator[ReportItem]:
    """Items from the rows of :func:`_items_statement`."""
    current: int | None = None
    members: list[Member] = []
    pairs: list[ReportPair] = []
    canonical: tuple[str | None, str | None] = (None, None)
    for row in rows:
        if row.section == 0 and row.cluster_id != current:
            if current is not None:
                yield ReportCluster(current, tuple(members), tuple(pairs), *canonical)
            current, members, pairs = row.cluster_id, [], []
            canonical = (row.canonical, row.chosen)
        if row.section == 1:
            if current is not None:
                yield ReportCluster(current, tuple(members), tuple(pairs), *canonical)
                current = None
            yield _pair(row)
        elif row.kind == 0:
            member = Member(row.a, row.created_at, row.length, row.token_count, row.is_canonical)
            members.append(member)
        else:
            pairs.append(_pair(row))
    if current is not None:
        yield ReportCluster(current, tuple(members), tuple(pairs), *canonical)


def _pair(row: Any) -> ReportPair:
    verdict = None
    if row.verdict is not None:
        cut = tuple((str(a), str(b)) for a, b in row.cut or ())
        verdict = Verdict(row.verdict, row.note, row.reviewer, row.decided_at, cut)
    return ReportPair(
        a=row.a,
        b=row.b,
        method=row.method,
        jaccard=row.jaccard,
        containment=row.containment,
        hamming=row.hamming,
        meta_score=row.meta_score,
        score=row.score,
        verdict=verdict,
        text_a=row.body_a,
        text_b=row.body_b,
        cluster_a=row.cluster_id,
        cluster_b=row.cluster_b,
        cut_by=None if row.cut_by_a is None else (row.cut_by_a, row.cut_by_b),
    )


def overview(
    conn: Connection,
    schema: str,
    params: FingerprintParams,
    label: int | None = None,
    document: str | None = None,
) -> Overview:
    """Counts over what :func:`report_items` lists with the same ``label``; ``document`` names
    the document whose cluster ``label`` is."""
    s = qualified(schema)
    min_size = 1 if label is not None else 2
    bound = {"label": label, "min_size": min_size}
    where = "WHERE cluster_id = :label" if label is not None else ""
    sizes_rows = conn.execute(
        text(
            f"""SELECT size, count(*) FROM (
                    SELECT count(*) AS size FROM {s}.documents {where} GROUP BY cluster_id
                ) c GROUP BY size"""
        ),
        bound,
    )
    sizes = {int(size): int(count) for size, count in sizes_rows}
    pair_rows = conn.execute(
        text(
            f"""WITH {_selection(s, label)}
            SELECT method, least(width_bucket(jaccard, 0, 1, :buckets), :buckets) AS bucket,
                   verdict, count(*)
            FROM listed GROUP BY 1, 2, 3"""
        ),
        {**bound, "buckets": BUCKETS},
    )
    by_method: dict[str, int] = {}
    similarity: dict[str, list[int]] = {}
    verdicts: dict[str, int] = {}
    for method, bucket, verdict, count in pair_rows:
        by_method[method] = by_method.get(method, 0) + count
        if bucket is not None:
            similarity.setdefault(method, [0] * BUCKETS)[bucket - 1] += count
        if verdict is not None:
            verdicts[verdict] = verdicts.get(verdict, 0) + count
    covered = {size: n for size, n in sizes.items() if size >= min_size}
    stored = params.to_dict()
    return Overview(
        schema=schema,
        documents=sum(size * n for size, n in sizes.items()),
        clusters=sum(covered.values()),
        documents_in_clusters=sum(size * n for size, n in covered.items()),
        pairs=sum(by_method.values()),
        edges_by_method=by_method,
        cluster_sizes={size: n for size, n in sizes.items() if size >= 2},
        similarity=similarity,
        buckets=BUCKETS,
        verdicts=verdicts,
        keep_text=keeps_text(conn, schema),
        cluster=document,
        params={name: stored[name] for name in _SHOWN_PARAMS if name in stored},
    )


def keeps_text(conn: Connection, schema: str) -> bool:
    """Whether the store keeps documents' texts (its setting, or any text stored)."""
    s = qualified(schema)
    statement = f"""SELECT coalesce((SELECT keep_text FROM {s}.settings WHERE id = 1), false)
                    OR EXISTS (SELECT 1 FROM {s}.documents WHERE body IS NOT NULL)"""
    return bool(conn.execute(text(statement)).scalar_one())


def _weight(params: FingerprintParams) -> dict[str, float]:
    return {"meta_weight": params.meta_weight}
