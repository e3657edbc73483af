"""Hot band and block buckets: N near-duplicate edits of one real text, re-keyed vs uncapped.

``python -m benchmarks.hot_buckets`` makes N edits of one Debian copyright file (each with 1 to
``--max-edits`` of its words replaced by words of other copyright files), ingests them with
the default params (``hot_key_limit`` 50: hot buckets split by secondary keys) and with
``hot_key_limit`` 0 (every key yields its whole bucket), and reports docs/s, the recall of the
re-keyed store's pairs against the uncapped store's (pairs of Jaccard >= 0.8, and pairs within
the SimHash distance), the rows of ``hot_keys`` and ``secondary_keys``, and the time of one
``check`` of a further edit (one word replaced), which lands in the hottest buckets, with how
many of the uncapped store's near-duplicate matches of it (excerpt matches aside) it finds.
"""

from __future__ import annotations

import argparse
import glob
import time
from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa

from benchmarks.common import add_url, scratch_schema, sqlalchemy_url
from dedup_store import DedupStore, FingerprintParams

COPYRIGHT = "/usr/share/doc/*/copyright"
Pairs = dict[tuple[str, str], tuple[float, int]]


def _words(path: str) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().split()


def source(low: int = 350, high: int = 700) -> tuple[str, list[str], list[str]]:
    """The first copyright file (in name order) of ``low`` to ``high`` words, its words, and
    the words of the other files (the replacements)."""
    paths = sorted(glob.glob(COPYRIGHT))
    chosen = next(p for p in paths if low <= len(_words(p)) <= high)
    filler = [w for p in paths[:200] if p != chosen for w in _words(p)]
    return chosen, _words(chosen), filler


def edits(words: list[str], filler: list[str], count: int, most: int, seed: int) -> list[str]:
    """``count`` copies of ``words`` with 1 to ``most`` words replaced."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        edited = list(words)
        changes = int(rng.integers(1, most + 1))
        for position in rng.choice(len(edited), size=changes, replace=False):
            edited[position] = filler[int(rng.integers(len(filler)))]
        texts.append(" ".join(edited))
    return texts


def _pairs(engine: sa.Engine, schema: str) -> Pairs:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(f'SELECT a, b, jaccard, hamming FROM "{schema}".duplicate_pairs')
        ).all()
    return {(a, b): (jaccard, hamming) for a, b, jaccard, hamming in rows}


def _count(engine: sa.Engine, schema: str, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f'SELECT count(*) FROM "{schema}".{table}')).scalar_one())


def run(url: str, count: int, most: int) -> None:
    """One row of the table for ``count`` edits."""
    engine = sa.create_engine(url)
    _, words, filler = source()
    texts = edits(words, filler, count, most, seed=count)
    probe = edits(words, filler, 1, 1, seed=count + 1)[0]  # in the hottest buckets
    found: dict[int, Pairs] = {}
    figures: dict[int, tuple[float, float, int, int]] = {}
    probed: dict[int, set[str]] = {}
    for limit in (50, 0):
        schema = f"bench_hot_buckets_{limit}"
        with scratch_schema(engine, schema):
            params = FingerprintParams(hot_key_limit=limit)
            with DedupStore(url, params, schema=schema) as store:
                start = time.perf_counter()
                store.ingest((f"e{i}", t) for i, t in enumerate(texts))
                seconds = time.perf_counter() - start
                checks = []
                for _ in range(3):
                    start = time.perf_counter()
                    result = store.check(probe)
                    checks.append(time.perf_counter() - start)
            # excerpt matches aside: a hot excerpt key is boilerplate, ignored when capped
            probed[limit] = {m.external_id for m in result.matches if m.method != "containment"}
            found[limit] = _pairs(engine, schema)
            hot = _count(engine, schema, "hot_keys")
            secondary = _count(engine, schema, "secondary_keys")
            figures[limit] = (count / seconds, min(checks), hot, secondary)
    engine.dispose()
    k = FingerprintParams().simhash_k
    similar = {p for p, (jaccard, _) in found[0].items() if jaccard >= 0.8}
    close = {p for p, (_, hamming) in found[0].items() if hamming <= k}
    rekeyed = set(found[50])
    recall_similar = len(similar & rekeyed) / max(1, len(similar))
    recall_close = len(close & rekeyed) / max(1, len(close))
    rate, check, hot, secondary = figures[50]
    rate0, check0, _, _ = figures[0]
    both = len(probed[50] & probed[0])
    print(
        f"| {count:,} | {rate:,.0f} | {rate0:,.0f} | {len(similar):,} | {recall_similar:.4f} "
        f"| {len(close):,} | {recall_close:.4f} | {hot:,} | {secondary:,} "
        f"| {check * 1000:.0f} ms ({both} of {len(probed[0])}) | {check0 * 1000:.0f} ms |"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_url(parser, None)
    parser.add_argument("--counts", default="500,2000")
    parser.add_argument("--max-edits", type=int, default=12)
    args = parser.parse_args(argv)
    url = sqlalchemy_url(args.url)
    chosen, words, _ = source()
    print(f"edits of {chosen} ({len(words)} words), 1 to {args.max_edits} words replaced\n")
    print(
        "| N | docs/s | docs/s uncapped | pairs J >= 0.8 | recall | pairs within k | recall "
        "| hot keys | secondary_keys rows | check (matches found) | check uncapped |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for count in (int(c) for c in args.counts.split(",")):
        run(url, count, args.max_edits)


if __name__ == "__main__":
    main()
