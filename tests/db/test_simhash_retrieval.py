"""SimHash retrieval finds exactly the pairs a full scan finds, for 4, 5 and 7 blocks.

Thousands of documents of a few hundred words, in families of variants one or two words apart
(SimHash distances 0..3) and a few more apart (4..6 and beyond), are added in batches. A full
scan of the stored SimHashes (every pair, in numpy) is the reference: every pair within distance
``k`` must be a stored edge, and every edge the store calls ``simhash`` must be within ``k``.

In the ``simhash-only`` configurations the other indexes cannot stand in for the block keys:
the Jaccard threshold is 1 (one band made of the whole signature, which only identical
signatures share) and the excerpt index is off, so a pair at distance 1..3 becomes an edge only
if its block keys retrieved it.
"""

from __future__ import annotations

import collections
import dataclasses
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document, FingerprintParams, Method, fingerprint
from tests.db.corpus import (
    PlantedCorpus,
    between_groups,
    exact_firsts,
    hamming,
    pairs_within,
    stored_edges,
    stored_simhashes,
)

FAMILIES = 600  # of 5 documents: 3,000 documents
BATCH = 250
CHECKS = 40
# retrieval is what is tested here: pairs within k are edges whatever their Jaccard
CONFIGS = {
    "blocks4-simhash-only": FingerprintParams(
        simhash_blocks=4, simhash_k=3, threshold=1.0, containment=0.0, simhash_min_jaccard=0.0
    ),
    "blocks5-simhash-only": FingerprintParams(
        simhash_blocks=5, simhash_k=3, threshold=1.0, containment=0.0, simhash_min_jaccard=0.0
    ),
    # what stores of long articles are made with (docs/parameters.md)
    "blocks7-simhash-only": FingerprintParams(
        simhash_blocks=7, simhash_k=3, threshold=1.0, containment=0.0, simhash_min_jaccard=0.0
    ),
    "blocks4-all-indexes": FingerprintParams(
        simhash_blocks=4, simhash_k=3, simhash_min_jaccard=0.0
    ),
}
SIMHASH_ONLY = [name for name in CONFIGS if name.endswith("simhash-only")]


@pytest.fixture(scope="module")
def corpus() -> PlantedCorpus:
    return PlantedCorpus(seed=20240603)


@pytest.fixture(scope="module")
def documents(corpus: PlantedCorpus) -> list[Document]:
    return corpus.families(FAMILIES)


@pytest.fixture(scope="module", params=list(CONFIGS), ids=list(CONFIGS))
def loaded(
    request: pytest.FixtureRequest, engine: Engine, documents: list[Document]
) -> Iterator[DedupStore]:
    """A store in its own schema holding ``documents``, added ``BATCH`` at a time."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        with DedupStore(engine, CONFIGS[request.param], schema=schema) as store:
            summary = store.ingest(documents, batch_size=BATCH)
            assert summary.documents == len(documents) and summary.errors == 0
            yield store
    finally:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))


def test_every_pair_of_the_full_scan_is_an_edge(
    loaded: DedupStore, engine: Engine, documents: list[Document]
) -> None:
    k = loaded.params.simhash_k
    with engine.connect() as conn:
        ids, _, simhashes = stored_simhashes(conn, loaded.schema)
        edges = stored_edges(conn, loaded.schema)
        first = exact_firsts(conn, loaded.schema)
    assert len(ids) == len(documents)
    truth = pairs_within(ids, simhashes, k)
    missing = sorted(between_groups(truth, first) - between_groups(edges, first))
    assert not missing, f"{len(missing)} pairs within distance {k} are not edges: {missing[:10]}"
    simhash_of = dict(zip(ids, simhashes.view(np.int64).tolist(), strict=True))
    for (a, b), (method, stored_distance, _) in edges.items():
        distance = hamming(simhash_of[a], simhash_of[b])
        assert stored_distance == distance, (a, b, method)
        if method == Method.SIMHASH:
            assert distance <= k, (a, b)


def test_the_corpus_exercises_every_distance_and_both_kinds_of_batch(
    loaded: DedupStore, engine: Engine, documents: list[Document]
) -> None:
    with engine.connect() as conn:
        ids, external_ids, simhashes = stored_simhashes(conn, loaded.schema)
    near = pairs_within(ids, simhashes, 6)
    by_distance = collections.Counter(near.values())
    assert min(by_distance[d] for d in (0, 1, 2, 3)) >= 300, by_distance
    assert sum(by_distance[d] for d in (4, 5, 6)) >= 200, by_distance
    batch_of_id = {d.id: i // BATCH for i, d in enumerate(documents)}
    batch_of = {i: batch_of_id[e] for i, e in zip(ids, external_ids, strict=True)}
    within_k = [pair for pair, d in near.items() if d <= loaded.params.simhash_k]
    same_batch = sum(batch_of[a] == batch_of[b] for a, b in within_k)
    assert same_batch >= 200 and len(within_k) - same_batch >= 2000


@pytest.mark.parametrize("loaded", SIMHASH_ONLY, indirect=True)
def test_simhash_only_edges_are_exactly_the_full_scan(loaded: DedupStore, engine: Engine) -> None:
    """Without bands and excerpts to help, the edges within ``k`` are the full scan's pairs."""
    params = loaded.params
    with engine.connect() as conn:
        ids, _, simhashes = stored_simhashes(conn, loaded.schema)
        edges = stored_edges(conn, loaded.schema)
        first = exact_firsts(conn, loaded.schema)
    truth = pairs_within(ids, simhashes, 6)
    within = {pair for pair, d in truth.items() if d <= params.simhash_k}
    found = [pair for pair, e in edges.items() if e[1] <= params.simhash_k]
    assert between_groups(found, first) == between_groups(within, first)
    assert all(e[0] == Method.EXACT for pair, e in edges.items() if first[pair[1]] == pair[0])
    beyond = {pair: e for pair, e in edges.items() if e[1] > params.simhash_k}
    assert all(e[0] == Method.MINHASH and e[2] == 1.0 for e in beyond.values()), beyond
    methods = collections.Counter(e[0] for pair, e in edges.items() if pair in within)
    assert methods[Method.SIMHASH] >= 1000, methods
    assert not any(pair in edges for pair, d in truth.items() if 4 <= d <= 6 and pair not in beyond)
    assert sum(e[0] == Method.EXACT for e in edges.values()) == sum(
        f != i for i, f in first.items()
    ), "one edge per exact copy"


