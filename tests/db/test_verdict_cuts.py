"""A ``not_duplicate`` verdict always parts its two documents: exact copies, documents joined
through others, and whatever writes come after; the store's clusters are the documented rule
computed by brute force (:mod:`tests.db.verdict_model`) on Debian's copyright files, through
batches and single adds, and the review's answer names the edges it cut."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document
from dedup_store.errors import InvalidParamsError
from tests.db.verdict_model import choose_verdicts, expected_clusters

pytestmark = pytest.mark.db

LICENCE = " ".join(
    f"clause{i} of the licence grants the right to copy and share" for i in range(40)
)


def stored_clusters(store: DedupStore) -> set[frozenset[str]]:
    return {frozenset(c.members) for c in store.clusters(2)}


def apart(store: DedupStore, a: str, b: str) -> bool:
    return store.cluster(a).cluster_id != store.cluster(b).cluster_id


def test_exact_copies_judged_not_duplicates_are_parted(engine: Engine, schema: str) -> None:
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document("post", LICENCE), Document("repost", LICENCE),
                      Document("again", LICENCE)])  # fmt: skip
        assert len(store.cluster("post").members) == 3
        review = store.review("post", "repost", "not_duplicate")
        assert apart(store, "post", "repost")
        assert [(c.a, c.b, c.method) for c in review.cut] == [("post", "repost", "exact")]
        assert review.to_dict()["cut"] == [
            {"a": "post", "b": "repost", "method": "exact", "score": 1.0}
        ]
        assert set(store.cluster("post").members) == {"post", "again"}
        pair = [p for p in store.pairs() if {p.a, p.b} == {"post", "repost"}]
        assert [p.verdict for p in pair] == ["not_duplicate"]
        assert store.clear_review("post", "repost")
        assert len(store.cluster("post").members) == 3


def test_a_pair_joined_through_others_loses_the_weakest_links(engine: Engine, schema: str) -> None:
    """a, b and c all match: judging a and c apart cuts their edge and the weaker of the two
    through b, and the answer says which."""
    words = LICENCE.split()
    b_text = " ".join(words[:-3])
    c_text = " ".join([*words[:-3], "another", "closing", "sentence", "here", "now"])
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document("a", LICENCE), Document("b", b_text), Document("c", c_text)])
        assert len(store.cluster("a").members) == 3
        scores = {frozenset((p.a, p.b)): p.score for p in store.pairs()}
        review = store.review("a", "c", "not_duplicate", note="different licences")
        through_b = [frozenset("ab"), frozenset("bc")]
        weaker = min(through_b, key=lambda k: scores[k])
        assert {frozenset((c.a, c.b)) for c in review.cut} == {frozenset("ac"), weaker}
        assert [c.score for c in review.cut] == sorted([scores[frozenset("ac")], scores[weaker]])
        assert apart(store, "a", "c")
        assert store.verdicts()[0].cut == review.cut
        assert stored_clusters(store) == expected_clusters(store, engine)


def test_contradicting_verdicts_are_refused_and_change_nothing(engine: Engine, schema: str) -> None:
    texts = [f"document {i} " + " ".join(f"w{i}x{k}" for k in range(30)) for i in range(3)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document(f"d{i}", t) for i, t in enumerate(texts)])
        store.review("d0", "d1", "duplicate")
        store.review("d1", "d2", "duplicate")
        with pytest.raises(InvalidParamsError, match="d0 = d1, d1 = d2"):
            store.review("d0", "d2", "not_duplicate")
        assert {(v.a, v.b) for v in store.verdicts()} == {("d0", "d1"), ("d1", "d2")}
        store.clear_review("d1", "d2")
        store.review("d0", "d2", "not_duplicate")
        with pytest.raises(InvalidParamsError, match="judged not duplicates"):
            store.review("d1", "d2", "duplicate")
        assert set(store.cluster("d0").members) == {"d0", "d1"}


@pytest.fixture(scope="module")
def corpus() -> list[Document]:
    return [Document(d.id, d.text) for d in copyright_docs()]


@pytest.fixture
def judged(engine: Engine, schema: str, corpus: list[Document]) -> Iterator[DedupStore]:
    """The copyright files with 50 pairs judged not duplicates (exact copies among them) and
    20 judged duplicates."""
    with DedupStore(engine, schema=schema) as store:
        store.ingest(corpus, bulk=False)
        vetoed, confirmed = choose_verdicts(store, seed=50)
        assert sum(p.method.value == "exact" for p in store.pairs() if (p.a, p.b) in vetoed)
        for a, b in confirmed:
            store.review(a, b, "duplicate")
        for a, b in vetoed:
            store.review(a, b, "not_duplicate")
        yield store


def assert_rule_holds(store: DedupStore, engine: Engine) -> None:
    vetoed = [(v.a, v.b) for v in store.verdicts() if v.verdict.value == "not_duplicate"]
    assert len(vetoed) == 50
    assert all(apart(store, a, b) for a, b in vetoed)
    assert stored_clusters(store) == expected_clusters(store, engine)


def regrouped(store: DedupStore, corpus: list[Document], seed: int) -> list[Document]:
    """Every document of a cluster that a verdict touches, deleted, shuffled, to write again."""
    named = {x for v in store.verdicts() for x in (v.a, v.b)}
    gone = sorted({m for x in named for m in store.cluster(x).members})
    store.delete(gone)
    texts = {d.id: d.text for d in corpus}
    order = np.random.default_rng(seed).permutation(len(gone))
    return [Document(gone[i], texts[gone[i]]) for i in order]


def test_random_verdicts_on_real_text_hold_as_documents_are_written_again(
    judged: DedupStore, engine: Engine, corpus: list[Document]
) -> None:
    assert_rule_holds(judged, engine)
    with engine.connect() as conn:
        cut = conn.execute(text(f'SELECT count(*) FROM "{judged.schema}".cut_edges')).scalar()
    assert cut and cut >= 15  # every exact pair judged apart cut at least its edge
    for document in regrouped(judged, corpus, seed=1):  # the single-statement path
        judged.add(document.id, document.text)
    assert_rule_holds(judged, engine)
    judged.ingest(regrouped(judged, corpus, seed=2), batch_size=5)
    assert_rule_holds(judged, engine)
    judged.ingest(regrouped(judged, corpus, seed=3), batch_size=5, update=True)
    assert_rule_holds(judged, engine)
    judged.ingest(regrouped(judged, corpus, seed=4), batch_size=5, bulk=True)
    assert_rule_holds(judged, engine)


def test_a_store_whose_verdicts_predate_the_rule_is_brought_in_line_when_it_opens(
    engine: Engine, schema: str
) -> None:
    """Until 0016 exact copies judged not duplicates stayed together."""
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document("post", LICENCE), Document("repost", LICENCE)])
        store.review("post", "repost", "not_duplicate")
    with engine.begin() as conn:  # as an earlier version left it
        conn.execute(text(f'DELETE FROM "{schema}".cut_edges'))
        conn.execute(text(f'UPDATE "{schema}".documents SET cluster_id = 1'))
    with DedupStore(engine, schema=schema) as store:
        assert apart(store, "post", "repost")
