"""SimHash feature weights on real text: occurrence counts against tf-idf and a length curve.

``python -m benchmarks.simhash_weights`` fingerprints each real-text corpus of
``benchmarks.realtext`` (copyright files, man pages, the seeded edits with their Russian and
Chinese documents) with several SimHash feature weightings, finds every pair of documents
within Hamming distance ``k`` by brute force over all pairs, and scores them against the exact
Jaccard similarity of their shingle sets:

- ``count``: every occurrence of a feature (a word, or a CJK character shingle) counts 1
  (``simhash_weights`` ``count``);
- ``tfidf``: each occurrence weighs the feature's inverse document frequency,
  ``log((N + 1) / (df + 1)) + 1`` (``simhash_weights`` ``tfidf``);
- ``tfidf-length``: the same times a normal density over the feature's length in UTF-8 bytes
  (mean 4.51, standard deviation 2.207, 1 at its peak; ``simhash_weights`` ``tfidf-length``);
- ``tfidf-length-chars``: the same curve over the length in characters (not a store
  parameter: the comparison that chose bytes).

The three store weightings are computed as a store computes them (:mod:`dedup_store.core`):
the corpus is ingested in batches of ``--batch-size`` documents, each weighed with the counts of
the batches before it plus its own, so documents fingerprinted at different times meet with the
weights they were stored with. ``tfidf-length-chars`` uses the whole corpus's counts. The drift
table compares each document's SimHash as stored in that order with the one the whole corpus's
counts give.

Precision is the share of pairs within ``k`` whose Jaccard is at least 0.5; recall the share of
the pairs with Jaccard at least 0.8 (and 0.5) that are within ``k``. Pairs of two identical
canonical texts are left out (every weighting finds them). For the seeded corpus the figures are
also given for pairs of two English, two Russian and two Chinese documents.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from benchmarks import realtext_corpus as rc
from benchmarks.common import add_seed
from benchmarks.fingerprint import peer_input
from benchmarks.realtext import Corpus, prepare
from benchmarks.realtext_report import table
from dedup_store import FingerprintParams, fingerprint_batch
from dedup_store.core import canonical_tokens
from dedup_store.core.weights import DocumentFrequencies, distinct_features

U64 = npt.NDArray[np.uint64]
LENGTH_MEAN, LENGTH_SD = 4.51, 2.207
Weight = Callable[[str], float]


def idf_table(features: Sequence[list[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of every feature of the corpus."""
    df = Counter(f for doc in features for f in set(doc))
    n = len(features)
    return {f: math.log((n + 1) / (d + 1)) + 1 for f, d in df.items()}


def length_relevance(length: int) -> float:
    """The term-length curve: a normal density over the length, 1 at its peak."""
    return math.exp(-((length - LENGTH_MEAN) ** 2) / (2 * LENGTH_SD**2))


STORE_WEIGHTS = ("count", "tfidf", "tfidf-length")


def chars_weights(idf: dict[str, float]) -> dict[str, float]:
    """tf-idf times the length curve over characters, as feature weights."""
    return {f: w * length_relevance(len(f)) for f, w in idf.items()}


def merged(
    frequencies: DocumentFrequencies, features: U64, offsets: npt.NDArray[np.int64]
) -> DocumentFrequencies:
    """``frequencies`` with the documents of a batch counted in."""
    new, counts = distinct_features(features, offsets)
    joined = np.concatenate([frequencies.features, new])
    unique, inverse = np.unique(joined, return_inverse=True)
    summed = np.bincount(inverse, np.concatenate([frequencies.counts, counts]), len(unique))
    return DocumentFrequencies(
        unique, summed.astype(np.int64), frequencies.documents + len(offsets) - 1
    )


def stored_simhashes(texts: list[str], params: FingerprintParams, batch_size: int) -> U64:
    """The SimHash each document gets when ``texts`` are ingested in batches, in order."""
    frequencies = DocumentFrequencies.empty()
    parts = []
    for start in range(0, len(texts), batch_size):
        batch = fingerprint_batch(
            texts[start : start + batch_size], params, frequencies=frequencies
        )
        assert len(batch) == len(texts[start : start + batch_size])
        parts.append(batch.simhashes)
        if params.weighted:
            frequencies = merged(frequencies, batch.features, batch.feature_offsets)
    return np.concatenate(parts)


def drift(texts: list[str], params: FingerprintParams, stored: U64) -> list[float]:
    """How far the stored SimHashes are from those the whole corpus's counts give: mean and
    95th percentile of the Hamming distance, share of documents moved at all and beyond 3."""
    whole = fingerprint_batch(texts, params).simhashes
    distance = np.bitwise_count(whole ^ stored).astype(np.float64)
    return [
        float(distance.mean()),
        float(np.percentile(distance, 95)),
        float(np.mean(distance > 0)),
        float(np.mean(distance > 3)),
    ]


