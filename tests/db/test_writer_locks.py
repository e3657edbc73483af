"""Writers wait only for what they must (:mod:`dedup_store.db.write.locks`).

An add takes the store's lock shared and locks the keys its document probes and writes: an add
of an unrelated document in another open transaction goes on, one that could match waits and
then sees it. Work that rewrites the store broadly takes the store's lock exclusively and waits
for open adders. Each race runs many rounds, its writers released together by a barrier, in
transactions of the store's own and in open transactions of the caller's.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from dedup_store import (
    ConflictError,
    DatabaseError,
    DedupStore,
    FingerprintParams,
)
from dedup_store.db.write import locks, single
from dedup_store.server.errors import status_of
from tests.db.corpus import PlantedCorpus, edge_partition, label_partition

HOLD = 3.0
ROUNDS = 30
JOIN_ROUNDS = 10
TIMEOUT = 60.0


@pytest.fixture
def url(database_url: str, schema: str) -> Iterator[str]:
    """The test database's URL, with a store of default params created in ``schema``."""
    DedupStore(database_url, FingerprintParams(), schema=schema).close()
    yield database_url


def run_threads(*work: Callable[[], Any]) -> list[Any]:
    """Run each of ``work`` in a thread of its own; their results, or raise the first error."""
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            results[i] = work[i]()
        except BaseException as e:  # reported to the test below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive(), "a writer is still waiting"
    if errors:
        raise errors[0]
    return results


def race(*work: Callable[[], Any]) -> list[Any]:
    """:func:`run_threads`, each of ``work`` released together by a barrier."""
    barrier = threading.Barrier(len(work))

    def released(one: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            barrier.wait(TIMEOUT)
            return one()

        return run

    return run_threads(*(released(one) for one in work))


def host_add(
    engine: Engine, schema: str, doc_id: str, body: str, hold: float = 0.0
) -> tuple[float, float]:
    """Add a document in a transaction of the caller's, held open ``hold`` seconds; returns
    when the add returned and when the transaction committed (``time.monotonic()``)."""
    with engine.connect() as conn, conn.begin():
        DedupStore(conn, schema=schema, create=False).add(doc_id, body)
        added = time.monotonic()
        time.sleep(hold)
    return added, time.monotonic()


def cluster_of(engine: Engine, schema: str, doc_id: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(f'SELECT cluster_id FROM "{schema}".documents WHERE external_id = :e'),
                {"e": doc_id},
            ).scalar_one()
        )


def edge_between(engine: Engine, schema: str, a: str, b: str) -> bool:
    """Whether documents ``a`` and ``b`` are linked: an edge between the first documents of
    their exact groups (a copy's edges are its group's first's), or one group."""
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(f"""
                WITH g AS (
                    SELECT external_id, coalesce(exact_of, id) AS first
                    FROM "{schema}".documents WHERE external_id IN (:a, :b)
                )
                SELECT (SELECT count(DISTINCT first) FROM g) = 1 OR EXISTS (
                    SELECT 1 FROM "{schema}".edges e, g x, g y
                    WHERE x.external_id = :a AND y.external_id = :b
                      AND (e.a, e.b) IN ((x.first, y.first), (y.first, x.first)))
                """),
                {"a": a, "b": b},
            ).scalar_one()
        )


def test_an_unrelated_add_does_not_wait_for_an_open_host_transaction(
    engine: Engine, schema: str, url: str
) -> None:
    corpus = PlantedCorpus(seed=3)
    first, second = corpus.original(), corpus.original()
    a_added = threading.Event()
    b_done: list[float] = []

    def a() -> tuple[float, float]:
        with engine.connect() as conn, conn.begin():
            DedupStore(conn, schema=schema, create=False).add("a", first)
            a_added.set()
            time.sleep(HOLD)
        return 0.0, time.monotonic()

    def b() -> float:
        assert a_added.wait(TIMEOUT)
        started = time.monotonic()
        host_add(engine, schema, "b", second)
        b_done.append(time.monotonic())
        return time.monotonic() - started

    (_, a_committed), b_seconds = run_threads(a, b)
    assert b_done[0] < a_committed, "b waited for a's transaction"
    assert b_seconds < HOLD / 3
    assert cluster_of(engine, schema, "a") != cluster_of(engine, schema, "b")


def test_a_near_duplicate_waits_for_the_open_transaction_and_meets_it(
    engine: Engine, schema: str, url: str
) -> None:
    corpus = PlantedCorpus(seed=4)
    body = corpus.original()
    a_added = threading.Event()

    def a() -> float:
        with engine.connect() as conn, conn.begin():
            DedupStore(conn, schema=schema, create=False).add("a", body)
            a_added.set()
            time.sleep(1.0)
        return time.monotonic()

    def b() -> float:
        assert a_added.wait(TIMEOUT)
        host_add(engine, schema, "b", corpus.edit(body, 2))
        return time.monotonic()

    a_committed, b_done = run_threads(a, b)
    assert b_done > a_committed
    assert edge_between(engine, schema, "a", "b")
    assert cluster_of(engine, schema, "a") == cluster_of(engine, schema, "b")


