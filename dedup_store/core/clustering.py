"""Union-find over match edges (pure; the store persists the labels it computes)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class UnionFind(Generic[K]):
    """Disjoint sets with path halving and union by size."""

    def __init__(self, items: Iterable[K] = ()) -> None:
        self.parent: dict[K, K] = {}
        self.size: dict[K, int] = {}
        for item in items:
            self.add(item)

    def add(self, item: K, size: int = 1) -> None:
        """Add ``item`` as its own set (of weight ``size``) if it is new."""
        if item not in self.parent:
            self.parent[item] = item
            self.size[item] = size

    def find(self, item: K) -> K:
        """The root of ``item``'s set."""
        parent = self.parent
        while parent[item] != item:
            parent[item] = parent[parent[item]]
            item = parent[item]
        return item

    def union(self, a: K, b: K) -> K:
        """Merge the sets of ``a`` and ``b``; returns the new root."""
        self.add(a)
        self.add(b)
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return ra
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra
        self.parent[rb] = ra
        self.size[ra] += self.size[rb]
        return ra

    def groups(self) -> dict[K, list[K]]:
        """Every set, keyed by its root."""
        out: dict[K, list[K]] = {}
        for item in self.parent:
            out.setdefault(self.find(item), []).append(item)
        return out


#: The label a group of merged clusters keeps, as ``(field, descending)`` in order of precedence:
#: the largest cluster's (``size``), ties to the smallest ``label`` (the oldest). The batch
#: writers apply it through :func:`keeper_rank`, the single add's statement through an
#: ``ORDER BY`` made from it (:func:`dedup_store.db.write.single.keeper_order`), a Spark load
#: through a struct made from it (:func:`dedup_store.spark.components.keeper_rank`).
KEEPER_ORDER: tuple[tuple[str, bool], ...] = (("size", True), ("label", False))


def keeper_rank(label: int, size: int) -> tuple[int, ...]:
    """The sort key of a cluster by :data:`KEEPER_ORDER`: the keeper of a group is its least."""
    fields = {"size": size, "label": label}
    return tuple(-fields[name] if descending else fields[name] for name, descending in KEEPER_ORDER)


def merge_labels(
    edges: Iterable[tuple[int, int]], label_of: Mapping[int, int], size_of: Mapping[int, int]
) -> dict[int, int]:
    """Relabelling that merges the clusters joined by ``edges``.

    Args:
        edges: pairs of document ids.
        label_of: current cluster label of every document in ``edges``.
        size_of: current size of every label in ``label_of``.

    Returns:
        ``{old_label: new_label}`` for every label that changes. Within each merged group the
        largest cluster keeps its label (ties: the smallest label, the oldest), so only the
        smaller clusters are relabelled (:data:`KEEPER_ORDER`).
    """
    sets: UnionFind[int] = UnionFind()
    for label in set(label_of.values()):
        sets.add(label, size_of[label])
    for a, b in edges:
        sets.union(label_of[a], label_of[b])
    mapping: dict[int, int] = {}
    for members in sets.groups().values():
        keeper = min(members, key=lambda label: keeper_rank(label, size_of[label]))
        mapping.update({label: keeper for label in members if label != keeper})
    return mapping


def components(nodes: Iterable[int], edges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Connected components of a graph, each sorted, in order of their smallest node."""
    sets: UnionFind[int] = UnionFind(nodes)
    for a, b in edges:
        sets.union(a, b)
    return sorted((sorted(group) for group in sets.groups().values()), key=lambda g: g[0])
