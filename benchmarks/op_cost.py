"""Cost of one call: the CPU of ``DedupStore.check`` and ``DedupStore.add`` beside two floors.

One run, on one seeded corpus of ~40-word documents (:mod:`benchmarks.ingest_corpus`, 20 % of
them edited copies), bulk-loaded into a fresh schema (``--reuse`` takes a loaded one):

* ``check`` and ``add``, ``--calls`` each, of fresh texts: half new documents, half edited copies
  of stored ones (:class:`benchmarks.load_workload.TextMaker`), after untimed warm-up calls;
* ``host check`` and ``host add``: the same calls of a store inside a host's SQLAlchemy
  connection, each in a transaction of the host's (begun, the call made, committed);
* floor (a): one statement round trip, a prepared ``SELECT 1`` on a plain psycopg connection;
* floor (b): a prepared 22-key ``= ANY`` probe of one narrow btree, ``(key) INCLUDE (id)`` over
  a table of 22 random keys for each of ``--documents`` documents (in the schema
  ``<schema>_floor``), with the 22 keys of one of them.

Each figure is CPU milliseconds per call, of the client (this process, ``time.process_time``
around the calls) and of the backends serving it (``utime + stime`` of ``/proc/<pid>/stat``;
the store's backends are every backend with this run's ``application_name``, read from
``pg_stat_activity`` before and after). CPU time, unlike wall time (printed beside it), moves
little with other load on the machine; the server must run on this machine. Then the ratios to
floor (b) and the store's size (``pg_total_relation_size`` of its tables). Unless
``--no-fresh``, the store's figures are measured again by a new process (this script with
``--reuse``); with ``--after-adds N`` also after N single adds and ``VACUUM ANALYZE`` of the
store's tables (what autovacuum would do), again in a new process.

Only the package's public API drives the store; everything else is the benchmark's own SQL.
Run it as ``python -m benchmarks.op_cost`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from sqlalchemy import create_engine

from benchmarks.common import (
    add_seed,
    add_store_options,
    add_url,
    conninfo,
    drop_schema,
    sqlalchemy_url,
)
from benchmarks.ingest_corpus import Indices, IngestCorpus
from benchmarks.load import server_settings
from benchmarks.load_workload import TextMaker
from dedup_store import DedupStore, StoreNotInitializedError

KEYS = 22
"""Keys a document of the probe floor's table holds, and keys a probe asks for."""
WARM_UP = 20
SOURCES = 5000
"""Stored documents whose edited copies the calls use."""
TICKS = os.sysconf("SC_CLK_TCK")
APPLICATION = "dedup_store_op_cost"


@dataclasses.dataclass
class Cost:
    """CPU and elapsed seconds of some calls.

    Attributes:
        client: CPU seconds of this process.
        backend: CPU seconds of the server's backends that served the calls.
        wall: elapsed seconds, for comparison (it moves with the machine's load).
        calls: how many calls were timed.
        backends: the most backends that served one slice of them.
    """

    client: float = 0.0
    backend: float = 0.0
    wall: float = 0.0
    calls: int = 0
    backends: int = 0

    def add(self, other: Cost) -> None:
        """Count ``other``'s calls in these."""
        self.client, self.backend = self.client + other.client, self.backend + other.backend
        self.wall, self.calls = self.wall + other.wall, self.calls + other.calls
        self.backends = max(self.backends, other.backends)

    def per_call(self) -> dict[str, float]:
        """Milliseconds per call: ``client``, ``backend``, their ``total`` and ``wall``; and
        ``calls`` and ``backends``."""
        ms = {name: getattr(self, name) * 1000 / self.calls for name in ("client", "backend")}
        ms |= {"total": ms["client"] + ms["backend"], "wall": self.wall * 1000 / self.calls}
        return ms | {"calls": self.calls, "backends": self.backends}


@dataclasses.dataclass
class Work:
    """Calls to time, and how to find the backends that serve them."""

    calls: list[Callable[[], object]]
    pids: Callable[[], list[int]]


# -- CPU of this process and of the server's backends -------------------------------------------


