"""The store over HTTP (``dedup-store serve``) under a CMS load, beside the library in-process.

One run, on the seeded corpus of :mod:`benchmarks.load` (``--docs`` documents of ~``--words``
words, 20 % edited copies):

1. *Build*: the corpus is bulk-loaded into ``--schema`` (``--reuse`` takes a store kept by an
   earlier ``--keep`` run, deleting the documents that run added).
2. *HTTP*: ``dedup-store serve`` starts on a free loopback port (``--threads``, ``--workers``);
   ``--clients`` keep-alive HTTP/1.1 clients (threads spread over ``--client-processes``
   processes, each client one connection) send 10 untimed checks, wait for each other, then
   run ``--ops`` operations each, four ``POST /check`` to one ``POST /documents`` (the texts
   of :func:`benchmarks.load.make_workload`: new documents, edited copies of stored ones, and
   copies of documents shared by every client), or stop after ``--seconds``. Any answer other
   than 200 for a check and 201 for an add, or a failed request, is an error. Without
   ``--rate`` each client sends its next request as soon as it has the answer (a closed loop:
   the figures are the capacity, and by Little's law the mean latency is ``--clients`` over
   the operations/s, 16 ms for 16 clients at 1,000/s); with ``--rate R`` the clients together
   send R requests a second, each at its share, and a latency counts from when the request
   was due (an open loop: the latency at that load, queueing included).
3. *Library*: the documents the HTTP phase added are deleted, and the same operations run
   through one ``DedupStore`` shared by ``--clients`` threads of this process.
4. *Paced* (``--paced``, without ``--rate``): the documents added are deleted again and the
   HTTP phase runs once more, paced at half the requests/s of the closed loop.

Figures: operations/s (successful operations over the time from the common start to the last
client's last operation), ``check`` and ``add`` latency percentiles in milliseconds (measured by
each client, from sending the request to reading the whole answer), errors, the CPU
milliseconds an operation costs the server (or this process, for the library), PostgreSQL and
the HTTP clients, and the 1-minute load average of the machine after each phase. Then the
comparison: the requests/s over HTTP over the library's operations/s, and the server's CPU per
request beyond the library's per operation (HTTP, JSON, the hop to a store thread, logs and
metrics). Targets (issue 51): HTTP at least 0.85x the library, at most 0.3 ms of server CPU
beyond the library a request; paced at half the closed-loop rate, ``check`` p50 at most 3 ms
and ``add`` p99 at most 50 ms; no errors. Run it as ``python -m benchmarks.http`` (see
``--help``).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import psycopg
from sqlalchemy.engine import make_url

from benchmarks.common import add_seed, add_store_options, add_url, conninfo, drop_schema
from benchmarks.ingest_corpus import IngestCorpus
from benchmarks.load import added_ids, build, server_settings
from benchmarks.load_report import percentile
from benchmarks.load_workload import EDITED_SOURCES, Op, TextMaker, make_workload
from dedup_store import DedupStore
from dedup_store.server.settings import APPLICATION_NAME

WARM_UP = 10
#: The ``application_name`` of the library phase's connections.
LIBRARY_APPLICATION = "benchmarks.http library"
Timed = tuple[str, float]
"""``(kind, milliseconds)`` of one successful operation."""


# -- HTTP clients -----------------------------------------------------------------------------


def schedule(ops: list[Op], start: float, interval: float) -> Iterator[tuple[Op, float]]:
    """Each operation with the time it is due: at once after the one before it (``interval``
    0), or every ``interval`` seconds from ``start`` (waiting until then). The latency of a
    paced operation counts from when it was due, so a slow answer delays the next ones' clocks
    too (no coordinated omission)."""
    for number, op in enumerate(ops):
        if interval:
            due = start + number * interval
            time.sleep(max(0.0, due - time.perf_counter()))
        else:
            due = time.perf_counter()
        yield op, due


def http_client(
    port: int,
    ops: list[Op],
    warm: list[str],
    deadline: float,
    interval: float,
    out: list[Timed],
    errors: list[str],
) -> None:
    """One keep-alive client: its operations in order, until they are done or ``deadline``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    for text in warm:
        conn.request("POST", "/check", json.dumps({"text": text}), headers)
        conn.getresponse().read()
    for (kind, external_id, text), started in schedule(ops, time.perf_counter(), interval):
        if time.monotonic() >= deadline:
            break
        path, body, expected = (
            ("/check", {"text": text}, 200)
            if kind == "check"
            else ("/documents", {"id": external_id, "text": text}, 201)
        )
        try:
            conn.request("POST", path, json.dumps(body), headers)
            response = conn.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException) as e:
            errors.append(f"{kind} {external_id}: {type(e).__name__}: {e}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        if response.status != expected:
            errors.append(f"{kind} {external_id}: {response.status} {answer[:200]!r}")
            continue
        out.append((kind, (time.perf_counter() - started) * 1000))
    conn.close()


def client_process(
    port: int,
    clients: list[list[Op]],
    warm: list[str],
    seconds: float,
    interval: float,
    barrier: Any,
    results: Any,
) -> None:
    """Run ``clients`` (one thread each) after the common start."""
    out: list[Timed] = []
    errors: list[str] = []
    barrier.wait()
    started = time.monotonic()
    cpu = time.process_time()
    deadline = started + seconds
    threads = [
        threading.Thread(
            target=http_client, args=(port, ops, warm, deadline, interval, out, errors)
        )
        for ops in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put((started, time.monotonic(), out, errors, time.process_time() - cpu))


def http_phase(
    args: argparse.Namespace,
    served: tuple[int, subprocess.Popen[bytes]],
    clients: list[list[Op]],
    warm: list[str],
) -> dict[str, Any]:
    """Every client against the server; the figures."""
    port, process = served
    meter = CpuMeter(args.url, APPLICATION_NAME, [psutil.Process(process.pid)])
    context = multiprocessing.get_context("spawn")
    processes = max(1, min(args.client_processes, len(clients)))
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    shares = [clients[k::processes] for k in range(processes)]
    started = [
        context.Process(
            target=client_process,
            args=(port, share, warm, args.seconds, interval(args), barrier, results),
        )
        for share in shares
    ]
    for client in started:
        client.start()
    barrier.wait(timeout=300)
    meter.start()
    collected = []
    for _ in started:
        with contextlib.suppress(queue.Empty):
            collected.append(results.get(timeout=args.seconds + 300))
    timed = [t for r in collected for t in r[2]]
    cpu = meter.stop(len(timed))
    for client in started:
        client.join(timeout=60)
    wall = max(r[1] for r in collected) - min(r[0] for r in collected) if collected else 0.0
    errors = [e for r in collected for e in r[3]]
    cpu["clients"] = 1000 * sum(r[4] for r in collected) / max(len(timed), 1)
    return {**figures(timed, errors, wall), "cpu_ms_per_operation": cpu, "rate": args.rate}


def interval(args: argparse.Namespace) -> float:
    """Seconds between two operations of one client: ``--clients / --rate`` (0: none)."""
    return args.clients / args.rate if args.rate else 0.0


def added_deleted(args: argparse.Namespace) -> None:
    """Delete the documents the phase before added."""
    with DedupStore(args.url, schema=args.schema, create=False) as store:
        store.delete(added_ids(args.url, args.schema))


# -- the library in-process -------------------------------------------------------------------


def library_phase(
    args: argparse.Namespace, clients: list[list[Op]], warm: list[str]
) -> dict[str, Any]:
    """The same operations through one store shared by one thread per client."""
    out: list[Timed] = []
    errors: list[str] = []
    url = make_url(args.url).update_query_dict({"application_name": LIBRARY_APPLICATION})
    named = url.render_as_string(hide_password=False)
    meter = CpuMeter(args.url, LIBRARY_APPLICATION, [psutil.Process()])
    with DedupStore(named, schema=args.schema, create=False, pool_size=len(clients)) as store:
        for text in warm:
            store.check(text)
        barrier = threading.Barrier(len(clients) + 1)
        ends: list[float] = []

        def client(ops: list[Op]) -> None:
            barrier.wait()
            deadline = time.monotonic() + args.seconds
            for (kind, external_id, text), started in schedule(
                ops, time.perf_counter(), interval(args)
            ):
                if time.monotonic() >= deadline:
                    break
                try:
                    if kind == "check":
                        store.check(text)
                    else:
                        store.add(external_id, text)
                except Exception as e:
                    errors.append(f"{kind} {external_id}: {type(e).__name__}: {e}")
                    continue
                out.append((kind, (time.perf_counter() - started) * 1000))
            ends.append(time.monotonic())

        threads = [threading.Thread(target=client, args=(ops,)) for ops in clients]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.monotonic()
        meter.start()
        for thread in threads:
            thread.join()
        cpu = meter.stop(len(out))
    found = figures(out, errors, max(ends) - started if ends else 0.0)
    return {**found, "cpu_ms_per_operation": cpu}


# -- figures ----------------------------------------------------------------------------------


def figures(timed: list[Timed], errors: list[str], seconds: float) -> dict[str, Any]:
    """Operations/s, latency percentiles by kind, errors."""
    checks = [ms for kind, ms in timed if kind == "check"]
    adds = [ms for kind, ms in timed if kind == "add"]
    return {
        "operations": len(timed),
        "seconds": seconds,
        "operations_per_second": len(timed) / seconds if seconds else 0.0,
        "check_ms": {f"p{q}": percentile(checks, q) for q in (50, 90, 99)},
        "add_ms": {f"p{q}": percentile(adds, q) for q in (50, 90, 99)},
        "checks": len(checks),
        "adds": len(adds),
        "errors": len(errors),
        "first_errors": errors[:5],
        "load_average": os.getloadavg()[0],
    }


def verdicts(f: dict[str, Any], paced: bool) -> dict[str, bool]:
    """Which targets a phase met (the latency targets are those of a paced phase)."""
    met = {"0 errors": f["errors"] == 0}
    if paced:
        met["check p50 <= 3 ms"] = (f["check_ms"]["p50"] or 1e9) <= 3
        met["add p99 <= 50 ms"] = (f["add_ms"]["p99"] or 1e9) <= 50
    return met


def comparison(http: dict[str, Any], library: dict[str, Any]) -> dict[str, float]:
    """HTTP beside the library: the ratio of their rates, the server's CPU per request beyond
    the library's per operation, and the ratio the CPU alone allows when the cores are
    saturated (the library's CPU per operation, PostgreSQL's included, over HTTP's, the
    clients' included)."""
    served, library_cpu = http["cpu_ms_per_operation"], library["cpu_ms_per_operation"]
    http_cpu = served["app"] + served["postgres"] + served.get("clients", 0.0)
    in_process = library_cpu["app"] + library_cpu["postgres"]
    return {
        "http_over_library": http["operations_per_second"]
        / max(library["operations_per_second"], 1e-9),
        "server_beyond_library_ms": served["app"] - library_cpu["app"],
        "http_cpu_ms": http_cpu,
        "library_cpu_ms": in_process,
        "cpu_bound_ratio": in_process / max(http_cpu, 1e-9),
    }


def print_comparison(found: dict[str, float]) -> None:
    """The comparison, with its targets."""
    ratio, beyond = found["http_over_library"], found["server_beyond_library_ms"]
    print(f"HTTP / library: {ratio:.2f}x (target >= 0.85: {'ok' if ratio >= 0.85 else 'MISSED'})")
    print(
        f"server CPU beyond the library per request: {beyond:.2f} ms "
        f"(target <= 0.3: {'ok' if beyond <= 0.3 else 'MISSED'})"
    )
    print(
        f"CPU ms per operation, all sides: HTTP {found['http_cpu_ms']:.2f}, library "
        f"{found['library_cpu_ms']:.2f}: on saturated cores the CPU alone allows HTTP "
        f"{found['cpu_bound_ratio']:.2f}x the library"
    )


def _cpu_row(cpu: dict[str, float]) -> str:
    row = f"{cpu['app']:.2f} / {cpu['postgres']:.2f}"
    return f"{row} (+{cpu['clients']:.2f})" if "clients" in cpu else row


def print_table(phases: dict[str, dict[str, Any]]) -> None:
    """The figures of each phase side by side."""

    def ms(d: dict[str, Any]) -> str:
        return " / ".join("-" if d[k] is None else f"{d[k]:.1f}" for k in ("p50", "p90", "p99"))

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("operations/s", lambda f: f"{f['operations_per_second']:,.0f}"),
        ("check p50 / p90 / p99 ms", lambda f: ms(f["check_ms"])),
        ("add p50 / p90 / p99 ms", lambda f: ms(f["add_ms"])),
        ("checks, adds", lambda f: f"{f['checks']:,}, {f['adds']:,}"),
        ("errors", lambda f: f"{f['errors']:,}"),
        ("CPU ms/op: app / pg (+clients)", lambda f: _cpu_row(f["cpu_ms_per_operation"])),
        ("load average after", lambda f: f"{f['load_average']:.2f}"),
    ]
    names = list(phases)
    print(f"\n{'measure':<26}" + "".join(f"{name:>30}" for name in names))
    for label, value in rows:
        print(f"{label:<26}" + "".join(f"{value(phases[n]):>30}" for n in names))
    for name, f in phases.items():
        paced = name.startswith("paced") or (name == "http" and f.get("rate", 0) > 0)
        met = ", ".join(f"{k}: {'ok' if ok else 'MISSED'}" for k, ok in verdicts(f, paced).items())
        print(f"{name}: {met}")
        for line in f["first_errors"]:
            print(f"  error: {line[:300]}")


# -- CPU time ---------------------------------------------------------------------------------


class CpuMeter:
    """CPU seconds that some processes and the PostgreSQL backends of one ``application_name``
    spend between :meth:`start` and :meth:`stop` (the machine is shared: this is what one
    operation costs, whatever else runs)."""

    def __init__(self, url: str, application: str, processes: Sequence[psutil.Process]) -> None:
        self.url = url
        self.application = application
        self.processes = list(processes)
        self._before: dict[int, float] = {}

    def _backends(self) -> list[psutil.Process]:
        query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
        with psycopg.connect(conninfo(self.url), autocommit=True) as conn:
            pids = [row[0] for row in conn.execute(query, [self.application])]
        return [p for p in (_process(pid) for pid in pids) if p is not None]

    def _readings(self) -> dict[str, dict[int, float]]:
        ours = [*self.processes, *(c for p in self.processes for c in _children(p))]
        return {"app": _cpu(ours), "postgres": _cpu(self._backends())}

    def start(self) -> None:
        """Read the counters."""
        self._start = self._readings()

    def stop(self, operations: int) -> dict[str, float]:
        """Milliseconds of CPU per operation since :meth:`start`, by side."""
        end = self._readings()
        spent = {
            side: sum(v - self._start[side].get(pid, 0.0) for pid, v in values.items())
            for side, values in end.items()
        }
        return {side: 1000 * seconds / max(operations, 1) for side, seconds in spent.items()}


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return list(process.children(recursive=True))
    except psutil.Error:
        return []


def _cpu(processes: Sequence[psutil.Process]) -> dict[int, float]:
    found = {}
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        found[process.pid] = times.user + times.system
    return found


# -- the server -------------------------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(args: argparse.Namespace, log: Path) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """``dedup-store serve`` on a free port, until the block ends (then SIGTERM)."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "dedup_store",
        "--db-url",
        args.url,
        "--schema",
        args.schema,
        "serve",
        "--port",
        str(port),
        "--threads",
        str(args.threads),
        "--workers",
        str(args.workers),
    ]
    with open(log, "wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        try:
            wait_ready(port, process)
            yield port, process
        finally:
            process.terminate()
            process.wait(timeout=60)


def wait_ready(port: int, process: subprocess.Popen[bytes], seconds: float = 60) -> None:
    """Wait until the server answers ``/readyz`` with 200."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server exited with {process.returncode}")
        url = f"http://127.0.0.1:{port}/readyz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                return
        time.sleep(0.2)
    raise SystemExit("the server did not become ready")


# -- main -------------------------------------------------------------------------------------


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def timed(name: str, work: Callable[[], Any]) -> Any:
    """Run ``work``, logging how long it took."""
    log(f"{name} ...")
    started = time.perf_counter()
    result = work()
    log(f"{name}: {time.perf_counter() - started:.1f} s")
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--docs", type=int, default=100_000, help="documents in the store")
    add("--words", type=int, default=40, help="mean words per document")
    add("--dup-rate", type=float, default=0.2, help="share of the corpus that are edited copies")
    add("--batch-size", type=int, default=5000, help="batch size of the load")
    add_seed(parser, 1, "seed of the corpus and of every text")
    add_url(parser, "PostgreSQL URL")
    add_store_options(
        parser,
        schema=(f"bench_http_{os.getpid()}", "schema of the store"),
        reuse="use the store a --keep run left in --schema",
        keep="keep the store afterwards",
    )
    add("--clients", type=int, default=16, help="concurrent clients")
    add("--client-processes", type=int, default=4, help="processes the HTTP clients run in")
    add("--ops", type=int, default=1000, help="operations per client (check:add = 4:1)")
    add("--seconds", type=float, default=120.0, help="stop every client after this long")
    add(
        "--rate",
        type=float,
        default=0.0,
        help="operations per second of all clients together, each client sending at its share "
        "of it; 0: each sends its next one as soon as it has the answer",
    )
    add("--threads", type=int, default=8, help="the server's --threads")
    add("--workers", type=int, default=1, help="the server's --workers")
    add(
        "--library",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the load through the library in-process",
    )
    add(
        "--paced",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="then run the HTTP phase again paced at half its closed-loop rate (without --rate)",
    )
    add("--json", action="store_true", help="print the figures as JSON")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Build, then the HTTP phase and the library phase."""
    args = parse_args(argv)
    args.single, args.profile = 0, 0
    log(
        f"{args.docs:,} documents in {args.schema}; {args.clients} clients x {args.ops:,} "
        f"operations; server {server_settings(args.url)}; load average "
        f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory(prefix="dedup-http-") as workdir:
        corpus = IngestCorpus(args.seed, args.words, args.dup_rate)
        positions = np.random.default_rng([args.seed, 7]).choice(
            args.docs, min(EDITED_SOURCES, args.docs), replace=False
        )
        generated = timed(
            "corpus",
            lambda: corpus.write(Path(workdir) / "c.tsv", args.docs, keep=positions.tolist()),
        )
        workload = make_workload(TextMaker(corpus, list(generated.kept.values()), args.seed), args)
        warm = workload.warm_checks[:WARM_UP]
        phases: dict[str, dict[str, Any]] = {}
        try:
            timed("build", lambda: build(args.url, args.schema, generated.path, args, args.reuse))
            with server(args, Path(workdir) / "server.log") as served:
                log(f"load average before the HTTP phase: {os.getloadavg()[0]:.2f}")
                phases["http"] = timed(
                    "http", lambda: http_phase(args, served, workload.clients, warm)
                )
            if args.library:
                added_deleted(args)
                log(f"load average before the library phase: {os.getloadavg()[0]:.2f}")
                phases["library"] = timed(
                    "library", lambda: library_phase(args, workload.clients, warm)
                )
            if args.paced and not args.rate and "http" in phases:
                added_deleted(args)
                args.rate = round(phases["http"]["operations_per_second"] / 2)
                name = f"paced at {args.rate:,}/s"
                with server(args, Path(workdir) / "paced.log") as served:
                    log(f"load average before the paced phase: {os.getloadavg()[0]:.2f}")
                    phases[name] = timed(
                        "paced", lambda: http_phase(args, served, workload.clients, warm)
                    )
        finally:
            if not args.keep:
                drop_schema(args.url, args.schema)
    both = "http" in phases and "library" in phases
    compared = comparison(phases["http"], phases["library"]) if both else None
    if args.json:
        print(json.dumps({**phases, "comparison": compared}, indent=2))
        return
    print_table(phases)
    if compared is not None:
        print_comparison(compared)


if __name__ == "__main__":
    main()
