"""Persisted clusters equal the connected components of the stored edges, before and after deletes.

The reference is computed from the ``documents`` and ``edges`` tables alone (a depth-first search
in the test, none of the store's clustering code). The corpus has families of near-duplicates,
drifting chains (each link matches the next, the ends do not match) and bridges (a document
containing two unrelated ones, joining their families), so deleting a bridge or a chain link must
split a cluster, and deleting a cluster's oldest member must hand the cluster another id.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Iterator

import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, Document, FingerprintParams, Method
from tests.db.corpus import (
    Edge,
    PlantedCorpus,
    edge_partition,
    edge_rows,
    exact_firsts,
    implied_pairs,
    label_partition,
    stored_edges,
    stored_labels,
)

CHAIN_LENGTH = 8
EdgeMap = dict[tuple[int, int], tuple[str, int, float]]
Pair = tuple[int, int]


def ordered(a: int, b: int) -> tuple[int, int]:
    return (a, b) if a < b else (b, a)


def build_corpus() -> tuple[list[Document], list[Document]]:
    """``(first, rest)``: three links of chain ``m`` (added first, in order), then the others.

    ``m3`` is the oldest document and its cluster has three members before any other part of
    chain ``m`` (at most three links long) joins it, so it stays the label of the whole chain.
    """
    corpus = PlantedCorpus(seed=5)
    docs = corpus.families(30, close=3, far=1)
    for prefix in ("a", "b", "c", "m"):
        docs += corpus.chain(CHAIN_LENGTH, prefix)
    for prefix in ("x", "y"):
        left, right = corpus.original(), corpus.original()
        docs += corpus.bridge(left, right, prefix)
        for side, body in (("left", left), ("right", right)):
            docs += [Document(f"{prefix}{side}{v}", corpus.edit(body, v)) for v in (1, 2)]
    by_id = {d.id: d for d in docs}
    first = [by_id["m3"], by_id["m2"], by_id["m4"]]
    return first, corpus.shuffled([d for d in docs if d not in first])


@pytest.fixture
def loaded(engine: Engine, schema: str) -> Iterator[DedupStore]:
    """The corpus, in a store whose excerpt matches merge clusters (so bridges join)."""
    with DedupStore(engine, FingerprintParams(containment_merges=True), schema=schema) as store:
        yield _load(store)


def _load(store: DedupStore) -> DedupStore:
    first, rest = build_corpus()
    for doc in first:
        store.add(doc.id, doc.text)
    store.add_many(rest[:40], batch_size=7)
    for doc in rest[40:60]:
        store.add(doc.id, doc.text)
    store.add_many(rest[60:], batch_size=50)
    return store


def check_consistent(store: DedupStore, engine: Engine) -> frozenset[frozenset[str]]:
    """Assert the store's clusters and reports agree with the tables; returns the partition."""
    partition = label_partition(engine, store.schema)
    assert partition == edge_partition(engine, store.schema)
    with engine.connect() as conn:
        labels = stored_labels(conn, store.schema)
        edges = stored_edges(conn, store.schema)
        implied = implied_pairs(exact_firsts(conn, store.schema), edge_rows(conn, store.schema))
    external = {doc_id: ext for doc_id, (ext, _) in labels.items()}
    members_of: dict[int, list[int]] = collections.defaultdict(list)
    for doc_id, (_, cluster_id) in labels.items():
        members_of[cluster_id].append(doc_id)
    for cluster_id, members in members_of.items():
        assert cluster_id in members, f"cluster id {cluster_id} is not one of its members"
    check_cluster_reports(store, external, members_of)
    check_similar(store, external, edges, implied)
    check_stats(store, members_of, edges)
    return partition


def check_cluster_reports(
    store: DedupStore, external: dict[int, str], members_of: dict[int, list[int]]
) -> None:
    expected = {
        cluster_id: [external[d] for d in sorted(members)]
        for cluster_id, members in members_of.items()
    }
    for min_size in (1, 2, 3):
        reported = {c.cluster_id: c for c in store.clusters(min_size)}
        wanted = {c: m for c, m in expected.items() if len(m) >= min_size}
        assert {c: r.members for c, r in reported.items()} == wanted
        for cluster in reported.values():
            assert cluster.representative == external[cluster.cluster_id]
            assert cluster.first_seen <= cluster.last_seen
    for cluster_id, members in expected.items():
        for external_id in members:
            cluster = store.cluster(external_id)
            assert (cluster.cluster_id, cluster.members) == (cluster_id, members)


def check_similar(
    store: DedupStore, external: dict[int, str], edges: EdgeMap, implied: dict[Pair, Edge]
) -> None:
    """``similar`` names every document the stored edges join a document to, through exact
    groups (:func:`implied_pairs`); ``pairs`` lists the stored edges."""
    neighbours: dict[str, set[tuple[str, str]]] = {e: set() for e in external.values()}
    for (a, b), edge in implied.items():
        neighbours[external[a]].add((external[b], edge.method))
        neighbours[external[b]].add((external[a], edge.method))
    for external_id, expected in neighbours.items():
        found = {(m.external_id, m.method.value) for m in store.similar(external_id)}
        assert found == expected, external_id
    pairs = {(p.a, p.b, p.method.value) for p in store.pairs()}
    assert pairs == {(external[a], external[b], e[0]) for (a, b), e in edges.items()}


