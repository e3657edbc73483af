"""Metadata sets deciding matches: product pages per variant against edited articles.

``python -m benchmarks.metadata`` builds a seeded corpus of two kinds of pairs and ingests it
into two stores at threshold 0.9, one scoring content alone and one with ``meta_fields=tags``
and ``meta_weight=0.15`` (mu 0.85), then reports, per kind of pair, how many pairs each store
put in one cluster, with the methods of their edges, and their mean content (Jaccard),
metadata and combined scores:

* product pages: one description posted once per variant, the same body under tags naming
  the variant (disjoint tag sets): different documents, which content alone merges;
* edited articles: an article and a copy with a share of its words substituted, under the
  same tags: the same document, which content alone misses once the edit takes its Jaccard
  under 0.9, and which the metadata score lifts while the combined score reaches 0.9.

Bodies are random sequences of words drawn from the Debian copyright files of the machine.
"""

from __future__ import annotations

import argparse
import glob
import random
import re
import time
from collections import Counter
from collections.abc import Sequence

import sqlalchemy as sa

from benchmarks.common import add_seed, add_url, scratch_schema, sqlalchemy_url
from dedup_store import DedupStore, Document, FingerprintParams
from dedup_store.core import fingerprint_batch
from dedup_store.core.metadata import meta_members, meta_signatures
from dedup_store.core.minhash import estimate_jaccard

COPYRIGHT = "/usr/share/doc/*/copyright"
EDIT_RATES = (0.01, 0.015, 0.02)


def vocabulary(limit: int = 4000) -> list[str]:
    """Distinct lower-case words (4+ letters) of the copyright files, at most ``limit``."""
    words: dict[str, None] = {}
    for path in sorted(glob.glob(COPYRIGHT)):
        with open(path, encoding="utf-8", errors="replace") as f:
            words.update(dict.fromkeys(re.findall(r"[a-z]{4,}", f.read().lower())))
        if len(words) >= limit:
            break
    return list(words)[:limit]


def corpus(
    products: int, articles: int, words: int, seed: int
) -> tuple[list[Document], dict[frozenset[str], str]]:
    """The documents and the kind of each pair that should or should not match."""
    rng = random.Random(seed)
    vocab = vocabulary()

    def body() -> list[str]:
        return [rng.choice(vocab) for _ in range(words)]

    docs: list[Document] = []
    kinds: dict[frozenset[str], str] = {}
    for p in range(products):
        text = " ".join(body())
        ids = [f"product-{p}-{variant}" for variant in ("red", "blue", "green")]
        for doc_id in ids:
            variant = doc_id.rsplit("-", 1)[1]
            docs.append(Document(doc_id, text, {"tags": [f"variant {variant}", f"sku {doc_id}"]}))
        for i, a in enumerate(ids):
            kinds.update({frozenset((a, b)): "product variants" for b in ids[i + 1 :]})
    for rate in EDIT_RATES:
        for n in range(articles):
            original = body()
            edited = list(original)
            for position in rng.sample(range(words), round(rate * words)):
                edited[position] = rng.choice(vocab)
            tags = {"tags": rng.sample(vocab, 4)}
            a, b = f"article-{rate}-{n}", f"article-{rate}-{n}-edited"
            docs += [Document(a, " ".join(original), tags), Document(b, " ".join(edited), tags)]
            kinds[frozenset((a, b))] = f"edited articles ({rate:.1%} of words)"
    rng.shuffle(docs)
    return docs, kinds


Pairs = set[frozenset[str]]
Scores = dict[frozenset[str], tuple[float, float, float]]


def run(
    url: str, params: FingerprintParams, docs: list[Document]
) -> tuple[float, Pairs, dict[frozenset[str], str]]:
    """Ingest ``docs`` into a fresh store: the seconds, the pairs in one cluster, and the
    method of every stored edge."""
    engine = sa.create_engine(url)
    schema = "bench_metadata"
    try:
        with scratch_schema(engine, schema), DedupStore(url, params, schema=schema) as store:
            started = time.perf_counter()
            store.ingest(docs, bulk=False)
            seconds = time.perf_counter() - started
            together = {
                frozenset((a, b))
                for cluster in store.clusters()
                for a in cluster.members
                for b in cluster.members
                if a != b
            }
            methods = {frozenset((p.a, p.b)): p.method.value for p in store.pairs()}
        return seconds, together, methods
    finally:
        engine.dispose()


