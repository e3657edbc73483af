"""Quality benchmark: recall and precision of near-duplicate and excerpt search against brute force.

Ground truth is computed independently of the fingerprinting code: the canonical tokens of each
document (``canonical_tokens`` defines the text) are cut into shingles here, as plain tuples of
words, and exact Jaccard similarity and containment (``|A ∩ B| / min(|A|, |B|)``) are computed
for every pair that shares at least one shingle (an inverted index finds them; every other pair
has Jaccard 0).

Evaluated on the same corpus in the same run: ``DedupStore`` with scheme ``threshold`` at several
targets, scheme ``broder`` (6 x 14, at least 2 equal), SimHash k=3 with 4 and 5 blocks, the
excerpt (containment) index, and datasketch ``MinHashLSH`` with the same number of permutations
on the same shingles.

Run ``python -m benchmarks.quality --help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import numpy as np
import sqlalchemy as sa

from benchmarks.common import add_seed, add_url, scratch_schema, sqlalchemy_url
from benchmarks.evaluation import (
    HEADER,
    PairSet,
    Row,
    containment_row,
    expand_exact_groups,
    jaccard_row,
)
from benchmarks.fingerprint import cjk_runs
from benchmarks.quality_corpus import CorpusDoc, build_corpus
from benchmarks.realtext_runs import lsh_pairs
from dedup_store.core import FingerprintParams, canonical_tokens, fingerprint_batch
from dedup_store.core.scripts import is_cjk, starts_cjk

THRESHOLDS = (0.5, 0.7, 0.8, 0.9)
CONTAINMENT = 0.8
NUM_PERM = 84
_KEEP_JACCARD = 0.25
_KEEP_CONTAINMENT = 0.4


# -- ground truth ------------------------------------------------------------------------------


def shingle_set(
    tokens: Sequence[str], n: int, cjk_n: int, version: int = 2
) -> frozenset[tuple[str, ...]]:
    """The shingles of one document's canonical tokens, as tuples of words or characters.

    Word tokens form one sequence cut into ``n``-word shingles; the CJK text (each CJK token in
    ``canonical_version`` 1, all of them joined from version 2 on) is cut into
    ``cjk_n``-character shingles (tagged so they never equal a word shingle). A sequence
    shorter than its shingle size is a single shingle.
    """
    runs = cjk_runs(tokens, version)
    words = [t for t in tokens if not (starts_cjk(t) if version >= 2 else is_cjk(t))]
    grams = set(_ngrams(words, n))
    for run in runs:
        grams.update(("\x00cjk", *gram) for gram in _ngrams(list(run), cjk_n))
    return frozenset(grams)


def _ngrams(items: list[str], n: int) -> list[tuple[str, ...]]:
    if not items:
        return []
    if len(items) < n:
        return [tuple(items)]
    return [tuple(items[i : i + n]) for i in range(len(items) - n + 1)]


@dataclasses.dataclass
class Truth:
    """Exact Jaccard and containment of every pair that shares a shingle.

    Attributes:
        sets: the shingle set of each document.
        scores: ``(jaccard, containment)`` of each pair ``(i, j)`` with ``i < j`` whose Jaccard
            or containment is high enough to matter; :meth:`score` computes any other pair.
        seconds: time taken.
    """

    sets: list[frozenset[tuple[str, ...]]]
    scores: dict[tuple[int, int], tuple[float, float]]
    seconds: float

    def score(self, i: int, j: int) -> tuple[float, float]:
        """``(jaccard, containment)`` of documents ``i`` and ``j``."""
        key = (min(i, j), max(i, j))
        if key in self.scores:
            return self.scores[key]
        a, b = self.sets[i], self.sets[j]
        inter = len(a & b)
        return inter / (len(a) + len(b) - inter), inter / max(1, min(len(a), len(b)))

    def jaccard_pairs(self, tau: float) -> PairSet:
        """Pairs with Jaccard at least ``tau``."""
        return {p for p, (j, _) in self.scores.items() if j >= tau}

    def containment_pairs(self, tau: float) -> PairSet:
        """Pairs with containment at least ``tau``."""
        return {p for p, (_, c) in self.scores.items() if c >= tau}


def ground_truth(token_lists: Sequence[Sequence[str]], n: int, cjk_n: int = 3) -> Truth:
    """Brute-force exact scores through an inverted index over shingles."""
    start = time.perf_counter()
    sets = [shingle_set(tokens, n, cjk_n) for tokens in token_lists]
    postings: dict[tuple[str, ...], list[int]] = defaultdict(list)
    scores: dict[tuple[int, int], tuple[float, float]] = {}
    for i, grams in enumerate(sets):
        shared: Counter[int] = Counter()
        for gram in grams:
            seen = postings[gram]
            shared.update(seen)
            seen.append(i)
        for j, inter in shared.items():
            jac = inter / (len(grams) + len(sets[j]) - inter)
            con = inter / min(len(grams), len(sets[j]))
            if jac >= _KEEP_JACCARD or con >= _KEEP_CONTAINMENT:
                scores[(j, i)] = (jac, con)
    return Truth(sets, scores, time.perf_counter() - start)


# -- evaluation --------------------------------------------------------------------------------


def relation(docs: Sequence[CorpusDoc], i: int, j: int) -> str:
    """How two documents are related: the edit between them, siblings, or unrelated."""
    a, b = docs[i], docs[j]
    if b.parent == a.id:
        return b.kind
    if a.parent == b.id:
        return a.kind
    if a.parent is not None and a.parent == b.parent:
        return "siblings"
    return "unrelated"


def _bucket(value: float, edges: Sequence[float]) -> str:
    for low, high in itertools.pairwise(edges):
        if low <= value < high:
            return f"[{low:g},{high:g})"
    return f">={edges[-1]:g}"


def miss_report(row: Row, docs: Sequence[CorpusDoc], truth: Truth, measure: int) -> list[str]:
    """Where the misses of a row come from: true score, relation and length of the pairs."""
    if not row.missed:
        return []
    by_score: Counter[str] = Counter()
    by_relation: Counter[str] = Counter()
    by_length: Counter[str] = Counter()
    score_edges = [row.tau, row.tau + 0.02, row.tau + 0.05, row.tau + 0.1, row.tau + 0.2]
    for i, j in row.missed:
        by_score[_bucket(truth.score(i, j)[measure], score_edges)] += 1
        by_relation[relation(docs, i, j)] += 1
        shorter = min(len(truth.sets[i]), len(truth.sets[j]))
        by_length[_bucket(shorter, [0, 16, 40, 80, 160, 320])] += 1
    label = "jaccard" if measure == 0 else "containment"
    return [
        f"  misses of {row.name} at {row.tau:g}: {len(row.missed)}",
        f"    true {label}: {_counts(by_score)}",
        f"    relation: {_counts(by_relation)}",
        f"    shingles of the smaller: {_counts(by_length)}",
    ]


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counter.items()))


# -- datasketch --------------------------------------------------------------------------------


def datasketch_rows(truth: Truth, thresholds: Iterable[float], seed: int = 1) -> list[Row]:
    """datasketch MinHashLSH at each threshold: raw candidates, then verified by its estimate."""
    from datasketch import MinHash

    start = time.perf_counter()
    encoded = [[" ".join(g).encode("utf-8") for g in grams] for grams in truth.sets]
    sketches = MinHash.bulk(encoded, num_perm=NUM_PERM, seed=seed)
    sketch_seconds = time.perf_counter() - start
    rows = []
    for tau in thresholds:
        start = time.perf_counter()
        found = lsh_pairs(sketches, tau, NUM_PERM)
        seconds = sketch_seconds + time.perf_counter() - start
        rows.append(jaccard_row("datasketch MinHashLSH (raw)", tau, found, truth, seconds))
        verified = {p for p in found if sketches[p[0]].jaccard(sketches[p[1]]) >= tau}
        seconds = sketch_seconds + time.perf_counter() - start
        rows.append(jaccard_row("datasketch + own estimate >= tau", tau, verified, truth, seconds))
    return rows


# -- band keys of the core (no database) -------------------------------------------------------


def band_candidates(texts: Sequence[str], params: FingerprintParams) -> tuple[PairSet, float]:
    """Pairs sharing a band key in ``fingerprint_batch`` (the candidate stage of the store)."""
    start = time.perf_counter()
    batch = fingerprint_batch(texts, params)
    rows = batch.source_index
    found: PairSet = set()
    keys = batch.band_keys
    for column in range(keys.shape[1]):
        groups: dict[int, list[int]] = defaultdict(list)
        for row, key in enumerate(keys[:, column].tolist()):
            groups[key].append(int(rows[row]))
        for members in groups.values():
            found.update((a, b) for x, a in enumerate(members) for b in members[x + 1 :])
    return found, time.perf_counter() - start


def band_sweep(
    texts: Sequence[str], truth: Truth, base: FingerprintParams, weights: Iterable[float]
) -> list[str]:
    """Candidate recall and candidate count of the band scheme for several FN weights."""
    out = []
    for tau in THRESHOLDS:
        positives = truth.jaccard_pairs(tau)
        for weight in weights:
            params = dataclasses.replace(base, threshold=tau, false_negative_weight=weight)
            found, _ = band_candidates(texts, params)
            recall = len(found & positives) / len(positives) if positives else 1.0
            b, r = params.bands
            out.append(
                f"  tau {tau:.2f}  fn_weight {weight:.2f}  bands {b:>2}x{r:<2}  "
                f"candidate recall {recall:.4f}  candidates {len(found):>7}  truth {len(positives)}"
            )
    return out


# -- seeded relations under each shingle size ---------------------------------------------------


def relation_profile(docs: Sequence[CorpusDoc], truth: Truth) -> list[str]:
    """Share of (base, edit) pairs reaching each threshold, and unrelated pairs that do."""
    index = {d.id: i for i, d in enumerate(docs)}
    reached: dict[str, list[float]] = defaultdict(list)
    for j, doc in enumerate(docs):
        if doc.parent is not None:
            jac, con = truth.score(index[doc.parent], j)
            reached[doc.kind].append(con if doc.kind == "excerpt" else jac)
    out = []
    for kind, values in sorted(reached.items()):
        shares = "  ".join(
            f">={tau:g}: {np.mean(np.array(values) >= tau):.2f}" for tau in THRESHOLDS
        )
        measure = "containment" if kind == "excerpt" else "jaccard"
        out.append(f"  {kind:<9} {measure:<11} median {np.median(values):.3f}  {shares}")
    unrelated = [
        (jac, con)
        for (i, j), (jac, con) in truth.scores.items()
        if relation(docs, i, j) == "unrelated"
    ]
    levels = (_KEEP_JACCARD, 0.3, 0.4, *THRESHOLDS)
    out.append(
        "  unrelated pairs (no seeded edit between them): jaccard "
        + ", ".join(f">={t:g}: {sum(j >= t for j, _ in unrelated)}" for t in levels)
        + f"; containment >={CONTAINMENT:g}: {sum(c >= CONTAINMENT for _, c in unrelated)}"
    )
    return out


# -- store -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class StoreRun:
    """What one store configuration reported.

    Attributes:
        name: configuration name.
        params: its fingerprint parameters.
        pairs: ``(method, jaccard, containment, hamming)`` of every reported pair.
        seconds: time to ingest the corpus and read the pairs back.
        total_bytes: size of every table and index of the store's schema.
        shingle_bytes: size of the stored shingle arrays (what ``verify="exact"`` reads).
    """

    name: str
    params: FingerprintParams
    pairs: dict[tuple[int, int], tuple[str, float, float, int]]
    seconds: float
    total_bytes: int
    shingle_bytes: int


def run_store(
    url: str,
    name: str,
    params: FingerprintParams,
    docs: Sequence[CorpusDoc],
    batch_size: int = 1000,
) -> StoreRun:
    """Ingest the corpus into a fresh schema, read every pair back, drop the schema."""
    import sqlalchemy as sa

    from dedup_store import DedupStore

    schema = f"quality_{name}".replace(".", "").replace("-", "_").lower()
    engine = sa.create_engine(sqlalchemy_url(url))
    index = {d.id: i for i, d in enumerate(docs)}
    try:
        with scratch_schema(engine, schema):
            start = time.perf_counter()
            with DedupStore(engine, params, schema=schema) as store:
                store.add_many([(d.id, d.text) for d in docs], batch_size=batch_size)
                pairs = {}
                for pair in store.pairs():
                    i, j = sorted((index[pair.a], index[pair.b]))
                    pairs[(i, j)] = (
                        str(pair.method),
                        pair.jaccard,
                        pair.containment,
                        pair.hamming,
                    )
                pairs = expand_exact_groups(pairs)
            seconds = time.perf_counter() - start
            total, shingles = _storage(engine, schema)
    finally:
        engine.dispose()
    return StoreRun(name, params, pairs, seconds, total, shingles)


def _storage(engine: sa.Engine, schema: str) -> tuple[int, int]:
    """Bytes of the schema's tables (with indexes and TOAST) and of the shingle arrays."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        total = conn.execute(
            sa.text(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = :schema AND c.relkind = 'r'"
            ),
            {"schema": schema},
        ).scalar_one()
        shingles = conn.execute(
            sa.text(f'SELECT coalesce(sum(pg_column_size(shingles)), 0) FROM "{schema}".documents')
        ).scalar_one()
    return int(total), int(shingles)