def backend_seconds(pid: int) -> float:
    """CPU seconds a server process has used (``/proc/<pid>/schedstat``, in nanoseconds, else
    ``utime + stime`` of ``/proc/<pid>/stat``, in clock ticks), 0 once it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def application_pids(monitor: psycopg.Connection[Any], application: str) -> list[int]:
    """The backends of this database whose ``application_name`` is ``application``."""
    query = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = %s"
    )
    return [row[0] for row in monitor.execute(query, [application])]


def timed(calls: Sequence[Callable[[], object]], pids: Callable[[], list[int]]) -> Cost:
    """Run ``calls``; the CPU of this process and of the backends ``pids()`` names (before and
    after: a backend that started between counts from zero)."""
    before = {pid: backend_seconds(pid) for pid in pids()}
    started, wall = time.process_time(), time.perf_counter()
    for call in calls:
        call()
    client, wall = time.process_time() - started, time.perf_counter() - wall
    after = {pid: backend_seconds(pid) for pid in pids()}
    if set(before) - set(after):
        print(f"warning: backends {sorted(set(before) - set(after))} ended", file=sys.stderr)
    backend = sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
    return Cost(client, backend, wall, len(calls), len(after))


def interleaved(work: dict[str, Work], rounds: int) -> dict[str, Cost]:
    """Time every kind of work in ``rounds`` slices, one slice of each kind in turn, so that a
    change in the machine's load touches them all alike."""
    costs = {name: Cost() for name in work}
    for round_number in range(rounds):
        for name, kind in work.items():
            costs[name].add(timed(kind.calls[round_number::rounds], kind.pids))
    return costs


def fetch(
    conn: psycopg.Connection[Any], query: str | sql.Composed, params: Sequence[object] = ()
) -> object:
    """Every row of ``query``, run as a prepared statement."""
    return conn.execute(query, params, prepare=True).fetchall()


# -- the store ------------------------------------------------------------------------------------


def store_url(url: str, application: str) -> str:
    """``url`` with ``application_name`` set, so the store's backends can be told apart."""
    return f"{url}{'&' if '?' in url else '?'}application_name={application}"


def corpus_sources(args: argparse.Namespace, load: bool) -> tuple[IngestCorpus, list[Indices]]:
    """The seeded corpus (bulk-loaded into the store when ``load``) and the word indices of
    the stored documents that edited copies are made of."""
    corpus = IngestCorpus(args.seed, 40, 0.2)
    keep = np.random.default_rng([args.seed, 7]).choice(
        args.documents, min(SOURCES, args.documents), replace=False
    )
    kept: dict[int, Indices] = {}

    def records() -> Iterable[tuple[str, str]]:
        for docs, _, chunk_kept in corpus.chunks(args.documents, keep=keep.tolist()):
            kept.update(chunk_kept)
            yield from docs

    if load:
        with DedupStore(args.url, schema=args.schema) as store:
            store.ingest(records(), batch_size=5000)
    else:
        for _ in records():
            pass
    return corpus, list(kept.values())


def store_work(
    stack: contextlib.ExitStack, url: str, schema: str, maker: TextMaker, calls: int, tag: str
) -> dict[str, Work]:
    """``check`` and ``add`` calls of fresh texts on a store opened here, after warm-up calls."""
    application = f"{APPLICATION}_{os.getpid()}"
    checks = [maker.mixed() for _ in range(calls + WARM_UP)]
    adds = [(f"opcost-{tag}-{i:06d}", maker.mixed()) for i in range(calls + WARM_UP)]
    monitor = stack.enter_context(psycopg.connect(conninfo(url), autocommit=True))
    url = store_url(url, application)
    store = stack.enter_context(DedupStore(url, schema=schema, create=False))
    for text in checks[:WARM_UP]:
        store.check(text)
    for i, text in adds[:WARM_UP]:
        store.add(i, text)

    def pids() -> list[int]:
        return application_pids(monitor, application)

    hosted, in_host = host_store(stack, url, schema)
    host_checks = [in_host(partial(hosted.check, t)) for t in checks]
    host_adds = [in_host(partial(hosted.add, f"{i}-host", t)) for i, t in adds]
    for call in host_checks[:WARM_UP] + host_adds[:WARM_UP]:
        call()
    return {
        "check": Work([partial(store.check, t) for t in checks[WARM_UP:]], pids),
        "add": Work([partial(store.add, i, t) for i, t in adds[WARM_UP:]], pids),
        "host check": Work(host_checks[WARM_UP:], pids),
        "host add": Work(host_adds[WARM_UP:], pids),
    }


