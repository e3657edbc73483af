"""Real-text benchmark: throughput and quality of the store on text nobody wrote for it.

For each corpus of :mod:`benchmarks.realtext_corpus` (``copyright``, ``licenses``, ``man``,
``pysrc``, ``docstrings``, ``seeded``), in one run:

1. Ground truth by brute force (:mod:`benchmarks.shingle_truth`): exact Jaccard and containment
   over the store's own shingle hashes for every pair sharing a shingle.
2. ``DedupStore.ingest`` (default parameters and batch size, as ``dedup-store ingest`` does) into
   a fresh schema, dropped afterwards; ``dedup-store ingest`` of the corpus as a JSONL file, in a
   new process, timed from its start to its exit; then ``DedupStore.ingest`` with
   ``containment=0`` (excerpt index off) and with ``threshold=0.5``.
   Reported: docs/s and MB/s of the ingest call (of the process for the command line);
   recall and precision at each threshold ``t`` (pairs of ``store.pairs()`` with Jaccard >=
   ``t`` against the true pairs with Jaccard >= ``t``); per method (in-process runs), the
   reported pairs that are not near-duplicates (Jaccard < 0.3 and containment < 0.8) and the
   lowest-Jaccard ones with the longest run of canonical words the two documents share; the
   largest cluster against the largest connected component of the true pairs of Jaccard >= 0.5.
3. datasketch ``MinHashLSH(threshold=t, num_perm=84)`` over ``MinHash.bulk`` of the same
   shingles (the same canonical tokens, cut as the store cuts them, as bytes), candidates kept
   when their MinHash estimate reaches ``t``, and union-find over those at the store's threshold:
   end to end in memory (canonical tokens included), its docs/s, recall, precision and largest
   cluster.
4. rensa end to end the same way: ``RMinHash`` digests of the same shingles, ``RMinHashLSH``
   (its bands must divide ``num_perm``: the divisor whose S-curve errs least at ``t``, as
   datasketch weighs the errors), candidates kept when their estimate reaches ``t``, union-find.

Run ``python -m benchmarks.realtext --help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import realtext_corpus as rc
from benchmarks.common import add_seed, add_url
from benchmarks.evaluation import Row, evaluate
from benchmarks.quality import relation
from benchmarks.quality_corpus import CorpusDoc
from benchmarks.realtext_report import CLI_RUN, headline, markdown
from benchmarks.realtext_runs import (
    THRESHOLDS,
    RunResult,
    run_cli,
    run_datasketch,
    run_rensa,
    run_store,
)
from benchmarks.shingle_truth import ShingleTruth, components, document_shingles, shingle_truth
from dedup_store import FingerprintParams, canonicalize

NOT_NEAR_JACCARD = 0.3
EXCERPT = 0.8
COMPONENT_JACCARD = 0.5
WORST = 5
SHOWN_MEMBERS = 10
HUBS = 3


@dataclasses.dataclass
class Corpus:
    """A corpus with its ground truth.

    Attributes:
        name: corpus name.
        docs: its documents (those empty after canonicalization left out).
        dropped: how many documents were left out.
        truth: exact scores over the store's shingles.
    """

    name: str
    docs: list[CorpusDoc]
    dropped: int
    truth: ShingleTruth

    @property
    def megabytes(self) -> float:
        """Size of the texts in UTF-8, MB (10**6 bytes)."""
        return sum(len(d.text.encode("utf-8")) for d in self.docs) / 1e6


# -- corpus and truth ----------------------------------------------------------------------


def prepare(name: str, limit: int | None, seed: int, extra: Sequence[Path]) -> Corpus:
    """Load the corpus and compute its ground truth."""
    docs = rc.load(name, limit, seed, extra)
    shingles, empty = document_shingles([d.text for d in docs], FingerprintParams())
    left_out = set(empty)
    kept = [i for i in range(len(docs)) if i not in left_out]
    truth = shingle_truth([shingles[i] for i in kept])
    return Corpus(name, [docs[i] for i in kept], len(left_out), truth)


# -- figures -------------------------------------------------------------------------------


def quality_rows(
    corpus: Corpus, runs: Sequence[RunResult], keep: Callable[[tuple[int, int]], bool] | None = None
) -> list[Row]:
    """Recall and precision of every run at every threshold (pairs restricted by ``keep``)."""
    truth = corpus.truth
    rows = []
    for run in runs:
        for tau in THRESHOLDS:
            found, positives = run.found[tau], truth.jaccard_pairs(tau)
            if keep is not None:
                found, positives = {p for p in found if keep(p)}, {p for p in positives if keep(p)}
            rows.append(
                evaluate(run.name, tau, found, positives, _reaches(truth, tau), run.seconds)
            )
    return rows


def _reaches(truth: ShingleTruth, tau: float) -> Callable[[tuple[int, int]], bool]:
    return lambda p: truth.score(*p)[0] >= tau


def throughput(corpus: Corpus, run: RunResult) -> dict[str, Any]:
    """Docs/s and MB/s of a run, with its edge and cluster counts."""
    return {
        "run": run.name,
        "seconds": round(run.seconds, 2),
        "docs_per_s": round(len(corpus.docs) / run.seconds, 1),
        "mb_per_s": round(corpus.megabytes / run.seconds, 3),
        "edges": len(run.pairs) or len(run.found[0.8]),
        "clusters": len(run.clusters),
    }


def not_near(corpus: Corpus, run: RunResult) -> list[dict[str, Any]]:
    """Per method: reported pairs, those that are not near-duplicates (Jaccard < 0.3 and not an
    excerpt) and all those below Jaccard 0.3, their lowest and mean Jaccard, and the pairs whose
    reported Jaccard differs from the truth."""
    out = []
    methods = sorted({m for m, *_ in run.pairs.values()})
    for method in methods:
        pairs = [(p, v) for p, v in run.pairs.items() if v[0] == method]
        scored = [(corpus.truth.score(*p), v) for p, v in pairs]
        low = [s for s, _ in scored if s[0] < NOT_NEAR_JACCARD]
        out.append(
            {
                "run": run.name,
                "method": method,
                "pairs": len(pairs),
                "below_0_3": len(low),
                "not_near": sum(s[1] < EXCERPT for s in low),
                "min_jaccard": round(min(s[0] for s, _ in scored), 4),
                "mean_jaccard": round(sum(s[0] for s, _ in scored) / len(scored), 4),
                "jaccard_differs": sum(abs(s[0] - v[1]) > 1e-6 for s, v in scored),
            }
        )
    return out


def worst_pairs(corpus: Corpus, run: RunResult, params: FingerprintParams) -> list[dict[str, Any]]:
    """The :data:`WORST` lowest-Jaccard pairs of each method but ``exact`` (no document in two
    of them), with the words they share."""
    out = []
    for method in sorted({m for m, *_ in run.pairs.values()} - {"exact"}):
        pairs = [p for p, v in run.pairs.items() if v[0] == method]
        pairs.sort(key=lambda p: corpus.truth.score(*p)[0])
        for i, j in _disjoint(pairs, WORST):
            jac, con = corpus.truth.score(i, j)
            a, b = corpus.docs[i], corpus.docs[j]
            run_words, shared = longest_shared_run(a.text, b.text, params)
            out.append(
                {
                    "run": run.name,
                    "method": method,
                    "a": a.id,
                    "b": b.id,
                    "jaccard": round(jac, 4),
                    "containment": round(con, 4),
                    "hamming": run.pairs[(i, j)][3],
                    "shingles": [len(corpus.truth.shingles[i]), len(corpus.truth.shingles[j])],
                    "shared_run_words": run_words,
                    "shared_run": shared,
                }
            )
    return out


def _disjoint(pairs: Sequence[tuple[int, int]], count: int) -> list[tuple[int, int]]:
    """The first ``count`` pairs of ``pairs`` that share no document with an earlier one."""
    seen: set[int] = set()
    out = []
    for i, j in pairs:
        if i not in seen and j not in seen:
            out.append((i, j))
            seen.update((i, j))
            if len(out) == count:
                break
    return out


def longest_shared_run(
    a: str, b: str, params: FingerprintParams, shown: int = 24
) -> tuple[int, str]:
    """The longest run of canonical words of ``a`` whose word 4-grams all occur in ``b``:
    its length in words and its first ``shown`` words."""
    words_a, words_b = canonicalize(a, params).split(), canonicalize(b, params).split()
    n = params.shingle_size
    grams_b = {tuple(words_b[k : k + n]) for k in range(len(words_b) - n + 1)}
    best, best_start, length = 0, 0, 0
    for k in range(len(words_a) - n + 1):
        length = length + 1 if tuple(words_a[k : k + n]) in grams_b else 0
        if length > best:
            best, best_start = length, k - length + 1
    words = best + n - 1 if best else 0
    return words, " ".join(words_a[best_start : best_start + min(words, shown)])


def largest_clusters(corpus: Corpus, runs: Sequence[RunResult]) -> list[dict[str, Any]]:
    """The largest cluster of each run and the largest component of true pairs (J >= 0.5),
    with the true components each cluster spans."""
    true_components = components(len(corpus.docs), corpus.truth.jaccard_pairs(COMPONENT_JACCARD))
    component_of = {doc: k for k, group in enumerate(true_components) for doc in group}
    rows = [_cluster_row(corpus, "truth: component of J >= 0.5", true_components[0], {})]
    for run in runs:
        if run.clusters:
            rows.append(_cluster_row(corpus, run.name, run.clusters[0], component_of, run))
    return rows


def _cluster_row(
    corpus: Corpus,
    name: str,
    members: list[int],
    component_of: dict[int, int],
    run: RunResult | None = None,
) -> dict[str, Any]:
    spans = Counter(component_of.get(m, -1 - m) for m in members)
    inside = set(members)
    edges = (
        [(p, v[0]) for p, v in run.pairs.items() if p[0] in inside and p[1] in inside]
        if run
        else []
    )
    degree = Counter(d for p, method in edges if method != "exact" for d in p)
    return {
        "run": name,
        "size": len(members),
        "first_members": [corpus.docs[m].id for m in members[:SHOWN_MEMBERS]],
        "true_components": len(spans) if component_of else 1,
        "largest_true_part": max(spans.values()) if component_of else len(members),
        "edges_by_method": dict(sorted(Counter(m for _, m in edges).items())),
        "hubs": {corpus.docs[d].id: n for d, n in degree.most_common(HUBS)},
    }


def languages_subset(corpus: Corpus) -> Callable[[tuple[int, int]], bool] | None:
    """For a corpus with Russian or Chinese documents: keeps pairs of two such documents."""
    other = {i for i, d in enumerate(corpus.docs) if rc.language(d.text) != "en"}
    if not other:
        return None
    return lambda p: p[0] in other and p[1] in other


def misses_by_relation(corpus: Corpus, run: RunResult) -> dict[str, dict[str, int]]:
    """Per threshold, the true pairs the run missed, by the seeded edit between them."""
    out = {}
    for tau in THRESHOLDS:
        missed = corpus.truth.jaccard_pairs(tau) - run.found[tau]
        out[f"{tau:g}"] = dict(Counter(relation(corpus.docs, *p) for p in missed).most_common())
    return out


def edit_profile(corpus: Corpus) -> list[dict[str, Any]]:
    """Per seeded edit and language: how similar, over the store's shingles, an edited copy is
    to its source (an edit of form only should leave Jaccard at 1)."""
    index = {d.id: i for i, d in enumerate(corpus.docs)}
    scores: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for k, doc in enumerate(corpus.docs):
        if doc.parent in index:
            parent = index[doc.parent]
            key = (doc.kind, rc.language(corpus.docs[parent].text))
            scores.setdefault(key, []).append(corpus.truth.score(parent, k))
    return [
        {
            "edit": kind,
            "language": lang,
            "copies": len(values),
            "median_jaccard": round(float(np.median([j for j, _ in values])), 4),
            "jaccard_0_8": round(float(np.mean([j >= 0.8 for j, _ in values])), 4),
            "median_containment": round(float(np.median([c for _, c in values])), 4),
        }
        for (kind, lang), values in sorted(scores.items())
    ]


# -- the benchmark -------------------------------------------------------------------------


#: The threshold of the third store run (the default store's bands are chosen for 0.8).
LOW_THRESHOLD = 0.5


def benchmark(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of one corpus, JSON-ready."""
    started = time.perf_counter()
    corpus = prepare(name, args.limit, args.seed, args.extra_text)
    _progress(f"{name}: {len(corpus.docs)} documents, truth in {corpus.truth.seconds:.1f} s")
    default = FingerprintParams(
        simhash_weights=args.simhash_weights,
        simhash_blocks=args.simhash_blocks,
        simhash_key_max_shingles=args.simhash_key_max_shingles,
    )
    runs = store_runs(args.url, name, default, corpus.docs) if args.url else []
    peers = run_datasketch(corpus.docs, default)
    _progress(f"{name}: datasketch {peers[1].seconds:.1f} s")
    peers.append(run_rensa(corpus.docs, default))
    _progress(f"{name}: rensa {peers[2].seconds:.1f} s")
    return report(corpus, runs, peers, default, time.perf_counter() - started)