def near_pairs(simhashes: U64, k: int) -> list[tuple[int, int]]:
    """Every pair ``(i, j)``, ``i < j``, within Hamming distance ``k``, by brute force."""
    found: list[tuple[int, int]] = []
    for i in range(len(simhashes) - 1):
        distances = np.bitwise_count(simhashes[i + 1 :] ^ simhashes[i])
        found.extend((i, i + 1 + int(j)) for j in np.flatnonzero(distances <= k))
    return found


def simhashes_of(
    corpus: Corpus, params: FingerprintParams, weights: dict[str, float] | None
) -> U64:
    """One SimHash per document of the corpus (none is empty: ``prepare`` left those out)."""
    batch = fingerprint_batch([d.text for d in corpus.docs], params, weights)
    assert len(batch) == len(corpus.docs)
    return batch.simhashes


def scores(
    corpus: Corpus,
    found: list[tuple[int, int]],
    keep: Callable[[tuple[int, int]], bool],
) -> list[float]:
    """Precision at J 0.5, recall at J 0.8 and J 0.5, and the pair count, over kept pairs."""
    truth = corpus.truth
    pairs = [p for p in found if keep(p)]
    jaccard = [truth.score(*p)[0] for p in pairs]
    precision = sum(j >= 0.5 for j in jaccard) / len(pairs) if pairs else 1.0
    got = set(pairs)
    recall = []
    for tau in (0.8, 0.5):
        positives = [p for p in truth.jaccard_pairs(tau) if keep(p)]
        recall.append(sum(p in got for p in positives) / len(positives) if positives else 1.0)
    return [precision, recall[0], recall[1], float(len(pairs))]


def _same_language(
    lang: str, languages: list[str], texts: list[str]
) -> Callable[[tuple[int, int]], bool]:
    def keep(p: tuple[int, int]) -> bool:
        a, b = p
        return languages[a] == languages[b] == lang and texts[a] != texts[b]

    return keep


def run(name: str, args: argparse.Namespace) -> str:
    """The table of one corpus."""
    corpus = prepare(name, args.limit, args.seed, args.extra_text)
    params = FingerprintParams(simhash_k=args.k)
    canonical = [canonical_tokens(d.text, params) for d in corpus.docs]
    features = [peer_input(tokens, params)[1] for tokens in canonical]
    texts = [" ".join(tokens) for tokens in canonical]
    languages = [rc.language(d.text) for d in corpus.docs]
    subsets: dict[str, Callable[[tuple[int, int]], bool]] = {
        "all": lambda p: texts[p[0]] != texts[p[1]]
    }
    if name == "seeded":
        for lang in ("en", "ru", "zh"):
            subsets[lang] = _same_language(lang, languages, texts)
    rows: list[list[object]] = []
    drifts: list[list[object]] = []
    texts_in = [d.text for d in corpus.docs]
    for label in (*STORE_WEIGHTS, "tfidf-length-chars"):
        start = time.perf_counter()
        if label == "tfidf-length-chars":
            simhashes = simhashes_of(corpus, params, chars_weights(idf_table(features)))
        else:
            weighted = FingerprintParams(simhash_k=args.k, simhash_weights=label)  # type: ignore[arg-type]
            simhashes = stored_simhashes(texts_in, weighted, args.batch_size)
            if weighted.weighted:
                drifts.append([label, *drift(texts_in, weighted, simhashes)])
        seconds = time.perf_counter() - start
        found = near_pairs(simhashes, args.k)
        for subset, keep in subsets.items():
            precision, recall_8, recall_5, count = scores(corpus, found, keep)
            rows.append([label, subset, int(count), precision, recall_8, recall_5, seconds])
        print(f"{name}: {label} done", file=sys.stderr, flush=True)
    headers = ["weights", "pairs", "within k", "precision (J >= 0.5)", "recall J >= 0.8"]
    headers += ["recall J >= 0.5", "fingerprint s"]
    title = f"## {name}: {len(corpus.docs):,} documents, Hamming <= {args.k}"
    drift_headers = ["weights", "mean distance", "p95 distance", "moved", "moved > 3"]
    drift_title = f"stored in batches of {args.batch_size:,} against the whole corpus's counts"
    return (
        f"{title}\n\n{table(headers, rows)}\n\n{drift_title}:\n\n{table(drift_headers, drifts)}\n"
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default="copyright,man,seeded", help="comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="documents per corpus")
    add_seed(parser, 7)
    parser.add_argument("--k", type=int, default=3, help="Hamming distance of a match")
    parser.add_argument("--batch-size", type=int, default=2000, help="documents per batch")
    parser.add_argument("--extra-text", type=Path, action="append", default=[])
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Command line entry point."""
    args = parse_args(argv)
    for name in args.corpus.split(","):
        print(run(name, args), flush=True)


if __name__ == "__main__":
    main()