def check_stats(store: DedupStore, members_of: dict[int, list[int]], edges: EdgeMap) -> None:
    stats = store.stats()
    sizes = [len(m) for m in members_of.values()]
    assert stats.documents == sum(sizes)
    assert stats.clusters == len(sizes)
    assert stats.duplicate_clusters == sum(1 for s in sizes if s > 1)
    assert stats.documents_in_duplicate_clusters == sum(s for s in sizes if s > 1)
    assert stats.edges == len(edges)
    assert stats.edges_by_method == dict(collections.Counter(e[0] for e in edges.values()))


def group_of(partition: frozenset[frozenset[str]], external_id: str) -> frozenset[str]:
    return next(group for group in partition if external_id in group)


def groups_of(partition: frozenset[frozenset[str]], ids: Iterable[str]) -> set[frozenset[str]]:
    return {group_of(partition, i) for i in ids}


def cluster_id_of(store: DedupStore, external_id: str) -> int:
    return store.cluster(external_id).cluster_id


def test_the_corpus_has_chains_and_bridges(loaded: DedupStore, engine: Engine) -> None:
    """The planted structure is there, so the tests below prove what they claim."""
    partition = check_consistent(loaded, engine)
    with engine.connect() as conn:
        labels = stored_labels(conn, loaded.schema)
        edges = stored_edges(conn, loaded.schema)
    index = {ext: doc_id for doc_id, (ext, _) in labels.items()}
    for prefix in ("a", "b", "c", "m"):
        chain = [index[f"{prefix}{i}"] for i in range(CHAIN_LENGTH)]
        links = {ordered(a, b) for a, b in itertools.pairwise(chain)}
        assert {pair for pair in edges if set(pair) <= set(chain)} == links, prefix
        assert len(groups_of(partition, (f"{prefix}{i}" for i in range(CHAIN_LENGTH)))) == 1
    with engine.connect() as conn:
        rows = conn.execute(
            text(f'SELECT id, coalesce(exact_of, id) FROM "{loaded.schema}".documents')
        )
        first_of = {row[0]: row[1] for row in rows}
    for prefix in ("x", "y"):
        bridge = index[f"{prefix}bridge"]
        # an exact copy is linked to the first document of its exact group only
        ends = [first_of[index[f"{prefix}{s}"]] for s in ("left", "right")]
        methods = {edges[ordered(end, bridge)][0] for end in ends}
        assert methods == {Method.CONTAINMENT.value}
        assert len(group_of(partition, f"{prefix}bridge")) == 7
    assert cluster_id_of(loaded, "m0") == index["m3"]
    assert len(partition) < len(labels) / 2


def test_clusters_after_deletes(loaded: DedupStore, engine: Engine) -> None:
    check_consistent(loaded, engine)
    x_before = loaded.cluster("xbridge")

    assert loaded.delete("xbridge") == 1
    partition = check_consistent(loaded, engine)
    split = groups_of(partition, (m for m in x_before.members if m != "xbridge"))
    assert split == {
        frozenset({"xleft", "xleft1", "xleft2"}),
        frozenset({"xright", "xright1", "xright2"}),
    }
    assert cluster_id_of(loaded, "xleft") != cluster_id_of(loaded, "xright")

    m_label = cluster_id_of(loaded, "m0")
    assert loaded.cluster("m0").representative == "m3"
    assert loaded.delete(["m3"]) == 1
    partition = check_consistent(loaded, engine)
    m_groups = groups_of(partition, (f"m{i}" for i in range(CHAIN_LENGTH) if i != 3))
    assert m_groups == {frozenset({"m0", "m1", "m2"}), frozenset({"m4", "m5", "m6", "m7"})}
    assert m_label not in {cluster_id_of(loaded, f"m{i}") for i in (0, 7)}

    family = loaded.cluster("f0-0")
    assert loaded.delete(family.representative) == 1
    partition = check_consistent(loaded, engine)
    rest = set(family.members) - {family.representative}
    assert groups_of(partition, rest) == {frozenset(rest)}
    assert cluster_id_of(loaded, next(iter(rest))) != family.cluster_id

    victims = ["a3", "b1", "b5", "yleft", "f1-0", "f2-1", "f3-2", "f4-3", "f5-4"]
    assert loaded.delete(victims) == len(victims)
    partition = check_consistent(loaded, engine)
    assert len(groups_of(partition, ("b0", "b3", "b7"))) == 3


def test_merges_after_splits(loaded: DedupStore, engine: Engine) -> None:
    """Adding a new bridge after a split joins the parts again, under one of their ids."""
    bridge = next(d for d in build_corpus()[1] if d.id == "ybridge")
    loaded.delete("ybridge")
    left, right = cluster_id_of(loaded, "yleft"), cluster_id_of(loaded, "yright")
    assert left != right
    check_consistent(loaded, engine)
    loaded.add("ybridge-again", bridge.text)
    partition = check_consistent(loaded, engine)
    assert len(group_of(partition, "ybridge-again")) == 7
    assert cluster_id_of(loaded, "yleft") in {left, right}
