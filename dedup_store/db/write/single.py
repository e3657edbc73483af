"""One new document written in one statement: the lookup of ``check``, then every write.

Adding a single document through the batch path costs a dozen round trips (candidate lookup, two
COPYs, edges, cluster sizes, relabelling). Here the store's lock is taken (with the document's key
locks: :mod:`dedup_store.db.write.locks`), then one statement finds and scores the document's
matches exactly as ``check`` does (which is what the batch path computes for one document), inserts
the document, its rows of ``recent_slot_keys``, its sample keys and its edges, and joins the
cluster its merging matches are in (:func:`~dedup_store.db.matches.scoring.merging_methods`).
A document named by a verdict, or one that would merge clusters of a store that holds
``not_duplicate`` verdicts, is left to the batch path, which applies them
(:mod:`dedup_store.db.write.reclustering`).

Under the store's shared lock it joins one existing cluster by itself: it takes that label's
lock shared, then reads its partners' labels again through row locks (``FOR SHARE`` reads the
newest version of a row, whatever the statement's snapshot). When they join several clusters,
or the label moved before its lock was granted, it writes nothing and says so (``merge``), with
the labels it met; :func:`run` sends it again after the locks of those labels, taken
exclusively before its snapshot (so it sees every member, and nobody moves them meanwhile).
Holding the locks of all the labels it meets (``locked``), or the store's lock exclusively (an
add of too many keys), it merges the clusters: it takes the cluster of the largest such cluster
(ties: the oldest label: :data:`~dedup_store.core.clustering.KEEPER_ORDER`, the rule
:func:`~dedup_store.core.clustering.merge_labels` applies too) and moves the members of the
others into it.

An exact copy of a stored document (the first of its exact group) is linked to that document
alone, records it in ``exact_of`` and gets no sample keys and no rows of ``slot_keys`` (its group's
first document has them).

The statement's snapshot is taken after the locks are granted, so it sees every add committed
before that could match the document, like the batch path.

A document that makes a band or block key hot (its ``hot_key_limit``-th stored document is
there already) is not inserted: the statement reports it, the caller makes the keys hot
(:func:`promote_pending`, which computes the bucket's secondary keys in
numpy) and runs the statement again. Otherwise the statement writes the document's secondary
keys of its hot slots, whose lookups :func:`~dedup_store.db.matches.scoring.matches_sql` includes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np
import psycopg
from sqlalchemy import Connection, TextClause, text

from dedup_store.core.arrays import I64, U32
from dedup_store.core.clustering import KEEPER_ORDER
from dedup_store.core.fingerprint import Fingerprint
from dedup_store.db.candidates import hot
from dedup_store.db.candidates.lookup import salt_arrays
from dedup_store.db.matches.scoring import (
    LookupShape,
    QueryScoring,
    fingerprint_parameters,
    found_sql,
    lookup_shape,
    matches_sql,
    merging_methods,
    query_scoring,
)
from dedup_store.db.schema.encoding import array_literal
from dedup_store.db.schema.names import qualified, regclass
from dedup_store.db.server import raw_statements
from dedup_store.db.server.engine import Database
from dedup_store.db.write import locks
from dedup_store.db.write.locks import label_seed
from dedup_store.results import MatchRow


@dataclasses.dataclass(frozen=True)
class SingleOutcome:
    """What the statement of :func:`add_statement` did.

    Attributes:
        doc_id: the new document's internal id, or the stored one's when the id was known.
        inserted: ``False`` when the external id was already stored (nothing was written).
        cluster_id: the document's cluster afterwards.
        matches: its verified matches with older documents (none when not inserted).
        rekey: nothing was written: the document makes keys hot, to be promoted first, or
            owns hot keys whose secondary keys were not sent.
        judged: nothing was written: a reviewer's verdict names the document, which the
            batch path writes (it applies verdicts to the clusters).
        merge: nothing was written: under the store's shared lock, the document joins several
            clusters whose labels' locks were not held, or the label of the one it joins moved
            before its lock was granted; ``matches`` name the labels to lock (:func:`run`).
        touched: ``(kind, slot)`` of the hot keys it owns whose secondary keys were not sent.
    """

    doc_id: int
    inserted: bool
    cluster_id: int
    matches: list[MatchRow]
    rekey: bool = False
    judged: bool = False
    merge: bool = False
    touched: list[tuple[int, int]] = dataclasses.field(default_factory=list)


@lru_cache(maxsize=32)
def _statement(schema: str, shape: LookupShape, scoring: QueryScoring) -> TextClause:
    """The statement of :func:`add_statement`: what to do (:func:`_deciding`), what is written
    (:func:`_writing`), and the rows it answers (:data:`_ANSWER`)."""
    s = qualified(schema)
    hot_limit, secondary = shape.hot_limit, shape.secondary
    lookups = found_sql(schema, *shape)
    matches = matches_sql(schema, *shape, "found", scoring)
    deciding = _deciding(
        s,
        lookups,
        matches,
        hot.touched_sql(s, secondary, hot_limit),
        hot.pending_keys_sql(s, secondary, hot_limit),
    )
    return text(
        "\n"
        + deciding
        + _writing(s, regclass(schema, "document_ids"), shape.band_count, shape.block_count)
        + _ANSWER
        + "    "
    )


def _deciding(s: str, lookups: str, matches: str, touched: str, pending: str) -> str:
    """The CTEs up to ``blocked``: the stored document of the id, the exact group, verdicts,
    candidates and matches, and whether the labels it merges are locked."""
    return f"""        WITH known AS (
            SELECT id, cluster_id FROM {s}.documents WHERE external_id = :external_id
        ),
        first AS (
            SELECT id FROM {s}.documents
            WHERE exact_hash = CAST(:exact AS bytea) AND exact_of IS NULL
        ),
        judged AS MATERIALIZED (
            SELECT 1 FROM {s}.verdicts
            WHERE (a = :external_id OR b = :external_id) AND NOT EXISTS (SELECT 1 FROM known)
            LIMIT 1
        ),
        found AS MATERIALIZED ({lookups}),
        touched AS MATERIALIZED ({touched}),
        pending AS MATERIALIZED (
            SELECT 1 FROM ({pending}
                           UNION ALL SELECT * FROM touched) p
            WHERE NOT EXISTS (SELECT 1 FROM known) AND NOT EXISTS (SELECT 1 FROM first) LIMIT 1
        ),
        proceed AS MATERIALIZED (
            SELECT 1 AS go WHERE NOT EXISTS (SELECT 1 FROM known)
              AND NOT EXISTS (SELECT 1 FROM pending) AND NOT EXISTS (SELECT 1 FROM judged)
        ),
        matched AS MATERIALIZED (
            SELECT * FROM ({matches}) m
            WHERE EXISTS (SELECT 1 FROM proceed)
              AND (m.a IN (SELECT id FROM first) OR NOT EXISTS (SELECT 1 FROM first))
        ),
        labels AS MATERIALIZED (
            SELECT DISTINCT cluster_id FROM matched
            WHERE method = ANY(CAST(:merging AS text[]))
        ),
        vetoing AS MATERIALIZED (
            SELECT 1 WHERE (SELECT count(*) FROM labels) > 1
              AND EXISTS (SELECT 1 FROM {s}.verdicts WHERE verdict = 'not_duplicate')
        ),
        held AS MATERIALIZED (
            SELECT :exclusive OR NOT EXISTS (
                SELECT 1 FROM labels WHERE cluster_id <> ALL(CAST(:locked AS bigint[]))
            ) AS free
        ),
        joined AS MATERIALIZED (
            SELECT count(pg_advisory_xact_lock_shared(
                       hashint8extended(cluster_id, CAST(:label_seed AS bigint)))) AS n
            FROM labels WHERE NOT (SELECT free FROM held) AND (SELECT count(*) FROM labels) = 1
        ),
        fresh AS MATERIALIZED (
            SELECT d.cluster_id FROM {s}.documents d
            WHERE d.id IN (SELECT a FROM matched WHERE method = ANY(CAST(:merging AS text[])))
              AND (SELECT n FROM joined) = 1
            FOR SHARE OF d
        ),
        blocked AS MATERIALIZED (
            SELECT 1 WHERE NOT (SELECT free FROM held) AND (
                (SELECT count(*) FROM labels) > 1
                OR EXISTS (SELECT 1 FROM fresh f
                           WHERE f.cluster_id NOT IN (SELECT cluster_id FROM labels)))
        ),