def store_pairs(run: StoreRun, methods: Iterable[str]) -> PairSet:
    """Pairs the store reported with one of ``methods``."""
    wanted = set(methods)
    return {p for p, (method, *_) in run.pairs.items() if method in wanted}


def contained_pairs(run: StoreRun, tau: float) -> PairSet:
    """Pairs found by the excerpt index, or reported with containment at least ``tau``."""
    return {
        p for p, (method, _, con, _) in run.pairs.items() if method == "containment" or con >= tau
    }


def store_configurations(
    base: FingerprintParams, thresholds: Iterable[float]
) -> list[tuple[str, FingerprintParams]]:
    """The store configurations of the benchmark (the excerpt index only with the defaults)."""
    configs = []
    for tau in thresholds:
        containment = base.containment if math.isclose(tau, base.threshold) else 0.0
        params = dataclasses.replace(
            base, scheme="threshold", threshold=tau, containment=containment
        )
        configs.append((f"threshold_{tau:g}", params))
    for tau in thresholds:
        params = dataclasses.replace(base, scheme="broder", threshold=tau, containment=0.0)
        configs.append((f"broder_{tau:g}", params))
    if any(math.isclose(tau, base.threshold) for tau in thresholds):
        configs.append(
            (
                f"threshold_{base.threshold:g}_estimate",
                dataclasses.replace(base, scheme="threshold", verify="estimate"),
            )
        )
    for blocks in (4, 5):
        params = dataclasses.replace(
            base, threshold=1.0, containment=0.0, simhash_k=3, simhash_blocks=blocks
        )
        configs.append((f"simhash_k3_b{blocks}", params))
    return configs


