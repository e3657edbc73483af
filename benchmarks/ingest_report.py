"""What :mod:`benchmarks.ingest` prints: the ingests, ``check`` latencies, storage, the peers
and the summary, and the machine's load and revision beside them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Sequence

import numpy as np

from benchmarks.ingest_corpus import GeneratedFile
from benchmarks.ingest_peers import PeerRun
from benchmarks.ingest_store import WARM_UP, CheckRun, IngestRun


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes), as ``uptime`` shows them."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values`` (NaN for none: ``--check-queries 0``)."""
    return float(np.percentile(np.asarray(values), q)) if len(values) else float("nan")


def ratio(ours: float, theirs: float) -> str:
    """``ours / theirs`` as ``12.3x`` (two decimals below 1)."""
    value = ours / theirs
    return f"{value:.1f}x" if value >= 1 else f"{value:.2f}x"


def revision() -> str:
    """The checked-out commit, and whether the package's files differ from it."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "dedup_store", "migrations")
    return commit + (" with uncommitted changes in dedup_store" if dirty else "")


def print_ingest(title: str, run: IngestRun, generated: GeneratedFile, read_seconds: float) -> None:
    """Throughput, slices and statuses of an ingest."""
    n, s = run.summary.documents, run.summary
    kind = f"bulk, index build {s.index_seconds:.1f} s" if s.bulk else "incremental"
    print(
        f"\n== {title} ({kind}): {n:,} documents in {run.seconds:.1f} s = "
        f"{n / run.seconds:,.0f} docs/s =="
    )
    print(
        f"statuses: new {s.new:,}, exact duplicates {s.exact_duplicates:,}, near duplicates "
        f"{s.near_duplicates:,}, errors {s.errors}; clusters in the store {s.clusters:,}"
    )
    print(
        f"generated before timing: {generated.seconds:.1f} s ({generated.bytes / 2**20:.0f} MiB, "
        f"{generated.near_duplicates:,} edited copies); reading the file alone: "
        f"{read_seconds:.2f} s"
    )
    print(f"{'slice':<8}{'documents':>22}{'seconds':>10}{'docs/s':>10}")
    for k, (first, count, seconds) in enumerate(run.slices()):
        label = f"{first:,}-{first + count:,}"
        print(f"{k + 1:<8}{label:>22}{seconds:>10.2f}{count / seconds:>10,.0f}")


def print_checks(runs: Sequence[tuple[str, CheckRun]], documents: int, notes: str) -> None:
    """``check`` latency percentiles, one row per phase."""
    print(
        f"\n== check: latency (ms) against {documents:,} documents; {WARM_UP} warm-up calls "
        f"per phase not counted =="
    )
    print(notes)
    print(
        f"{'phase':<34}{'queries':>8}{'p50':>8}{'p95':>8}{'p99':>8}{'mean':>8}{'max':>8}"
        f"{'found near':>12}{'found new':>11}"
    )
    for phase, run in runs:
        lat = run.latencies
        print(
            f"{phase:<34}{len(lat):>8,}{percentile(lat, 50):>8.2f}{percentile(lat, 95):>8.2f}"
            f"{percentile(lat, 99):>8.2f}{statistics.fmean(lat):>8.2f}{max(lat):>8.2f}"
            f"{f'{run.found_near}/{run.near_queries}':>12}"
            f"{f'{run.found_new}/{run.new_queries}':>11}"
        )


def print_storage(rows: list[tuple[str, int, int]], documents: int) -> None:
    """Bytes per document, per table."""
    print(f"\n== storage per document ({documents:,} documents) ==")
    print(f"{'table':<14}{'heap+toast':>12}{'indexes':>10}{'total':>10}{'MiB':>9}")
    for table, heap, indexes in rows:
        print(
            f"{table:<14}{heap / documents:>12,.0f}{indexes / documents:>10,.0f}"
            f"{(heap + indexes) / documents:>10,.0f}{(heap + indexes) / 2**20:>9,.1f}"
        )
    heap, indexes = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(
        f"{'all':<14}{heap / documents:>12,.0f}{indexes / documents:>10,.0f}"
        f"{(heap + indexes) / documents:>10,.0f}{(heap + indexes) / 2**20:>9,.1f}"
    )


def print_peers(peer: PeerRun, ours: IngestRun, checks: CheckRun) -> None:
    """datasketch's rates next to ours on the same subset, with ratios ours/theirs."""
    whole = peer.documents >= ours.summary.documents
    done, seconds = (
        (ours.summary.documents, ours.seconds) if whole else ours.time_at(peer.documents)
    )
    our_insert = done / seconds
    our_query = 1000 * len(checks.latencies) / sum(checks.latencies)
    print(
        f"\n== datasketch MinHashLSH(threshold=0.8, num_perm=84), first {peer.documents:,} "
        f"documents =="
    )
    print(
        f"end to end: shingling {peer.prep_seconds:.1f} s, MinHash.bulk "
        f"{peer.minhash_seconds:.1f} s, inserts "
        + ", ".join(f"{k} {v:.1f} s" for k, v in peer.insert_seconds.items())
    )
    print(
        f"ours on the same documents: the first {done:,} of the load above took "
        f"{seconds:.1f} s = {our_insert:,.0f} docs/s (persisted, indexes "
        f"{'built' if whole else 'not yet built: batch marks'}); check "
        f"{our_query:,.0f} queries/s (store of {ours.summary.documents:,})"
    )
    print(
        f"{'index':<10}{'insert/s':>11}{'ours/them':>11}{'query/s':>10}{'ours/them':>11}"
        f"{'p50 ms':>9}{'p99 ms':>9}"
    )
    for name in peer.insert_seconds:
        lat = peer.query_latencies[name]
        print(
            f"{name:<10}{peer.insert_rate(name):>11,.0f}"
            f"{ratio(our_insert, peer.insert_rate(name)):>11}{peer.query_rate(name):>10,.0f}"
            f"{ratio(our_query, peer.query_rate(name)):>11}{percentile(lat, 50):>9.2f}"
            f"{percentile(lat, 99):>9.2f}"
        )


