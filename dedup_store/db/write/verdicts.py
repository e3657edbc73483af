"""A reviewer's verdicts on pairs of documents, and the clusters they shape.

A verdict is kept by the two documents' external ids, ordered by the server (``a < b``), so it
stays in force when either document is deleted and added again or updated. Clusters are always
the connected components of the merging edges, less the pairs judged ``not_duplicate``, plus the
pairs judged ``duplicate``: :func:`recluster` computes them for a set of clusters, and every
write calls :func:`apply_to_new` for the documents it adds (nothing to do unless a verdict names
one of them). Callers hold the store's lock: exclusively, but for :func:`apply_to_new` (an add
holds it shared, and locks the labels it reclusters).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, text

from dedup_store.core.clustering import components
from dedup_store.db.schema.names import qualified
from dedup_store.db.write import locks

DUPLICATE, NOT_DUPLICATE = "duplicate", "not_duplicate"


@dataclasses.dataclass(frozen=True)
class VerdictRow:
    """A stored verdict: the pair (external ids, ``a < b`` as the server orders text), the
    decision, the reviewer's note and name, and when it was made."""

    a: str
    b: str
    verdict: str
    note: str | None
    reviewer: str | None
    decided_at: dt.datetime


_COLUMNS = "a, b, verdict, note, reviewer, decided_at"


def record(
    conn: Connection,
    schema: str,
    pair: tuple[str, str],
    verdict: str,
    note: str | None,
    reviewer: str | None,
) -> VerdictRow:
    """Store (or replace) the verdict on ``pair``; returns it as stored."""
    row = conn.execute(
        text(
            f"INSERT INTO {qualified(schema, 'verdicts')} AS v ({_COLUMNS}) "
            "VALUES (least(:x, :y), greatest(:x, :y), :verdict, :note, :reviewer, now()) "
            "ON CONFLICT (a, b) DO UPDATE SET verdict = excluded.verdict, note = excluded.note, "
            f"reviewer = excluded.reviewer, decided_at = excluded.decided_at RETURNING {_COLUMNS}"
        ),
        {"x": pair[0], "y": pair[1], "verdict": verdict, "note": note, "reviewer": reviewer},
    ).one()
    return VerdictRow(*row)


def clear(conn: Connection, schema: str, pair: tuple[str, str]) -> bool:
    """Delete the verdict on ``pair``; whether there was one."""
    deleted = conn.execute(
        text(
            f"DELETE FROM {qualified(schema, 'verdicts')} "
            "WHERE a = least(:x, :y) AND b = greatest(:x, :y)"
        ),
        {"x": pair[0], "y": pair[1]},
    )
    return bool(deleted.rowcount)


def of_pair(conn: Connection, schema: str, pair: tuple[str, str]) -> VerdictRow | None:
    """The verdict on ``pair``, if any."""
    row = conn.execute(
        text(
            f"SELECT {_COLUMNS} FROM {qualified(schema, 'verdicts')} "
            "WHERE a = least(:x, :y) AND b = greatest(:x, :y)"
        ),
        {"x": pair[0], "y": pair[1]},
    ).first()
    return None if row is None else VerdictRow(*row)


def all_rows(conn: Connection, schema: str) -> list[VerdictRow]:
    """Every verdict, newest first."""
    rows = conn.execute(
        text(f"SELECT {_COLUMNS} FROM {qualified(schema, 'verdicts')} ORDER BY decided_at DESC")
    )
    return [VerdictRow(*row) for row in rows]


def cluster_labels(conn: Connection, schema: str, external_ids: Iterable[str]) -> set[int]:
    """The clusters of the stored documents among ``external_ids``."""
    labels = conn.execute(
        text(
            f"SELECT cluster_id FROM {qualified(schema, 'documents')} WHERE external_id = ANY(:e)"
        ),
        {"e": list(external_ids)},
    ).scalars()
    return set(labels)


def partners(conn: Connection, schema: str, external_ids: Sequence[str]) -> list[str]:
    """The external ids that verdicts pair with any of ``external_ids``."""
    rows = conn.execute(
        text(
            f"SELECT b FROM {qualified(schema, 'verdicts')} WHERE a = ANY(:e) "
            f"UNION SELECT a FROM {qualified(schema, 'verdicts')} WHERE b = ANY(:e)"
        ),
        {"e": list(external_ids)},
    ).scalars()
    return list(rows)


