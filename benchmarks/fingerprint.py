"""Fingerprinting throughput: dedup_store against datasketch and simhash, in one process.

For batches of short (~40 words) and long (~600 words) seeded synthetic documents it prints
documents per second of:

* ``ours, raw text``: :func:`dedup_store.core.fingerprint_batch` from the raw text (canonical
  text, shingles, MinHash, band keys, SimHash, block keys, excerpt keys, exact hash);
* ``ours, tokens``: :func:`dedup_store.core.fingerprint.fingerprint_tokens` from the canonical
  tokens (everything above but canonicalization);
* ``datasketch``: ``MinHash.bulk`` with the same ``num_perm`` on the same word shingles (the
  ``shingle_size``-word n-grams of the same canonical tokens, as UTF-8 bytes); building those bytes
  is not timed, so the peer is measured on its hashing alone;
* ``simhash``: ``simhash.Simhash(features)`` on the same features as our SimHash (the canonical
  tokens, every occurrence weighing 1, that is term frequency); not timed either: building them.

Each figure is the best of ``--repeat`` runs on one core (a single process, no threads), and the
ratios are ours divided by the peer. Ours runs the compiled kernels when they are built, or with
``--numpy`` the numpy implementation a build without a C compiler runs. Run it as
``python -m benchmarks.fingerprint``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.synthetic import Corpus
from dedup_store.core import FingerprintParams, canonical_tokens, fingerprint_batch, kernels
from dedup_store.core.fingerprint import fingerprint_tokens


def best_rates(runs: dict[str, Callable[[], Any]], count: int, repeat: int) -> dict[str, float]:
    """Documents per second of the fastest of ``repeat`` runs of each contender.

    The contenders take turns (round robin), so a burst of load on the machine hurts them alike.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: count / seconds for name, seconds in best.items()}


def word_shingles(tokens: Sequence[str], n: int) -> list[bytes]:
    """The ``n``-word shingles of one document as bytes (one shingle of all words if shorter)."""
    if len(tokens) <= n:
        return [" ".join(tokens).encode("utf-8")]
    return [" ".join(tokens[i : i + n]).encode("utf-8") for i in range(len(tokens) - n + 1)]


def measure(docs: list[str], params: FingerprintParams, repeat: int) -> dict[str, float]:
    """Docs/s of ours and of the peers on the same documents."""
    from datasketch import MinHash
    from simhash import Simhash

    tokens = [canonical_tokens(doc, params) for doc in docs]
    shingles = [word_shingles(t, params.shingle_size) for t in tokens]
    runs: dict[str, Callable[[], Any]] = {
        "ours, raw text": lambda: fingerprint_batch(docs, params),
        "ours, tokens": lambda: fingerprint_tokens(tokens, params),
        "datasketch": lambda: MinHash.bulk(shingles, num_perm=params.num_perm),
        "simhash": lambda: [Simhash(t) for t in tokens],
    }
    return best_rates(runs, len(docs), repeat)


def render(rows: list[tuple[str, int, int, dict[str, float]]]) -> str:
    """A table of docs/s and ratios (ours / peer)."""
    lines = [
        f"{'documents':<22}{'ours raw':>11}{'ours tok':>11}{'datasketch':>12}{'simhash':>10}"
        f"{'raw/ds':>9}{'tok/ds':>9}{'raw/sh':>9}{'raw/ds+sh':>11}",
    ]
    for _label, count, words, rate in rows:
        both = 1.0 / (1.0 / rate["datasketch"] + 1.0 / rate["simhash"])
        raw = rate["ours, raw text"]
        lines.append(
            f"{f'{count} x ~{words} words':<22}{raw:>11,.0f}{rate['ours, tokens']:>11,.0f}"
            f"{rate['datasketch']:>12,.0f}{rate['simhash']:>10,.0f}"
            f"{raw / rate['datasketch']:>8.1f}x{rate['ours, tokens'] / rate['datasketch']:>8.1f}x"
            f"{raw / rate['simhash']:>8.1f}x{raw / both:>10.1f}x"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse options, run both document sizes, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--docs", type=int, default=2000, help="documents of ~40 words per batch")
    parser.add_argument("--long-docs", type=int, default=0, help="documents of ~600 words "
                        "(default: --docs / 5)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the synthetic text")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (best is kept)")
    parser.add_argument("--numpy", action="store_true", help="run our numpy implementation "
                        "instead of the compiled kernels (as a build without a C compiler does)")
    args = parser.parse_args(argv)
    if args.numpy:
        kernels.compiled = None
    params = FingerprintParams()
    corpus = Corpus(args.seed)
    sizes = [(args.docs, 40), (args.long_docs or max(1, args.docs // 5), 600)]
    rows = []
    for count, words in sizes:
        docs = corpus.documents(count, words)
        rows.append((f"{count} x {words}", count, words, measure(docs, params, args.repeat)))
    print(f"params: num_perm={params.num_perm} shingle_size={params.shingle_size} "
          f"bands={params.bands} scheme={params.scheme}; one process, seed {args.seed}; "
          f"kernels: {'numpy' if kernels.compiled is None else 'compiled'}")
    print(render(rows))


if __name__ == "__main__":
    main()
