"""Clusters that honour reviewers' verdicts: components of the match graph after minimum cuts.

The store's clusters are a pure function of its links and its ``not_duplicate`` verdicts
(:func:`separate`):

1. The links are the merging match edges, each weighted by its similarity, and the pairs judged
   ``duplicate``, which cannot be cut.
2. The vetoed pairs (judged ``not_duplicate``) are taken in a fixed order (the server's order of
   their ids). A pair still joined is separated by a minimum cut between its two documents: the
   set of links of least total similarity whose removal parts them, and of those cuts the one
   that leaves the first document the fewest companions (the source side reachable in the
   residual graph of a maximum flow; it does not depend on how the flow was found). A pair
   joined only through links that cannot be cut stays joined (the store refuses the verdicts
   that would make one).
3. The clusters are the connected components of what is left.

Cutting links never joins anything, so a pair separated stays separated as later pairs are cut,
and a document that links into one cluster only changes no cut (every path it adds stays on one
side of each): only a write that joins two clusters of a family of clusters parted by cuts, or a
vetoed pair, asks for the family to be computed again.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque
from collections.abc import Iterable, Sequence

#: Capacity of a link of similarity 1 (similarities are scaled to integers, so that flows are
#: exact): a cut of one such link outweighs any cut of fewer than a million links of 0.
CAPACITY_SCALE = 1_000_000

#: A link: two document ids and its capacity (``None``: it cannot be cut).
Link = tuple[int, int, int | None]


def capacity(similarity: float) -> int:
    """The capacity of a link of ``similarity`` (0-1): positive, so every link counts."""
    return 1 + round(max(0.0, min(1.0, similarity)) * CAPACITY_SCALE)


@dataclasses.dataclass
class Separation:
    """What :func:`separate` found.

    Attributes:
        components: the clusters, each sorted, in order of their smallest document.
        cuts: for each vetoed pair that had to be cut, the links it cut (``(a, b)``, ``a < b``,
            sorted).
        unseparated: vetoed pairs joined only through links that cannot be cut.
    """

    components: list[list[int]]
    cuts: dict[tuple[int, int], list[tuple[int, int]]]
    unseparated: list[tuple[int, int]]


def separate(
    nodes: Iterable[int], links: Iterable[Link], vetoes: Sequence[tuple[int, int]]
) -> Separation:
    """The clusters of ``nodes`` joined by ``links`` once each pair of ``vetoes`` (in order) is
    parted by a minimum cut (see the module's rule). Parallel links count once, with the
    largest capacity."""
    graph = _Graph(nodes, links)
    cuts: dict[tuple[int, int], list[tuple[int, int]]] = {}
    unseparated: list[tuple[int, int]] = []
    for source, target in vetoes:
        if source == target or not graph.joined(source, target):
            continue
        cut = graph.min_cut(source, target)
        if cut is None:
            unseparated.append((source, target))
            continue
        graph.remove(cut)
        cuts[(source, target)] = cut
    return Separation(graph.components(), cuts, unseparated)


class _Graph:
    """An undirected graph of integer capacities (``None``: infinite)."""

    def __init__(self, nodes: Iterable[int], links: Iterable[Link]) -> None:
        self.adjacent: dict[int, dict[int, int | None]] = {node: {} for node in nodes}
        for a, b, cap in links:
            if a == b or a not in self.adjacent or b not in self.adjacent:
                continue
            old = self.adjacent[a].get(b, 0)
            merged = None if cap is None or old is None else max(cap, old)
            self.adjacent[a][b] = self.adjacent[b][a] = merged

    def reachable(self, start: int) -> list[int]:
        """The nodes joined to ``start``, in order of discovery."""
        seen, queue = {start}, deque([start])
        while queue:
            for other in self.adjacent[queue.popleft()]:
                if other not in seen:
                    seen.add(other)
                    queue.append(other)
        return list(seen)

    def joined(self, a: int, b: int) -> bool:
        """Whether ``a`` and ``b`` are both nodes and joined."""
        return a in self.adjacent and b in self.adjacent and b in set(self.reachable(a))

    def min_cut(self, source: int, target: int) -> list[tuple[int, int]] | None:
        """The links of the minimum cut between joined ``source`` and ``target`` whose source
        side is smallest; ``None`` when only links that cannot be cut join them."""
        members = self.reachable(source)
        infinite = 1 + sum(c for m in members for c in self.adjacent[m].values() if c is not None)
        flow = _Flow(
            {m: {o: infinite if c is None else c for o, c in self.adjacent[m].items()}
             for m in members}
        )  # fmt: skip
        if flow.max_flow(source, target) >= infinite:
            return None
        side = flow.source_side(source)
        return sorted(
            (min(u, v), max(u, v)) for u in side for v in self.adjacent[u] if v not in side
        )

    def remove(self, cut: Iterable[tuple[int, int]]) -> None:
        """Take the links ``cut`` out."""
        for a, b in cut:
            self.adjacent[a].pop(b, None)
            self.adjacent[b].pop(a, None)

    def components(self) -> list[list[int]]:
        """The connected components, each sorted, in order of their smallest node."""
        seen: set[int] = set()
        out = []
        for node in self.adjacent:
            if node not in seen:
                component = self.reachable(node)
                seen.update(component)
                out.append(sorted(component))
        return sorted(out, key=lambda c: c[0])


class _Flow:
    """Maximum flow on an undirected graph (Dinic's algorithm; each link is two arcs that
    share its capacity as residuals of each other)."""

    def __init__(self, capacities: dict[int, dict[int, int]]) -> None:
        self.residual = {node: dict(arcs) for node, arcs in capacities.items()}

    def max_flow(self, source: int, target: int) -> int:
        """The value of a maximum flow from ``source`` to ``target`` (residuals kept)."""
        total = 0
        while True:
            level = self._levels(source)
            if target not in level:
                return total
            pointers = {node: list(arcs) for node, arcs in self.residual.items()}
            while pushed := self._push(source, target, level, pointers):
                total += pushed

    def source_side(self, source: int) -> set[int]:
        """The nodes reachable from ``source`` through arcs with residual capacity."""
        return set(self._levels(source))

    def _levels(self, source: int) -> dict[int, int]:
        level, queue = {source: 0}, deque([source])
        while queue:
            node = queue.popleft()
            for other, left in self.residual[node].items():
                if left > 0 and other not in level:
                    level[other] = level[node] + 1
                    queue.append(other)
        return level

    def _push(
        self, source: int, target: int, level: dict[int, int], pointers: dict[int, list[int]]
    ) -> int:
        """Push one augmenting path of the level graph (iteratively); its amount, or 0."""
        path: list[int] = [source]
        while path:
            node = path[-1]
            if node == target:
                amount = min(self.residual[u][v] for u, v in itertools.pairwise(path))
                for u, v in itertools.pairwise(path):
                    self.residual[u][v] -= amount
                    self.residual[v][u] += amount
                return amount
            arcs = pointers[node]
            while arcs:
                other = arcs[-1]
                if self.residual[node][other] > 0 and level.get(other) == level[node] + 1:
                    path.append(other)
                    break
                arcs.pop()
            else:
                path.pop()
                if path:
                    pointers[path[-1]].pop()
        return 0
