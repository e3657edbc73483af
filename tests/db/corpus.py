"""Seeded documents with planted near-duplicates, and brute-force references to check a store by.

Documents come from :class:`benchmarks.synthetic.Corpus` (real English words drawn with their
observed frequencies). Near-duplicates are copies with a given number of words replaced, deleted
or inserted, so a family of variants lands at small SimHash distances (mostly 0..3 for one or two
edited words of a few hundred, further for more edits). The references read a store's tables
directly and recompute what the store should hold without any of its code: every SimHash pair
within a distance (numpy, all pairs), the connected components of the stored edges, and every
pair the stored edges imply through exact groups.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Engine, text

from benchmarks.synthetic import Corpus
from dedup_store import Document, FingerprintParams, Method

U64 = npt.NDArray[np.uint64]
Partition = frozenset[frozenset[str]]
METHOD_ORDER = [m.value for m in Method]
_POPCOUNT8 = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


class PlantedCorpus:
    """A seeded generator of documents and of near-duplicate variants of them.

    Args:
        seed: seed of every random choice (same seed, same documents).
        words: range ``(low, high)`` of the number of words of an original document.
    """

    def __init__(self, seed: int, words: tuple[int, int] = (250, 400)) -> None:
        self.source = Corpus(seed)
        self.rng = self.source.rng
        self.words = words

    def original(self) -> str:
        """A new document unrelated to the others."""
        low, high = self.words
        return self.source.document(int(self.rng.integers(low, high + 1)))

    def edit(self, text: str, edits: int) -> str:
        """A copy of ``text`` with ``edits`` words replaced, deleted or inserted."""
        return self.source.near_duplicate(text, edit_rate=edits / len(text.split()))

    def families(
        self, count: int, close: int = 3, far: int = 1, prefix: str = "f"
    ) -> list[Document]:
        """``count`` families, shuffled together.

        Each family is an original (id ``{prefix}{n}-0``), ``close`` variants with one or two
        edited words and ``far`` variants with three to six edited words.
        """
        docs: list[Document] = []
        for n in range(count):
            base = self.original()
            docs.append(Document(f"{prefix}{n}-0", base))
            for v in range(1, close + far + 1):
                low, high = (1, 2) if v <= close else (3, 6)
                edits = int(self.rng.integers(low, high + 1))
                docs.append(Document(f"{prefix}{n}-{v}", self.edit(base, edits)))
        return self.shuffled(docs)

    def chain(self, length: int, prefix: str, window: int = 400, step: int = 50) -> list[Document]:
        """A chain of ``length`` windows over one long text, ``step`` words apart.

        Link ``i`` (id ``{prefix}{i}``) is words ``[i * step, i * step + window)``, so neighbours
        share ``1 - step / window`` of their words (a containment match at the defaults) and
        links two apart share less (no match): the chain is a path.
        """
        words = self.source.document(window + (length - 1) * step).split()
        return [
            Document(f"{prefix}{i}", " ".join(words[i * step : i * step + window]))
            for i in range(length)
        ]

    def bridge(self, left: str, right: str, prefix: str) -> list[Document]:
        """Two unrelated documents and a third holding both (contained in it, so it joins them).

        Ids ``{prefix}left``, ``{prefix}bridge``, ``{prefix}right``.
        """
        return [
            Document(f"{prefix}left", left),
            Document(f"{prefix}bridge", f"{left}\n\n{right}"),
            Document(f"{prefix}right", right),
        ]

    def shuffled(self, docs: Sequence[Document]) -> list[Document]:
        """``docs`` in a seeded random order."""
        order = self.rng.permutation(len(docs))
        return [docs[i] for i in order]


# -- brute-force references -----------------------------------------------------------------


def popcount(values: U64) -> npt.NDArray[np.int64]:
    """Number of set bits of each ``uint64`` (any shape)."""
    as_bytes = np.ascontiguousarray(values).view(np.uint8).reshape(*values.shape, 8)
    counts: npt.NDArray[np.int64] = _POPCOUNT8[as_bytes].sum(axis=-1, dtype=np.int64)
    return counts


def hamming(a: int, b: int) -> int:
    """Hamming distance of two 64-bit values (signed or unsigned)."""
    return ((a ^ b) & 0xFFFFFFFFFFFFFFFF).bit_count()


def pairs_within(
    ids: Sequence[int], simhashes: U64, k: int, chunk: int = 512
) -> dict[tuple[int, int], int]:
    """Every pair ``(smaller id, larger id)`` whose SimHashes differ in at most ``k`` bits.

    A full scan: all ``n * (n - 1) / 2`` distances, computed in numpy a block of rows at a time.
    """
    id_array = np.asarray(ids, dtype=np.int64)
    found: dict[tuple[int, int], int] = {}
    for start in range(0, len(simhashes), chunk):
        rows = simhashes[start : start + chunk]
        distances = popcount(rows[:, None] ^ simhashes[None, :])
        i, j = np.nonzero(distances <= k)
        upper = j > i + start
        for r, c in zip(i[upper].tolist(), j[upper].tolist(), strict=True):
            a, b = int(id_array[start + r]), int(id_array[c])
            found[(min(a, b), max(a, b))] = int(distances[r, c])
    return found


def stored_simhashes(conn: Connection, schema: str) -> tuple[list[int], list[str], U64]:
    """``(ids, external ids, simhashes as uint64)`` of every stored document, by id."""
    rows = conn.execute(
        text(f'SELECT id, external_id, simhash FROM "{schema}".documents ORDER BY id')
    ).all()
    simhashes = np.array([r[2] for r in rows], dtype=np.int64).view(np.uint64)
    return [r[0] for r in rows], [r[1] for r in rows], simhashes


def stored_edges(conn: Connection, schema: str) -> dict[tuple[int, int], tuple[str, int, float]]:
    """``{(a, b): (method, hamming, jaccard)}`` of every stored edge."""
    rows = conn.execute(text(f'SELECT a, b, method, hamming, jaccard FROM "{schema}".edges'))
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}


def stored_labels(conn: Connection, schema: str) -> dict[int, tuple[str, int]]:
    """``{id: (external id, cluster id)}`` of every stored document."""
    rows = conn.execute(text(f'SELECT id, external_id, cluster_id FROM "{schema}".documents'))
    return {r[0]: (r[1], r[2]) for r in rows}


def exact_firsts(conn: Connection, schema: str) -> dict[int, int]:
    """``{id: id of the first document of its exact group}`` (itself for a first document).

    An exact copy is linked to its group's first document only, and other documents match
    that first document only: pairs are compared between groups.
    """
    rows = conn.execute(text(f'SELECT id, coalesce(exact_of, id) FROM "{schema}".documents'))
    return {row[0]: row[1] for row in rows}


@dataclasses.dataclass(frozen=True)
class Edge:
    """A stored edge, as read from the ``edges`` table."""

    a: int
    b: int
    method: str
    jaccard: float
    containment: float
    hamming: int
    meta_score: float | None
    found_at: dt.datetime

    @property
    def rank(self) -> tuple[int, float, int, int]:
        """Best first: method, then the Jaccard (the score of a store without metadata sets),
        then the ids."""
        return (METHOD_ORDER.index(self.method), -self.jaccard, self.a, self.b)


def edge_rows(conn: Connection, schema: str) -> list[Edge]:
    """Every stored edge with all its scores."""
    rows = conn.execute(
        text(
            "SELECT a, b, method, jaccard, containment, hamming, meta_score, found_at "
            f'FROM "{schema}".edges'
        )
    )
    return [Edge(*row) for row in rows]


def implied_pairs(first: dict[int, int], edges: Iterable[Edge]) -> dict[tuple[int, int], Edge]:
    """``{(older id, newer id): edge}``: every pair of documents whose exact groups (``first``:
    :func:`exact_firsts`) a stored edge joins, or inside a group with an edge, with the best
    edge between the two groups."""
    members: dict[int, list[int]] = defaultdict(list)
    for doc_id, group in first.items():
        members[group].append(doc_id)
    best: dict[tuple[int, int], Edge] = {}
    for edge in edges:
        g1, g2 = sorted((first[edge.a], first[edge.b]))
        if (g1, g2) not in best or edge.rank < best[(g1, g2)].rank:
            best[(g1, g2)] = edge
    pairs: dict[tuple[int, int], Edge] = {}
    for (g1, g2), edge in best.items():
        for x, y in itertools.product(members[g1], members[g2]):
            if x != y:
                pairs[(min(x, y), max(x, y))] = edge
    return pairs


def between_groups(pairs: Iterable[tuple[int, int]], first: dict[int, int]) -> set[tuple[int, int]]:
    """``pairs`` as pairs of exact groups (by first document), without pairs inside a group."""
    grouped = ((first[a], first[b]) for a, b in pairs)
    return {(min(a, b), max(a, b)) for a, b in grouped if a != b}


def components(nodes: Iterable[int], edges: Iterable[tuple[int, int]]) -> list[set[int]]:
    """Connected components of an undirected graph, by depth-first search."""
    neighbours: dict[int, list[int]] = {n: [] for n in nodes}
    for a, b in edges:
        neighbours[a].append(b)
        neighbours[b].append(a)
    seen: set[int] = set()
    out: list[set[int]] = []
    for start in neighbours:
        if start in seen:
            continue
        component = set(_reachable(start, neighbours))
        seen |= component
        out.append(component)
    return out


def _reachable(start: int, neighbours: dict[int, list[int]]) -> Iterator[int]:
    stack, visited = [start], {start}
    while stack:
        node = stack.pop()
        yield node
        for other in neighbours[node]:
            if other not in visited:
                visited.add(other)
                stack.append(other)


def edge_partition(engine: Engine, schema: str) -> Partition:
    """The clusters the stored edges of merging methods imply, as sets of external ids.

    Excerpt (containment) edges merge clusters only in a store whose params say so.
    """
    with engine.connect() as conn:
        labels = stored_labels(conn, schema)
        edges = stored_edges(conn, schema)
        recorded = conn.execute(text(f'SELECT params FROM "{schema}".params')).scalar_one()
    if not FingerprintParams.from_stored(recorded).containment_merges:
        edges = {pair: edge for pair, edge in edges.items() if edge[0] != "containment"}
    return frozenset(frozenset(labels[d][0] for d in group) for group in components(labels, edges))


def label_partition(engine: Engine, schema: str) -> Partition:
    """The clusters the stored ``cluster_id`` column says, as sets of external ids."""
    with engine.connect() as conn:
        labels = stored_labels(conn, schema)
    groups: dict[int, set[str]] = {}
    for external_id, cluster_id in labels.values():
        groups.setdefault(cluster_id, set()).add(external_id)
    return frozenset(frozenset(group) for group in groups.values())
