"""Reads on a real hot standby: routing, the lag bound, read-your-writes, a standby killed
mid-load and a primary stopped while reads go on. The primary and the standby are made for
these tests (:mod:`tests.replica_servers`), no mock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from benchmarks.replica_servers import Pair, primary_and_standby
from dedup_store import DatabaseError, DedupStore, Document
from dedup_store.aio import AsyncDedupStore
from dedup_store.db.server import replicas
from dedup_store.db.server.replicas import Replica

pytestmark = pytest.mark.db

SCHEMA = "replicated"
WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron".split()  # noqa: SIM905
)


def text_of(n: int) -> str:
    """A text of its own for each ``n`` (near-duplicates of ``n`` share most words)."""
    return " ".join(f"{w}{n}" for w in WORDS) + " " + " ".join(WORDS)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with primary_and_standby() as servers:
        with DedupStore(servers.primary.url, schema=SCHEMA) as store:
            store.ingest([Document(f"d{i}", text_of(i)) for i in range(50)])
        servers.wait_replayed()
        yield servers


@pytest.fixture
def store(pair: Pair) -> Iterator[DedupStore]:
    with DedupStore(
        pair.primary.url, schema=SCHEMA, replicas=[pair.standby.url], max_replica_lag=0.5
    ) as s:
        yield s


def served_by_standby(store: DedupStore) -> bool:
    source = store.last_read
    assert source is not None
    return source.replica is not None


def test_reads_go_to_the_standby_and_writes_to_the_primary(pair: Pair, store: DedupStore) -> None:
    assert store.check(text_of(3)).matches
    assert served_by_standby(store)
    assert store.cluster("d3").members == ["d3"]
    assert served_by_standby(store)
    assert len(list(store.clusters(min_size=1))) == 50 and served_by_standby(store)
    assert store.similar("d3") == [] and served_by_standby(store)
    store.add("new-1", text_of(1000))  # a write: on the primary, or it would fail
    assert pair.primary.sql(
        f"SELECT count(*) FROM {SCHEMA}.documents WHERE external_id = 'new-1'"
    ) == [(1,)]
    stats = store.stats()
    assert stats.replicas["replica_reads"] > 0
    assert stats.replicas["servers"][0]["up"] is True


def test_a_lagging_standby_is_not_read_and_is_read_again_once_caught_up(
    pair: Pair, store: DedupStore
) -> None:
    store.check(text_of(1))
    assert served_by_standby(store)
    pair.standby.sql("SELECT pg_wal_replay_pause()")
    try:
        with DedupStore(pair.primary.url, schema=SCHEMA) as writer:  # not this store's write
            writer.add("lag-1", text_of(2000))
        time.sleep(0.8)  # more than max_replica_lag
        store.check(text_of(1))
        assert not served_by_standby(store)
        assert store.stats().replicas["lagging"] > 0
    finally:
        pair.standby.sql("SELECT pg_wal_replay_resume()")
    pair.wait_replayed()
    time.sleep(0.2)
    store.check(text_of(1))
    assert served_by_standby(store)


def test_the_store_reads_its_own_writes_before_the_standby_has_them(
    pair: Pair, store: DedupStore
) -> None:
    pair.standby.sql("SELECT pg_wal_replay_pause()")
    try:
        store.add("mine-1", text_of(3000))
        assert store.cluster("mine-1").members == ["mine-1"]  # the standby has not replayed it
        assert not served_by_standby(store)
        assert store.check(text_of(3000)).status.value == "exact_duplicate"
    finally:
        pair.standby.sql("SELECT pg_wal_replay_resume()")
    pair.wait_replayed()
    assert store.cluster("mine-1").members == ["mine-1"]
    assert served_by_standby(store)


def test_eight_readers_see_no_error_while_the_standby_is_killed_and_started_again(
    pair: Pair, store: DedupStore
) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()

    def read() -> None:
        n = 0
        while not stop.is_set():
            try:
                store.check(text_of(n % 50))
                store.cluster(f"d{n % 50}")
            except BaseException as e:  # reported by the test
                errors.append(e)
            n += 1

    readers = [threading.Thread(target=read) for _ in range(8)]
    for reader in readers:
        reader.start()
    time.sleep(0.5)
    pair.standby.kill()
    time.sleep(1.0)
    stop.set()
    for reader in readers:
        reader.join()
    assert errors == []
    assert store.stats().replicas["replica_failures"] >= 1
    pair.standby.start()
    pair.wait_replayed()
    deadline = time.monotonic() + 40  # the back-off doubles, to 30 s at most
    while time.monotonic() < deadline:
        store.check(text_of(1))
        if served_by_standby(store):
            break
        time.sleep(0.2)
    assert served_by_standby(store)


def test_with_the_primary_stopped_reads_go_on_and_writes_fail(pair: Pair) -> None:
    pair.primary.stop()
    try:
        with DedupStore(
            pair.primary.url, schema=SCHEMA, replicas=[pair.standby.url], create=False
        ) as store:
            assert store.check(text_of(7)).matches
            source = store.last_read
            assert source is not None and source.replica is not None and source.primary_down
            assert source.lag is not None and source.lag > 0  # the answer's age
            assert store.cluster("d7").members == ["d7"]
            with pytest.raises(DatabaseError):
                store.add("while-down", text_of(4000))
            # the reads do not try the stopped primary each time: it is tried again after a
            # back-off (1 s, then 2 s, ...)
            started = time.monotonic()
            while time.monotonic() - started < 1.5:
                assert store.check(text_of(7)).matches
            assert 1 <= store.stats().replicas["primary_failures"] <= 3
    finally:
        pair.primary.start()


def test_a_statement_that_fails_on_the_standby_is_the_stores_error_not_the_standbys(
    store: DedupStore,
) -> None:
    """A statement's own error on a replica (not the replica's: gone, in recovery conflict)
    is raised as the store's DatabaseError, and the replica stays in use."""
    store.check(text_of(1))
    assert served_by_standby(store)
    with pytest.raises(DatabaseError, match="division by zero"):
        store._db.native(lambda raw: raw.execute("SELECT 1 / 0").fetchall(), replica=True)
    with pytest.raises(DatabaseError, match="division by zero"):
        store._db.read(lambda conn: conn.exec_driver_sql("SELECT 1 / 0").all(), replica=True)
    assert store.stats().replicas["replica_failures"] == 0
    store.check(text_of(1))
    assert served_by_standby(store)


