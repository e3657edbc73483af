"""The systems the real-text benchmark runs on a corpus: the store (in this process and through
its command line), datasketch and rensa.

Each run returns a :class:`RunResult`: the pairs it reports at each of :data:`THRESHOLDS`, its
clusters, and the time of its timed work (see :mod:`benchmarks.realtext`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from benchmarks.common import scratch_schema, sqlalchemy_url
from benchmarks.evaluation import PairSet, expand_exact_groups
from benchmarks.fingerprint import peer_input
from benchmarks.quality_corpus import CorpusDoc
from dedup_store import DedupStore, FingerprintParams
from dedup_store.core import canonical_tokens
from dedup_store.core.clustering import UnionFind

THRESHOLDS = (0.5, 0.8, 0.9)
PairScores = dict[tuple[int, int], tuple[str, float, float, int]]


@dataclasses.dataclass
class RunResult:
    """What one system reported.

    Attributes:
        name: the system and configuration.
        seconds: time of the timed work (the ingest call, or the peer end to end).
        found: the pairs it reports as reaching each threshold.
        clusters: its clusters of two or more documents, largest first (document positions).
        pairs: every reported pair with ``(method, jaccard, containment, hamming)`` (the store).
    """

    name: str
    seconds: float
    found: dict[float, PairSet]
    clusters: list[list[int]]
    pairs: PairScores = dataclasses.field(default_factory=dict)


# -- the store -----------------------------------------------------------------------------


def run_store(
    url: str, label: str, params: FingerprintParams, docs: Sequence[CorpusDoc]
) -> RunResult:
    """One ``DedupStore.ingest`` call of ``docs`` in this process (what ``dedup-store ingest``
    does) into a fresh schema, timed; pairs and clusters read back, the schema dropped."""

    def load(engine: sa.Engine, schema: str) -> float:
        with DedupStore(engine, params, schema=schema) as store:
            start = time.perf_counter()
            store.ingest([(d.id, d.text) for d in docs])
            return time.perf_counter() - start

    return _scratch_run(url, label, params, docs, load)


def run_cli(
    url: str, label: str, params: FingerprintParams, docs: Sequence[CorpusDoc]
) -> RunResult:
    """``dedup-store ingest`` of ``docs`` written as one JSONL file (untimed), in a process of
    its own, into a fresh schema: timed from the start of the process to its exit, so the
    interpreter, imports, connection, store creation and checks are included (a store whose
    parameters are not the defaults is created by ``dedup-store init`` first, timed as well)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "documents.jsonl"
        write_jsonl(docs, path)
        return _scratch_run(
            url, label, params, docs, lambda _, schema: cli_ingest(url, schema, params, path)
        )


def write_jsonl(docs: Sequence[CorpusDoc], path: Path) -> None:
    """``docs`` as JSONL records with ``id`` and ``text``, as ``dedup-store ingest`` reads them."""
    with path.open("w", encoding="utf-8") as out:
        for doc in docs:
            out.write(json.dumps({"id": doc.id, "text": doc.text}, ensure_ascii=False) + "\n")