"""


def _writing(s: str, ids: str, band_count: int, block_count: int) -> str:
    """The CTEs from ``new_id`` on: the id (from the sequence ``ids``), the cluster it joins (the
    keeper of the clusters it merges), and the rows it writes."""
    keeper = keeper_order("size", "cluster_id")
    return f"""        new_id AS (
            SELECT nextval({ids}) AS id
            WHERE EXISTS (SELECT 1 FROM proceed) AND NOT EXISTS (SELECT 1 FROM blocked)
              AND NOT EXISTS (SELECT 1 FROM vetoing)
        ),
        sizes AS MATERIALIZED (
            SELECT d.cluster_id, count(*) AS size FROM {s}.documents d
            WHERE d.cluster_id IN (
                SELECT cluster_id FROM matched WHERE method = ANY(CAST(:merging AS text[])))
            GROUP BY d.cluster_id
        ),
        keeper AS MATERIALIZED (
            SELECT coalesce(
                (SELECT cluster_id FROM sizes ORDER BY {keeper} LIMIT 1),
                (SELECT id FROM new_id)
            ) AS label
        ),
        document AS (
            INSERT INTO {s}.documents (
                id, cluster_id, simhash, exact_hash, signature, shingle_count, token_count,
                length, external_id, language, meta, body, shingles, exact_of, meta_signature)
            SELECT n.id, k.label, CAST(:simhash AS bigint), CAST(:exact AS bytea),
                   CAST(:signature AS integer[]), :shingle_count, :token_count, :length,
                   :external_id, :language, CAST(:meta AS jsonb), :body,
                   CAST(:shingles AS integer[]), (SELECT id FROM first),
                   CAST(:meta_signature AS integer[])
            FROM new_id n CROSS JOIN keeper k
        ),
        slotted AS (
            INSERT INTO {s}.recent_slot_keys (key, doc_id, kind, slot)
            SELECT k.key # k.salt, n.id, k.kind, k.slot FROM new_id n
            CROSS JOIN unnest({salt_arrays(band_count, block_count)},
                              CAST(:slot_keys AS bigint[])) AS k(kind, slot, salt, key)
            WHERE NOT EXISTS (SELECT 1 FROM first)
        ),
        sample AS (
            INSERT INTO {s}.sample_keys (key, doc_id)
            SELECT key, n.id FROM new_id n CROSS JOIN unnest(CAST(:sk AS integer[])) AS key
            WHERE NOT EXISTS (SELECT 1 FROM first)
        ),
        secondary AS (
            INSERT INTO {s}.secondary_keys (kind, slot, key, doc_id)
            SELECT x.kind, x.slot, x.key, n.id FROM new_id n
            CROSS JOIN ({hot.hot_secondary(s)}) x
            WHERE NOT EXISTS (SELECT 1 FROM first)
        ),
        edge AS (
            INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming, meta_score)
            SELECT m.a, n.id, m.method, m.jaccard, m.containment, m.hamming, m.meta_score
            FROM matched m CROSS JOIN new_id n
        ),
        moved AS (
            UPDATE {s}.documents d SET cluster_id = k.label FROM keeper k
            WHERE d.cluster_id IN (SELECT cluster_id FROM sizes) AND d.cluster_id <> k.label
              AND EXISTS (SELECT 1 FROM new_id)
        )
