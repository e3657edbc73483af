"""What merges clusters: exact copies cost one row each, excerpts are reported, not merged."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, FingerprintParams, Method, Status
from tests.db.corpus import PlantedCorpus


@pytest.fixture(scope="module")
def corpus() -> PlantedCorpus:
    return PlantedCorpus(seed=11)


def _count(engine: Engine, schema: str, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f'SELECT count(*) FROM "{schema}".{table}')).scalar_one())


def test_an_excerpt_is_reported_with_its_direction_and_not_merged(
    store: DedupStore, corpus: PlantedCorpus
) -> None:
    left, right = corpus.original(), corpus.original()
    store.add("left", left)
    store.add("right", right)
    both = store.add("both", f"{left}\n\n{right}")
    assert both.status is Status.EXCERPT
    assert {(m.external_id, m.method) for m in both.matches} == {
        ("left", Method.CONTAINMENT),
        ("right", Method.CONTAINMENT),
    }
    assert list(store.clusters()) == []  # an excerpt does not merge clusters
    assert {(p.a, p.b, p.excerpt) for p in store.pairs()} == {
        ("left", "both", "left"),
        ("right", "both", "right"),
    }
    assert store.check(f"{left}\n\n{right}").cluster_id == both.cluster_id


def test_excerpts_merge_when_the_store_says_so(
    engine: Engine, schema: str, corpus: PlantedCorpus
) -> None:
    left, right = corpus.original(), corpus.original()
    with DedupStore(engine, FingerprintParams(containment_merges=True), schema=schema) as store:
        store.add_many([("left", left), ("right", right)])
        assert store.add("both", f"{left}\n\n{right}").status is Status.NEAR_DUPLICATE
        assert [c.members for c in store.clusters()] == [["left", "right", "both"]]


@pytest.mark.parametrize("single", [True, False], ids=["add", "add_many"])
def test_exact_copies_cost_one_row_each(
    engine: Engine, store: DedupStore, corpus: PlantedCorpus, single: bool
) -> None:
    original = corpus.original()
    copies = 60
    if single:
        results = [store.add(f"c{i}", original) for i in range(copies)]
    else:
        results = store.add_many([(f"c{i}", original) for i in range(copies)], batch_size=25)
    assert [r.status for r in results[1:]] == [Status.EXACT_DUPLICATE] * (copies - 1)
    assert all([m.external_id for m in r.matches] == ["c0"] for r in results[1:])
    schema = store.schema
    assert _count(engine, schema, "edges") == copies - 1
    with engine.connect() as conn:
        owners = conn.execute(text(f'SELECT DISTINCT doc_id FROM "{schema}".sample_keys')).all()
    assert len(owners) == 1
    near = store.add("near", corpus.edit(original, 2))
    assert near.status is Status.NEAR_DUPLICATE
    assert [m.external_id for m in near.matches] == ["c0"]
    (cluster,) = store.clusters()
    assert cluster.size == copies + 1
    assert {(p.a, p.b) for p in store.pairs() if p.method is Method.EXACT} == {
        ("c0", f"c{i}") for i in range(1, copies)
    }


def test_deleting_the_first_copy_hands_its_place_to_the_next(
    engine: Engine, store: DedupStore, corpus: PlantedCorpus
) -> None:
    original = corpus.original()
    near_text = corpus.edit(original, 2)
    store.add_many([("c0", original), ("c1", original), ("c2", original)])
    store.add("near", near_text)
    store.add("other", corpus.original())
    store.delete("c0")
    assert {(p.a, p.b) for p in store.pairs()} == {("c1", "c2"), ("c1", "near")}
    assert [m.external_id for m in store.similar("near")] == ["c1", "c2"]
    assert [m.external_id for m in store.similar("c2")] == ["c1", "near"]
    assert [c.members for c in store.clusters()] == [["c1", "c2", "near"]]
    checked = store.check(original)
    assert checked.status is Status.EXACT_DUPLICATE
    assert checked.matches[0].external_id == "c1"
    assert store.add("c3", original).matches[0].external_id == "c1"
    store.delete(["c1", "c2"])
    assert [m.external_id for m in store.similar("c3")] == ["near"]
    assert store.check(near_text).matches[0].external_id == "near"
    assert [sorted(c.members) for c in store.clusters()] == [["c3", "near"]]


def test_a_paragraph_in_many_documents_is_boilerplate_not_an_excerpt(
    engine: Engine, schema: str, corpus: PlantedCorpus
) -> None:
    notice = corpus.original()
    docs = [(f"d{i}", f"{corpus.original()}\n\n{notice}") for i in range(60)]
    with DedupStore(engine, schema=schema) as store:
        store.add_many(docs, batch_size=25)
        assert store.check(notice).matches == []
        bare = store.add("notice", notice)
        assert bare.status is Status.NEW and bare.matches == []
    unbounded = FingerprintParams(hot_key_limit=0)
    with DedupStore(engine, unbounded, schema=schema + "_all") as store:
        try:
            store.add_many(docs, batch_size=25)
            found = store.add("notice", notice)
            assert {m.method for m in found.matches} == {Method.CONTAINMENT}
            assert len(found.matches) == 60
        finally:
            with engine.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}_all" CASCADE'))


def test_long_and_short_documents_score_alike_in_every_path(
    engine: Engine, store: DedupStore, corpus: PlantedCorpus
) -> None:
    parts = [corpus.original() for _ in range(16)]
    long_text = "\n\n".join(parts)
    short_text = parts[4]
    [_, short] = store.add_many([("long", long_text), ("short", short_text)])
    (batch_match,) = short.matches
    (checked,) = [m for m in store.check(short_text).matches if m.external_id == "long"]
    single = store.add("short-again", short_text + " and one more line of text here")
    (single_match,) = [m for m in single.matches if m.external_id == "long"]
    assert batch_match.method is Method.CONTAINMENT
    assert (batch_match.jaccard, batch_match.containment) == (checked.jaccard, checked.containment)
    assert single_match.containment > 0.8 and single_match.method is Method.CONTAINMENT
    with engine.connect() as conn:
        sizes = conn.execute(
            text(f'SELECT shingle_count FROM "{store.schema}".documents ORDER BY id')
        ).scalars()
        long_size, short_size, _ = list(sizes)
    assert long_size >= 2000 and long_size >= 4 * short_size


def test_a_hot_band_key_is_split_by_secondary_keys(
    engine: Engine, schema: str, corpus: PlantedCorpus
) -> None:
    base = corpus.original()
    with DedupStore(engine, FingerprintParams(hot_key_limit=5), schema=schema) as store:
        store.add_many([(f"t{i}", f"{base} variant {i}") for i in range(80)], batch_size=30)
        probe = f"{base} variant probe"
        checked = store.check(probe)
        added = store.add("probe", probe)
        # not only the 5 oldest documents of each key: the secondary keys lead further
        assert len(added.matches) > 40
        assert added.matches == checked.matches
        assert [c.size for c in store.clusters()] == [81]
        stats = store.stats()
        assert stats.hot_keys["band"] > 0 and stats.hot_keys["block"] > 0
        assert len(stats.hottest_keys) == 5
        assert max(stats.hottest_keys.values()) == 81
        assert all(re.fullmatch(r"#\d (band|block) \d+ in t0", k) for k in stats.hottest_keys)


def test_a_hot_broder_key_yields_its_oldest_documents_only(
    engine: Engine, schema: str, corpus: PlantedCorpus
) -> None:
    base = corpus.original()
    params = FingerprintParams(hot_key_limit=5, scheme="broder", simhash_k=0, simhash_blocks=2)
    with DedupStore(engine, params, schema=schema) as store:
        store.add_many([(f"t{i}", f"{base} variant {i}") for i in range(80)], batch_size=30)
        probe = f"{base} variant probe"
        checked = store.check(probe)
        added = store.add("probe", probe)
        # each mega-shingle key yields its 5 oldest documents: far fewer than all 80 copies
        assert 0 < len(added.matches) < 40
        assert added.matches == checked.matches
        assert store.stats().hot_keys["band"] == 0


def test_stats_show_the_hottest_excerpt_keys(store: DedupStore, corpus: PlantedCorpus) -> None:
    notice = corpus.original()
    store.add_many([(f"d{i}", f"{corpus.original()}\n\n{notice}") for i in range(12)])
    hottest = store.stats().hottest_excerpt_keys
    assert len(hottest) == 5
    assert next(iter(hottest.values())) == 12
    assert next(iter(hottest)) == "#1 in d0"  # named by its oldest document, not its hash
