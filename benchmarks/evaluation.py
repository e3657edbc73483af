"""Scoring found pairs against a ground truth, shared by the quality benchmarks.

A ground truth is anything with :class:`PairScores`' three methods: the quality benchmark's
word-tuple :class:`~benchmarks.quality.Truth` and the real-text benchmark's
:class:`~benchmarks.shingle_truth.ShingleTruth` (over the store's own shingle hashes).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import Protocol

PairSet = set[tuple[int, int]]


class PairScores(Protocol):
    """Exact scores of document pairs (documents are numbered from 0)."""

    def score(self, i: int, j: int) -> tuple[float, float]:
        """``(jaccard, containment)`` of documents ``i`` and ``j``."""
        ...

    def jaccard_pairs(self, tau: float) -> PairSet:
        """Pairs ``(i, j)``, ``i < j``, with Jaccard at least ``tau``."""
        ...

    def containment_pairs(self, tau: float) -> PairSet:
        """Pairs ``(i, j)``, ``i < j``, with containment at least ``tau``."""
        ...


@dataclasses.dataclass
class Row:
    """One line of a result table."""

    name: str
    tau: float
    recall: float
    precision: float
    found: int
    truth: int
    seconds: float
    missed: PairSet

    def line(self) -> str:
        """The row formatted for the table."""
        return (
            f"{self.name:<34} {self.tau:>4.2f} {self.recall:>7.4f} {self.precision:>9.4f} "
            f"{self.found:>7} {self.truth:>7} {self.seconds:>8.1f}"
        )


HEADER = (
    f"{'configuration':<34} {'tau':>4} {'recall':>7} {'precision':>9} "
    f"{'found':>7} {'truth':>7} {'seconds':>8}"
)


def evaluate(
    name: str,
    tau: float,
    found: PairSet,
    positives: PairSet,
    correct: Callable[[tuple[int, int]], bool],
    seconds: float,
) -> Row:
    """Recall of ``positives``; precision of ``found`` (a found pair is right when ``correct``)."""
    hits = len(found & positives)
    right = sum(1 for p in found if p in positives or correct(p))
    recall = hits / len(positives) if positives else 1.0
    precision = right / len(found) if found else 1.0
    return Row(name, tau, recall, precision, len(found), len(positives), seconds, positives - found)


def jaccard_row(name: str, tau: float, found: PairSet, truth: PairScores, seconds: float) -> Row:
    """Evaluate ``found`` against the pairs of Jaccard at least ``tau``."""
    return evaluate(
        name, tau, found, truth.jaccard_pairs(tau), lambda p: truth.score(*p)[0] >= tau, seconds
    )


def containment_row(
    name: str, tau: float, found: PairSet, truth: PairScores, seconds: float
) -> Row:
    """Evaluate ``found`` against the pairs of containment at least ``tau``."""
    return evaluate(
        name, tau, found, truth.containment_pairs(tau), lambda p: truth.score(*p)[1] >= tau, seconds
    )


Scores = tuple[str, float, float, int]


def expand_exact_groups(pairs: dict[tuple[int, int], Scores]) -> dict[tuple[int, int], Scores]:
    """The pairs a store's edges imply: every copy of an exact group has its group's matches.

    The store links each exact copy to the first document of its group only, and other
    documents match that first document only; a pair of documents is reported when their
    groups are linked (or they are in the same group).
    """
    parent: dict[int, int] = {}

    def root(i: int) -> int:
        while parent.get(i, i) != i:
            i = parent[i]
        return i

    for (i, j), (method, *_) in pairs.items():
        if method == "exact":
            parent[max(root(i), root(j))] = min(root(i), root(j))
    members: dict[int, list[int]] = {}
    for i in {i for pair in pairs for i in pair}:
        members.setdefault(root(i), []).append(i)
    expanded = dict(pairs)
    for group in members.values():
        for a, b in itertools.combinations(group, 2):
            expanded[(min(a, b), max(a, b))] = ("exact", 1.0, 1.0, 0)
    for (i, j), scores in pairs.items():
        if scores[0] != "exact":
            for a in members[root(i)]:
                for b in members[root(j)]:
                    expanded.setdefault((min(a, b), max(a, b)), scores)
    return expanded
