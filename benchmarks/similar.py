"""``similar`` latency: random documents of a large store, and the members of a huge exact group.

``python -m benchmarks.similar`` bulk-loads ``--docs`` seeded documents of ~``--words`` words
(:class:`benchmarks.ingest_corpus.IngestCorpus`, ``--dup-rate`` of them edited copies of recent
ones) into the schema ``--schema``, plants ``--group`` exact copies of one of them and
``--neighbours`` light edits of it (documents whose answer holds the whole group), then times
``DedupStore.similar``:

* of ``--queries`` random documents of the corpus;
* of ``--group-queries`` random members of the planted group, whole and, where the code has
  it, the first ``--limit`` matches;
* of the planted edits.

Each call is timed from the caller, after ``--warm-up`` untimed calls, and the p50 and p99
printed with the mean number of matches. ``--keep`` leaves the store in the schema, and
``--reuse`` times a store left there (upgrading its schema first), so the same store can be
timed by two revisions of the code: run the older one with ``--keep``, then the newer one with
``--reuse`` (an older revision cannot open a store a newer one has upgraded). With
``--count-pairs`` it also times counting ``duplicate_pairs`` and, where the store has it,
``duplicate_pairs_expanded``.
"""

from __future__ import annotations

import argparse
import inspect
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import sqlalchemy as sa

from benchmarks.common import add_seed, add_store_options, add_url, drop_schema, sqlalchemy_url
from benchmarks.ingest_corpus import IngestCorpus
from benchmarks.ingest_report import load, percentile, revision
from dedup_store import DedupStore, Document
from dedup_store.db import migrate

#: The id of the planted group's first document, and the prefixes of its copies and edits.
PLANTED, COPY, EDIT = "planted", "copy-", "edit-"


def documents(args: argparse.Namespace) -> Iterator[Document]:
    """The corpus, then the planted group (its first document and its copies)."""
    corpus = IngestCorpus(seed=args.seed, words=args.words, dup_rate=args.dup_rate)
    for chunk, _, _ in corpus.chunks(args.docs):
        yield from (Document(external_id, text) for external_id, text in chunk)
    text = planted_text(args)
    yield Document(PLANTED, text)
    yield from (Document(f"{COPY}{i:05d}", text) for i in range(args.group - 1))


def planted_text(args: argparse.Namespace) -> str:
    """The text of the planted exact group (a document of its own stream)."""
    (text,) = IngestCorpus(seed=args.seed + 1, words=args.words * 4).fresh_texts(1)
    return text


def edits(args: argparse.Namespace) -> list[Document]:
    """``--neighbours`` edits of the planted text, one word replaced each."""
    rng = np.random.default_rng(args.seed)
    words = planted_text(args).split()
    out = []
    for i in range(args.neighbours):
        edited = list(words)
        edited[int(rng.integers(len(edited)))] = f"edited{i}"
        out.append(Document(f"{EDIT}{i}", " ".join(edited)))
    return out


def build(store: DedupStore, args: argparse.Namespace) -> float:
    """Load the store; returns the seconds it took."""
    started = time.perf_counter()
    store.ingest(documents(args), bulk=True, batch_size=args.batch_size, workers=args.workers)
    store.add_many(edits(args))
    return time.perf_counter() - started


def timed(call: Callable[[str], int], ids: Sequence[str], warm_up: int) -> tuple[list[float], int]:
    """Per-call milliseconds of ``call`` on each of ``ids`` (after ``warm_up`` untimed calls of
    the first ones), and the matches they returned."""
    for external_id in ids[:warm_up]:
        call(external_id)
    times, found = [], 0
    for external_id in ids:
        started = time.perf_counter()
        found += call(external_id)
        times.append((time.perf_counter() - started) * 1000)
    return times, found


def report(name: str, times: list[float], found: int) -> None:
    """One row of the figures table."""
    print(
        f"| {name} | {len(times):,} | {percentile(times, 50):.2f} | {percentile(times, 99):.2f} "
        f"| {sum(times) / len(times):.2f} | {found / len(times):,.1f} |"
    )