def apply_to_new(
    conn: Connection, schema: str, new_ids: Sequence[int], shared: bool = False
) -> set[int]:
    """Bring the clusters of documents just added in line with the verdicts that name them
    (a new document's merging edge to a vetoed partner merged their clusters; a confirmed
    partner is joined); returns the clusters recomputed.

    Holding the store's lock ``shared``, the labels of those clusters are locked first
    (:func:`~dedup_store.db.write.locks.lock_labels`), as concurrent adds may move their members.
    """
    if not len(new_ids):
        return set()
    s = qualified(schema)
    if isinstance(new_ids, range):  # a load's contiguous ids
        where = "id >= :lo AND id < :hi"
        bounds: dict[str, Any] = {"lo": new_ids.start, "hi": new_ids.stop}
    else:
        where, bounds = "id = ANY(:ids)", {"ids": list(new_ids)}
    statement = text(f"""
        WITH new AS (SELECT external_id FROM {s}.documents WHERE {where}),
        named AS (
            SELECT v.a, v.b FROM new JOIN {s}.verdicts v ON v.a = new.external_id
            UNION SELECT v.a, v.b FROM new JOIN {s}.verdicts v ON v.b = new.external_id
        )
        SELECT DISTINCT d.id, d.cluster_id FROM named
        JOIN {s}.documents d ON d.external_id IN (named.a, named.b)
        """)

    def read() -> dict[int, int]:
        return {int(row[0]): int(row[1]) for row in conn.execute(statement, bounds)}

    labels = read()
    if shared and labels:
        labels = locks.lock_labels(conn, schema, read, labels)
    found = set(labels.values())
    if found:
        recluster(conn, schema, found)
    return found


#: The links between documents ``:ids`` that make clusters: their merging edges, less those
#: between the exact groups of a pair judged ``not_duplicate`` (an edge links the first
#: documents of two groups, and copies of one text share its verdicts), plus the pairs judged
#: ``duplicate``. The function ``clusters_at`` of migration 0012 says the same for a report.
_LINKS_SQL = f"""
    WITH judged AS (
        SELECT da.id AS x, db.id AS y, coalesce(da.exact_of, da.id) AS gx,
               coalesce(db.exact_of, db.id) AS gy, v.verdict
        FROM {{s}}.documents da
        JOIN {{s}}.verdicts v ON v.a = da.external_id
        JOIN {{s}}.documents db ON db.external_id = v.b
        WHERE da.id = ANY(:ids) AND db.id = ANY(:ids)
    ),
    vetoed AS (
        SELECT least(gx, gy) AS g1, greatest(gx, gy) AS g2 FROM judged
        WHERE verdict = '{NOT_DUPLICATE}' AND gx <> gy
    )
    SELECT e.a, e.b FROM {{s}}.edges e
    JOIN {{s}}.documents da ON da.id = e.a
    JOIN {{s}}.documents db ON db.id = e.b
    JOIN {{s}}.params p ON p.id = 1
    WHERE e.a = ANY(:ids) AND e.b = ANY(:ids)
      AND (e.method <> 'containment'
           OR coalesce((p.params ->> 'containment_merges')::boolean, false))
      AND NOT EXISTS (
          SELECT 1 FROM vetoed t
          WHERE t.g1 = least(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id))
            AND t.g2 = greatest(coalesce(da.exact_of, da.id), coalesce(db.exact_of, db.id)))
    UNION SELECT x, y FROM judged WHERE verdict = '{DUPLICATE}'
"""


def recluster(conn: Connection, schema: str, labels: set[int]) -> None:
    """Recompute clusters ``labels`` as the connected components of their merging edges, less
    the edges between the exact groups of a pair judged ``not_duplicate``, plus the pairs
    judged ``duplicate`` (:data:`_LINKS_SQL`).

    A component that holds the document whose id was its members' label keeps that label; any
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
    links = conn.execute(text(_LINKS_SQL.format(s=s)), {"ids": list(label_of)}).all()
    changed: dict[int, int] = {}
    for component in components(label_of, [(row[0], row[1]) for row in links]):
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
