"""The documented rule of clusters under verdicts, computed by brute force with scipy's maximum
flow (none of the store's code): from a store's stored edges and verdicts, the clusters it must
hold.

The rule (docs/reviewing.md): the links are the merging edges, weighted by their combined score,
and the pairs judged duplicates (never cut); each pair judged not duplicates, in the server's
order of the pair's ids, that links still join is parted by the minimum cut whose side of the
pair's first document is smallest; the clusters are what is left joined.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components, maximum_flow
from sqlalchemy import Engine, text

from dedup_store import DedupStore

MERGING = {"exact", "minhash", "simhash"}
_SCALE = 1_000_000


def weight(score: float) -> int:
    """An edge's capacity: its combined score as an integer, at least 1."""
    return 1 + round(max(0.0, min(1.0, score)) * _SCALE)


def model_clusters(
    ids: list[str],
    edges: Iterable[tuple[str, str, float]],
    confirmed: Iterable[tuple[str, str]],
    vetoed: Iterable[tuple[str, str]],
    min_similarity: float = 0.0,
) -> set[frozenset[str]]:
    """The clusters the rule makes of documents ``ids`` (of two or more members); with
    ``min_similarity``, of the links left of at least that score (the cuts made on all)."""
    index = {name: i for i, name in enumerate(ids)}
    capacity: dict[tuple[int, int], int] = {}
    scores: dict[tuple[int, int], float] = {}
    for a, b, score in edges:
        key = (min(index[a], index[b]), max(index[a], index[b]))
        capacity[key] = max(capacity.get(key, 0), weight(score))
        scores[key] = max(scores.get(key, 0.0), score)
    infinite = 1 + sum(capacity.values())
    for a, b in confirmed:
        key = (min(index[a], index[b]), max(index[a], index[b]))
        capacity[key], scores[key] = infinite, 1.0
    for a, b in vetoed:
        source, target = index[a], index[b]
        if not _joined(len(ids), capacity, source, target):
            continue
        graph = _matrix(len(ids), capacity)
        flow = maximum_flow(graph, source, target).flow
        if flow[source].sum() >= infinite:
            continue  # only confirmed pairs join them
        residual = (graph - flow).tocsr()
        residual.data[residual.data <= 0] = 0
        residual.eliminate_zeros()
        side = set(breadth_first_order(residual, source, directed=True)[0].tolist())
        for key in [k for k in capacity if (k[0] in side) != (k[1] in side)]:
            del capacity[key]
    kept = {k: c for k, c in capacity.items() if scores[k] >= min_similarity}
    _, labels = connected_components(_matrix(len(ids), kept), directed=False)
    groups: dict[int, set[str]] = {}
    for name, label in zip(ids, labels.tolist(), strict=True):
        groups.setdefault(label, set()).add(name)
    return {frozenset(g) for g in groups.values() if len(g) > 1}


def _matrix(n: int, capacity: dict[tuple[int, int], int]) -> csr_matrix:
    rows = [a for a, _ in capacity] + [b for _, b in capacity]
    cols = [b for _, b in capacity] + [a for a, _ in capacity]
    data = list(capacity.values()) * 2
    return csr_matrix((np.array(data, dtype=np.int32), (rows, cols)), shape=(n, n))


def _joined(n: int, capacity: dict[tuple[int, int], int], a: int, b: int) -> bool:
    reached = breadth_first_order(_matrix(n, capacity), a, directed=False)[0]
    return b in set(reached.tolist())


def expected_clusters(
    store: DedupStore, engine: Engine, min_similarity: float = 0.0
) -> set[frozenset[str]]:
    """The clusters the rule makes of what ``store`` holds (edges of at least
    ``min_similarity``)."""
    ids = [record["id"] for record in store.export()]
    edges = [(p.a, p.b, p.score) for p in store.pairs() if p.method.value in MERGING]
    with engine.connect() as conn:
        verdicts = conn.execute(
            text(f'SELECT a, b, verdict FROM "{store.schema}".verdicts ORDER BY a, b')
        ).all()
    known = set(ids)
    judged = [(a, b, v) for a, b, v in verdicts if a in known and b in known]
    confirmed = [(a, b) for a, b, v in judged if v == "duplicate"]
    vetoed = [(a, b) for a, b, v in judged if v == "not_duplicate"]
    return model_clusters(ids, edges, confirmed, vetoed, min_similarity)


def choose_verdicts(
    store: DedupStore, seed: int, vetoes: int = 50, confirms: int = 20
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Pairs to judge, drawn with ``seed``: ``vetoes`` pairs inside stored clusters (exact
    copies among them: a third of them where there are enough) and ``confirms`` pairs of
    documents in different clusters."""
    rng = np.random.default_rng(seed)
    exact = sorted((p.a, p.b) for p in store.pairs() if p.method.value == "exact")
    chosen = [exact[i] for i in rng.permutation(len(exact))[: vetoes // 3]]
    clusters = sorted(sorted(c.members) for c in store.clusters(2))
    while len(chosen) < vetoes:
        members = clusters[int(rng.integers(len(clusters)))]
        a, b = (members[int(i)] for i in rng.choice(len(members), 2, replace=False))
        if (min(a, b), max(a, b)) not in {(min(x, y), max(x, y)) for x, y in chosen}:
            chosen.append((a, b))
    ids = sorted(record["id"] for record in store.export())
    confirmed: list[tuple[str, str]] = []
    while len(confirmed) < confirms:
        a, b = (ids[int(i)] for i in rng.choice(len(ids), 2, replace=False))
        if store.cluster(a).cluster_id != store.cluster(b).cluster_id:
            confirmed.append((a, b))
    return chosen, confirmed