def test_a_stream_after_the_standby_restarted_is_read_whole(
    pair: Pair, store: DedupStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection a stream of clusters took from the pool of a standby that has restarted
    since is found dead before the first row: the stream reads the primary instead."""
    assert len(list(store.clusters(min_size=1))) >= 50 and served_by_standby(store)
    # the restart falls between two readings of the standby's position (one every 0.1 s)
    monkeypatch.setattr(replicas, "CHECK_INTERVAL", 3600.0)
    pair.standby.stop()
    pair.standby.start()
    pair.wait_replayed()
    assert len(list(store.clusters(min_size=1))) >= 50
    assert store.stats().replicas["replica_failures"] >= 1


def test_each_task_of_an_async_store_knows_where_its_own_last_read_was_served(pair: Pair) -> None:
    async def main() -> None:
        async with AsyncDedupStore(
            pair.primary.url, schema=SCHEMA, replicas=[pair.standby.url], max_replica_lag=0.5
        ) as store:
            assert store.last_read is None

            async def reads() -> None:
                await store.check(text_of(3))
                assert store.last_read is not None and store.last_read.replica is not None

            async def waits() -> None:
                await asyncio.sleep(0.2)
                assert store.last_read is None  # this task has read nothing

            await asyncio.gather(reads(), waits())
            assert store.last_read is None  # nor has this one
            await store.cluster("d3")
            assert store.last_read is not None and store.last_read.replica is not None

    asyncio.run(main())


def test_a_lag_read_earlier_grows_with_the_time_since() -> None:
    replica = Replica("standby", None, None, checked_at=10.0, replayed=5, replay_age=0.2)  # type: ignore[arg-type]
    assert replica.lag(primary=5, now=11.0) == 0.0  # it had replayed the primary's position
    assert replica.lag(primary=9, now=10.5) == pytest.approx(0.7)
    assert replica.lag(primary=9) == pytest.approx(0.2)


def test_the_command_line_reads_the_replicas_it_is_given(pair: Pair) -> None:
    from typer.testing import CliRunner

    from dedup_store.cli import app

    base = ["--db-url", pair.primary.url, "--schema", SCHEMA]
    env = {"DEDUP_STORE_URL": None, "DEDUP_STORE_REPLICA_URLS": f" {pair.standby.url} ,"}
    result = CliRunner().invoke(app, [*base, "stats", "-f", "json"], env=env)
    assert result.exit_code == 0, result.stderr
    import json

    replicas = json.loads(result.stdout)["replicas"]
    assert replicas["replica_reads"] >= 1 and replicas["servers"][0]["up"]
    given = ["--replica-url", pair.standby.url, *base, "cluster", "d5", "-f", "json"]
    result = CliRunner().invoke(app, given, env={"DEDUP_STORE_URL": None})
    assert result.exit_code == 0, result.stderr
    assert '"d5"' in result.stdout


def test_inside_a_callers_transaction_everything_stays_on_its_connection(pair: Pair) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(pair.primary.url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn, conn.begin():
        store = DedupStore(conn, schema=SCHEMA, replicas=[pair.standby.url], create=False)
        store.add("in-host-transaction", text_of(5000))
        assert store.cluster("in-host-transaction").members == ["in-host-transaction"]
        assert store.last_read is None and store.stats().replicas == {}
        conn.rollback()
    engine.dispose()