def host_store(
    stack: contextlib.ExitStack, url: str, schema: str
) -> tuple[DedupStore, Callable[[Callable[[], object]], Callable[[], object]]]:
    """The store inside a host's SQLAlchemy connection, and a wrapper that runs a call in a
    transaction of the host's own (begun, the call made, committed), as a CMS back end does."""
    engine = create_engine(sqlalchemy_url(url))
    stack.callback(engine.dispose)
    conn = stack.enter_context(engine.connect())
    with conn.begin():
        store = DedupStore(conn, schema=schema, create=False)

    def in_host(call: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            with conn.begin():
                return call()

        return run

    return store, in_host


def store_size(url: str, schema: str) -> dict[str, int]:
    """Documents and bytes (tables, their indexes and TOAST) of the store in ``schema``."""
    query = (
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')"
    )
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        row = conn.execute(query, [schema]).fetchone()
    with DedupStore(url, schema=schema, create=False) as store:
        documents = store.stats().documents
    total = int(row[0]) if row else 0
    return {"documents": documents, "bytes": total, "bytes_per_document": total // documents}


def vacuum_store(url: str, schema: str) -> None:
    """``VACUUM ANALYZE`` every table of the store, as autovacuum would."""
    query = "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    query += "WHERE n.nspname = %s AND c.relkind IN ('r', 'm')"
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        for (table,) in conn.execute(query, [schema]).fetchall():
            conn.execute(
                sql.SQL("VACUUM ANALYZE {}.{}").format(*map(sql.Identifier, (schema, table)))
            )


# -- the floors ------------------------------------------------------------------------------------


def backend(stack: contextlib.ExitStack, url: str) -> tuple[psycopg.Connection[Any], int]:
    """A plain autocommit psycopg connection and its backend's pid."""
    conn = stack.enter_context(psycopg.connect(conninfo(url), autocommit=True))
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return conn, int(row[0])


def round_trip_floor(stack: contextlib.ExitStack, url: str, calls: int) -> Work:
    """Floor (a): a prepared ``SELECT 1`` on a plain psycopg connection."""
    conn, pid = backend(stack, url)
    for _ in range(WARM_UP):
        fetch(conn, "SELECT 1")
    return Work([partial(fetch, conn, "SELECT 1") for _ in range(calls)], lambda: [pid])


def probe_table(conn: psycopg.Connection[Any], schema: str, documents: int) -> sql.Identifier:
    """The probe floor's table in ``schema``, made with ``documents`` x :data:`KEYS` random
    keys unless it already holds that many."""
    table = sql.Identifier(schema, "probe")
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
    exists = conn.execute("SELECT to_regclass(%s)", [table.as_string(conn)]).fetchone()
    if exists and exists[0] is not None:
        row = conn.execute(sql.SQL("SELECT count(DISTINCT id) FROM {}").format(table)).fetchone()
        if row and row[0] == documents:
            return table
        conn.execute(sql.SQL("DROP TABLE {}").format(table))
    conn.execute(sql.SQL("CREATE TABLE {} (key bigint NOT NULL, id bigint NOT NULL)").format(table))
    fill = "INSERT INTO {} SELECT (random() * 9.2e18 - 4.6e18)::bigint, d "
    fill += "FROM generate_series(1, %s) d, generate_series(1, %s) k"
    conn.execute(sql.SQL(fill).format(table), [documents, KEYS])
    conn.execute(sql.SQL("CREATE INDEX ON {} (key) INCLUDE (id)").format(table))
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))
    return table


def probe_floor(
    stack: contextlib.ExitStack, url: str, schema: str, documents: int, calls: int, seed: int
) -> Work:
    """Floor (b): a prepared 22-key ``= ANY`` probe of one narrow btree, with the keys of one
    stored document of the probe table."""
    conn, pid = backend(stack, url)
    table = probe_table(conn, schema, documents)
    ids = np.random.default_rng([seed, 13]).integers(1, documents + 1, calls + WARM_UP).tolist()
    keys_of = sql.SQL("SELECT id, array_agg(key) FROM {} WHERE id = ANY(%s) GROUP BY id")
    found: dict[int, list[int]] = dict(conn.execute(keys_of.format(table), [ids]).fetchall())
    probe = sql.SQL("SELECT id FROM {} WHERE key = ANY(%s::bigint[])").format(table)
    for i in ids[:WARM_UP]:
        fetch(conn, probe, [found[i]])
    return Work([partial(fetch, conn, probe, [found[i]]) for i in ids[WARM_UP:]], lambda: [pid])


# -- one measurement, a new process, the report ----------------------------------------------------


def measure(args: argparse.Namespace, load: bool) -> dict[str, Any]:
    """The store's size (before the calls), its costs and the floors, in this process."""
    corpus, sources = corpus_sources(args, load)
    size = store_size(args.url, args.schema)
    maker = TextMaker(corpus, sources, args.seed + 1000 * args.phase)
    tag = f"{args.phase}-{os.getpid()}"
    with contextlib.ExitStack() as stack:
        work = store_work(stack, args.url, args.schema, maker, args.calls, tag)
        work["round trip"] = round_trip_floor(stack, args.url, args.floor_calls)
        work["22-key probe"] = probe_floor(
            stack, args.url, f"{args.schema}_floor", args.documents, args.floor_calls, args.seed
        )
        costs = {name: cost.per_call() for name, cost in interleaved(work, args.rounds).items()}
    floor = costs["22-key probe"]["total"]
    return {
        "cost_ms": costs,
        "ratio_to_probe": {
            name: costs[name]["total"] / floor
            for name in ("check", "add", "host check", "host add")
        },
        "size": size,
    }