def print_verdict(
    load_run: IngestRun,
    appended: IngestRun | None,
    baseline: IngestRun | None,
    checks: CheckRun,
    peer: PeerRun | None,
) -> None:
    """The figures side by side: load against the incremental path and datasketch, append
    against an empty store, ``check`` latency."""
    rate = load_run.summary.documents / load_run.seconds
    kind = "bulk" if load_run.summary.bulk else "incremental"
    print("\n== summary ==")
    print(
        f"load ({kind}, {load_run.summary.documents:,} documents, text to persisted clusters "
        f"and built indexes): {rate:,.0f} docs/s in {load_run.seconds:.1f} s "
        f"(index build {load_run.summary.index_seconds:.1f} s)"
    )
    if baseline is not None:
        base = baseline.summary.documents / baseline.seconds
        print(
            f"incremental path into an empty store ({baseline.summary.documents:,} documents): "
            f"{base:,.0f} docs/s; load / incremental: {ratio(rate, base)}"
        )
        if appended is not None:
            added = appended.summary.documents / appended.seconds
            first, seconds = baseline.time_at(appended.summary.documents)
            empty = first / seconds
            print(
                f"append ({appended.summary.documents:,} documents, incremental) into the "
                f"{load_run.summary.documents:,}-document store: {added:,.0f} docs/s; the "
                f"first {first:,} into an empty store: {empty:,.0f} docs/s (load / that: "
                f"{ratio(rate, empty)}); append / empty: {added / empty:.2f}"
            )
    lat = checks.latencies
    print(
        f"check: p50 {percentile(lat, 50):.2f} ms, p99 {percentile(lat, 99):.2f} ms "
        f"({len(lat):,} queries)"
    )
    if peer is not None:
        theirs = peer.insert_rate("memory")
        print(
            f"datasketch in memory, end to end ({peer.documents:,} documents): "
            f"{theirs:,.0f} docs/s; ours / datasketch: {ratio(rate, theirs)}"
            + ("" if peer.documents == load_run.summary.documents else " (not the same count)")
        )
