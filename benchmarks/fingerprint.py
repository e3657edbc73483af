"""Fingerprinting throughput: dedup_store against datasketch, simhash and rensa, in one process.

For batches of short (~40 words) and long (~600 words) seeded synthetic English documents, and
with ``--languages en,ru,zh`` also Russian and Chinese ones (drawn from the sample articles in
``examples/``; a Chinese "word" is two characters), or with ``--corpus copyright`` for the real
long text of every ``/usr/share/doc/*/copyright`` file, it prints documents per second of:

* ``ours, raw text``: :func:`dedup_store.core.fingerprint_batch` from the raw text (canonical
  text, shingles, MinHash, band keys, SimHash, block keys, excerpt keys, exact hash);
* ``ours, tokens``: :func:`dedup_store.core.fingerprint.fingerprint_tokens` from the canonical
  tokens (everything above but canonicalization);
* ``datasketch``: ``MinHash.bulk`` with the same ``num_perm`` on the same shingles (the
  ``shingle_size``-word n-grams of the same canonical words and the ``cjk_shingle_size``-character
  n-grams of the CJK runs, as UTF-8 bytes); building those bytes is not timed, so the peer is
  measured on its hashing alone;
* ``simhash``: ``simhash.Simhash(features)`` on the same features as our SimHash (the canonical
  words and CJK character shingles, every occurrence weighing 1, that is term frequency); not
  timed either: building them;
* ``rensa``: ``rensa.RMinHash(num_perm, seed).update(shingles)`` and ``digest()`` per document
  on ready shingles: the ``RENSA_NGRAM``-word n-grams of the lower-cased ``split()`` words, as
  strings, built untimed (the digests alone: rensa's Rust against our whole fingerprint);
* ``rensa, raw text``: the same with the shingles built from the raw text, timed.

Each figure is the best of ``--repeat`` runs on one core (a single process, no threads), and the
ratios are ours divided by the peer. Ours runs the compiled kernels when they are built, or with
``--reference`` the reference kernels a build without a C compiler runs. Run it as
``python -m benchmarks.fingerprint``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import add_seed
from benchmarks.synthetic import Corpus
from dedup_store.config import ENV_KERNELS
from dedup_store.core import FingerprintParams, canonical_tokens, fingerprint_batch, kernels
from dedup_store.core.fingerprint import fingerprint_tokens
from dedup_store.core.scripts import is_cjk, starts_cjk

_SAMPLES = Path(__file__).resolve().parents[1] / "examples" / "articles"
#: Words per shingle of rensa's ready shingles.
RENSA_NGRAM = 5
RENSA_SEED = 42


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


def word_shingles(tokens: Sequence[str], n: int) -> list[str]:
    """The ``n``-word shingles of one document (one shingle of all words if shorter)."""
    if len(tokens) <= n:
        return [" ".join(tokens)] if tokens else []
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def char_shingles(run: str, n: int) -> list[str]:
    """The ``n``-character shingles of one CJK run (the whole run if shorter)."""
    return [run] if len(run) <= n else [run[i : i + n] for i in range(len(run) - n + 1)]


def _is_cjk(token: str, version: int) -> bool:
    return starts_cjk(token) if version >= 2 else is_cjk(token)


def cjk_runs(tokens: Sequence[str], version: int) -> list[str]:
    """The CJK character sequences shingled by characters: each CJK token in version 1, all of
    a document's CJK tokens joined from version 2 on."""
    runs = [t for t in tokens if _is_cjk(t, version)]
    return ["".join(runs)] if version >= 2 and runs else runs


def peer_input(tokens: list[str], params: FingerprintParams) -> tuple[list[bytes], list[str]]:
    """The shingles (as bytes, for datasketch) and SimHash features of one document, as ours
    takes them: word shingles of its words, character shingles of its CJK text (all of it one
    sequence from ``canonical_version`` 2 on); features are the words and the CJK shingles."""
    runs = cjk_runs(tokens, params.canonical_version)
    words = [t for t in tokens if not _is_cjk(t, params.canonical_version)]
    cjk = [s for run in runs for s in char_shingles(run, params.cjk_shingle_size)]
    shingles = word_shingles(words, params.shingle_size) + cjk
    return [s.encode("utf-8") for s in shingles], words + cjk


def split_shingles(text: str, n: int = RENSA_NGRAM) -> list[str]:
    """The ``n``-word shingles of the lower-cased ``split()`` words of ``text`` (rensa's input:
    no canonical text, no stop words)."""
    return word_shingles(text.lower().split(), n)


def rensa_digests(shingles: Sequence[list[str]], num_perm: int) -> list[list[int]]:
    """rensa's MinHash digest of each document's ready shingles."""
    from rensa import RMinHash

    digests = []
    for doc in shingles:
        minhash = RMinHash(num_perm=num_perm, seed=RENSA_SEED)
        minhash.update(doc)
        digests.append(minhash.digest())
    return digests


def measure(docs: list[str], params: FingerprintParams, repeat: int) -> dict[str, float]:
    """Docs/s of ours and of the peers on the same documents."""
    from datasketch import MinHash
    from simhash import Simhash

    tokens = [canonical_tokens(doc, params) for doc in docs]
    shingles, features = zip(*(peer_input(t, params) for t in tokens), strict=True)
    ready = [split_shingles(doc) for doc in docs]
    runs: dict[str, Callable[[], Any]] = {
        "ours, raw text": lambda: fingerprint_batch(docs, params),
        "ours, tokens": lambda: fingerprint_tokens(tokens, params),
        "datasketch": lambda: MinHash.bulk(shingles, num_perm=params.num_perm),
        "simhash": lambda: [Simhash(f) for f in features],
        "rensa": lambda: rensa_digests(ready, params.num_perm),
        "rensa, raw text": lambda: rensa_digests(list(map(split_shingles, docs)), params.num_perm),
    }
    return best_rates(runs, len(docs), repeat)


