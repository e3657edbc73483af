"""Clusters kept equal to the rule of :mod:`dedup_store.core.separation` as verdicts and
documents come and go.

A store's clusters are the components of its merging edges (weighted by their combined score)
and its ``duplicate`` verdicts, once each ``not_duplicate`` pair, in the server's order of the
pair's ids, is parted by a minimum cut. ``cut_edges`` records each edge a verdict cut, with the
verdict. Clusters joined by cut edges form a *family*: one component of the uncut graph, which
:func:`recluster` always computes whole, so the result depends on the edges and the verdicts
only, not on the order of the writes that made them.

A write computes a family again when it needs to (:func:`apply_to_new`): a new document that a
verdict names, or a cluster that holds a new document and either an end of a cut edge or both
documents of a ``not_duplicate`` pair (a merge that joined them). A document that joins one
cluster changes no cut, so it asks for nothing. Callers hold the store's lock: exclusively, but
for :func:`apply_to_new` (an add holds it shared, and locks the labels it reclusters).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, text

from dedup_store.core.clustering import UnionFind
from dedup_store.core.params import FingerprintParams
from dedup_store.core.separation import Link, capacity, separate
from dedup_store.db.matches.scoring import combined_score_sql
from dedup_store.db.schema.names import qualified
from dedup_store.db.write import locks, verdicts
from dedup_store.db.write.verdicts import DUPLICATE, NOT_DUPLICATE


@dataclasses.dataclass(frozen=True)
class CutEdge:
    """A stored match edge that a ``not_duplicate`` verdict cut: its documents' external ids
    (``a`` the older), its method and combined score, and the verdict's pair."""

    a: str
    b: str
    method: str
    score: float
    verdict_a: str
    verdict_b: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def apply_to_new(
    conn: Connection, schema: str, new_ids: Sequence[int], shared: bool = False
) -> set[int]:
    """Bring the clusters of documents just added in line with the rule (a verdict names one,
    or a merge joined a vetoed pair or a family); returns the labels of the clusters
    recomputed.

    Holding the store's lock ``shared``, the labels of the families are locked first
    (:func:`~dedup_store.db.write.locks.lock_labels`), as concurrent adds may move their members.
    """
    if not len(new_ids):
        return set()
    if isinstance(new_ids, range):  # a load's contiguous ids
        where = "n.id >= :lo AND n.id < :hi"
        bounds: dict[str, Any] = {"lo": new_ids.start, "hi": new_ids.stop}
    else:
        where, bounds = "n.id = ANY(:ids)", {"ids": list(new_ids)}
    statement = text(_TOUCHED_SQL.format(s=qualified(schema), where=where))

    def read() -> dict[int, int]:
        touched = set(conn.execute(statement, bounds).scalars())
        return {label: label for label in family(conn, schema, touched)}

    labels = read()
    if shared and labels:
        labels = locks.lock_labels(conn, schema, read, labels)
    found = set(labels.values())
    if found:
        recluster(conn, schema, found)
    return found


#: The labels of the clusters a write of documents ``n`` (``{where}``) asks to compute again.
_TOUCHED_SQL = f"""
    WITH new AS (SELECT n.id, n.external_id FROM {{s}}.documents n WHERE {{where}}),
    named AS (
        SELECT v.a, v.b FROM new JOIN {{s}}.verdicts v ON v.a = new.external_id
        UNION SELECT v.a, v.b FROM new JOIN {{s}}.verdicts v ON v.b = new.external_id
    ),
    ends AS (
        SELECT DISTINCT d.cluster_id FROM {{s}}.cut_edges c
        JOIN {{s}}.documents d ON d.id IN (c.a, c.b)
    )
    SELECT d.cluster_id FROM named JOIN {{s}}.documents d ON d.external_id IN (named.a, named.b)
    UNION
    SELECT e.cluster_id FROM ends e
    WHERE EXISTS (SELECT 1 FROM {{s}}.documents n WHERE n.cluster_id = e.cluster_id AND {{where}})
    UNION
    SELECT da.cluster_id FROM {{s}}.verdicts v
    JOIN {{s}}.documents da ON da.external_id = v.a
    JOIN {{s}}.documents db ON db.external_id = v.b
    WHERE v.verdict = '{NOT_DUPLICATE}' AND da.cluster_id = db.cluster_id
"""


def vetoed_together(conn: Connection, schema: str) -> set[int]:
    """The labels of clusters that hold both documents of a pair judged ``not_duplicate``
    (none, but in a store whose verdicts were recorded under the rule before 0016), less
    those that duplicate verdicts join (no cut can part them)."""
    s = qualified(schema)
    rows = conn.execute(
        text(
            f"SELECT da.cluster_id, v.a, v.b FROM {s}.verdicts v "
            f"JOIN {s}.documents da ON da.external_id = v.a "
            f"JOIN {s}.documents db ON db.external_id = v.b "
            f"WHERE v.verdict = '{NOT_DUPLICATE}' AND da.cluster_id = db.cluster_id"
        )
    ).all()
    if not rows:
        return set()
    confirmed = verdicts.confirmed_chains(conn, schema)
    return {int(label) for label, a, b in rows if confirmed.chain(a, b) is None}