def in_new_process(args: argparse.Namespace, phase: int) -> dict[str, Any]:
    """:func:`measure` run by a new process of this script on the store as it is."""
    with tempfile.TemporaryDirectory(prefix="dedup-op-cost-") as directory:
        out = Path(directory) / "figures.json"
        command = [sys.executable, "-m", "benchmarks.op_cost", "--reuse", "--no-fresh"]
        command += ["--url", args.url, "--schema", args.schema, "--seed", str(args.seed)]
        command += ["--documents", str(args.documents), "--calls", str(args.calls)]
        command += ["--floor-calls", str(args.floor_calls), "--rounds", str(args.rounds)]
        command += ["--phase", str(phase)]
        subprocess.run([*command, "--json", str(out)], check=True, stdout=subprocess.DEVNULL)
        found: dict[str, Any] = json.loads(out.read_text())["runs"]["this process"]
        return found


def single_adds(args: argparse.Namespace, count: int) -> float:
    """Add ``count`` fresh documents one by one; returns the seconds they took."""
    corpus, sources = corpus_sources(args, load=False)
    maker = TextMaker(corpus, sources, args.seed + 999)
    records = [(f"opcost-single-{i:07d}", maker.mixed()) for i in range(count)]
    started = time.perf_counter()
    with DedupStore(args.url, schema=args.schema, create=False) as store:
        for i, text in records:
            store.add(i, text)
    return time.perf_counter() - started


def machine() -> str:
    """This machine's cores and processor model, as Linux names them."""
    model = "unknown processor"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{os.cpu_count()} cores, {model}"


def print_report(figures: dict[str, Any]) -> None:
    """One table per run: CPU ms per call, client + backend, and the ratio to floor (b)."""
    print(f"server {figures['server']}; {figures['machine']}")
    for run, found in figures["runs"].items():
        size = found["size"]
        print(
            f"\n{run}: {size['documents']:,} documents, {size['bytes'] / 2**20:,.1f} MiB, "
            f"{size['bytes_per_document']:,} bytes a document"
        )
        head = ("client", "backend", "total", "x probe", "wall")
        print(f"{'CPU ms per call':<14}" + "".join(f" {name:>8}" for name in head))
        for name, cost in found["cost_ms"].items():
            ratio = found["ratio_to_probe"].get(name)
            shown = f"{ratio:8.2f}" if ratio is not None else f"{'':8}"
            cpu = "".join(f" {cost[key]:8.3f}" for key in ("client", "backend", "total"))
            served = f"{cost['calls']:,} calls, {cost['backends']} backends"
            print(f"{name:<14}{cpu} {shown} {cost['wall']:8.3f}  ({served})")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--documents", type=int, default=100_000, help="documents loaded into the store")
    add("--calls", type=int, default=1000, help="timed check calls, and as many add calls")
    add("--floor-calls", type=int, default=10_000, help="timed calls of each floor")
    add("--rounds", type=int, default=10, help="slices of each kind of call, taken in turn")
    add_seed(parser, 1, "seed of the corpus and of every text")
    add_url(parser)
    parser.add_argument("--db-url", dest="url", default=argparse.SUPPRESS, help="same as --url")
    add_store_options(
        parser,
        schema=(f"bench_op_cost_{os.getpid()}", "schema of the store (the floor: <schema>_floor)"),
        reuse="measure the store kept in --schema by an earlier --keep run (implies --keep)",
        keep="keep both schemas afterwards",
    )
    add(
        "--after-adds",
        type=int,
        default=0,
        metavar="N",
        help="then N single adds, VACUUM ANALYZE, a new process measures again",
    )
    add("--no-fresh", action="store_true", help="do not measure again in a new process")
    add("--phase", type=int, default=0, help=argparse.SUPPRESS)
    add("--json", type=Path, default=None, metavar="PATH", help="also write the figures here")
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement the options ask for."""
    runs = {"this process": measure(args, load=not args.reuse)}
    if not args.no_fresh:
        runs["new process"] = in_new_process(args, 1)
    if args.after_adds:
        seconds = single_adds(args, args.after_adds)
        print(f"{args.after_adds:,} single adds in {seconds:.1f} s", file=sys.stderr)
        vacuum_store(args.url, args.schema)
        runs[f"new process after {args.after_adds:,} single adds"] = in_new_process(args, 2)
    return {"server": server_settings(args.url), "machine": machine(), "runs": runs}


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the options, measure, print (and write) the figures, drop the schemas."""
    args = parse_args(argv)
    if not args.reuse:
        drop_schema(args.url, args.schema)
    try:
        figures = run(args)
    except StoreNotInitializedError:
        raise SystemExit(f"schema {args.schema} holds no store: run without --reuse") from None
    finally:
        if not (args.keep or args.reuse):
            for schema in (args.schema, f"{args.schema}_floor"):
                drop_schema(args.url, schema)
    print_report(figures)
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