def cli_ingest(url: str, schema: str, params: FingerprintParams, path: Path) -> float:
    """Seconds of ``dedup-store init`` (only when ``params`` are not the defaults) and
    ``dedup-store ingest --quiet path``, each a new ``python -m dedup_store`` process that runs
    with its bytecode compiled, as an installed package does (:func:`compiled_environment`)."""
    command = [sys.executable, "-m", "dedup_store", "--db-url", url, "--schema", schema]
    runs = [[*command, "ingest", "--quiet", str(path)]]
    options = init_options(params)
    if options:
        runs.insert(0, [*command, "init", *options])
    env = compiled_environment()
    start = time.perf_counter()
    for run in runs:
        subprocess.run(run, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


@functools.cache
def compiled_environment() -> dict[str, str]:
    """The environment of the timed commands: the package's bytecode compiled beforehand and
    used, even where ``PYTHONDONTWRITEBYTECODE`` is set, as an installed package (compiled by
    pip) runs. Without it each command would compile every module of the package again."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    package = str(Path(__file__).resolve().parent.parent / "dedup_store")
    subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True, env=env)
    return env


def init_options(params: FingerprintParams) -> list[str]:
    """The ``dedup-store init`` options that give ``params`` where they differ from the
    defaults."""
    default = FingerprintParams()
    options: list[str] = []
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        if value == getattr(default, field.name):
            continue
        name = field.name.replace("_", "-")
        if isinstance(value, bool):
            options.append(f"--{name}" if value else f"--no-{name}")
        else:
            options += [f"--{name}", str(value)]
    return options


def _scratch_run(
    url: str,
    label: str,
    params: FingerprintParams,
    docs: Sequence[CorpusDoc],
    load: Callable[[sa.Engine, str], float],
) -> RunResult:
    """``load(engine, schema)`` into a fresh schema (it returns its timed seconds), then the
    store's pairs and clusters read back; the schema is dropped."""
    schema = f"realtext_{os.getpid()}"
    engine = sa.create_engine(sqlalchemy_url(url))
    index = {d.id: i for i, d in enumerate(docs)}
    try:
        with scratch_schema(engine, schema):
            seconds = load(engine, schema)
            with DedupStore(engine, params, schema=schema, create=False) as store:
                pairs = _store_pairs(store, index)
                clusters = [[index[m] for m in c.members] for c in store.clusters()]
    finally:
        engine.dispose()
    found = {t: {p for p, (_, j, _, _) in pairs.items() if j >= t} for t in THRESHOLDS}
    clusters.sort(key=lambda c: (-len(c), c[0]))
    return RunResult(label, seconds, found, clusters, pairs)


def _store_pairs(store: DedupStore, index: dict[str, int]) -> PairScores:
    pairs: PairScores = {}
    for pair in store.pairs():
        i, j = sorted((index[pair.a], index[pair.b]))
        pairs[(i, j)] = (str(pair.method), pair.jaccard, pair.containment, pair.hamming)
    return expand_exact_groups(pairs)


# -- the peer ------------------------------------------------------------------------------


def run_datasketch(docs: Sequence[CorpusDoc], params: FingerprintParams) -> list[RunResult]:
    """datasketch end to end at each threshold: raw LSH candidates, and those whose estimate
    reaches the threshold (clustered by union-find; timed at the store's threshold)."""
    from datasketch import MinHash

    start = time.perf_counter()
    shingles = [peer_input(canonical_tokens(d.text, params), params)[0] for d in docs]
    sketches = MinHash.bulk(shingles, num_perm=params.num_perm, seed=params.seed)
    prepared = time.perf_counter() - start
    raw: dict[float, PairSet] = {}
    verified: dict[float, PairSet] = {}
    seconds, clusters = prepared, []
    for tau in THRESHOLDS:
        start = time.perf_counter()
        raw[tau] = lsh_pairs(sketches, tau, params.num_perm)
        verified[tau] = {p for p in raw[tau] if sketches[p[0]].jaccard(sketches[p[1]]) >= tau}
        groups = union_find_clusters(len(docs), verified[tau])
        if tau == params.threshold:
            seconds, clusters = prepared + time.perf_counter() - start, groups
    return [
        RunResult("datasketch (raw candidates)", seconds, raw, []),
        RunResult("datasketch (estimate >= t)", seconds, verified, clusters),
    ]


def run_rensa(docs: Sequence[CorpusDoc], params: FingerprintParams) -> RunResult:
    """rensa end to end at each threshold, as :func:`run_datasketch` (timed at the store's
    threshold), on the same shingles."""
    from rensa import RMinHash, RMinHashLSH

    start = time.perf_counter()
    sketches = []
    for doc in docs:
        sketch = RMinHash(num_perm=params.num_perm, seed=params.seed)
        sketch.update(peer_input(canonical_tokens(doc.text, params), params)[0])
        sketches.append(sketch)
    prepared = time.perf_counter() - start
    verified: dict[float, PairSet] = {}
    seconds, clusters = prepared, []
    for tau in THRESHOLDS:
        start = time.perf_counter()
        lsh = RMinHashLSH(tau, params.num_perm, rensa_bands(tau, params.num_perm))
        for i, sketch in enumerate(sketches):
            lsh.insert(i, sketch)
        found = {(min(i, j), max(i, j)) for i, s in enumerate(sketches) for j in lsh.query(s)}
        verified[tau] = {
            (a, b) for a, b in found if a != b and sketches[a].jaccard(sketches[b]) >= tau
        }
        groups = union_find_clusters(len(docs), verified[tau])
        if tau == params.threshold:
            seconds, clusters = prepared + time.perf_counter() - start, groups
    return RunResult("rensa (estimate >= t)", seconds, verified, clusters)


def rensa_bands(tau: float, num_perm: int) -> int:
    """The bands ``b`` dividing ``num_perm`` whose S-curve ``1 - (1 - s**r)**b`` has the least
    false-positive plus false-negative area around ``tau`` (datasketch's weights, 0.5 each)."""
    low, high = np.linspace(0.0, tau, 257), np.linspace(tau, 1.0, 257)

    def error(b: int) -> float:
        r = num_perm // b
        fp = np.trapezoid(1.0 - (1.0 - low**r) ** b, low)
        fn = np.trapezoid((1.0 - high**r) ** b, high)
        return float(fp + fn)

    return min((b for b in range(1, num_perm + 1) if num_perm % b == 0), key=error)


def lsh_pairs(sketches: Sequence[Any], tau: float, num_perm: int) -> PairSet:
    """Candidate pairs of ``MinHashLSH(threshold=tau)``: every sketch inserted, then queried."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=tau, num_perm=num_perm)
    with lsh.insertion_session() as session:
        for i, sketch in enumerate(sketches):
            session.insert(i, sketch)
    found: PairSet = set()
    for i, sketch in enumerate(sketches):
        found.update((min(i, j), max(i, j)) for j in lsh.query(sketch) if j != i)
    return found


def union_find_clusters(n: int, pairs: PairSet) -> list[list[int]]:
    """Clusters of two or more of ``n`` documents joined by ``pairs``, largest first."""
    sets: UnionFind[int] = UnionFind(range(n))
    for a, b in pairs:
        sets.union(a, b)
    groups = [sorted(g) for g in sets.groups().values() if len(g) > 1]
    return sorted(groups, key=lambda g: (-len(g), g[0]))