"""


#: The rows of the statement of :func:`add_statement`: its outcome, its matches, and the hot
#: slots it met that it sent no secondary keys of.
_ANSWER = """        SELECT 'outcome' AS row_kind,
               coalesce((SELECT id FROM new_id), (SELECT id FROM known)) AS doc_id,
               EXISTS (SELECT 1 FROM new_id) AS inserted,
               coalesce((SELECT label FROM keeper), (SELECT cluster_id FROM known))
                   AS cluster_id,
               coalesce((SELECT 'judged'::text FROM judged),
                        (SELECT 'judged'::text FROM vetoing),
                        (SELECT 'merge'::text FROM blocked)) AS unwritten,
               NULL::text AS external_id, NULL::text AS method, NULL::float8 AS jaccard,
               NULL::float8 AS containment, NULL::bigint AS hamming,
               NULL::float8 AS meta_score, NULL::float8 AS score,
               NULL::integer AS hot_kind, NULL::integer AS hot_slot
        UNION ALL
        SELECT 'match', m.a, NULL, m.cluster_id, NULL, m.external_id, m.method, m.jaccard,
               m.containment, m.hamming, m.meta_score, m.score, NULL, NULL
        FROM matched m
        UNION ALL
        SELECT 'touched', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               t.kind::integer, t.slot::integer
        FROM (SELECT DISTINCT kind, slot FROM touched) t WHERE EXISTS (SELECT 1 FROM pending)
