"""``AsyncDedupStore``: the library's calls as coroutines, on its own connections, in the
caller's SQLAlchemy or psycopg async transaction, and cancelled midway."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from dedup_store import AsyncDedupStore, Cluster, DedupStore, Status, UnknownDocumentError, aio

pytestmark = pytest.mark.db

TEXT = (
    "The city council approved the new budget on Tuesday after a long debate about "
    "road repairs, school funding and the renovation of the central library building."
)


def count(engine: Engine, schema: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(text(f'SELECT count(*) FROM "{schema}".documents')).scalar_one())


def test_the_calls_give_what_the_library_gives(
    engine: Engine, schema: str, database_url: str
) -> None:
    async def main() -> None:
        async with AsyncDedupStore(database_url, schema=schema) as store:
            assert (await store.add("a", TEXT)).status is Status.NEW
            added = await store.add_many([("b", TEXT), ("c", TEXT + " again, with more words")])
            assert [r.status for r in added] == [Status.EXACT_DUPLICATE, Status.NEAR_DUPLICATE]
            assert (await store.check(TEXT)).status is Status.EXACT_DUPLICATE
            assert [m.external_id for m in await store.similar("a")] == ["b", "c"]
            assert (await store.cluster("a")).members == ["a", "b", "c"]
            assert [c.members async for c in store.clusters()] == [["a", "b", "c"]]
            assert len([p async for p in store.pairs()]) == 2
            review = await store.review("a", "c", "not_duplicate")
            assert review.cut and await store.verdicts() == [review]
            assert (await store.explain("a", "b")).exact
            assert (await store.stats()).documents == 3
            assert await store.delete(["c"]) == 1
            with pytest.raises(UnknownDocumentError):
                await store.cluster("c")
            # many calls at once, each on a worker thread
            found = await asyncio.gather(*(store.check(TEXT) for _ in range(20)))
            assert {r.status for r in found} == {Status.EXACT_DUPLICATE}

    asyncio.run(main())


def test_inside_the_callers_async_transactions(
    engine: Engine, schema: str, database_url: str
) -> None:
    DedupStore(engine, schema=schema).close()

    async def sqlalchemy_connection(commit: bool) -> None:
        async_engine = create_async_engine(database_url)
        async with async_engine.connect() as conn:
            await conn.begin()
            store = await AsyncDedupStore(conn, schema=schema).open()
            await store.add("sa-" + str(commit), TEXT)
            assert (await store.check(TEXT)).matches
            await (conn.commit() if commit else conn.rollback())
        await async_engine.dispose()

    async def psycopg_connection(commit: bool) -> None:
        import psycopg

        conninfo = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
        async with await psycopg.AsyncConnection.connect(conninfo) as raw:
            store = await AsyncDedupStore(raw, schema=schema).open()
            await store.add("pg-" + str(commit), TEXT + " from psycopg")
            await (raw.commit() if commit else raw.rollback())
            await store.close()
            assert not raw.closed

    asyncio.run(sqlalchemy_connection(False))
    assert count(engine, schema) == 0
    asyncio.run(sqlalchemy_connection(True))
    asyncio.run(psycopg_connection(False))
    assert count(engine, schema) == 1
    asyncio.run(psycopg_connection(True))
    assert count(engine, schema) == 2


def test_calls_in_an_async_callers_transaction_plan_generically(
    engine: Engine, schema: str, database_url: str
) -> None:
    # as in a synchronous caller's transaction: the server does not plan a check again on every
    # call, and the caller's own setting is as it was
    DedupStore(engine, schema=schema).close()

    async def main() -> tuple[str, list[tuple[int, int]]]:
        async_engine = create_async_engine(database_url)
        async with async_engine.connect() as conn:
            await conn.begin()
            await conn.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
            store = await AsyncDedupStore(conn, schema=schema).open()
            await store.add("a", TEXT)
            for n in range(8):
                await store.check(f"{TEXT} Call {n}.")
            setting = (await conn.execute(text("SHOW plan_cache_mode"))).scalar_one()
            plans = (
                await conn.execute(
                    text(
                        "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                        "WHERE statement LIKE '%WITH found AS MATERIALIZED%'"
                    )
                )
            ).all()
            await conn.rollback()
        await async_engine.dispose()
        return setting, [(int(generic), int(custom)) for generic, custom in plans]

    setting, plans = asyncio.run(main())
    assert setting == "force_custom_plan"
    assert plans and all(generic > 0 and custom == 0 for generic, custom in plans)


def test_a_cancelled_call_leaves_nothing_half_written(
    engine: Engine, schema: str, database_url: str
) -> None:
    documents = [(f"d{i}", f"{TEXT} number {i} " + " ".join(f"w{i}x{k}" for k in range(30)))
                 for i in range(20_000)]  # fmt: skip

    async def main() -> None:
        async with AsyncDedupStore(database_url, schema=schema) as store:
            task = asyncio.create_task(store.ingest(documents, batch_size=500, bulk=False))
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(main())
    with engine.connect() as conn:
        stored = conn.execute(text(f'SELECT count(*) FROM "{schema}".documents')).scalar_one()
        edges_to_nowhere = conn.execute(text(
            f'SELECT count(*) FROM "{schema}".edges e LEFT JOIN "{schema}".documents d '
            "ON d.id = e.b WHERE d.id IS NULL"
        )).scalar_one()  # fmt: skip
    assert 0 < stored < len(documents) and stored % 500 == 0  # whole batches, then it stopped
    assert edges_to_nowhere == 0


def test_clusters_and_pairs_stream_and_end_their_read_when_left_early(
    engine: Engine, schema: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(aio, "STREAM_CHUNK", 2)
    groups = [f"{TEXT} Group {n}: " + " ".join(f"word{n}x{k}" for k in range(12)) for n in range(5)]
    with DedupStore(engine, schema=schema) as sync:
        sync.add_many([(f"{n}-{copy}", text) for n, text in enumerate(groups) for copy in "ab"])
        expected_clusters, expected_pairs = list(sync.clusters()), list(sync.pairs())
    assert len(expected_clusters) == 5 and len(expected_pairs) == 5

    async def main() -> None:
        async with AsyncDedupStore(database_url, schema=schema) as store:
            assert [c async for c in store.clusters()] == expected_clusters
            assert [p async for p in store.pairs()] == expected_pairs
            read: list[int] = []
            whole = store.store.clusters

            def counted(*args: object, **kwargs: object) -> Iterator[Cluster]:
                for n, found in enumerate(whole(*args, **kwargs)):  # type: ignore[arg-type]
                    read.append(n)
                    yield found

            monkeypatch.setattr(store.store, "clusters", counted)
            async for first in store.clusters():
                assert first == expected_clusters[0]
                assert len(read) == 2  # one chunk read, not the whole
                break
            await asyncio.sleep(0)
            # the read ended with the loop: no transaction of the store is left open
            assert open_transactions(engine, schema) == 0

    asyncio.run(main())


def open_transactions(engine: Engine, schema: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction' "
                    "AND datname = current_database() AND query LIKE :schema"
                ),
                {"schema": f'%"{schema}"%'},
            ).scalar_one()
        )
