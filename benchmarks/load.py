"""CMS load: ``add`` and ``check`` on a stored corpus, alone and from concurrent client processes.

A content management system checks every draft and adds every published page, from many
processes at once. One run, on one seeded corpus (:mod:`benchmarks.ingest_corpus`):

1. *Build*: ``--docs`` documents of ~``--words`` words, ``--dup-rate`` of them edited copies,
   are written to a temporary file, then bulk-loaded with ``DedupStore.ingest`` into the schema
   ``--schema`` (``--reuse`` takes a store left there by an earlier run with ``--keep`` and
   deletes that run's additions instead).
2. *Single client*: alternately ``check(text)`` and ``add(id, text)`` of fresh texts, half new
   documents and half edited copies of stored ones, after untimed warm-up calls.
3. *Load*: ``--clients`` processes (``spawn``), each with its own ``DedupStore(url, schema=...)``,
   released together, each doing ``--ops`` operations, four ``check`` calls to one ``add``, or
   stopping after ``--seconds``. Every text is prepared before the start: new documents, edited
   copies of stored ones, and at every fifth ``add`` of every client an edited copy (or, for one
   client, the text itself) of the same shared new document, so concurrent adds fall into the
   same clusters. Any exception counts as an error. With ``--host-hold MS`` each ``add`` runs
   inside a transaction of the client's own (a CMS request's), on a store opened on its
   Connection, which stays open ``MS`` milliseconds after the ``add`` before it commits.
4. *Replay*: the adds that committed, in the order of their internal ids, are added one by one
   to a second schema loaded with the same corpus; its clusters (``clusters(min_size=2)``, as
   sets of member ids) are compared with the loaded store's. Two adds that could match each
   other share a key lock, held from before the second one's id is drawn until the first
   commits, so their ids are their commit order; adds that cannot match commute.

Only the package's public API drives the store; the benchmark's own SQL (dropping its schemas,
reading the commit order) uses psycopg. Run it as ``python -m benchmarks.load`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import os
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from sqlalchemy import Connection, create_engine

from benchmarks.ingest_corpus import Indices, IngestCorpus, read_documents
from benchmarks.load_profile import WaitSampler, conninfo, profile_adds, with_application_name
from dedup_store import DedupStore, StoreNotInitializedError
from dedup_store.config import normalize_url

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
#: Every document the benchmark adds has an id starting with this (the corpus ids start with d).
ADD_PREFIX = "load-"
ADD_EVERY = 5
"""One operation in ``ADD_EVERY`` is an ``add``, the others are ``check`` calls (4:1)."""
SHARED_EVERY = 5
"""One ``add`` in ``SHARED_EVERY`` of every client is a copy of a document shared by all."""
WARM_UP_CHECKS = 50
WARM_UP_ADDS = 10
EDITED_SOURCES = 5000
SHOWN_ERRORS = 5
Op = tuple[str, str, str]
"""``(kind, id, text)``: ``kind`` is ``check`` (``id`` empty) or ``add``."""


# -- workload ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Workload:
    """Every text of a run, prepared before any timer starts.

    Attributes:
        warm_checks: untimed ``check`` texts (new documents).
        warm_adds: untimed ``add`` records of the single client.
        single: the single client's ``(check text, (add id, add text))`` rounds.
        clients: each client's operations.
        profile: ``add`` records for ``--profile``.
    """

    warm_checks: list[str]
    warm_adds: list[tuple[str, str]]
    single: list[tuple[str, tuple[str, str]]]
    clients: list[list[Op]]
    profile: list[tuple[str, str]]

    def texts(self) -> dict[str, str]:
        """``{id: text}`` of every document the run may add."""
        records = [*self.warm_adds, *(add for _, add in self.single), *self.profile]
        records += [(i, t) for ops in self.clients for kind, i, t in ops if kind == "add"]
        return dict(records)


class TextMaker:
    """New documents and edited copies, from the corpus' vocabulary and a separate stream."""

    def __init__(self, corpus: IngestCorpus, sources: Sequence[Indices], seed: int) -> None:
        self.corpus = corpus
        self.sources = sources
        self.rng = np.random.default_rng([seed, 11])

    def new_indices(self) -> Indices:
        """Word indices of a new document, as long as the corpus' documents."""
        length = int(self.rng.integers(self.corpus.low, self.corpus.high + 1))
        return self.corpus.draw(length, self.rng)

    def new(self) -> str:
        """A new document."""
        return self.corpus.text(self.new_indices())

    def edited(self, indices: Indices | None = None) -> str:
        """An edited copy of ``indices``, by default of a random stored document."""
        if indices is None:
            indices = self.sources[int(self.rng.integers(len(self.sources)))]
        return self.corpus.text(self.corpus.edit(indices, self.rng))

    def mixed(self) -> str:
        """A new document or an edited copy of a stored one, with even odds."""
        return self.new() if self.rng.random() < 0.5 else self.edited()


