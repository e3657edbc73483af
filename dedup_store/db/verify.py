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
``containment`` (containment >= the containment threshold, when that index is on).

:func:`merging_methods` names the methods whose matches merge clusters: every method but
``containment`` (an excerpt is reported, not merged) unless the store's params say otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dedup_store.core.params import FingerprintParams

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


def scored_pairs_sql(pairs_from: str, intersection: str = EXACT_INTERSECTION) -> str:
    """A query of ``(a, b, hamming, jaccard, containment, method)`` over candidate pairs.

    Args:
        pairs_from: a FROM clause that binds ``x`` (stored document, id ``a``), ``y`` (new
            document or query, id ``b``) and ``cand`` with booleans ``block_only`` (the pair
            was found through SimHash block keys only) and ``sampled`` (through an excerpt
            key: only such a pair can be an excerpt match), e.g. a join of a candidate CTE
            with ``documents``.
            It may use the bind parameters of :func:`score_parameters`.
        intersection: the SQL expression of ``|X ∩ Y|`` (exact mode).
    """
    return f"""
    SELECT a, b, hamming, jaccard, containment,
           CASE WHEN same THEN 'exact'
                WHEN jaccard >= :tau THEN 'minhash'
                WHEN hamming <= :simhash_k AND jaccard >= :simhash_min_jaccard THEN 'simhash'
                WHEN :containment > 0 AND sampled AND containment >= :containment
                    THEN 'containment'
           END AS method
    FROM (
        SELECT a, b, same, hamming, sampled,
               CASE WHEN same THEN 1.0 ELSE inter / nullif(nx + ny - inter, 0) END AS jaccard,
               CASE WHEN same THEN 1.0 ELSE inter / nullif(least(nx, ny), 0) END AS containment
        FROM (
            SELECT a, b, same, hamming, sampled, nx, ny,
                   CASE WHEN :exact_mode THEN exact_inter
                        ELSE est / (1 + est) * (nx + ny) END AS inter
            FROM (
                SELECT x.id AS a, y.id AS b, cand.sampled,
                       x.exact_hash = y.exact_hash AS same,
                       bit_count((x.simhash # y.simhash)::bit(64)) AS hamming,
                       x.shingle_count::float8 AS nx, y.shingle_count::float8 AS ny,
                       -- Jaccard >= t needs min/max size >= t: a pair that no method can
                       -- accept by its sizes is not intersected
                       CASE WHEN :exact_mode AND x.exact_hash <> y.exact_hash
                                 AND (cand.sampled
                                      OR least(x.shingle_count, y.shingle_count)
                                         >= :min_ratio * greatest(x.shingle_count,
                                                                  y.shingle_count))
                            THEN {intersection}::float8 END AS exact_inter,
                       CASE WHEN NOT :exact_mode THEN {_SIGNATURE_AGREEMENT} END AS est
                FROM {pairs_from}
                -- a pair found only through SimHash blocks is dropped by its Hamming distance
                -- alone, before the costlier Jaccard scoring
                WHERE NOT (cand.block_only
                           AND bit_count((x.simhash # y.simhash)::bit(64)) > :simhash_k)
                OFFSET 0  -- keeps the planner from inlining (and re-running) the subqueries
            ) raw
        ) counted
    ) scored
    """


def fetch_document(s: str, alias: str, id_expression: str) -> str:
    """A lateral primary-key lookup of one document row as ``alias``."""
    return (
        f"CROSS JOIN LATERAL (SELECT * FROM {s}.documents d WHERE d.id = {id_expression} "
        f"OFFSET 0) {alias}"
    )


def array_literal(values: Iterable[int]) -> str:
    """Integers as a PostgreSQL array literal, for ``CAST(:param AS bigint[])``.

    Sending one string is much cheaper than a list of Python ints, each adapted on its own.
    """
    return "{" + ",".join(map(str, values)) + "}"


def merging_methods(params: FingerprintParams) -> frozenset[str]:
    """The methods whose matches merge clusters under ``params``."""
    methods = {"exact", "minhash", "simhash", "containment"}
    return frozenset(methods if params.containment_merges else methods - {"containment"})


def score_parameters(params: FingerprintParams) -> dict[str, Any]:
    """Bind parameters used by :func:`scored_pairs_sql`."""
    return {
        "tau": params.threshold,
        "simhash_k": params.simhash_k,
        "simhash_min_jaccard": params.simhash_min_jaccard,
        "min_ratio": min(params.threshold, params.simhash_min_jaccard),
        "containment": params.containment,
        "exact_mode": params.verify == "exact",
    }