def store_rows(
    runs: Sequence[StoreRun], truth: Truth, docs: Sequence[CorpusDoc]
) -> tuple[list[Row], list[Row]]:
    """Jaccard rows and containment rows of the store runs."""
    jaccard: list[Row] = []
    containment: list[Row] = []
    for run in runs:
        p = run.params
        if run.name.startswith("simhash"):
            found = store_pairs(run, ("simhash", "minhash", "exact"))
            label = f"store simhash k={p.simhash_k} blocks={p.simhash_blocks}"
            jaccard += [jaccard_row(label, tau, found, truth, run.seconds) for tau in THRESHOLDS]
            continue
        found = store_pairs(run, ("minhash", "exact"))
        label = _label(p)
        jaccard.append(jaccard_row(label, p.threshold, found, truth, run.seconds))
        if p.containment > 0:
            contained = contained_pairs(run, p.containment)
            row = containment_row(label, p.containment, contained, truth, run.seconds)
            containment += [row, excerpt_row(row, docs, truth, contained)]
    return jaccard, containment


def _label(p: FingerprintParams) -> str:
    b, r = p.bands
    label = f"store {p.scheme} {b}x{r}" + (" >=2 equal" if p.scheme == "broder" else "")
    return label + (" (estimate)" if p.verify == "estimate" else "")