def make_workload(maker: TextMaker, args: argparse.Namespace) -> Workload:
    """The texts of every phase, ids ``load-w-*``, ``load-s-*``, ``load-p-*``, ``load-c<k>-*``."""
    warm_adds = [(f"{ADD_PREFIX}w-{i:05d}", maker.mixed()) for i in range(WARM_UP_ADDS)]
    single = [
        (maker.mixed(), (f"{ADD_PREFIX}s-{i:05d}", maker.mixed())) for i in range(args.single)
    ]
    profile = [(f"{ADD_PREFIX}p-{i:05d}", maker.mixed()) for i in range(args.profile)]
    adds = -(-args.ops // ADD_EVERY)
    shared = [maker.new_indices() for _ in range(-(-adds // SHARED_EVERY))]
    clients: list[list[Op]] = []
    for client in range(args.clients):
        ops: list[Op] = []
        for i in range(args.ops):
            slot = i // ADD_EVERY
            if i % ADD_EVERY != ADD_EVERY - 1:
                ops.append(("check", "", maker.mixed()))
            elif slot % SHARED_EVERY == 0:
                group = slot // SHARED_EVERY
                own = client == group % args.clients
                text = maker.corpus.text(shared[group]) if own else maker.edited(shared[group])
                ops.append(("add", f"{ADD_PREFIX}c{client}-{slot:05d}", text))
            else:
                ops.append(("add", f"{ADD_PREFIX}c{client}-{slot:05d}", maker.mixed()))
        clients.append(ops)
    return Workload(
        [maker.new() for _ in range(WARM_UP_CHECKS)], warm_adds, single, clients, profile
    )


# -- the benchmark's own SQL ------------------------------------------------------------------


def drop_schema(url: str, schema: str) -> None:
    """Drop a schema of the benchmark and everything in it."""
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def added_ids(url: str, schema: str) -> list[str]:
    """Ids of the documents the benchmark added, in the order they committed."""
    statement = sql.SQL(
        "SELECT external_id FROM {}.documents WHERE starts_with(external_id, %s) ORDER BY id"
    ).format(sql.Identifier(schema))
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        return [row[0] for row in conn.execute(statement, [ADD_PREFIX])]


def server_settings(url: str) -> dict[str, str]:
    """The server settings that matter for these figures."""
    names = (
        "server_version",
        "shared_buffers",
        "synchronous_commit",
        "autovacuum",
        "max_connections",
    )
    query = "SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s) ORDER BY 1"
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        return {str(name): str(value) for name, value in conn.execute(query, [list(names)])}


# -- building the stores ----------------------------------------------------------------------


def build(url: str, schema: str, corpus: Path, args: argparse.Namespace, reuse: bool) -> str:
    """Load the corpus into ``schema``, or with ``reuse`` empty a kept store of earlier adds.

    Returns:
        ``"loaded"`` or ``"reused"``.
    """
    if reuse:
        try:
            with DedupStore(url, schema=schema, create=False) as store:
                earlier = added_ids(url, schema)
                if earlier:
                    store.delete(earlier)
                stored = store.stats().documents
            if stored != args.docs:
                raise SystemExit(
                    f"schema {schema} holds {stored:,} documents, not --docs "
                    f"{args.docs:,}: run without --reuse"
                )
            return "reused"
        except StoreNotInitializedError:
            pass
    drop_schema(url, schema)
    with DedupStore(url, schema=schema) as store:
        store.ingest(read_documents(corpus), batch_size=args.batch_size)
    return "loaded"


def cluster_sets(url: str, schema: str) -> set[frozenset[str]]:
    """Every cluster of two or more documents, as the set of its members' ids."""
    with DedupStore(url, schema=schema, create=False) as store:
        return {frozenset(c.members) for c in store.clusters(min_size=2)}


# -- single client ----------------------------------------------------------------------------


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


# -- concurrent clients -----------------------------------------------------------------------


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


# -- replay -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Replay:
    """The serial replay of the committed adds and the comparison of the clusters."""

    adds: int
    statuses: dict[str, str]
    clusters: int
    replayed_clusters: int
    differing: int


def replay(url: str, schema: str, order: list[str], texts: dict[str, str]) -> dict[str, str]:
    """Add ``order``'s documents one by one; returns ``{id: status}``."""
    with DedupStore(url, schema=schema, create=False) as store:
        return {i: str(store.add(i, texts[i]).status) for i in order}


# -- figures ----------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100), or ``None`` without values."""
    return float(np.percentile(np.asarray(values), q)) if values else None


def figures(single: Latencies, run: LoadRun, check: Replay | None) -> dict[str, Any]:
    """Every measure of the run, by name (milliseconds unless the name says otherwise)."""
    done = len(run.latencies("check")) + len(run.latencies("add"))
    out: dict[str, Any] = {
        "single_check_ms": {f"p{q}": percentile(single.check, q) for q in (50, 90, 99)},
        "single_add_ms": {f"p{q}": percentile(single.add, q) for q in (50, 90, 99)},
        "load_operations": done,
        "load_seconds": run.seconds,
        "load_operations_per_second": done / run.seconds if run.seconds else 0.0,
        "load_check_ms": {f"p{q}": percentile(run.latencies("check"), q) for q in (50, 99)},
        "load_add_ms": {f"p{q}": percentile(run.latencies("add"), q) for q in (50, 99)},
        "load_checks": len(run.latencies("check")),
        "load_adds": len(run.latencies("add")),
        "load_errors": len(run.errors()),
        "load_connection_states": run.states,
    }
    check_p50, add_p50 = out["single_check_ms"]["p50"], out["single_add_ms"]["p50"]
    out["single_add_over_check_p50"] = add_p50 / check_p50 if check_p50 and add_p50 else None
    if check is not None:
        out["replay"] = {k: v for k, v in dataclasses.asdict(check).items() if k != "statuses"}
        out["clusters_equal"] = check.differing == 0
    return out


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def table(f: dict[str, Any], clients: int) -> list[tuple[str, str, str, str]]:
    """``(measure, value, target, verdict)`` rows."""

    def verdict(ok: bool | None) -> str:
        return "-" if ok is None else ("ok" if ok else "MISSED")

    single_c, single_a = f["single_check_ms"], f["single_add_ms"]
    load_c, load_a = f["load_check_ms"], f["load_add_ms"]
    ratio = f["single_add_over_check_p50"]
    done = f["load_operations"] + f["load_errors"]
    rows = [
        (
            "single client: check p50 / p90 / p99 ms",
            " / ".join(_ms(single_c[k]) for k in ("p50", "p90", "p99")),
            "",
            "",
        ),
        (
            "single client: add p50 / p90 / p99 ms",
            " / ".join(_ms(single_a[k]) for k in ("p50", "p90", "p99")),
            "",
            "",
        ),
        (
            "single client: add p50 / check p50",
            "-" if ratio is None else f"{ratio:.1f}x",
            "<= 2x",
            verdict(None if ratio is None else ratio <= 2),
        ),
        (
            f"{clients} clients: operations/s",
            f"{f['load_operations_per_second']:,.0f}",
            ">= 1,000",
            verdict(f["load_operations_per_second"] >= 1000 if done else None),
        ),
        (
            f"{clients} clients: check p50 / p99 ms",
            f"{_ms(load_c['p50'])} / {_ms(load_c['p99'])}",
            "",
            "",
        ),
        (
            f"{clients} clients: add p50 / p99 ms",
            f"{_ms(load_a['p50'])} / {_ms(load_a['p99'])}",
            "p99 <= 50",
            verdict(None if load_a["p99"] is None else load_a["p99"] <= 50),
        ),
        (
            f"{clients} clients: errors",
            f"{f['load_errors']:,}",
            "0",
            verdict(f["load_errors"] == 0 if done else None),
        ),
    ]
    if "replay" in f:
        r = f["replay"]
        rows.append(
            (
                "clusters equal to a serial replay",
                f"{'equal' if f['clusters_equal'] else 'NOT equal'} ({r['differing']:,} of "
                f"{r['clusters']:,} / {r['replayed_clusters']:,} differ)",
                "equal",
                verdict(f["clusters_equal"]),
            )
        )
    return rows


def print_report(
    f: dict[str, Any], args: argparse.Namespace, phases: dict[str, float], run: LoadRun
) -> None:
    """The figures as a table, the phases' durations and the first errors."""
    rows = table(f, args.clients)
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"\n{'measure':<{widths[0]}}  {'value':>{widths[1]}}  {'target':<{widths[2]}}  ")
    for measure, value, target, verdict in rows:
        print(f"{measure:<{widths[0]}}  {value:>{widths[1]}}  {target:<{widths[2]}}  {verdict}")
    print(
        f"\nload: {f['load_checks']:,} checks and {f['load_adds']:,} adds in "
        f"{f['load_seconds']:.1f} s (--ops {args.ops:,} per client, --seconds {args.seconds:g})"
    )
    if "replay" in f:
        print(
            f"replay: {f['replay']['adds']:,} adds; statuses differing from the load run: "
            f"{f['statuses_differing']:,}"
        )
    states = ", ".join(f"{name} {mean:.2f}" for name, mean in f["load_connection_states"].items())
    if states:
        print(f"client connections in each state during the load (mean of samples): {states}")
    m = f["machine"]
    print(
        f"machine: {m['cores']} cores, load average (1 min) {m['load_before']:.2f} before the "
        f"load run, {m['load_after']:.2f} after"
    )
    print("phases: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items()))
    errors = run.errors()
    for line in errors[:SHOWN_ERRORS]:
        print(f"error: {line[:300]}")
    if len(errors) > SHOWN_ERRORS:
        print(f"... and {len(errors) - SHOWN_ERRORS:,} more errors")


# -- main -------------------------------------------------------------------------------------


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def phase(phases: dict[str, float], name: str) -> Iterator[None]:
    """Time a phase into ``phases`` and log it."""
    log(f"{name} ...")
    started = time.perf_counter()
    yield
    phases[name] = time.perf_counter() - started
    log(f"{name}: {phases[name]:.1f} s")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--docs", type=int, default=100_000, help="documents in the store")
    add("--words", type=int, default=40, help="mean words per document (±25%%)")
    add("--dup-rate", type=float, default=0.2, help="share of the corpus that are edited copies")
    add("--batch-size", type=int, default=5000, help="DedupStore.ingest batch size")
    add("--seed", type=int, default=1, help="seed of the corpus and of every text")
    add(
        "--url",
        default=os.environ.get("DEDUP_STORE_TEST_URL", DEFAULT_URL),
        help="PostgreSQL URL (default $DEDUP_STORE_TEST_URL or %(default)s)",
    )
    add(
        "--schema",
        default=f"bench_load_{os.getpid()}",
        help="schema of the store (the replay uses <schema>_replay)",
    )
    add(
        "--reuse",
        action="store_true",
        help="use the stores kept in --schema by an earlier --keep run (its adds are deleted)",
    )
    add("--keep", action="store_true", help="keep both schemas afterwards")
    add("--single", type=int, default=500, help="check and add calls of the single client")
    add("--clients", type=int, default=8, help="concurrent client processes")
    add("--ops", type=int, default=2500, help="operations per client (check:add = 4:1)")
    add("--seconds", type=float, default=120.0, help="stop every client after this long")
    add(
        "--host-hold",
        type=float,
        default=0.0,
        metavar="MS",
        help="run each add of the load in a host transaction held open MS ms before it commits",
    )
    add(
        "--replay",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="replay the adds serially on a copy and compare the clusters",
    )
    add(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also show where N single-client check and add calls spend their time",
    )
    add("--json", action="store_true", help="print the figures as JSON instead of a table")
    add("--tmp", type=Path, default=None, help="directory of the generated corpus file")
    return parser.parse_args(argv)


def run(args: argparse.Namespace, workdir: Path) -> None:
    """Every phase, then the report."""
    phases: dict[str, float] = {}
    schemas = [args.schema, f"{args.schema}_replay"] if args.replay else [args.schema]
    log(
        f"{args.docs:,} documents of ~{args.words} words in {', '.join(schemas)}; "
        f"{args.clients} clients x {args.ops:,} operations"
        + (f", adds held {args.host_hold:g} ms" if args.host_hold else "")
        + f"; server {server_settings(args.url)}; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    with phase(phases, "corpus"):
        corpus = IngestCorpus(args.seed, args.words, args.dup_rate)
        positions = np.random.default_rng([args.seed, 7]).choice(
            args.docs, min(EDITED_SOURCES, args.docs), replace=False
        )
        generated = corpus.write(workdir / "corpus.tsv", args.docs, keep=positions.tolist())
        workload = make_workload(TextMaker(corpus, list(generated.kept.values()), args.seed), args)
    try:
        with phase(phases, "build"):
            log(f"{args.schema}: {build(args.url, args.schema, generated.path, args, args.reuse)}")
        with phase(phases, "single client"):
            single = single_client(args.url, args.schema, workload)
        if args.profile:
            with phase(phases, "profile"):
                profile_adds(args.url, args.schema, workload.profile)
        before = os.getloadavg()[0]
        with phase(phases, "load"):
            loaded = (
                load_run(args.url, args.schema, workload, args.seconds, args.host_hold / 1000)
                if args.ops > 0 and args.clients > 0
                else LoadRun([], 0.0, {})
            )
        machine = {"cores": os.cpu_count(), "load_before": before, "load_after": os.getloadavg()[0]}
        checked = None
        if args.replay:
            checked = replay_phase(args, generated.path, workload, phases)
        f = figures(single, loaded, checked)
        if checked is not None:
            ran = loaded.statuses()
            f["statuses_differing"] = sum(checked.statuses.get(i) != s for i, s in ran.items())
        f["phases_seconds"], f["machine"] = phases, machine
        if args.json:
            print(json.dumps(f, indent=2))
        else:
            print_report(f, args, phases, loaded)
    finally:
        if not args.keep:
            for schema in schemas:
                drop_schema(args.url, schema)


def replay_phase(
    args: argparse.Namespace, corpus: Path, workload: Workload, phases: dict[str, float]
) -> Replay:
    """Load the copy, replay the committed adds in commit order, compare the clusters."""
    copy = f"{args.schema}_replay"
    order = added_ids(args.url, args.schema)
    with phase(phases, "replay build"):
        log(f"{copy}: {build(args.url, copy, corpus, args, args.reuse)}")
    with phase(phases, "replay adds"):
        statuses = replay(args.url, copy, order, workload.texts())
    with phase(phases, "compare clusters"):
        ours, theirs = cluster_sets(args.url, args.schema), cluster_sets(args.url, copy)
    return Replay(len(order), statuses, len(ours), len(theirs), len(ours ^ theirs))


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options and run the benchmark in a temporary directory."""
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dedup-load-", dir=args.tmp) as workdir:
        run(args, Path(workdir))


if __name__ == "__main__":
    main()