def store_runs(
    url: str, name: str, default: FingerprintParams, docs: Sequence[CorpusDoc]
) -> list[RunResult]:
    """``DedupStore.ingest`` at ``default``, the command line at ``default``, then
    ``DedupStore.ingest`` with the excerpt index off and with bands chosen for
    :data:`LOW_THRESHOLD` (what a user who wants pairs from Jaccard 0.5 on creates)."""
    configs: list[tuple[str, Callable[..., RunResult], FingerprintParams]] = [
        ("store (defaults)", run_store, default),
        (CLI_RUN, run_cli, default),
        ("store (containment 0)", run_store, dataclasses.replace(default, containment=0.0)),
        (
            f"store (threshold {LOW_THRESHOLD:g})",
            run_store,
            dataclasses.replace(default, threshold=LOW_THRESHOLD),
        ),
    ]
    runs = []
    for label, run, params in configs:
        runs.append(run(url, label, params, docs))
        _progress(f"{name}: {label}: {runs[-1].seconds:.1f} s")
    return runs


def report(
    corpus: Corpus,
    runs: list[RunResult],
    peers: list[RunResult],
    params: FingerprintParams,
    seconds: float,
) -> dict[str, Any]:
    """The figures of one corpus as a JSON-ready dict."""
    truth = corpus.truth
    everything = runs + peers
    in_process = [r for r in runs if r.name != CLI_RUN]  # the CLI's pairs are the same
    result: dict[str, Any] = {
        "corpus": corpus.name,
        "documents": len(corpus.docs),
        "dropped_empty": corpus.dropped,
        "megabytes": round(corpus.megabytes, 2),
        "truth_seconds": round(truth.seconds, 2),
        "pairs_sharing_a_shingle": truth.sharing,
        "true_pairs": {f"{t:g}": len(truth.jaccard_pairs(t)) for t in THRESHOLDS},
        "true_excerpt_pairs": len(truth.containment_pairs(EXCERPT)),
        "throughput": [throughput(corpus, r) for r in [*runs, *peers[1:]]],
        "quality": [_row(r) for r in quality_rows(corpus, everything)],
        "not_near": [row for r in in_process for row in not_near(corpus, r)],
        "largest_clusters": largest_clusters(corpus, [*in_process, *peers[1:]]),
        "worst_pairs": [row for r in in_process for row in worst_pairs(corpus, r, params)],
        "seconds": round(seconds, 1),
    }
    keep = languages_subset(corpus)
    if keep is not None and corpus.name == "seeded":
        result["quality_ru_zh"] = [_row(r) for r in quality_rows(corpus, everything, keep)]
    if corpus.name == "seeded":
        result["edit_profile"] = edit_profile(corpus)
    if corpus.name == "seeded" and runs:
        result["store_misses_by_edit"] = misses_by_relation(corpus, runs[0])
    return result