def pair_scores(
    docs: list[Document], kinds: dict[frozenset[str], str], params: FingerprintParams
) -> Scores:
    """``(jaccard, meta_score, combined)`` of every pair of interest, from the fingerprints and
    the metadata signatures (the values the store computes), matched or not."""
    by_id = {d.id: d for d in docs}
    ids = sorted({i for pair in kinds for i in pair})
    batch = fingerprint_batch([by_id[i].text for i in ids], params)
    fps = {doc_id: batch.row(row) for row, doc_id in enumerate(ids)}
    members = [meta_members(by_id[i].meta, params.meta_fields) for i in ids]
    signatures = dict(zip(ids, meta_signatures(members, params).signatures, strict=True))
    scores: Scores = {}
    for pair in kinds:
        a, b = sorted(pair)
        jaccard = fps[a].jaccard(fps[b])
        meta = estimate_jaccard(signatures[a], signatures[b])
        combined = (1 - params.meta_weight) * jaccard + params.meta_weight * meta
        scores[pair] = (jaccard, meta, combined)
    return scores


def report(
    label: str,
    kinds: dict[frozenset[str], str],
    together: Pairs,
    methods: dict[frozenset[str], str],
    seconds: float,
) -> None:
    """One table row per kind of pair: the pairs the store put in one cluster, and the
    methods of their edges."""
    for kind in sorted(set(kinds.values())):
        pairs = [p for p, k in kinds.items() if k == kind]
        hits = sum(p in together for p in pairs)
        counts = Counter(methods[p] for p in pairs if p in methods)
        shown = ", ".join(f"{m} {n}" for m, n in sorted(counts.items())) or "-"
        print(f"| {label} | {kind} | {hits} / {len(pairs)} | {shown} | {seconds:.1f} |")


def report_scores(kinds: dict[frozenset[str], str], scores: Scores) -> None:
    """One table row per kind of pair: the mean and range of its scores."""
    print("| pairs | jaccard mean (min-max) | meta score mean | combined mean (min-max) |")
    print("|---|---|---|---|")
    for kind in sorted(set(kinds.values())):
        found = [scores[p] for p, k in kinds.items() if k == kind]
        jaccard, meta, combined = ([s[i] for s in found] for i in range(3))
        print(
            f"| {kind} | {_mean(jaccard)} ({min(jaccard):.3f}-{max(jaccard):.3f}) "
            f"| {_mean(meta)} | {_mean(combined)} ({min(combined):.3f}-{max(combined):.3f}) |"
        )


def _mean(values: list[float]) -> str:
    return f"{sum(values) / len(values):.3f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_url(parser, None)
    parser.add_argument("--products", type=int, default=60)
    parser.add_argument("--articles", type=int, default=40, help="per edit rate")
    parser.add_argument("--words", type=int, default=200)
    add_seed(parser, 3)
    args = parser.parse_args(argv)
    url = sqlalchemy_url(args.url)
    docs, kinds = corpus(args.products, args.articles, args.words, args.seed)
    with_meta = FingerprintParams(threshold=0.9, meta_fields=("tags",), meta_weight=0.15)
    print(f"{len(docs)} documents, {len(kinds)} pairs of interest, threshold 0.9\n")
    report_scores(kinds, pair_scores(docs, kinds, with_meta))
    print("\n| store | pairs | in one cluster | edges by method | ingest s |")
    print("|---|---|---|---|---|")
    for label, params in (
        ("content alone", FingerprintParams(threshold=0.9)),
        ("meta_weight 0.15", with_meta),
    ):
        seconds, together, methods = run(url, params, docs)
        report(label, kinds, together, methods, seconds)


if __name__ == "__main__":
    main()