def run_queries(store: DedupStore, args: argparse.Namespace) -> None:
    """Time ``similar`` on the corpus, the planted group and its edits."""
    rng = np.random.default_rng(args.seed + 2)
    corpus_ids = [f"d{i:07d}" for i in rng.choice(args.docs, args.queries, replace=False)]
    members = [PLANTED] + [f"{COPY}{i:05d}" for i in range(args.group - 1)]
    group_ids = [members[i] for i in rng.choice(len(members), args.group_queries, replace=False)]
    pages = "limit" in inspect.signature(store.similar).parameters

    def whole(external_id: str) -> int:
        return len(store.similar(external_id))

    def page(external_id: str) -> int:
        return len(store.similar(external_id, limit=args.limit))

    print("| documents | calls | p50 ms | p99 ms | mean ms | matches per call |")
    print("|---|---|---|---|---|---|")
    report("random documents", *timed(whole, corpus_ids, args.warm_up))
    report(f"members of the {args.group:,}-copy group", *timed(whole, group_ids, args.warm_up))
    if pages:
        name = f"members of the group, limit {args.limit}"
        report(name, *timed(page, group_ids, args.warm_up))
    edit_ids = [d.id for d in edits(args)]
    report("edits of the group's text", *timed(whole, edit_ids, 0))
    if pages:
        report(f"edits of the group's text, limit {args.limit}", *timed(page, edit_ids, 0))


def count_pairs(engine: sa.Engine, schema: str) -> None:
    """Time counting the rows of the pair views the store has, with the server's ``jit``
    setting and without JIT compilation (which a large view's estimated cost triggers)."""
    with engine.connect() as conn:
        views = set(sa.inspect(conn).get_view_names(schema=schema))
        jit = conn.execute(sa.text("SHOW jit")).scalar_one()
        for setting in (jit, "off"):
            conn.execute(sa.text(f"SET jit = {'on' if setting == 'on' else 'off'}"))
            for view in ("duplicate_pairs", "duplicate_pairs_expanded"):
                if view in views:
                    started = time.perf_counter()
                    rows = conn.execute(sa.text(f'SELECT count(*) FROM "{schema}".{view}'))
                    count = rows.scalar_one()
                    seconds = time.perf_counter() - started
                    print(f"{view} (jit {setting}): {count:,} rows counted in {seconds:.2f} s")


def run(args: argparse.Namespace) -> None:
    """Build (or reuse) the store, time the calls, print the figures."""
    url = sqlalchemy_url(args.url)
    engine = sa.create_engine(url)
    print(f"revision {revision()}, {load()}")
    if args.reuse:
        if args.schema not in sa.inspect(engine).get_schema_names():
            raise SystemExit(f"no store in schema {args.schema!r} to reuse (run with --keep)")
        migrate.upgrade(engine, args.schema)
    else:
        drop_schema(engine, args.schema)
    try:
        with DedupStore(url, schema=args.schema) as store:
            if not args.reuse:
                seconds = build(store, args)
                print(f"loaded {store.stats().documents:,} documents in {seconds:.1f} s")
            print()
            run_queries(store, args)
        if args.count_pairs:
            print()
            count_pairs(engine, args.schema)
    finally:
        if not (args.keep or args.reuse):
            drop_schema(engine, args.schema)
        engine.dispose()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--docs", type=int, default=100_000, help="documents of the corpus")
    add("--words", type=int, default=40, help="mean words per document (±25%%)")
    add("--dup-rate", type=float, default=0.2, help="share of edited copies of recent documents")
    add("--group", type=int, default=4000, help="documents of the planted exact group")
    add("--neighbours", type=int, default=5, help="light edits of the planted group's text")
    add("--queries", type=int, default=2000, help="similar calls on random documents")
    add("--group-queries", type=int, default=200, help="similar calls on the group's members")
    add("--limit", type=int, default=20, help="the page size of the paged calls")
    add("--warm-up", type=int, default=20, help="untimed calls before each series")
    add("--batch-size", type=int, default=5000, help="DedupStore.ingest batch size")
    add("--workers", type=int, default=1, help="DedupStore.ingest fingerprinting processes")
    add_seed(parser, 1, "seed of the corpus and the queries")
    add_url(parser)
    add_store_options(
        parser,
        schema=("bench_similar", "the store's schema"),
        keep="keep the store in --schema afterwards",
    )
    add("--reuse", action="store_true", help="time the store --keep left in --schema (kept)")
    add("--count-pairs", action="store_true", help="also time counting the pair views")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