def storage_lines(runs: Sequence[StoreRun], n_docs: int) -> list[str]:
    """Storage of each store run: whole schema and the shingle arrays, per document."""
    return [
        f"  {run.name:<28} schema {run.total_bytes / 2**20:7.1f} MiB "
        f"({run.total_bytes / n_docs:7.0f} B/doc), shingle arrays "
        f"{run.shingle_bytes / 2**20:6.1f} MiB ({run.shingle_bytes / n_docs:6.0f} B/doc)"
        for run in runs
    ]


def excerpt_row(row: Row, docs: Sequence[CorpusDoc], truth: Truth, found: PairSet) -> Row:
    """``row`` restricted to the seeded excerpts (pairs of an excerpt and its source)."""
    positives = {p for p in truth.containment_pairs(row.tau) if relation(docs, *p) == "excerpt"}
    hits = found & positives
    recall = len(hits) / len(positives) if positives else 1.0
    return Row(
        row.name + " [excerpts]",
        row.tau,
        recall,
        row.precision,
        len(found),
        len(positives),
        row.seconds,
        positives - found,
    )


# -- the benchmark -----------------------------------------------------------------------------


def _print_rows(title: str, rows: Sequence[Row]) -> None:
    print(f"\n{title}\n{HEADER}")
    for row in rows:
        print(row.line())


