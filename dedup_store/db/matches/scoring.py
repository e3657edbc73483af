"""The SQL that scores candidate pairs and decides which become matches.

Both sides of a pair are relations with the columns of ``documents`` (``x`` the stored, older
document; ``y`` the new one or the query). Scores are computed in the database:

* Hamming distance of the SimHashes with ``bit_count``;
* Jaccard similarity, exact (``verify="exact"``: the size of the intersection of the stored
  shingle sets) or estimated (``verify="estimate"``: the share of equal signature positions);
* containment, ``|X ∩ Y| / min(|X|, |Y|)`` (estimated from Jaccard and the set sizes in
  ``estimate`` mode).

A pair becomes a match by the first method that accepts it: ``exact`` (same canonical text),
``minhash`` (Jaccard >= threshold), ``simhash`` (Hamming <= k and Jaccard >= the SimHash floor),
``containment`` (containment >= the containment threshold, when that index is on). The rule is
stated once, in :mod:`dedup_store.core.matchrule`; the ``CASE`` here is written from it.

:func:`merging_methods` names the methods whose matches merge clusters: every method but
``containment`` (an excerpt is reported, not merged) unless the store's params say otherwise.
A batch's candidates are intersected in numpy (:func:`batch_intersections`) and scored and
stored in one statement (:func:`store_edges`); one fingerprint's candidates are found and scored
in one statement (:func:`matches_sql`, for ``check`` and ``add``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, TextClause, text

from dedup_store.core.arrays import I64, U32, U64, distinct, merged_segments
from dedup_store.core.fingerprint import Fingerprint
from dedup_store.core.matchrule import META_BAR, RULE, Rule, could_match
from dedup_store.core.matchrule import merging_methods as merging_methods
from dedup_store.core.overlap import intersection_sizes
from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import hamming_many
from dedup_store.db.candidates import hot
from dedup_store.db.candidates.lookup import (
    Candidates,
    Reach,
    key_lookups,
    sample_lookup,
)
from dedup_store.db.candidates.stored import INDEXED, StoredKeys
from dedup_store.db.rows.batch_rows import NewRows
from dedup_store.db.schema.encoding import (
    sparse_excerpt_keys,
    top32,
)
from dedup_store.db.schema.names import qualified
from dedup_store.db.server.array_params import Int4Array, Int8Array
from dedup_store.results import MatchRow

EXACT_INTERSECTION = (
    "(SELECT count(*) FROM (SELECT unnest(x.shingles) INTERSECT SELECT unnest(y.shingles)) i)"
)
#: |X ∩ Y| for ``check``: Y's shingles are hashed once (``query_shingles``), not per pair, so a
#: huge query costs one pass plus one probe per shingle of each candidate.
QUERY_INTERSECTION = (
    "(SELECT count(*) FROM unnest(x.shingles) AS u(sh) "
    "WHERE u.sh IN (SELECT sh FROM query_shingles))"
)
_SIGNATURE_AGREEMENT = (
    "(SELECT count(*) FROM unnest(x.signature, y.signature) s(p, q) WHERE p = q)::float8"
    " / cardinality(x.signature)"
)


_META_AGREEMENT = (
    "(SELECT count(*) FROM unnest(x.meta_signature, y.meta_signature) s(p, q) WHERE p = q)"
    "::float8 / cardinality(x.meta_signature)"
)


def rule_sql(rule: Rule, score: str = "score") -> str:
    """The SQL condition of one method's :class:`~dedup_store.core.matchrule.Rule` over the
    columns of :data:`~dedup_store.core.matchrule.SCORES`, its parameters bound by name;
    ``score`` names the column read as the combined score."""
    tests = [] if rule.enabled_by is None else [f":{rule.enabled_by} > 0"]
    tests += rule.flags
    tests += [
        f"{score if bar.score == 'score' else bar.score} {bar.op} :{bar.param}" for bar in rule.bars
    ]
    return " AND ".join(tests) or "true"


def method_case_sql() -> str:
    """The ``CASE`` that names the method accepting a pair (``NULL``: none), written from
    :data:`~dedup_store.core.matchrule.RULE`; it reads the column ``by_content``
    (:func:`by_content_sql`)."""
    veto = f"WHEN by_content AND meta_score IS NOT NULL AND score < :{META_BAR} THEN NULL"
    decided = [f"WHEN {rule_sql(rule)} THEN '{method.value}'" for method, rule in RULE.items()]
    return "\n".join(["CASE", veto, *decided, "END"])


def by_content_sql() -> str:
    """Whether a content method accepts a pair on its content alone (``score`` read as
    ``jaccard``)."""
    content = [f"({rule_sql(rule, 'jaccard')})" for rule in RULE.values() if rule.content]
    return " OR ".join(content)


_METHOD_CASE = method_case_sql()
_BY_CONTENT = by_content_sql()
#: The parameters the rule's SQL binds by their names.
_RULE_PARAMETERS = tuple(
    dict.fromkeys(
        [META_BAR]
        + [rule.enabled_by for rule in RULE.values() if rule.enabled_by is not None]
        + [bar.param for rule in RULE.values() for bar in rule.bars]
    )
)


class QueryScoring(NamedTuple):
    """What a statement that scores the candidates of one query document is built for, so
    that its plan leaves out what cannot apply: ``exact_mode`` (exact intersections, else the
    MinHash estimate: ``verify``; ``None``: as the ``:exact_mode`` parameter says) and
    ``query_meta`` (the query may have a metadata signature)."""

    exact_mode: bool | None = None
    query_meta: bool = True


#: A query statement scored as its parameters say.
_BY_PARAMETERS = QueryScoring()


def query_scoring(params: FingerprintParams, meta_signature: U32 | None) -> QueryScoring:
    """The :class:`QueryScoring` of a query document under ``params`` with ``meta_signature``
    (``None``: no metadata set)."""
    return QueryScoring(params.verify == "exact", meta_signature is not None)


def scored_pairs_sql(
    pairs_from: str, intersection: str = EXACT_INTERSECTION, scoring: QueryScoring | None = None
) -> str:
    """A query of ``(a, b, hamming, jaccard, containment, meta_score, score, method)`` over
    candidate pairs.

    ``meta_score`` is the agreement of the two metadata signatures (``NULL`` unless both
    documents have one) and ``score`` the combined score (:func:`combined_score_sql`, the
    Jaccard without ``meta_score``). ``minhash`` accepts a pair whose combined score reaches
    ``threshold``; with a ``meta_score``, a pair that ``exact``, ``minhash`` or ``simhash``
    would accept on its content alone is no match at all (not even an excerpt) unless its
    combined score reaches ``threshold``.

    Args:
        pairs_from: a FROM clause that binds ``x`` (stored document, id ``a``), ``y`` (new
            document or query, id ``b``) and ``cand`` with booleans ``block_only`` (the pair
            was found through SimHash block keys only) and ``sampled`` (through an excerpt
            key: only such a pair can be an excerpt match), e.g. a join of a candidate CTE
            with ``documents``.
            It may use the bind parameters of :func:`score_parameters`.
        intersection: the SQL expression of ``|X ∩ Y|`` (exact mode).
        scoring: built for one query document (``y``) scored this way: the verification mode
            is a constant (``:exact_mode`` otherwise), and without the query's metadata
            signature ``meta_score`` is ``NULL`` (no subquery is planned for what cannot run);
            the rows also carry the stored document's ``external_id`` and ``cluster_id``.
    """
    exact_mode = (
        ":exact_mode"
        if scoring is None or scoring.exact_mode is None
        else str(scoring.exact_mode).lower()
    )
    # a query's matches are answered with the stored document's id and cluster, read with it
    kept = "" if scoring is None else ", external_id, cluster_id"
    meta_score = (
        "CASE WHEN x.meta_signature IS NOT NULL AND y.meta_signature IS NOT NULL "
        f"THEN {_META_AGREEMENT} END"
        if scoring is None or scoring.query_meta
        else "NULL::float8"
    )
    return f"""
    SELECT a, b, hamming, jaccard, containment, meta_score, score{kept},
           {_METHOD_CASE} AS method
    FROM (
    SELECT a, b, same, hamming, jaccard, containment, meta_score, sampled{kept},
           {combined_score_sql("jaccard", "meta_score", ":meta_weight")} AS score,
           {_BY_CONTENT} AS by_content
    FROM (
        SELECT a, b, same, hamming, sampled, meta_score{kept},
               CASE WHEN same THEN 1.0 ELSE inter / nullif(nx + ny - inter, 0) END AS jaccard,
               CASE WHEN same THEN 1.0 ELSE inter / nullif(least(nx, ny), 0) END AS containment
        FROM (
            SELECT a, b, same, hamming, sampled, nx, ny, meta_score{kept},
                   CASE WHEN {exact_mode} THEN exact_inter
                        ELSE est / (1 + est) * (nx + ny) END AS inter
            FROM (
                SELECT x.id AS a, y.id AS b, cand.sampled{kept.replace(" ", " x.")},
                       x.exact_hash = y.exact_hash AS same,
                       bit_count((x.simhash # y.simhash)::bit(64)) AS hamming,
                       x.shingle_count::float8 AS nx, y.shingle_count::float8 AS ny,
                       -- Jaccard >= t needs min/max size >= t: a pair that no method can
                       -- accept by its sizes is not intersected
                       CASE WHEN {exact_mode} AND x.exact_hash <> y.exact_hash
                                 AND (cand.sampled
                                      OR least(x.shingle_count, y.shingle_count)
                                         >= :min_ratio * greatest(x.shingle_count,
                                                                  y.shingle_count))
                            THEN {intersection}::float8 END AS exact_inter,
                       CASE WHEN NOT {exact_mode} THEN {_SIGNATURE_AGREEMENT} END AS est,
                       {meta_score} AS meta_score
                FROM {pairs_from}
                -- a pair found only through SimHash blocks is dropped by its Hamming distance
                -- alone, before the costlier Jaccard scoring
                WHERE NOT (cand.block_only
                           AND bit_count((x.simhash # y.simhash)::bit(64)) > :simhash_k)
                OFFSET 0  -- keeps the planner from inlining (and re-running) the subqueries
            ) raw
        OFFSET 0) counted
    OFFSET 0) scored
    OFFSET 0) combined
    OFFSET 0  -- each level's columns are computed once, not copied into the next one's
    """


def combined_score_sql(jaccard: str, meta_score: str, meta_weight: str) -> str:
    """The SQL of the combined score of a pair: ``jaccard`` when ``meta_score`` is ``NULL``,
    else ``(1 - meta_weight) * jaccard + meta_weight * meta_score`` (three SQL expressions)."""
    return (
        f"CASE WHEN {meta_score} IS NULL THEN {jaccard} "
        f"ELSE (1 - {meta_weight}) * {jaccard} + {meta_weight} * {meta_score} END"
    )


def fetch_document(s: str, alias: str, id_expression: str) -> str:
    """A lateral primary-key lookup of one document row as ``alias``."""
    return (
        f"CROSS JOIN LATERAL (SELECT * FROM {s}.documents d WHERE d.id = {id_expression} "
        f"OFFSET 0) {alias}"
    )


def score_parameters(params: FingerprintParams) -> dict[str, Any]:
    """Bind parameters used by :func:`scored_pairs_sql`."""
    return {
        **{name: getattr(params, name) for name in _RULE_PARAMETERS},
        "min_ratio": params.lowest_jaccard,
        "exact_mode": params.verify == "exact",
        "meta_weight": params.meta_weight,
    }


@lru_cache(maxsize=32)
def found_sql(
    schema: str,
    band_count: int,
    block_count: int,
    hot_limit: int = 0,
    secondary: tuple[int, int] = (0, 0),
    sends_secondary: bool = True,
) -> str:
    """The candidate lookups of :func:`matches_sql`: rows ``(a, block, sample, kind, slot,
    pkey)``, the last three naming the band or block key a row was found by (``NULL`` for
    other rows). ``sends_secondary``: the query sends secondary keys of hot slots (without
    them, the statement leaves out their lookup: a third of its plan)."""
    s = qualified(schema)
    exact = (
        f"SELECT o.id, false, false FROM {s}.documents o "
        "WHERE o.exact_hash = CAST(:exact AS bytea) AND o.exact_of IS NULL"
    )
    others = [sample_lookup(s, hot_limit), exact]
    if hot_limit and any(secondary) and sends_secondary:
        others.append(hot.secondary_lookup(s, hot_limit))
    branches = key_lookups(s, band_count, block_count, hot_limit) + [
        "SELECT o.*, NULL::smallint AS kind, NULL::smallint AS slot, NULL::bigint AS pkey "
        f"FROM ({other}) o"
        for other in others
    ]
    return " UNION ALL ".join(branches)


@lru_cache(maxsize=32)
def matches_sql(
    schema: str,
    band_count: int,
    block_count: int,
    hot_limit: int = 0,
    secondary: tuple[int, int] = (0, 0),
    sends_secondary: bool = True,
    found: str = "",
    scoring: QueryScoring = _BY_PARAMETERS,
) -> str:
    """A query of the verified matches of an unstored fingerprint given in bind parameters.

    Rows ``(a, external_id, cluster_id, method, jaccard, containment, hamming, meta_score,
    score)``; the
    parameters are :func:`fingerprint_parameters`. ``secondary`` gives the secondary keys per
    band and per block slot (:func:`~dedup_store.db.candidates.hot.secondary_counts`): a hot slot is
    also looked up by them. ``found`` names a CTE of the statement holding the rows of
    :func:`found_sql` (by default they are looked up inline); ``scoring``, what the statement
    is built for (:func:`scored_pairs_sql`).
    """
    s = qualified(schema)
    query = """(SELECT 0::bigint AS id, CAST(:exact AS bytea) AS exact_hash,
                       CAST(:simhash AS bigint) AS simhash,
                       CAST(:signature AS integer[]) AS signature,
                       CAST(:shingles AS integer[]) AS shingles,
                       CAST(:shingle_count AS integer) AS shingle_count,
                       CAST(:meta_signature AS integer[]) AS meta_signature) y"""
    lookups = found_sql(schema, band_count, block_count, hot_limit, secondary, sends_secondary)
    rows = found or f"({lookups})"
    candidates = f"""(
        SELECT a, bool_and(block) AS block_only, bool_or(sample) AS sampled
        FROM {rows} found GROUP BY a
    ) cand"""
    scored = scored_pairs_sql(
        f"{candidates} {fetch_document(s, 'x', 'cand.a')} CROSS JOIN {query}",
        QUERY_INTERSECTION,
        scoring,
    )
    return f"""
        WITH query_shingles AS MATERIALIZED (
            SELECT DISTINCT unnest(CAST(:shingles AS integer[])) AS sh
        )
        SELECT j.a, j.external_id, j.cluster_id, j.method, j.jaccard, j.containment, j.hamming,
               j.meta_score, j.score
        FROM ({scored}) j
        WHERE j.method IS NOT NULL
    """


@lru_cache(maxsize=32)
def _check_statement(schema: str, shape: LookupShape, scoring: QueryScoring) -> TextClause:
    """The statement of :func:`check_statement` (built once: it is long and parsed for binds).

    Its rows, read by column name, are of two kinds (``row_kind``): a ``match``, with the
    columns of :class:`~dedup_store.results.MatchRow` but ``new_id``; and a ``touched`` row for
    each hot slot of the query whose secondary keys were not sent
    (:func:`~dedup_store.db.candidates.hot.touched_sql`), with only ``hot_kind`` and
    ``hot_slot``: run it again with them.
    """
    s = qualified(schema)
    hot_limit, secondary = shape.hot_limit, shape.secondary
    lookups = found_sql(schema, *shape)
    matches = matches_sql(schema, *shape, "found", scoring)
    return text(f"""
        WITH found AS MATERIALIZED ({lookups})
        SELECT 'match' AS row_kind, m.a AS doc_id, m.external_id, m.cluster_id, m.method,
               m.jaccard, m.containment, m.hamming, m.meta_score, m.score,
               NULL::integer AS hot_kind, NULL::integer AS hot_slot
        FROM ({matches}) m
        UNION ALL
        SELECT 'touched', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               t.kind::integer, t.slot::integer
        FROM (SELECT DISTINCT kind, slot
              FROM ({hot.touched_sql(s, secondary, hot_limit, full_buckets=True)}) h) t
    """)


def touched_slots(rows: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """``(kind, slot)`` of the ``touched`` rows of the statement of :func:`check_statement`."""
    return [
        (int(row["hot_kind"]), int(row["hot_slot"])) for row in rows if row["row_kind"] == "touched"
    ]


def check_matches(rows: Iterable[Mapping[str, Any]]) -> list[MatchRow]:
    """The ``match`` rows of the statement of :func:`check_statement`."""
    return [MatchRow.of(row) for row in rows if row["row_kind"] == "match"]


def fingerprint_parameters(
    fp: Fingerprint,
    slots: Iterable[tuple[int, int]] | None = (),
    meta_signature: U32 | None = None,
) -> dict[str, Any]:
    """The bind parameters of :func:`matches_sql` for ``fp`` with the signature of its
    metadata set (``None``: it has none), with the secondary keys of its ``(kind, slot)`` pairs
    ``slots`` (``None``: of every re-keyed slot;
    :func:`~dedup_store.db.candidates.hot.query_parameters`).
    """
    simhash = fp.simhash
    parameters: dict[str, Any] = {
        "meta_signature": None
        if meta_signature is None
        else Int4Array(meta_signature.view(np.int32)),
        "exact": fp.exact_hash,
        "simhash": simhash - (1 << 64) if simhash >= 1 << 63 else simhash,
        "signature": Int4Array(fp.signature.view(np.int32)),
        "shingles": Int4Array(top32(fp.shingles)),
        "shingle_count": len(fp.shingles),
        "sk": Int4Array(sparse_excerpt_keys(top32(fp.sample_keys), fp.params.max_excerpt_keys)),
        **score_parameters(fp.params),
    }
    parameters["slot_keys"] = Int8Array(np.concatenate([fp.band_keys, fp.block_keys]))
    parameters.update(hot.query_parameters(fp, slots))
    return parameters


class LookupShape(NamedTuple):
    """What the statements of one fingerprint are built for: band and block slots, the hot-key
    limit, the secondary keys per hot band and block slot, and whether the query sends any."""

    band_count: int
    block_count: int
    hot_limit: int
    secondary: tuple[int, int]
    sends_secondary: bool = True


def lookup_shape(fp: Fingerprint, parameters: Mapping[str, Any]) -> LookupShape:
    """The :class:`LookupShape` of ``fp`` sent with its :func:`fingerprint_parameters`
    ``parameters`` (with no secondary keys among them, the statement has no lookup of them)."""
    counts = hot.secondary_counts(fp.params)
    sends = hot.sends_secondary(parameters)
    return LookupShape(
        len(fp.band_keys), len(fp.block_keys), fp.params.hot_key_limit, counts, sends
    )


def check_statement(
    schema: str,
    fp: Fingerprint,
    slots: Iterable[tuple[int, int]] | None = (),
    meta_signature: U32 | None = None,
) -> tuple[str, dict[str, Any]]:
    """The statement of ``check`` (:func:`matches_sql`) and its ``:name`` parameters, with the
    secondary keys of ``slots`` and ``meta_signature`` as in :func:`fingerprint_parameters`."""
    parameters = fingerprint_parameters(fp, slots, meta_signature)
    statement = _check_statement(
        schema, lookup_shape(fp, parameters), query_scoring(fp.params, meta_signature)
    )
    return statement.text, parameters


def store_edges(
    conn: Connection,
    schema: str,
    new: NewRows,
    candidates: Candidates,
    stored: StoredKeys = INDEXED,
) -> list[MatchRow]:
    """Verify and store the matches of the new documents with older documents
    (:func:`batch_intersections`, then :func:`store_verified`)."""
    inter, possible = batch_intersections(conn, schema, new, candidates, stored)
    return store_verified(conn, schema, verified_parameters(new, candidates, inter, possible))


def verified_parameters(
    new: NewRows, candidates: Candidates, inter: I64, possible: npt.NDArray[np.bool_]
) -> dict[str, Any]:
    """The parameters of :func:`store_verified` for the ``possible`` candidates of the new
    documents, whose intersections ``inter`` are those of :func:`batch_intersections`."""
    inter = inter[possible]
    copies = new.exact_of != 0
    return {
        "copy_of": Int8Array(new.exact_of[copies]),
        "copies": Int8Array(new.ids[copies]),
        **candidates.subset(possible).parameters(),
        "cand_inter": "{" + ",".join("NULL" if v < 0 else str(v) for v in inter.tolist()) + "}",
        **score_parameters(new.batch.params),
    }


def store_verified(conn: Connection, schema: str, parameters: Mapping[str, Any]) -> list[MatchRow]:
    """Score and store the candidates of :func:`verified_parameters` in one statement: the
    candidates found by their keys, plus each new exact copy's link to the first document of
    its group (``exact_of``, given as ``copy_of`` and ``copies``), scored in SQL.
    """
    s = qualified(schema)
    found = """
        cand AS (SELECT a, b, bool_and(block_only) AS block_only,
                        bool_or(sampled) AS sampled, max(inter) AS inter FROM (
                     SELECT a, b, block_only = 1 AS block_only, sampled = 1 AS sampled, inter
                     FROM unnest(CAST(:cand_a AS bigint[]), CAST(:cand_b AS bigint[]),
                                 CAST(:cand_block_only AS integer[]),
                                 CAST(:cand_sampled AS integer[]),
                                 CAST(:cand_inter AS float8[]))
                          AS p(a, b, block_only, sampled, inter)
                     UNION ALL
                     SELECT a, b, false, false, NULL
                     FROM unnest(CAST(:copy_of AS bigint[]), CAST(:copies AS bigint[])) AS c(a, b)
                 ) all_found GROUP BY a, b)
    """
    scored = scored_pairs_sql(
        f"cand {fetch_document(s, 'x', 'cand.a')} {fetch_document(s, 'y', 'cand.b')}",
        f"coalesce(cand.inter, {EXACT_INTERSECTION})",
    )
    statement = f"""
        WITH {found},
        judged AS ({scored}),
        ins AS (INSERT INTO {s}.edges (a, b, method, jaccard, containment, hamming, meta_score)
                SELECT a, b, method, jaccard, containment, hamming, meta_score FROM judged
                WHERE method IS NOT NULL
                ON CONFLICT DO NOTHING
                RETURNING a, b, method, jaccard, containment, hamming, meta_score)
        SELECT ins.a AS doc_id, ins.b AS new_id, ins.method, ins.jaccard, ins.containment,
               ins.hamming, ins.meta_score,
               {combined_score_sql("ins.jaccard", "ins.meta_score", ":meta_weight")} AS score,
               d.external_id, d.cluster_id
        FROM ins JOIN {s}.documents d ON d.id = ins.a
    """
    result = conn.execute(text(statement), parameters)
    names = tuple(result.keys())  # the columns, named as MatchRow's fields
    return [MatchRow(**dict(zip(names, row, strict=True))) for row in result]


def batch_intersections(
    conn: Reach,
    schema: str,
    new: NewRows,
    candidates: Candidates,
    stored: StoredKeys = INDEXED,
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
    people = distinct(np.concatenate([candidates.a, candidates.b]))
    sizes, simhashes = _summaries(conn, schema, new, people, stored)
    a_at, b_at = np.searchsorted(people, candidates.a), np.searchsorted(people, candidates.b)
    a_sizes, b_sizes = sizes[a_at], sizes[b_at]
    ratio = np.minimum(a_sizes, b_sizes) / np.maximum(np.maximum(a_sizes, b_sizes), 1)
    min_jaccard = params.lowest_jaccard
    # a pair found through SimHash blocks only matches within simhash_k (as the SQL rules)
    distance = hamming_many(simhashes[a_at], simhashes[b_at])
    near = ~candidates.block_only | (distance <= params.simhash_k)
    wanted = np.flatnonzero(near & (candidates.sampled | (ratio >= min_jaccard)))
    ends = distinct(np.concatenate([candidates.a[wanted], candidates.b[wanted]]))
    is_new, rows = _new_rows_of(new, ends)
    here = new.shingles_of(rows)
    offsets, values = merged_segments(is_new, here, stored.shingles(conn, schema, ends[~is_new]))
    left = np.searchsorted(ends, candidates.a[wanted])
    right = np.searchsorted(ends, candidates.b[wanted])
    result[wanted] = intersection_sizes(values, offsets, left, right)
    inter = result[wanted].astype(np.float64)
    x, y = a_sizes[wanted], b_sizes[wanted]
    jaccard = inter / np.maximum(x + y - inter, 1)
    containment = inter / np.maximum(np.minimum(x, y), 1)
    possible = np.zeros(count, dtype=bool)
    possible[wanted] = could_match(params, jaccard, containment, candidates.sampled[wanted])
    return result, possible


def _new_rows_of(new: NewRows, ids: I64) -> tuple[npt.NDArray[np.bool_], I64]:
    """Which of the ascending ``ids`` are new documents, and the batch rows of those."""
    at = np.minimum(np.searchsorted(new.ids, ids), max(len(new.ids) - 1, 0))
    is_new = new.ids[at] == ids if len(new.ids) else np.zeros(len(ids), dtype=bool)
    return is_new, new.rows[at[is_new]]


def _summaries(
    conn: Reach, schema: str, new: NewRows, ids: I64, stored: StoredKeys
) -> tuple[npt.NDArray[np.float64], U64]:
    """Shingle counts (as floats) and SimHashes of the ascending ``ids``, new or stored."""
    is_new, rows = _new_rows_of(new, ids)
    sizes = np.zeros(len(ids), dtype=np.int64)
    simhashes = np.zeros(len(ids), dtype=np.int64)
    sizes[is_new] = np.diff(new.batch.shingle_offsets)[rows]
    simhashes[is_new] = new.batch.simhashes[rows].view(np.int64)
    sizes[~is_new], simhashes[~is_new] = stored.summaries(conn, schema, ids[~is_new])
    return sizes.astype(np.float64), simhashes.view(np.uint64)