"""


#: Rounds of :func:`run` for a document whose clusters keep moving, before the batch path.
MERGE_ROUNDS = 4


def keeper_order(size: str, label: str) -> str:
    """SQL: the ``ORDER BY`` list that ranks clusters (columns ``size`` and ``label``) by
    :data:`~dedup_store.core.clustering.KEEPER_ORDER`, the keeper first."""
    columns = {"size": size, "label": label}
    return ", ".join(
        f"{columns[name]} {'DESC' if descending else 'ASC'}" for name, descending in KEEPER_ORDER
    )


def run(
    db: Database, schema: str, statement: str, parameters: dict[str, Any], keys: I64
) -> SingleOutcome:
    """Run the statement of :func:`add_statement` holding the store's lock: shared with the
    document's ``keys`` (unless the statement is the exclusive one), and the locks of the
    cluster labels it merges (a round for each set of labels it reports, at most
    :data:`MERGE_ROUNDS`: ``merge`` then stays, for the batch path). Each round is one
    pipelined round trip on the store's own engine."""
    labels: set[int] = set()
    held = None if parameters["exclusive"] else keys
    result = SingleOutcome(0, False, 0, [], merge=True)
    for _ in range(MERGE_ROUNDS):
        locked = sorted(labels)
        with_labels = {**parameters, "locked": array_literal(locked)}
        result = outcome(_rows(db, schema, statement, with_labels, held, locked))
        if not result.merge:
            return result
        labels |= {m.cluster_id for m in result.matches if m.method in parameters["merging"]}
    return result


def _rows(
    db: Database,
    schema: str,
    statement: str,
    parameters: dict[str, Any],
    keys: I64 | None,
    labels: list[int],
) -> list[dict[str, Any]]:
    """The rows of ``statement``, by column name, in a transaction of its own holding the locks
    (:func:`~dedup_store.db.write.locks.lock_statement`), or in the caller's."""
    lock, lock_parameters, _ = locks.lock_statement(schema, keys, labels)
    rows = db.native(
        lambda raw: raw_statements.locked_statement(
            raw, (lock, lock_parameters), statement, parameters
        )
    )
    if rows is None:  # inside a caller's transaction
        rows = db.in_caller(
            lambda conn, raw: _in_caller(conn, raw, schema, statement, parameters, keys, labels)
        )
    if rows is None:  # an asyncio caller's

        def work(conn: Connection) -> list[dict[str, Any]]:
            shared = locks.lock_store(conn, schema, keys, labels)
            bound = {**parameters, "exclusive": not shared}
            with raw_statements.generic_plans(conn):
                return [dict(row) for row in conn.execute(text(statement), bound).mappings()]

        rows = db.run(work)
    return list(rows)


def _in_caller(
    conn: Connection,
    raw: psycopg.Connection[Any],
    schema: str,
    statement: str,
    parameters: dict[str, Any],
    keys: I64 | None,
    labels: list[int],
) -> list[dict[str, Any]]:
    """The rows of ``statement`` in the caller's transaction, in a savepoint of it: the
    store's lock and the document's (as :func:`~dedup_store.db.write.locks.lock_store` takes
    them) in one round trip, then the statement and the savepoint's release in another."""
    lock, lock_parameters, shared = locks.transaction_lock_statement(conn, schema, keys, labels)
    bound = {**parameters, "exclusive": not shared}
    return raw_statements.locked_in_savepoint(
        raw, (lock, lock_parameters), statement, bound, lambda row: locks.check_isolation(row[0])
    )


