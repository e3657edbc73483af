"""The clients of :mod:`benchmarks.load`: one client alone, then ``--clients`` processes released
together, each timing its operations.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import queue
import threading
import time
from typing import Any

from sqlalchemy import Connection, create_engine

from benchmarks.load_profile import WaitSampler, with_application_name
from benchmarks.load_workload import Op, Workload
from dedup_store import DedupStore
from dedup_store.config import normalize_url


@dataclasses.dataclass
class Latencies:
    """Milliseconds per call, by kind."""

    check: list[float] = dataclasses.field(default_factory=list)
    add: list[float] = dataclasses.field(default_factory=list)

    def of(self, kind: str) -> list[float]:
        """The list of ``kind`` (``check`` or ``add``)."""
        return self.check if kind == "check" else self.add


def single_client(url: str, schema: str, workload: Workload) -> Latencies:
    """Time alternate ``check`` and ``add`` calls of one client."""
    timed = Latencies()
    with DedupStore(url, schema=schema, create=False) as store:
        for text in workload.warm_checks:
            store.check(text)
        for external_id, text in workload.warm_adds:
            store.add(external_id, text)
        for check_text, (external_id, text) in workload.single:
            started = time.perf_counter()
            store.check(check_text)
            middle = time.perf_counter()
            store.add(external_id, text)
            timed.check.append((middle - started) * 1000)
            timed.add.append((time.perf_counter() - middle) * 1000)
    return timed


@dataclasses.dataclass
class ClientResult:
    """What one client process did.

    Attributes:
        index: the client's number.
        started, ended: ``time.monotonic()`` at the common start and at its last operation.
        latencies: milliseconds of each operation that succeeded.
        errors: one line per operation that raised.
        statuses: ``{id: status}`` of every successful ``add``.
    """

    index: int
    started: float = 0.0
    ended: float = 0.0
    latencies: Latencies = dataclasses.field(default_factory=Latencies)
    errors: list[str] = dataclasses.field(default_factory=list)
    statuses: dict[str, str] = dataclasses.field(default_factory=dict)


def client(
    index: int,
    url: str,
    schema: str,
    ops: list[Op],
    warm: list[str],
    seconds: float,
    barrier: Any,
    results: Any,
    host_hold: float = 0.0,
) -> None:
    """One client process: open the store, wait for the others, run ``ops`` until the deadline
    (with ``host_hold``, each ``add`` in a host transaction held that many seconds)."""
    result = ClientResult(index)
    engine = create_engine(normalize_url(url), pool_size=1)
    try:
        with DedupStore(url, schema=schema, create=False) as store, engine.connect() as conn:
            host = HostAdds(conn, schema, host_hold) if host_hold > 0 else None
            for text in warm:
                store.check(text)
            barrier.wait()
            result.started = time.monotonic()
            run_ops(store, ops, result.started + seconds, result, host)
            result.ended = time.monotonic()
    except BaseException as e:
        barrier.abort()
        result.errors.append(f"client {index}: {type(e).__name__}: {e}")
    finally:
        engine.dispose()
    results.put(result)


class HostAdds:
    """``add`` inside a transaction of the caller's, kept open ``hold`` seconds afterwards."""

    def __init__(self, conn: Connection, schema: str, hold: float) -> None:
        self.conn, self.hold = conn, hold
        with conn.begin():
            self.store = DedupStore(conn, schema=schema, create=False)

    def add(self, external_id: str, text: str) -> str:
        """Add a document in a transaction of its own, held open, then committed."""
        with self.conn.begin():
            status = str(self.store.add(external_id, text).status)
            time.sleep(self.hold)
        return status


def run_ops(
    store: DedupStore,
    ops: list[Op],
    deadline: float,
    result: ClientResult,
    host: HostAdds | None = None,
) -> None:
    """Run ``ops`` in order until they are done or ``deadline`` (monotonic) has passed; adds
    go through ``host`` when given."""
    for kind, external_id, text in ops:
        if time.monotonic() >= deadline:
            return
        started = time.perf_counter()
        try:
            if kind == "check":
                store.check(text)
            elif host is not None:
                result.statuses[external_id] = host.add(external_id, text)
            else:
                result.statuses[external_id] = str(store.add(external_id, text).status)
        except Exception as e:
            result.errors.append(f"{kind} {external_id or text[:30]!r}: {type(e).__name__}: {e}")
            continue
        result.latencies.of(kind).append((time.perf_counter() - started) * 1000)


@dataclasses.dataclass
class LoadRun:
    """What the clients did together.

    Attributes:
        results: each client's result.
        seconds: wall time from the common start to the last client's last operation.
        states: mean number of client connections in each state
            (:class:`~benchmarks.load_profile.WaitSampler`).
    """

    results: list[ClientResult]
    seconds: float
    states: dict[str, float]

    def latencies(self, kind: str) -> list[float]:
        """Milliseconds of every successful ``kind`` operation of every client."""
        return [ms for r in self.results for ms in r.latencies.of(kind)]

    def errors(self) -> list[str]:
        """Every error, client by client."""
        return [e for r in self.results for e in r.errors]

    def statuses(self) -> dict[str, str]:
        """``{id: status}`` of every successful ``add``."""
        return {k: v for r in self.results for k, v in r.statuses.items()}


def load_run(
    url: str, schema: str, workload: Workload, seconds: float, host_hold: float = 0.0
) -> LoadRun:
    """Start one process per client, release them together, collect their results."""
    context = multiprocessing.get_context("spawn")
    clients = len(workload.clients)
    barrier = context.Barrier(clients + 1)
    results = context.Queue()
    processes = [
        context.Process(
            target=client,
            args=(
                k,
                with_application_name(url),
                schema,
                ops,
                workload.warm_checks[:10],
                seconds,
                barrier,
                results,
                host_hold,
            ),
        )
        for k, ops in enumerate(workload.clients)
    ]
    for process in processes:
        process.start()
    sampler = WaitSampler(url)
    with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: see its result
        barrier.wait(timeout=300)
    sampler.start()
    collected: list[ClientResult] = []
    while len(collected) < clients:
        try:
            collected.append(results.get(timeout=seconds + 300))
        except queue.Empty:
            break
    states = sampler.stop()
    for process in processes:
        process.join(timeout=60)
    ran = [r for r in collected if r.ended > 0]
    wall = max(r.ended for r in ran) - min(r.started for r in ran) if ran else 0.0
    return LoadRun(sorted(collected, key=lambda r: r.index), wall, states)