@pytest.mark.parametrize("host", [False, True], ids=["own", "host"])
def test_concurrent_near_duplicates_end_with_their_edge(
    engine: Engine, schema: str, url: str, host: bool
) -> None:
    corpus = PlantedCorpus(seed=5 + host, words=(200, 300))
    with DedupStore(url, schema=schema, create=False) as store:
        stored = {f"o{n}": corpus.original() for n in range(ROUNDS)}
        store.add_many(list(stored.items()))
        merged = 0
        for n in range(ROUNDS):
            base = corpus.original() if n % 2 else stored[f"o{n}"]
            pair = [(f"r{n}-{k}", corpus.edit(base, 2)) for k in range(2)]
            (x, x_text), (y, y_text) = pair
            if host:
                race(
                    partial(host_add, engine, schema, x, x_text),
                    partial(host_add, engine, schema, y, y_text, 0.02),
                )
            else:
                race(partial(store.add, x, x_text), partial(store.add, y, y_text))
            assert edge_between(engine, schema, x, y), f"round {n}: the edge was missed"
            assert label_partition(engine, schema) == edge_partition(engine, schema)
            merged += cluster_of(engine, schema, x) == cluster_of(engine, schema, y)
    assert merged >= ROUNDS // 2


def test_adds_that_join_clusters_concurrently_end_in_the_union_of_their_edges(
    database_url: str, engine: Engine, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    merges: list[int] = []
    outcome = single.outcome

    def counted(rows: Any) -> single.SingleOutcome:
        found = outcome(rows)
        merges.extend([1] if found.merge else [])
        return found

    monkeypatch.setattr(single, "outcome", counted)
    params = FingerprintParams(containment_merges=True)
    corpus = PlantedCorpus(seed=7, words=(150, 250))
    with DedupStore(database_url, params, schema=schema) as store:
        for n in range(JOIN_ROUNDS):
            left, right = corpus.original(), corpus.original()
            store.add_many(
                [
                    (f"l{n}", left),
                    (f"l{n}b", corpus.edit(left, 3)),
                    (f"r{n}", right),
                    (f"r{n}b", corpus.edit(right, 3)),
                ]
            )
            assert cluster_of(engine, schema, f"l{n}") != cluster_of(engine, schema, f"r{n}")
            writers = [
                (f"j{n}-lr", f"{corpus.edit(left, 3)}\n\n{corpus.edit(right, 3)}"),
                (f"j{n}-rl", f"{corpus.edit(right, 3)}\n\n{corpus.edit(left, 3)}"),
                (f"j{n}-l", corpus.edit(left, 3)),
                (f"j{n}-r", corpus.edit(right, 3)),
            ]
            work = [
                (lambda d=d, b=b, k=k: host_add(engine, schema, d, b, 0.01 * k))
                if (n + k) % 2
                else (lambda d=d, b=b: store.add(d, b))
                for k, (d, b) in enumerate(writers)
            ]
            race(*work)
            members = [f"l{n}", f"l{n}b", f"r{n}", f"r{n}b"] + [d for d, _ in writers]
            assert len({cluster_of(engine, schema, m) for m in members}) == 1, f"round {n}"
            assert label_partition(engine, schema) == edge_partition(engine, schema)
    assert len(merges) >= JOIN_ROUNDS, "no add went round again to lock the labels it merges"


@pytest.mark.parametrize("work", ["delete", "review"])
def test_exclusive_work_waits_for_an_open_adder(
    engine: Engine, schema: str, url: str, work: str
) -> None:
    corpus = PlantedCorpus(seed=9)
    base, other = corpus.original(), corpus.original()
    with DedupStore(url, schema=schema, create=False) as store:
        store.add_many([("p", base), ("q", corpus.edit(base, 1)), ("z", other)])
        added = threading.Event()

        def adder() -> float:
            with engine.connect() as conn, conn.begin():
                DedupStore(conn, schema=schema, create=False).add("n", corpus.edit(base, 2))
                added.set()
                time.sleep(1.0)
            return time.monotonic()

        def exclusive() -> float:
            assert added.wait(TIMEOUT)
            if work == "delete":
                store.delete("q")
            else:  # joins z's cluster to n's, which it sees once n's transaction committed
                store.review("n", "z", "duplicate")
            return time.monotonic()

        committed, done = run_threads(adder, exclusive)
        assert done > committed, "the exclusive work did not wait for the open add"
    assert cluster_of(engine, schema, "n") == cluster_of(engine, schema, "p")
    if work == "delete":
        assert label_partition(engine, schema) == edge_partition(engine, schema)
    else:
        assert cluster_of(engine, schema, "z") == cluster_of(engine, schema, "p")


def test_a_deadlock_between_host_transactions_is_a_conflict_error(
    engine: Engine, schema: str, url: str
) -> None:
    corpus = PlantedCorpus(seed=10)
    x, y = corpus.original(), corpus.original()
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def writer(first: tuple[str, str], second: tuple[str, str]) -> None:
        try:
            with engine.connect() as conn, conn.begin():
                store = DedupStore(conn, schema=schema, create=False)
                store.add(*first)
                barrier.wait(TIMEOUT)
                store.add(*second)  # the text the other one added: its keys
            outcomes.append("committed")
        except ConflictError as e:
            assert e.sqlstate == "40P01"
            assert "roll the caller's transaction back and run it again" in str(e)
            outcomes.append("conflict")

    run_threads(
        lambda: writer(("x", x), ("y2", y)),
        lambda: writer(("y", y), ("x2", x)),
    )
    assert sorted(outcomes) == ["committed", "conflict"]
    error = ConflictError("deadlock")
    assert isinstance(error, DatabaseError) and error.exit_code == 7
    assert status_of(error) == 503


def test_the_store_retries_a_deadlock_in_its_own_transactions(
    engine: Engine, schema: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deadlock forced on the store's own batch path is run again, not raised."""
    corpus = PlantedCorpus(seed=11)
    x, y = corpus.original(), corpus.original()
    barrier = threading.Barrier(2)
    original = locks.lock_store
    calls: dict[int, int] = {}
    other_of: dict[int, str] = {}

    def crossed(conn: Connection, schema_: str, keys: Any = None) -> bool:
        # the first time, each writer locks the other's id before its own keys: a deadlock
        me = threading.get_ident()
        calls[me] = calls.get(me, 0) + 1
        if keys is not None and calls[me] == 1:
            original(conn, schema_, locks.id_keys(schema_, [other_of[me]]))
            barrier.wait(TIMEOUT)
        return original(conn, schema_, keys)

    monkeypatch.setattr(locks, "lock_store", crossed)
    with DedupStore(url, schema=schema, create=False) as store:

        def add_many(doc_id: str, body: str, other: str) -> None:
            other_of[threading.get_ident()] = other
            store.add_many([(doc_id, body)])

        run_threads(lambda: add_many("x", x, "y"), lambda: add_many("y", y, "x"))
        assert store.stats().documents == 2
    assert max(calls.values()) >= 2, "neither writer ran again"


@pytest.mark.parametrize("level", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_host_transaction_that_cannot_see_concurrent_adds_is_refused(
    engine: Engine, schema: str, url: str, level: str
) -> None:
    corpus = PlantedCorpus(seed=12)
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level=level)
        with conn.begin():
            store = DedupStore(conn, schema=schema, create=False)
            assert store.check(corpus.original()).status.value == "new"  # reading is fine
            with pytest.raises(DatabaseError, match="writes at READ COMMITTED.*" + level):
                store.add("a", corpus.original())
            with pytest.raises(DatabaseError, match="READ COMMITTED"):
                store.add_many([("b", corpus.original())])
    with DedupStore(url, schema=schema, create=False) as store:
        assert store.stats().documents == 0


def test_an_add_of_too_many_keys_takes_the_store_lock_exclusively(
    engine: Engine, schema: str, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locks, "MAX_KEY_LOCKS", 4)
    corpus = PlantedCorpus(seed=13)
    a_added = threading.Event()

    def a() -> float:
        with engine.connect() as conn, conn.begin():
            DedupStore(conn, schema=schema, create=False).add("a", corpus.original())
            a_added.set()
            time.sleep(1.0)
        return time.monotonic()

    def b() -> float:
        assert a_added.wait(TIMEOUT)
        host_add(engine, schema, "b", corpus.original())
        return time.monotonic()

    a_committed, b_done = run_threads(a, b)
    assert b_done > a_committed


def test_lock_keys_name_kind_slot_and_store() -> None:
    from dedup_store.core.fingerprint import fingerprint, fingerprint_batch

    params = FingerprintParams()
    corpus = PlantedCorpus(seed=14)
    texts = [corpus.original() for _ in range(3)]
    fps = [fingerprint(t, params) for t in texts]
    singles = [locks.keys_of("s", fp, f"d{i}") for i, fp in enumerate(fps)]
    together = locks.batch_keys("s", fingerprint_batch(texts, params), ["d0", "d1", "d2"])
    assert sorted(set().union(*(k.tolist() for k in singles))) == together.tolist()
    assert len(singles[0]) == len(set(singles[0].tolist()))  # sorted and distinct
    assert not set(singles[0].tolist()) & set(locks.keys_of("t", fps[0], "d0").tolist())
    moved = fps[0].band_keys[[1, 0, *range(2, len(fps[0].band_keys))]]  # slots 1 and 2 swapped
    swapped = dataclasses.replace(fps[0], band_keys=moved)
    assert locks.keys_of("s", swapped, "d0").tolist() != singles[0].tolist()
    same_id = locks.keys_of("s", fps[1], "d0")
    assert set(same_id.tolist()) & set(singles[0].tolist()) == set(
        locks.id_keys("s", ["d0"]).tolist()
    )
