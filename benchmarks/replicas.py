"""Reads on a streaming replica: what one costs, and what readers see while its replay stops.

``python -m benchmarks.replicas`` makes a PostgreSQL primary and a hot standby of it
(:mod:`benchmarks.replica_servers`: ``initdb``, ``pg_basebackup -R``, ports of their own), loads
``--documents`` seeded ~40-word documents into the primary, and measures in one run:

1. **CPU per ``check``**, of this process and of the backends that serve it (found by
   ``application_name`` on both servers), through a store on the primary alone and through a
   store given the standby, in ``--rounds`` interleaved slices of ``--calls`` checks each.
   The ratio of the two is the cost of routing (the target is at most 1.1).
2. **8 readers while replay stops**: 8 threads call ``check`` and ``cluster`` of documents a
   writer thread adds through the same store (one a second); replay is paused for
   ``--pause`` seconds, then resumed. Counted: errors; reads served by a replica lagging by more
   than ``max_replica_lag`` (0.5 s); reads that missed a document the store had added (the
   read-your-writes promise); and how the reads were split between the standby and the
   primary.
"""

from __future__ import annotations

import argparse
import functools
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import psycopg

from benchmarks.load_workload import TextMaker
from benchmarks.op_cost import (
    Work,
    application_pids,
    corpus_sources,
    interleaved,
    machine,
    store_url,
)
from benchmarks.replica_servers import Pair, primary_and_standby
from dedup_store import DedupStore, UnknownDocumentError

SCHEMA = "bench_replicas"
APPLICATION = "dedup_store_replicas"
MAX_LAG = 0.5


def load(pair: Pair, documents: int, seed: int, count: int) -> list[str]:
    """Load the corpus into the primary; ``count`` fresh texts to check (half new, half
    edited copies of stored documents)."""
    options = argparse.Namespace(
        seed=seed, documents=documents, url=pair.primary.url, schema=SCHEMA
    )
    corpus, sources = corpus_sources(options, load=True)
    pair.wait_replayed(600)
    maker = TextMaker(corpus, sources, seed)
    return [maker.mixed() for _ in range(count)]


def check_cost(pair: Pair, texts: list[str], calls: int, rounds: int) -> dict[str, Any]:
    """CPU ms per ``check``: primary alone, and with the standby as replica."""
    app_primary, app_replica = f"{APPLICATION}_p", f"{APPLICATION}_r"
    alone = DedupStore(store_url(pair.primary.url, app_primary), schema=SCHEMA)
    routed = DedupStore(
        store_url(pair.primary.url, app_replica),
        schema=SCHEMA,
        replicas=[store_url(pair.standby.url, app_replica)],
        max_replica_lag=MAX_LAG,
    )
    monitors = [psycopg.connect(s.url, autocommit=True) for s in (pair.primary, pair.standby)]

    def pids(application: str) -> list[int]:
        return [pid for m in monitors for pid in application_pids(m, application)]

    for store in (alone, routed):
        for text in texts[:50]:
            store.check(text)
    work = {
        "primary alone": Work(
            [functools.partial(alone.check, t) for t in texts[:calls]],
            lambda: pids(app_primary),
        ),
        "with replica": Work(
            [functools.partial(routed.check, t) for t in texts[calls : 2 * calls]],
            lambda: pids(app_replica),
        ),
    }
    costs = {name: cost.per_call() for name, cost in interleaved(work, rounds).items()}
    served = routed.stats().replicas
    for store in (alone, routed):
        store.close()
    for monitor in monitors:
        monitor.close()
    ratio = costs["with replica"]["total"] / costs["primary alone"]["total"]
    return {"costs": costs, "ratio": ratio, "served": served}


def readers_while_replay_stops(pair: Pair, texts: list[str], pause: float) -> dict[str, Any]:
    """8 readers and a writer on one store while the standby's replay is paused, then resumed."""
    store = DedupStore(
        pair.primary.url, schema=SCHEMA, replicas=[pair.standby.url], max_replica_lag=MAX_LAG
    )
    added: list[str] = []
    counts: dict[str, Any] = {
        "reads": 0,
        "errors": 0,
        "too_old": 0,
        "missed_own_write": 0,
        "on_standby": 0,
    }
    lock, stop = threading.Lock(), threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            store.add(f"live-{n}", f"{texts[n]} live {n}")
            with lock:
                added.append(f"live-{n}")
            n += 1
            time.sleep(1.0)

    def read(k: int) -> None:
        n = k
        while not stop.is_set():
            with lock:
                mine = added[-1] if added else None
            try:
                store.check(texts[n % len(texts)])
                _tally(store, counts, lock)
                if mine is not None:
                    try:
                        store.cluster(mine)
                    except UnknownDocumentError:
                        with lock:
                            counts["missed_own_write"] += 1
                    _tally(store, counts, lock)
            except Exception:
                with lock:
                    counts["errors"] += 1
            n += 8

    threads = [threading.Thread(target=write)] + [
        threading.Thread(target=read, args=(k,)) for k in range(8)
    ]
    for thread in threads:
        thread.start()
    time.sleep(2.0)
    pair.standby.sql("SELECT pg_wal_replay_pause()")
    time.sleep(pause)
    pair.standby.sql("SELECT pg_wal_replay_resume()")
    time.sleep(3.0)
    stop.set()
    for thread in threads:
        thread.join()
    counts["replica_counters"] = store.stats().replicas
    store.close()
    return counts


def _tally(store: DedupStore, counts: dict[str, Any], lock: threading.Lock) -> None:
    source = store.last_read
    with lock:
        counts["reads"] += 1
        if source is not None and source.replica is not None:
            counts["on_standby"] += 1
            if source.lag is not None and source.lag > MAX_LAG:
                counts["too_old"] += 1


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=1000, help="timed checks of each kind")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved slices")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds replay is paused")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    with primary_and_standby() as pair:
        texts = load(pair, args.documents, args.seed, 2 * args.calls + 2000)
        figures = {
            "machine": machine(),
            "documents": args.documents,
            "check": check_cost(pair, texts, args.calls, args.rounds),
            "readers": readers_while_replay_stops(pair, texts, args.pause),
        }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{figures['machine']}, {args.documents:,} documents")
    print("CPU ms per check   client  backend  total   wall")
    for name, cost in figures["check"]["costs"].items():
        print(
            f"{name:<16} {cost['client']:7.3f} {cost['backend']:8.3f} {cost['total']:6.3f}"
            f" {cost['wall']:6.3f}"
        )
    print(f"with replica / primary alone: {figures['check']['ratio']:.2f}")
    readers = figures["readers"]
    print(
        f"8 readers, replay paused {args.pause:.0f} s: {readers['reads']:,} reads, "
        f"{readers['on_standby']:,} on the standby, errors {readers['errors']}, "
        f"older than {MAX_LAG} s {readers['too_old']}, "
        f"own writes missed {readers['missed_own_write']}"
    )


if __name__ == "__main__":
    main()