@pytest.mark.parametrize("blocks", [5, 7])
def test_copyright_files_within_k_are_exactly_the_full_scan(
    engine: Engine, schema: str, blocks: int
) -> None:
    """On real templated text (every package's copyright file: long texts whose SimHashes lean
    the same way, and families of licence boilerplate), bulk loaded and then added in batches,
    the block keys of 5 and of 7 blocks find every pair a full scan finds within ``k``, and
    nothing more."""
    documents = [Document(d.id, d.text) for d in copyright_docs()]
    params = dataclasses.replace(CONFIGS["blocks5-simhash-only"], simhash_blocks=blocks)
    with DedupStore(engine, params, schema=schema) as store:
        assert store.ingest(documents[:300], bulk=True).errors == 0
        assert store.ingest(documents[300:], batch_size=100, bulk=False).errors == 0
    with engine.connect() as conn:
        ids, _, simhashes = stored_simhashes(conn, schema)
        edges = stored_edges(conn, schema)
        first = exact_firsts(conn, schema)
    assert len(ids) == len(documents)
    within = between_groups(pairs_within(ids, simhashes, params.simhash_k), first)
    found = [pair for pair, e in edges.items() if e[1] <= params.simhash_k]
    assert between_groups(found, first) == within
    assert len(within) >= 30, "pairs within k between distinct texts"


def test_check_returns_every_stored_document_within_k(
    loaded: DedupStore, engine: Engine, documents: list[Document], corpus: PlantedCorpus
) -> None:
    """``check`` of stored texts and of unseen one-word edits of them, against a full scan."""
    k = loaded.params.simhash_k
    with engine.connect() as conn:
        ids, external_ids, simhashes = stored_simhashes(conn, loaded.schema)
        first = exact_firsts(conn, loaded.schema)
    external_of = dict(zip(ids, external_ids, strict=True))
    group_of = {external_of[i]: external_of[f] for i, f in first.items()}
    stored = simhashes.view(np.int64).tolist()
    rng = np.random.default_rng(7)
    picks = [documents[i] for i in rng.choice(len(documents), CHECKS, replace=False)]
    queries = [d.text for d in picks] + [corpus.edit(d.text, 1) for d in picks]
    matched_within = 0
    for query in queries:
        simhash = fingerprint(query, loaded.params).simhash
        distance = {e: hamming(simhash, s) for e, s in zip(external_ids, stored, strict=True)}
        expected = {group_of[e] for e, d in distance.items() if d <= k}
        result = loaded.check(query)
        found = {m.external_id: m for m in result.matches}
        assert expected <= set(found), sorted(expected - set(found))
        assert all(group_of[e] == e for e in found), "check returns first documents only"
        for match in found.values():
            assert match.hamming == distance[match.external_id]
            if match.method is Method.SIMHASH:
                assert match.hamming <= k
        matched_within += len(expected)
    assert matched_within >= 3 * len(queries)