def promote_pending(conn: Connection, schema: str, fp: Fingerprint) -> None:
    """Make hot the keys of ``fp`` that adding it makes hot (holding the store's lock,
    exclusive)."""
    params = fp.params
    counts = hot.secondary_counts(params)
    lookups = found_sql(schema, len(fp.band_keys), len(fp.block_keys), params.hot_key_limit, counts)
    pending = hot.pending_keys_sql(qualified(schema), counts, params.hot_key_limit)
    rows = conn.execute(
        text(f"WITH found AS MATERIALIZED ({lookups}) {pending}"), fingerprint_parameters(fp)
    ).all()
    if rows:
        kinds, slots, keys = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
        hot.promote(conn, schema, params, kinds, slots, keys)


def add_statement(
    schema: str,
    fp: Fingerprint,
    external_id: str,
    meta: Any,
    body: str | None,
    language: str,
    meta_signature: U32 | None = None,
    slots: Iterable[tuple[int, int]] | None = (),
    exclusive: bool = False,
) -> tuple[str, dict[str, Any]]:
    """The statement that inserts one document, with its ``:name`` parameters.

    Run it holding the store's lock
    (:func:`~dedup_store.db.server.raw_statements.locked_statement`, or
    :func:`~dedup_store.db.write.locks.lock_store` first): ``exclusive`` says in which mode; in the
    shared one, the document's key locks too. Read its rows with :func:`outcome`.
    ``meta`` must be JSON-serializable (validated by the caller); ``meta_signature`` is the
    signature of its metadata set (``None``: none), and ``fp`` then has its exact key
    (:func:`~dedup_store.core.metadata.exact_key`). The secondary keys of the ``(kind, slot)``
    pairs ``slots`` are sent (:func:`~dedup_store.db.matches.scoring.fingerprint_parameters`).
    """
    found = fingerprint_parameters(fp, slots, meta_signature)
    statement = _statement(
        schema, lookup_shape(fp, found), query_scoring(fp.params, meta_signature)
    )
    parameters = {
        **found,
        "external_id": external_id,
        "token_count": fp.token_count,
        "length": len(fp.canonical_text),
        "language": language,
        "meta": None if meta is None else json.dumps(meta, ensure_ascii=False),
        "body": body,
        "merging": sorted(merging_methods(fp.params)),
        "exclusive": exclusive,
        "label_seed": label_seed(schema),
        "locked": "{}",
    }
    return statement.text, parameters


def outcome(rows: Iterable[Mapping[str, Any]]) -> SingleOutcome:
    """What the statement of :func:`add_statement` did, from its rows (read by column name).

    Its rows are of three kinds (``row_kind``): one ``outcome`` (the document's ``doc_id``,
    whether it was ``inserted``, its ``cluster_id``, and why nothing was written, ``unwritten``:
    ``judged``, ``merge`` or ``NULL``), its ``match`` rows (the columns of
    :class:`~dedup_store.results.MatchRow` but ``new_id``), and a ``touched`` row (``hot_kind``,
    ``hot_slot``) for each hot slot it owns whose secondary keys were not sent.
    """
    kinds: dict[str, list[Mapping[str, Any]]] = {"outcome": [], "match": [], "touched": []}
    for row in rows:
        kinds[row["row_kind"]].append(row)
    (head,) = kinds["outcome"]
    if head["doc_id"] is None and head["unwritten"] == "judged":
        return SingleOutcome(0, False, 0, [], judged=True)
    matches = [MatchRow.of(row) for row in kinds["match"]]
    if head["doc_id"] is None and head["unwritten"] == "merge":
        return SingleOutcome(0, False, 0, matches, merge=True)
    if head["doc_id"] is None:  # neither inserted nor known: keys to make hot first
        touched = [(int(row["hot_kind"]), int(row["hot_slot"])) for row in kinds["touched"]]
        return SingleOutcome(0, False, 0, [], rekey=True, touched=touched)
    doc_id, inserted = int(head["doc_id"]), bool(head["inserted"])
    return SingleOutcome(doc_id, inserted, int(head["cluster_id"]), matches)