class SampledText:
    """Documents drawn from the words (or, for Chinese, the characters) of one sample text, in
    runs of a few consecutive ones, so that they read like the language and its punctuation.

    Args:
        path: the sample text.
        chinese: draw characters (two per "word" of the requested length) instead of words.
        seed: seed of the draws.
    """

    def __init__(self, path: Path, chinese: bool, seed: int) -> None:
        text = path.read_text(encoding="utf-8")
        self.units = [c for c in text if not c.isspace()] if chinese else text.split()
        self.per_word = 2 if chinese else 1
        self.joiner = "" if chinese else " "
        self.rng = np.random.default_rng(seed)

    def documents(self, count: int, words: int) -> list[str]:
        """``count`` documents of about ``words`` words (±25 %)."""
        docs = []
        for _ in range(count):
            size = int(self.rng.integers(int(words * 0.75), int(words * 1.25) + 1)) * self.per_word
            starts = self.rng.integers(0, len(self.units) - 8, size=size // 8 + 1)
            units = [u for start in starts.tolist() for u in self.units[start : start + 8]]
            docs.append(self.joiner.join(units[:size]))
        return docs


def corpus(language: str, seed: int) -> Corpus | SampledText:
    """English synthetic text, or documents drawn from the Russian or Chinese sample article."""
    if language == "en":
        return Corpus(seed)
    return SampledText(_SAMPLES / f"man-{language}.txt", language == "zh", seed)


def render(rows: list[tuple[str, dict[str, float]]]) -> str:
    """A table of docs/s and ratios (ours / peer)."""
    lines = [
        f"{'documents':<27}{'ours raw':>11}{'ours tok':>11}{'datasketch':>12}{'simhash':>10}"
        f"{'rensa':>10}{'rensa raw':>11}{'raw/ds':>9}{'tok/ds':>9}{'raw/sh':>9}{'raw/ds+sh':>11}"
        f"{'raw/rensa':>11}{'raw/rensa raw':>15}",
    ]
    for label, rate in rows:
        both = 1.0 / (1.0 / rate["datasketch"] + 1.0 / rate["simhash"])
        raw = rate["ours, raw text"]
        lines.append(
            f"{label:<27}{raw:>11,.0f}{rate['ours, tokens']:>11,.0f}"
            f"{rate['datasketch']:>12,.0f}{rate['simhash']:>10,.0f}{rate['rensa']:>10,.0f}"
            f"{rate['rensa, raw text']:>11,.0f}"
            f"{raw / rate['datasketch']:>8.1f}x{rate['ours, tokens'] / rate['datasketch']:>8.1f}x"
            f"{raw / rate['simhash']:>8.1f}x{raw / both:>10.1f}x{raw / rate['rensa']:>10.2f}x"
            f"{raw / rate['rensa, raw text']:>14.2f}x"
        )
    return "\n".join(lines)


def copyright_texts() -> list[str]:
    """The text of every ``/usr/share/doc/*/copyright`` file (the real-text corpus)."""
    from benchmarks.realtext_corpus import copyright_docs

    return [doc.text for doc in copyright_docs()]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse options, run both document sizes, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--docs", type=int, default=2000, help="documents of ~40 words per batch")
    parser.add_argument(
        "--long-docs", type=int, default=0, help="documents of ~600 words (default: --docs / 5)"
    )
    add_seed(parser, 1, "seed of the synthetic text")
    parser.add_argument(
        "--languages",
        default="en",
        help="comma-separated: en (synthetic "
        "English), ru and zh (drawn from the Russian and Chinese sample articles "
        "in examples/)",
    )
    parser.add_argument(
        "--corpus",
        choices=("synthetic", "copyright"),
        default="synthetic",
        help="synthetic documents of --languages, or every /usr/share/doc/*/copyright file",
    )
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (best is kept)")
    parser.add_argument(
        "--reference",
        action="store_true",
        help="run our reference kernels (numpy and plain Python) instead of the compiled ones "
        f"(as a build without a C compiler, or {ENV_KERNELS}=reference, does)",
    )
    args = parser.parse_args(argv)
    if args.reference:
        kernels.backend = kernels.REFERENCE
    params = FingerprintParams()
    sizes = [(args.docs, 40), (args.long_docs or max(1, args.docs // 5), 600)]
    rows = []
    if args.corpus == "copyright":
        docs = copyright_texts()
        rows.append((f"copyright ({len(docs)} files)", measure(docs, params, args.repeat)))
    for language in args.languages.split(",") if args.corpus == "synthetic" else ():
        source = corpus(language, args.seed)
        for count, words in sizes:
            docs = source.documents(count, words)
            label = f"{count} x ~{words} words" + ("" if language == "en" else f" ({language})")
            rows.append((label, measure(docs, params, args.repeat)))
    print(
        f"params: num_perm={params.num_perm} shingle_size={params.shingle_size} "
        f"bands={params.bands} scheme={params.scheme}; one process, seed {args.seed}; "
        f"kernels: {kernels.backend.name}; rensa on lower-cased split() {RENSA_NGRAM}-grams"
    )
    print(render(rows))


if __name__ == "__main__":
    main()
