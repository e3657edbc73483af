"""The CMS load through ``AsyncDedupStore`` on one event loop against ``DedupStore`` from
threads, in one run.

``python -m benchmarks.async_load`` bulk-loads ``--documents`` seeded ~40-word documents (20 %
edited copies), then runs the same kind of load on that store from 16 threads on one
``DedupStore`` and from 16 coroutines on one ``AsyncDedupStore`` (both with ``pool_size`` 16),
in two rounds taken in turn, each client doing ``--operations`` calls in all, four ``check`` to
one ``add`` of fresh texts (half new documents, half edited copies of stored ones). It prints
the operations per second of each and their ratio (the target: the coroutines at least 0.9 of
the threads), then replays every add, in the order they were made, in one thread into a second
store loaded the same way and compares the clusters of the two stores.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.common import add_seed, add_url, drop_schema
from benchmarks.load_workload import TextMaker
from benchmarks.op_cost import corpus_sources
from dedup_store import AsyncDedupStore, DedupStore

CLIENTS = 16


def workload(maker: TextMaker, tag: str, operations: int) -> list[list[tuple[str, str]]]:
    """Per client, its calls: ``("check", text)`` four times, then ``("add:<id>", text)``."""
    plans = []
    for client in range(CLIENTS):
        calls = []
        for n in range(operations):
            kind = f"add:{tag}-{client}-{n}" if n % 5 == 4 else "check"
            calls.append((kind, maker.mixed()))
        plans.append(calls)
    return plans


def with_threads(store: DedupStore, plans: list[list[tuple[str, str]]], added: list[str]) -> float:
    lock = threading.Lock()

    def client(calls: list[tuple[str, str]]) -> None:
        for kind, text in calls:
            if kind == "check":
                store.check(text)
            else:
                store.add(kind[4:], text)
                with lock:
                    added.append(kind[4:])

    threads = [threading.Thread(target=client, args=(calls,)) for calls in plans]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


async def with_coroutines(
    store: AsyncDedupStore, plans: list[list[tuple[str, str]]], added: list[str]
) -> float:
    async def client(calls: list[tuple[str, str]]) -> None:
        for kind, text in calls:
            if kind == "check":
                await store.check(text)
            else:
                await store.add(kind[4:], text)
                added.append(kind[4:])

    started = time.perf_counter()
    await asyncio.gather(*(client(calls) for calls in plans))
    return time.perf_counter() - started


def clusters_of(url: str, schema: str) -> set[frozenset[str]]:
    with DedupStore(url, schema=schema) as store:
        return {frozenset(c.members) for c in store.clusters(2)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--operations", type=int, default=500, help="calls per client")
    add_seed(parser, 1, "seed of the corpus and of every text")
    add_url(parser)
    args = parser.parse_args(argv)
    schemas = ("bench_async_load", "bench_async_replay")
    texts: dict[str, str] = {}
    try:
        figures: dict[str, Any] = {}
        for schema in schemas:
            drop_schema(args.url, schema)
            options = argparse.Namespace(**{**vars(args), "schema": schema})
            corpus, sources = corpus_sources(options, load=True)
        maker = TextMaker(corpus, sources, args.seed)
        rounds = 2  # taken in turn, so that the growing store weighs on both alike
        each = args.operations // rounds
        plans = {
            kind: [workload(maker, f"{kind[0]}{r}", each) for r in range(rounds)]
            for kind in ("threads", "coroutines")
        }
        for kind_plans in plans.values():
            for plan in kind_plans:
                texts.update((k[4:], t) for calls in plan for k, t in calls if k != "check")
        order: list[str] = []
        seconds = {"threads": 0.0, "coroutines": 0.0}

        async def run(plan: list[list[tuple[str, str]]]) -> float:
            async with AsyncDedupStore(args.url, schema=schemas[0], pool_size=CLIENTS) as s:
                return await with_coroutines(s, plan, order)

        with DedupStore(args.url, schema=schemas[0], pool_size=CLIENTS) as store:
            for r in range(rounds):
                seconds["threads"] += with_threads(store, plans["threads"][r], order)
                seconds["coroutines"] += asyncio.run(run(plans["coroutines"][r]))
        figures = {kind: CLIENTS * each * rounds / spent for kind, spent in seconds.items()}
        with DedupStore(args.url, schema=schemas[1]) as replay:
            for external_id in order:
                replay.add(external_id, texts[external_id])
        same = clusters_of(args.url, schemas[0]) == clusters_of(args.url, schemas[1])
    finally:
        for schema in schemas:
            drop_schema(args.url, schema)
    each = f"{CLIENTS} clients x {args.operations} calls (4 check : 1 add)"
    print(f"{args.documents:,} documents, {each}")
    print(f"16 threads on DedupStore:         {figures['threads']:8.0f} operations/s")
    print(f"16 coroutines on AsyncDedupStore: {figures['coroutines']:8.0f} operations/s")
    print(f"coroutines / threads: {figures['coroutines'] / figures['threads']:.2f}")
    print(f"clusters equal to a serial replay of the adds: {same}")


if __name__ == "__main__":
    main()