def _row(row: Row) -> dict[str, Any]:
    return {
        "run": row.name,
        "t": row.tau,
        "recall": round(row.recall, 4),
        "precision": round(row.precision, 4),
        "found": row.found,
        "truth": row.truth,
        "missed": len(row.missed),
    }


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--corpus",
        default=",".join(rc.CORPORA),
        help=f"comma-separated corpora, of {', '.join(rc.CORPORA)}",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help="at most this many documents per corpus (the man sample is "
        f"{rc.MAN_PAGES} pages, the seeded corpus {rc.SEEDED_DOCS} "
        "documents unless limited)",
    )
    add_seed(parser, 7, "seed of the samples and edits")
    parser.add_argument(
        "--extra-text",
        type=Path,
        action="append",
        default=[],
        help="a text file added to the sources of the seeded corpus "
        "(repeatable; e.g. articles in Russian or Chinese)",
    )
    add_url(
        parser, "PostgreSQL URL (a fresh schema per run, dropped after); empty to skip the store"
    )
    parser.add_argument(
        "--simhash-weights",
        choices=["count", "tfidf", "tfidf-length"],
        default="count",
        help="the stores' SimHash feature weights",
    )
    parser.add_argument(
        "--simhash-blocks",
        type=int,
        default=FingerprintParams.simhash_blocks,
        help="the stores' SimHash blocks (default %(default)s)",
    )
    parser.add_argument(
        "--simhash-key-max-shingles",
        type=int,
        default=FingerprintParams.simhash_key_max_shingles,
        help="the stores' longest document with SimHash block keys (0: no limit; default "
        "%(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    args.corpus = [c for c in args.corpus.split(",") if c]
    unknown = sorted(set(args.corpus) - set(rc.CORPORA))
    if unknown:
        parser.error(f"unknown corpus {', '.join(unknown)}; expected {', '.join(rc.CORPORA)}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    args = parse_args(argv)
    results = []
    for name in args.corpus:
        results.append(benchmark(name, args))
        if not args.json:
            print(markdown(results[-1]), flush=True)
    if args.json:
        print(json.dumps(results, indent=2))
    elif len(results) > 1:
        print("## every corpus: the store's defaults against datasketch\n")
        print(headline(results))


if __name__ == "__main__":
    main()
