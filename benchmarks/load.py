"""CMS load: ``add`` and ``check`` on a stored corpus, alone and from concurrent client processes.

A content management system checks every draft and adds every published page, from many
processes at once. One run, on one seeded corpus (:mod:`benchmarks.ingest_corpus`):

1. *Build*: ``--docs`` documents of ~``--words`` words, ``--dup-rate`` of them edited copies,
   are written to a temporary file, then bulk-loaded with ``DedupStore.ingest`` into the schema
   ``--schema`` (``--reuse`` takes a store left there by an earlier run with ``--keep``,
   deletes that run's additions instead, and keeps it for the next run).
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
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from benchmarks.common import add_seed, add_store_options, add_url, conninfo, drop_schema
from benchmarks.ingest_corpus import IngestCorpus, read_documents
from benchmarks.load_clients import LoadRun, load_run, single_client
from benchmarks.load_profile import profile_adds
from benchmarks.load_report import Replay, figures, print_report
from benchmarks.load_workload import ADD_PREFIX, EDITED_SOURCES, TextMaker, Workload, make_workload
from dedup_store import DedupStore, StoreNotInitializedError

# -- the benchmark's own SQL ------------------------------------------------------------------


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


# -- replay -----------------------------------------------------------------------------------


def replay(url: str, schema: str, order: list[str], texts: dict[str, str]) -> dict[str, str]:
    """Add ``order``'s documents one by one; returns ``{id: status}``."""
    with DedupStore(url, schema=schema, create=False) as store:
        return {i: str(store.add(i, texts[i]).status) for i in order}


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
    add_seed(parser, 1, "seed of the corpus and of every text")
    add_url(parser)
    add_store_options(
        parser,
        schema=(
            f"bench_load_{os.getpid()}",
            "schema of the store (the replay uses <schema>_replay)",
        ),
        reuse="use the stores a --keep run left in --schema, its adds deleted (implies --keep)",
        keep="keep both schemas afterwards",
    )
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
        if not (args.keep or args.reuse):
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