def _print_misses(
    rows: Sequence[Row], docs: Sequence[CorpusDoc], truth: Truth, measure: int
) -> None:
    lines = [line for row in rows for line in miss_report(row, docs, truth, measure)]
    if lines:
        print("\n".join(lines))


def run(args: argparse.Namespace) -> None:
    """Build the corpus, compute the ground truth, evaluate every configuration, print."""
    start = time.perf_counter()
    docs = build_corpus(args.size, args.seed)
    kinds = Counter(d.kind for d in docs)
    print(
        f"corpus: {len(docs)} documents ({_counts(kinds)}) built in "
        f"{time.perf_counter() - start:.1f} s, seed {args.seed}"
    )
    base = FingerprintParams()
    tokens = [canonical_tokens(d.text, base) for d in docs]
    texts = [d.text for d in docs]
    for n in args.shingle_sizes:
        params = dataclasses.replace(base, shingle_size=n)
        truth = ground_truth(tokens, n, base.cjk_shingle_size)
        print(
            f"\n=== shingle_size {n}: ground truth in {truth.seconds:.1f} s, "
            f"{len(truth.scores)} scored pairs ==="
        )
        print("seeded relations (source document vs its edit):")
        print("\n".join(relation_profile(docs, truth)))
        thresholds = THRESHOLDS if n == base.shingle_size else (base.threshold,)
        jaccard = datasketch_rows(truth, thresholds, seed=base.seed)
        containment: list[Row] = []
        runs: list[StoreRun] = []
        if args.url:
            runs = [
                run_store(args.url, f"{name}_n{n}", p, docs)
                for name, p in store_configurations(params, thresholds)
            ]
            store_j, containment = store_rows(runs, truth, docs)
            jaccard = store_j + jaccard
        _print_rows(f"Jaccard >= tau (shingle_size {n})", jaccard)
        _print_misses([r for r in jaccard if r.name.startswith("store")], docs, truth, 0)
        if containment:
            _print_rows(f"containment >= {CONTAINMENT:g} (shingle_size {n})", containment)
            _print_misses(containment, docs, truth, 1)
        if runs:
            print("\nstorage:")
            print("\n".join(storage_lines(runs, len(docs))))
        if args.fn_weights and n == base.shingle_size:
            print("\nband scheme candidates of the core (no database), per false_negative_weight:")
            print("\n".join(band_sweep(texts, truth, params, args.fn_weights)))
    print(f"\ntotal {time.perf_counter() - start:.1f} s")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=3000, help="documents in the corpus")
    add_seed(parser, 7, "seed of the corpus")
    parser.add_argument(
        "--shingle-sizes",
        type=_ints,
        default=[4],
        help="comma-separated shingle sizes; the default one gets every "
        "configuration, the others the default threshold only",
    )
    parser.add_argument(
        "--fn-weights",
        type=_floats,
        default=[0.7, 0.9, 0.95, 0.98],
        help="false_negative_weight values for the band-candidate sweep (empty to skip)",
    )
    add_url(
        parser,
        "PostgreSQL URL (a fresh schema per configuration, dropped after); empty to skip the store",
    )
    run(parser.parse_args(argv))


if __name__ == "__main__":
    main()