def family(conn: Connection, schema: str, labels: Iterable[int]) -> set[int]:
    """``labels`` with every cluster joined to one of them through cut edges."""
    wanted = set(labels)
    if not wanted:
        return wanted
    s = qualified(schema)
    rows = conn.execute(
        text(
            f"SELECT da.cluster_id, db.cluster_id FROM {s}.cut_edges c "
            f"JOIN {s}.documents da ON da.id = c.a JOIN {s}.documents db ON db.id = c.b"
        )
    ).all()
    sets: UnionFind[int] = UnionFind(wanted)
    for x, y in rows:
        sets.union(int(x), int(y))
    roots = {sets.find(label) for label in wanted}
    return {label for label in sets.parent if sets.find(label) in roots}


def recluster(conn: Connection, schema: str, labels: Iterable[int]) -> None:
    """Compute the clusters ``labels`` and their families again by the rule, and record the
    edges their verdicts cut.

    A component that holds the document whose id was its members' label keeps that label; any
    other component is labelled by its oldest member.
    """
    s = qualified(schema)
    wanted = family(conn, schema, labels)
    members = conn.execute(
        text(f"SELECT id, cluster_id FROM {s}.documents WHERE cluster_id = ANY(:labels)"),
        {"labels": sorted(wanted)},
    ).all()
    if not members:
        return
    label_of: dict[int, int] = {row[0]: row[1] for row in members}
    ids = {"ids": list(label_of)}
    links: list[Link] = [
        (int(a), int(b), capacity(score))
        for a, b, score in conn.execute(text(_LINKS_SQL.format(s=s)), ids)
    ]
    judged = conn.execute(text(_JUDGED_SQL.format(s=s)), ids).all()
    links += [(x, y, None) for x, y, verdict, _, _ in judged if verdict == DUPLICATE]
    vetoes = [(x, y) for x, y, verdict, _, _ in judged if verdict == NOT_DUPLICATE]
    separation = separate(label_of, links, vetoes)
    _relabel(conn, s, label_of, separation.components)
    names = {(x, y): (a, b) for x, y, _, a, b in judged}
    _record_cuts(conn, s, list(label_of), {names[v]: cut for v, cut in separation.cuts.items()})


#: The merging edges among documents ``:ids`` with their combined scores.
_LINKS_SQL = f"""
    SELECT e.a, e.b, {combined_score_sql("e.jaccard", "e.meta_score", "w.weight")}
    FROM {{s}}.edges e
    CROSS JOIN (SELECT coalesce((params ->> 'meta_weight')::float8, 0) AS weight,
                       coalesce((params ->> 'containment_merges')::boolean, false) AS merges
                FROM {{s}}.params) w
    WHERE e.a = ANY(:ids) AND e.b = ANY(:ids) AND (e.method <> 'containment' OR w.merges)
"""

#: The verdicts among documents ``:ids``: the two documents, the verdict and the pair's ids,
#: in the server's order of the pair (the order their cuts are made in).
_JUDGED_SQL = """
    SELECT da.id, db.id, v.verdict, v.a, v.b FROM {s}.verdicts v
    JOIN {s}.documents da ON da.external_id = v.a
    JOIN {s}.documents db ON db.external_id = v.b
    WHERE da.id = ANY(:ids) AND db.id = ANY(:ids)
    ORDER BY v.a, v.b
"""


def _relabel(
    conn: Connection, s: str, label_of: dict[int, int], components: list[list[int]]
) -> None:
    """Give each of ``components`` its label (see :func:`recluster`)."""
    changed: dict[int, int] = {}
    for component in components:
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


def _record_cuts(
    conn: Connection,
    s: str,
    members: list[int],
    cuts: dict[tuple[str, str], list[tuple[int, int]]],
) -> None:
    """Replace the cut edges of ``members`` by ``cuts`` (``{verdict's pair: edges}``)."""
    conn.execute(text(f"DELETE FROM {s}.cut_edges WHERE a = ANY(:ids)"), {"ids": members})
    rows = [(a, b, pair) for pair, cut in cuts.items() for a, b in cut]
    if rows:
        conn.execute(
            text(
                f"INSERT INTO {s}.cut_edges (a, b, verdict_a, verdict_b) "
                "SELECT * FROM unnest(CAST(:a AS bigint[]), CAST(:b AS bigint[]), "
                "CAST(:va AS text[]), CAST(:vb AS text[]))"
            ),
            {
                "a": [a for a, _, _ in rows],
                "b": [b for _, b, _ in rows],
                "va": [pair[0] for _, _, pair in rows],
                "vb": [pair[1] for _, _, pair in rows],
            },
        )


def cut_edges(
    conn: Connection, schema: str, params: FingerprintParams, pair: tuple[str, str] | None = None
) -> list[CutEdge]:
    """The edges the verdict on ``pair`` cut (``None``: every verdict), weakest first."""
    s = qualified(schema)
    where = (
        ""
        if pair is None
        else "WHERE c.verdict_a = least(:x, :y) AND c.verdict_b = greatest(:x, :y)"
    )
    rows = conn.execute(
        text(
            f"SELECT da.external_id, db.external_id, e.method, "
            f"{combined_score_sql('e.jaccard', 'e.meta_score', ':weight')} AS score, "
            f"c.verdict_a, c.verdict_b FROM {s}.cut_edges c "
            f"JOIN {s}.edges e ON e.a = c.a AND e.b = c.b "
            f"JOIN {s}.documents da ON da.id = c.a JOIN {s}.documents db ON db.id = c.b "
            f"{where} ORDER BY score, c.a, c.b"
        ),
        {"x": pair and pair[0], "y": pair and pair[1], "weight": params.meta_weight},
    )
    return [CutEdge(a, b, method, float(score), va, vb) for a, b, method, score, va, vb in rows]
