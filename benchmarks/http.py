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
   than 200 for a check and 201 for an add, or a failed request, is an error.
3. *Library*: the documents the HTTP phase added are deleted, and the same operations run
   through one ``DedupStore`` shared by ``--clients`` threads of this process.

Figures: operations/s (successful operations over the time from the common start to the last
client's last operation), ``check`` and ``add`` latency percentiles in milliseconds (measured by
each client, from sending the request to reading the whole answer), errors, and the 1-minute
load average of the machine before and after each phase. Targets (issue 42): at least 1,000
requests/s, ``add`` p99 at most 50 ms, ``check`` p50 at most 3 ms, no errors. Run it as
``python -m benchmarks.http`` (see ``--help``).
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

from benchmarks.ingest_corpus import IngestCorpus
from benchmarks.load import (
    DEFAULT_URL,
    EDITED_SOURCES,
    Op,
    TextMaker,
    added_ids,
    build,
    drop_schema,
    make_workload,
    percentile,
    server_settings,
)
from dedup_store import DedupStore

WARM_UP = 10
Timed = tuple[str, float]
"""``(kind, milliseconds)`` of one successful operation."""


# -- HTTP clients -----------------------------------------------------------------------------


def http_client(
    port: int, ops: list[Op], warm: list[str], deadline: float, out: list[Timed], errors: list[str]
) -> None:
    """One keep-alive client: its operations in order, until they are done or ``deadline``."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    for text in warm:
        conn.request("POST", "/check", json.dumps({"text": text}), headers)
        conn.getresponse().read()
    for kind, external_id, text in ops:
        if time.monotonic() >= deadline:
            break
        path, body, expected = (
            ("/check", {"text": text}, 200)
            if kind == "check"
            else ("/documents", {"id": external_id, "text": text}, 201)
        )
        started = time.perf_counter()
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
    barrier: Any,
    results: Any,
) -> None:
    """Run ``clients`` (one thread each) after the common start."""
    out: list[Timed] = []
    errors: list[str] = []
    barrier.wait()
    started = time.monotonic()
    deadline = started + seconds
    threads = [
        threading.Thread(target=http_client, args=(port, ops, warm, deadline, out, errors))
        for ops in clients
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put((started, time.monotonic(), out, errors))


def http_phase(
    args: argparse.Namespace, port: int, clients: list[list[Op]], warm: list[str]
) -> dict[str, Any]:
    """Every client against the server; the figures."""
    context = multiprocessing.get_context("spawn")
    processes = max(1, min(args.client_processes, len(clients)))
    barrier = context.Barrier(processes + 1)
    results = context.Queue()
    shares = [clients[k::processes] for k in range(processes)]
    started = [
        context.Process(
            target=client_process,
            args=(port, share, warm, args.seconds, barrier, results),
        )
        for share in shares
    ]
    for process in started:
        process.start()
    barrier.wait(timeout=300)
    collected = []
    for _ in started:
        with contextlib.suppress(queue.Empty):
            collected.append(results.get(timeout=args.seconds + 300))
    for process in started:
        process.join(timeout=60)
    wall = max(r[1] for r in collected) - min(r[0] for r in collected) if collected else 0.0
    timed = [t for r in collected for t in r[2]]
    errors = [e for r in collected for e in r[3]]
    return figures(timed, errors, wall)


# -- the library in-process -------------------------------------------------------------------


def library_phase(
    args: argparse.Namespace, clients: list[list[Op]], warm: list[str]
) -> dict[str, Any]:
    """The same operations through one store shared by one thread per client."""
    out: list[Timed] = []
    errors: list[str] = []
    with DedupStore(args.url, schema=args.schema, create=False, pool_size=len(clients)) as store:
        for text in warm:
            store.check(text)
        barrier = threading.Barrier(len(clients) + 1)
        ends: list[float] = []

        def client(ops: list[Op]) -> None:
            barrier.wait()
            deadline = time.monotonic() + args.seconds
            for kind, external_id, text in ops:
                if time.monotonic() >= deadline:
                    break
                started = time.perf_counter()
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
        for thread in threads:
            thread.join()
    return figures(out, errors, max(ends) - started if ends else 0.0)


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


def verdicts(f: dict[str, Any]) -> dict[str, bool]:
    """Which targets a phase met."""
    return {
        "requests/s >= 1,000": f["operations_per_second"] >= 1000,
        "add p99 <= 50 ms": (f["add_ms"]["p99"] or 1e9) <= 50,
        "check p50 <= 3 ms": (f["check_ms"]["p50"] or 1e9) <= 3,
        "0 errors": f["errors"] == 0,
    }


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
        ("load average after", lambda f: f"{f['load_average']:.2f}"),
    ]
    names = list(phases)
    print(f"\n{'measure':<26}" + "".join(f"{name:>26}" for name in names))
    for label, value in rows:
        print(f"{label:<26}" + "".join(f"{value(phases[n]):>26}" for n in names))
    for name, f in phases.items():
        met = ", ".join(f"{k}: {'ok' if ok else 'MISSED'}" for k, ok in verdicts(f).items())
        print(f"{name}: {met}")
        for line in f["first_errors"]:
            print(f"  error: {line[:300]}")


# -- the server -------------------------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(args: argparse.Namespace, log: Path) -> Iterator[int]:
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
            yield port
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
    add("--seed", type=int, default=1, help="seed of the corpus and of every text")
    add("--url", default=os.environ.get("DEDUP_STORE_TEST_URL", DEFAULT_URL), help="PostgreSQL URL")
    add("--schema", default=f"bench_http_{os.getpid()}", help="schema of the store")
    add("--reuse", action="store_true", help="use the store a --keep run left in --schema")
    add("--keep", action="store_true", help="keep the store afterwards")
    add("--clients", type=int, default=16, help="concurrent clients")
    add("--client-processes", type=int, default=4, help="processes the HTTP clients run in")
    add("--ops", type=int, default=1000, help="operations per client (check:add = 4:1)")
    add("--seconds", type=float, default=120.0, help="stop every client after this long")
    add("--threads", type=int, default=8, help="the server's --threads")
    add("--workers", type=int, default=1, help="the server's --workers")
    add(
        "--library",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the load through the library in-process",
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
            with server(args, Path(workdir) / "server.log") as port:
                log(f"load average before the HTTP phase: {os.getloadavg()[0]:.2f}")
                phases["http"] = timed(
                    "http", lambda: http_phase(args, port, workload.clients, warm)
                )
            if args.library:
                with DedupStore(args.url, schema=args.schema, create=False) as store:
                    store.delete(added_ids(args.url, args.schema))
                log(f"load average before the library phase: {os.getloadavg()[0]:.2f}")
                phases["library"] = timed(
                    "library", lambda: library_phase(args, workload.clients, warm)
                )
        finally:
            if not args.keep:
                drop_schema(args.url, args.schema)
    if args.json:
        print(json.dumps(phases, indent=2))
    else:
        print_table(phases)


if __name__ == "__main__":
    main()
