"""Every copy answers: ``similar``, ``pairs(expand=True)`` and ``duplicate_pairs_expanded``
expand the exact groups of both ends of each stored edge.

The reference is brute force over the ``documents`` and ``edges`` tables alone: each document's
exact group (``exact_of``), the best stored edge between each two groups, and every pair of
their members, computed in the test without the store's code. The corpus is real text: Debian
copyright files, their exact copies (groups of up to four), light edits of them (some with
copies of their own), edits of edits and excerpts.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, Engine, text

from benchmarks.realtext_corpus import copyright_docs
from dedup_store import DedupStore, Document, Match, Method, Pair
from tests.conftest import SqlRecorder
from tests.db.corpus import METHOD_ORDER, Edge, edge_rows, exact_firsts, implied_pairs


@dataclasses.dataclass
class Stored:
    """The tables: ``{id: (external id, first of its exact group)}`` and the edges."""

    documents: dict[int, tuple[str, int]]
    edges: list[Edge]

    def external(self, doc_id: int) -> str:
        return self.documents[doc_id][0]

    def firsts(self) -> dict[int, int]:
        return {doc_id: first for doc_id, (_, first) in self.documents.items()}


def read_store(engine: Engine, schema: str) -> Stored:
    with engine.connect() as conn:
        first = exact_firsts(conn, schema)
        rows = conn.execute(text(f'SELECT id, external_id FROM "{schema}".documents'))
        documents = {row[0]: (row[1], first[row[0]]) for row in rows}
        return Stored(documents, edge_rows(conn, schema))


def brute_force(stored: Stored) -> dict[tuple[int, int], Edge]:
    return implied_pairs(stored.firsts(), stored.edges)


def expected_similar(stored: Stored, pairs: dict[tuple[int, int], Edge]) -> dict[str, list[Match]]:
    """What ``similar`` must answer for every document, best first."""
    found: dict[str, list[Match]] = {ext: [] for ext, _ in stored.documents.values()}
    for (x, y), edge in pairs.items():
        for me, other in ((x, y), (y, x)):
            match = Match(
                stored.external(other),
                Method(edge.method),
                edge.jaccard,
                edge.containment,
                edge.hamming,
                edge.meta_score,
                edge.jaccard,
            )
            found[stored.external(me)].append(match)
    for matches in found.values():
        matches.sort(key=lambda m: (METHOD_ORDER.index(m.method), -m.score, m.external_id))
    return found


def expected_pairs(stored: Stored, pairs: dict[tuple[int, int], Edge]) -> list[tuple[object, ...]]:
    """The rows of ``pairs(expand=True)``: ``(a, b, method, scores, found_at, via_exact_of)``,
    oldest first (ids in ``a``, ``b`` order)."""
    own = {(e.a, e.b) for e in stored.edges}
    return [
        (
            stored.external(x),
            stored.external(y),
            edge.method,
            edge.jaccard,
            edge.containment,
            edge.hamming,
            edge.meta_score,
            edge.found_at,
            (x, y) not in own,
        )
        for (x, y), edge in sorted(pairs.items())
    ]


def pair_rows(pairs: Iterator[Pair]) -> list[tuple[object, ...]]:
    return [
        (
            p.a,
            p.b,
            p.method.value,
            p.jaccard,
            p.containment,
            p.hamming,
            p.meta_score,
            p.found_at,
            p.via_exact_of,
        )
        for p in pairs
    ]


def view_rows(conn: Connection, schema: str) -> list[tuple[object, ...]]:
    rows = conn.execute(
        text(
            "SELECT a, b, method, jaccard, containment, hamming, meta_score, found_at, "
            f'via_exact_of FROM "{schema}".duplicate_pairs_expanded ORDER BY a_doc_id, b_doc_id'
        )
    )
    return [tuple(row) for row in rows]


def check_expanded(store: DedupStore, engine: Engine) -> dict[tuple[int, int], Edge]:
    """Assert ``similar``, ``pairs`` and the views agree with the brute force; returns it."""
    stored = read_store(engine, store.schema)
    pairs = brute_force(stored)
    for external_id, expected in expected_similar(stored, pairs).items():
        assert store.similar(external_id) == expected, external_id
    assert pair_rows(store.pairs(expand=True)) == expected_pairs(stored, pairs)
    stored_pairs = {(p.a, p.b, p.method.value, p.via_exact_of) for p in store.pairs()}
    assert stored_pairs == {
        (stored.external(e.a), stored.external(e.b), e.method, False) for e in stored.edges
    }
    with engine.connect() as conn:
        assert view_rows(conn, store.schema) == expected_pairs(stored, pairs)
        counts = conn.execute(
            text(
                "SELECT count(*), count(*) FILTER (WHERE NOT via_exact_of) "
                f'FROM "{store.schema}".duplicate_pairs_expanded'
            )
        ).one()
        stored_count = conn.execute(
            text(f'SELECT count(*) FROM "{store.schema}".duplicate_pairs')
        ).scalar_one()
    assert tuple(counts) == (len(pairs), stored_count)
    return pairs


# -- the corpus ------------------------------------------------------------------------------


def edited(text: str, seed: int, edits: int = 2) -> str:
    """``text`` with ``edits`` words replaced (a light edit)."""
    rng = random.Random(seed)
    words = text.split()
    for _ in range(edits):
        words[rng.randrange(len(words))] = rng.choice(["quokka", "marmalade", "zeppelin"])
    return " ".join(words)


def excerpt(text: str) -> str:
    """The first half of ``text``'s words."""
    words = text.split()
    return " ".join(words[: len(words) // 2])


def sources(count: int) -> list[Document]:
    """``count`` copyright files of 400 to 3,000 words, with different texts."""
    chosen: list[Document] = []
    seen: set[str] = set()
    for doc in copyright_docs():
        key = " ".join(doc.text.split())
        if 400 <= len(doc.text.split()) <= 3000 and key not in seen:
            seen.add(key)
            chosen.append(Document(doc.id, doc.text))
    return random.Random(43).sample(chosen, count)


def corpus() -> list[Document]:
    """Groups of exact copies (one to four members), edits of several groups (two edits of
    the same group, an edit with copies of its own, an edit of an edit) and excerpts (one with
    a copy), shuffled."""
    bases = sources(6)
    docs: list[Document] = []
    for i, size in enumerate([3, 2, 1, 4, 2, 1]):
        docs += [Document(f"t{i}.{c}", bases[i].text) for c in range(size)]
    docs += [Document("e0", edited(bases[0].text, 1)), Document("e0b", edited(bases[0].text, 2))]
    docs += [Document("e0.1", edited(bases[0].text, 1)), Document("e1", edited(bases[1].text, 3))]
    e3 = edited(bases[3].text, 4)
    docs += [Document("e3", e3), Document("e3.1", e3), Document("ee3", edited(e3, 5))]
    docs += [Document("e4", edited(bases[4].text, 6))]
    docs += [Document("x2", excerpt(bases[2].text)), Document("x2.1", excerpt(bases[2].text))]
    docs += [Document("x5", excerpt(bases[5].text))]
    random.Random(7).shuffle(docs)
    return docs


def load(store: DedupStore, docs: list[Document], how: str) -> None:
    if how == "one by one":
        for doc in docs:
            store.add(doc.id, doc.text)
    elif how == "batches":
        store.add_many(docs, batch_size=5)
    else:
        store.ingest(docs, bulk=True)


@pytest.fixture(scope="module")
def documents() -> list[Document]:
    return corpus()


# -- the tests -------------------------------------------------------------------------------


def test_a_copy_and_a_light_edit_each_name_the_other_two(store: DedupStore) -> None:
    """The example of the issue: A, B an exact copy of A, C a light edit of A."""
    (base,) = sources(1)
    store.add("A", base.text)
    store.add("B", base.text)
    store.add("C", edited(base.text, 11))
    a, b, c = (store.similar(x) for x in "ABC")
    assert [(m.external_id, m.method) for m in a] == [("B", Method.EXACT), ("C", Method.MINHASH)]
    assert [(m.external_id, m.method) for m in b] == [("A", Method.EXACT), ("C", Method.MINHASH)]
    assert [(m.external_id, m.method) for m in c] == [("A", Method.MINHASH), ("B", Method.MINHASH)]
    assert a[1] == b[1]  # B's match with C has the scores of the edge of A and C
    assert c[0].jaccard == c[1].jaccard == a[1].jaccard < 1.0
    assert [(p.a, p.b) for p in store.pairs()] == [("A", "B"), ("A", "C")]
    expanded = [(p.a, p.b, p.method, p.via_exact_of) for p in store.pairs(expand=True)]
    assert expanded == [
        ("A", "B", Method.EXACT, False),
        ("A", "C", Method.MINHASH, False),
        ("B", "C", Method.MINHASH, True),
    ]


def test_a_verdict_on_a_pair_holds_for_the_copies_of_its_texts(store: DedupStore) -> None:
    """Clusters apply a verdict to every pair of the two exact groups; so does the expanded
    view."""
    (base,) = sources(1)
    store.add_many([("A", base.text), ("B", base.text), ("C", edited(base.text, 11))])
    store.add("D", edited(base.text, 11))  # a copy of C
    store.review("B", "D", "not_duplicate")
    verdicts = {(p.a, p.b): p.verdict for p in store.pairs(expand=True)}
    assert verdicts == {
        ("A", "B"): None,
        ("C", "D"): None,
        ("A", "C"): "not_duplicate",
        ("A", "D"): "not_duplicate",
        ("B", "C"): "not_duplicate",
        ("B", "D"): "not_duplicate",
    }
    assert {(p.a, p.b): p.verdict for p in store.pairs()} == {
        ("A", "B"): None,
        ("A", "C"): None,
        ("C", "D"): None,
    }
    assert store.cluster("B").members == ["A", "B"]
    assert [m.external_id for m in store.similar("B")] == ["A", "C", "D"]


@pytest.mark.parametrize("how", ["one by one", "batches", "bulk"])
def test_similar_and_pairs_equal_the_brute_force_expansion(
    engine: Engine, store: DedupStore, documents: list[Document], how: str
) -> None:
    load(store, documents, how)
    pairs = check_expanded(store, engine)
    stored = read_store(engine, store.schema)
    # the planted structure is there: copies link to their first document only, and the
    # expansion adds pairs (copies of a group with an edit of it, edits with copies)
    assert any(doc_id != first for doc_id, (_, first) in stored.documents.items())
    assert len(pairs) > len(stored.edges)
    assert {m.external_id for m in store.similar("t3.2")} >= {
        "t3.0", "t3.1", "t3.3", "e3", "e3.1",
    }  # fmt: skip
    assert {m.external_id for m in store.similar("e0.1")} >= {"t0.0", "t0.1", "t0.2", "e0"}
    excerpts = {m.external_id: m.method for m in store.similar("x2.1")}
    assert (excerpts["x2"], excerpts["t2.0"]) == (Method.EXACT, Method.CONTAINMENT)
    assert any(p.excerpt == "x2.1" for p in store.pairs(expand=True) if p.b == "x2.1")


def test_deleting_the_first_of_a_group_keeps_the_answers(
    engine: Engine, store: DedupStore, documents: list[Document]
) -> None:
    """The oldest remaining copy takes over the group, its edges and the other links."""
    load(store, documents, "batches")
    check_expanded(store, engine)
    stored = read_store(engine, store.schema)
    firsts = {
        ext: doc_id
        for doc_id, (ext, first) in stored.documents.items()
        if doc_id == first and ext.split(".")[0] in {"t0", "t3", "e3", "x2"}
    }
    firsts_of = {ext.split(".")[0] for ext in firsts}
    assert firsts_of == {"t0", "t3", "e3", "x2"}  # every group has its first document
    heir_before = {m.external_id for m in store.similar("e0")}
    store.delete(list(firsts))
    check_expanded(store, engine)
    gone = set(firsts)
    assert {m.external_id for m in store.similar("e0")} == heir_before - gone
    store.delete([ext for ext in ("t3.0", "t3.1", "t3.2", "t3.3") if ext not in gone][:2])
    check_expanded(store, engine)


def test_copies_with_edges_of_their_own_answer_once_with_the_best_edge(
    engine: Engine, store: DedupStore, documents: list[Document]
) -> None:
    """A store written before revision 0003 kept the edges of its copies: each other
    document is still named once, with the best of the edges that lead to it."""
    load(store, documents, "batches")
    before = {doc.id: store.similar(doc.id) for doc in documents}
    with engine.begin() as conn:  # every copy gets the edges of its first document
        conn.execute(
            text(
                f'INSERT INTO "{store.schema}".edges (a, b, method, jaccard, containment, '
                "hamming, meta_score, found_at) "
                "SELECT least(c.id, o.id), greatest(c.id, o.id), e.method, e.jaccard, "
                "e.containment, e.hamming, e.meta_score, e.found_at "
                f'FROM "{store.schema}".documents c '
                f'JOIN "{store.schema}".edges e ON c.exact_of IN (e.a, e.b) '
                "CROSS JOIN LATERAL (SELECT CASE WHEN e.a = c.exact_of THEN e.b ELSE e.a END "
                "AS id) o WHERE o.id <> c.id ON CONFLICT DO NOTHING"
            )
        )
    stored = read_store(engine, store.schema)
    copy_of = {doc_id: first for doc_id, (_, first) in stored.documents.items() if first != doc_id}
    of_copies = [e for e in stored.edges if e.method != "exact" and {e.a, e.b} & set(copy_of)]
    assert of_copies  # copies with near-duplicate and excerpt edges of their own
    check_expanded(store, engine)
    assert {doc.id: store.similar(doc.id) for doc in documents} == before

    better = of_copies[0]  # one of them scores higher than its first document's edge
    with engine.begin() as conn:
        conn.execute(
            text(
                f'UPDATE "{store.schema}".edges SET jaccard = jaccard + 0.001 '
                "WHERE a = :a AND b = :b"
            ),
            {"a": better.a, "b": better.b},
        )
    check_expanded(store, engine)
    for x, y in ((better.a, better.b), (better.b, better.a)):
        for member in (x, copy_of.get(x, x)):
            found = store.similar(stored.external(member))
            (match,) = [m for m in found if m.external_id == stored.external(y)]
            assert match.jaccard == better.jaccard + 0.001


def test_similar_pages_and_is_one_statement(
    engine: Engine, store: DedupStore, documents: list[Document], sql_recorder: SqlRecorder
) -> None:
    load(store, documents, "batches")
    everything = store.similar("t3.1")
    assert len(everything) >= 5
    pages = [store.similar("t3.1", limit=2, offset=o) for o in range(0, len(everything) + 2, 2)]
    assert [m for page in pages for m in page] == everything
    assert store.similar("t3.1", limit=0) == []
    with pytest.raises(ValueError, match="must not be negative"):
        store.similar("t3.1", offset=-1)
    before = len(sql_recorder.queries())
    store.similar("t3.1", limit=3)
    assert len(sql_recorder.queries()) - before == 1
