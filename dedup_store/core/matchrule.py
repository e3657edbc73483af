"""The match rule: which method, if any, accepts a scored pair of documents, stated once.

:data:`RULE` holds, per :class:`~dedup_store.results.Method`, the tests a pair must pass. The
scoring statement's ``CASE`` (:func:`dedup_store.db.matches.scoring.scored_pairs_sql`) is written
from it, and :func:`decide` applies it to arrays of scores (the Spark load's scoring, and through
:func:`could_match` the batch writer's prefilter).

A pair has these scores (:data:`SCORES`): ``same`` (equal exact hashes), ``jaccard``,
``containment``, ``hamming`` (of the SimHashes), ``sampled`` (found through an excerpt key: only
such a pair can be an excerpt), ``meta_score`` (agreement of the two metadata signatures;
missing unless both documents have one) and ``score`` (:func:`combined_score`).

The first method, in :class:`~dedup_store.results.Method` order, whose tests all pass accepts
the pair. But a pair with a ``meta_score`` that a content method (:attr:`Rule.content`) accepts
on its content alone (``score`` read as ``jaccard``) is no match at all, not even an excerpt,
unless its ``score`` reaches ``threshold`` (:data:`META_BAR`). A missing score (NaN, SQL's
``NULL``) passes no test.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dedup_store.core.params import FingerprintParams
from dedup_store.results import Method

#: The scores of a pair that a rule reads.
SCORES = ("same", "jaccard", "containment", "hamming", "sampled", "meta_score", "score")


@dataclasses.dataclass(frozen=True)
class Bar:
    """One test of a method: ``score op params.<param>``."""

    score: str
    op: Literal[">=", "<="]
    param: str


@dataclasses.dataclass(frozen=True)
class Rule:
    """When one method accepts a pair, and whether its matches merge clusters.

    Attributes:
        flags: booleans of the pair that must hold (``same``, ``sampled``).
        bars: the tests of its scores.
        enabled_by: a parameter that turns the method on when above 0 (``None``: always on).
        content: whether it judges the content alone, so that metadata can veto it.
        merges_by: the parameter by which its matches merge clusters (``None``: they always do).
    """

    flags: tuple[str, ...] = ()
    bars: tuple[Bar, ...] = ()
    enabled_by: str | None = None
    content: bool = True
    merges_by: str | None = None


#: The rule of each method, in the order of preference.
RULE: Mapping[Method, Rule] = MappingProxyType(
    {
        Method.EXACT: Rule(flags=("same",)),
        Method.MINHASH: Rule(bars=(Bar("score", ">=", "threshold"),)),
        Method.SIMHASH: Rule(
            bars=(Bar("hamming", "<=", "simhash_k"), Bar("jaccard", ">=", "simhash_min_jaccard"))
        ),
        Method.CONTAINMENT: Rule(
            flags=("sampled",),
            bars=(Bar("containment", ">=", "containment"),),
            enabled_by="containment",
            content=False,
            merges_by="containment_merges",
        ),
    }
)
#: The parameter the combined score of a pair with a ``meta_score`` must reach when a content
#: method accepts it.
META_BAR = "threshold"
#: What :func:`decide` gives a pair no method accepts.
NO_MATCH = -1
#: The methods by their codes in :func:`decide`.
METHODS: tuple[Method, ...] = tuple(RULE)


def merging_methods(params: FingerprintParams) -> frozenset[Method]:
    """The methods whose matches merge clusters under ``params``."""
    return frozenset(
        method
        for method, rule in RULE.items()
        if rule.merges_by is None or getattr(params, rule.merges_by)
    )


Array = npt.NDArray[Any]


def combined_score(jaccard: Array, meta_score: Array | None, meta_weight: float) -> Array:
    """``jaccard`` where ``meta_score`` is missing, else ``(1 - meta_weight) * jaccard +
    meta_weight * meta_score``."""
    if meta_score is None:
        return jaccard
    weighted = (1 - meta_weight) * jaccard + meta_weight * meta_score
    return np.where(np.isnan(meta_score), jaccard, weighted)


def decide(params: FingerprintParams, pair: Mapping[str, Array]) -> npt.NDArray[np.int8]:
    """The code of the method that accepts each pair (an index of :data:`METHODS`), or
    :data:`NO_MATCH`.

    Args:
        params: the store's parameters.
        pair: arrays of the scores of :data:`SCORES` but ``score``; ``meta_score`` may be left
            out (no pair has one).
    """
    meta = pair.get("meta_score")
    scores = {**pair, "score": combined_score(pair["jaccard"], meta, params.meta_weight)}
    count = len(scores["jaccard"])
    open_ = np.ones(count, dtype=bool)
    if meta is not None:
        content = np.zeros(count, dtype=bool)
        for rule in RULE.values():
            if rule.content:
                content |= _accepts(rule, {**scores, "score": scores["jaccard"]}, params)
        short = scores["score"] < getattr(params, META_BAR)
        open_ &= ~(content & ~np.isnan(meta) & short)
    chosen = np.full(count, NO_MATCH, dtype=np.int8)
    for code, rule in enumerate(RULE.values()):
        hit = open_ & _accepts(rule, scores, params)
        chosen[hit] = code
        open_ &= ~hit
    return chosen


def could_match(
    params: FingerprintParams, jaccard: Array, containment: Array, sampled: Array
) -> npt.NDArray[np.bool_]:
    """Whether pairs of different texts with these scores can be matches whatever their
    SimHashes and metadata sets: :func:`decide` with Hamming distance 0, and without or (when
    ``params`` use metadata) with a perfect ``meta_score``."""
    count = len(jaccard)
    pair = {
        "same": np.zeros(count, dtype=bool),
        "jaccard": jaccard,
        "containment": containment,
        "hamming": np.zeros(count, dtype=np.int64),
        "sampled": sampled,
    }
    found: npt.NDArray[np.bool_] = decide(params, pair) != NO_MATCH
    if params.uses_meta:
        found |= decide(params, {**pair, "meta_score": np.ones(count)}) != NO_MATCH
    return found


def _accepts(rule: Rule, scores: Mapping[str, Array], params: FingerprintParams) -> Array:
    """Whether ``rule`` accepts each pair of ``scores``."""
    count = len(scores["jaccard"])
    if rule.enabled_by is not None and not getattr(params, rule.enabled_by) > 0:
        return np.zeros(count, dtype=bool)
    ok = np.ones(count, dtype=bool)
    for flag in rule.flags:
        ok &= np.asarray(scores[flag], dtype=bool)
    for bar in rule.bars:
        bound = getattr(params, bar.param)
        values = scores[bar.score]
        ok &= values >= bound if bar.op == ">=" else values <= bound
    return ok
