"""The review report on a large store: time to write it, its size, and time to open it in a
browser.

For each ``--docs`` size, a store that keeps texts is bulk loaded in a fresh schema of the test
database from the seeded corpus of :mod:`benchmarks.ingest_corpus` (``--words`` words per
document, ``--dup-rate`` of them edited copies of a recent one, ``--edit-rate`` of their words
replaced), then ``DedupStore.report`` writes the report (timed: the reads, the word alignment
of every pair, the file). With ``--browser``, Debian's chromium (headless, through playwright)
opens the file and the time until the first page of clusters is drawn is measured, and again
for a page in the middle and for a search by id.

Run it as ``python -m benchmarks.report`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import sqlalchemy as sa

from benchmarks.common import add_seed, add_url, drop_schema
from benchmarks.ingest_corpus import IngestCorpus
from dedup_store import DedupStore
from dedup_store.config import normalize_url
from dedup_store.review.report import ReportSummary

CHROMIUM = "/usr/bin/chromium"
#: The machine's network is closed, and the browser must not try it.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclasses.dataclass(frozen=True)
class Opened:
    """Seconds the browser took: to the first page drawn, to a page in the middle, to the
    result of a search by id."""

    first_page: float
    middle_page: float
    search: float


def load(url: str, schema: str, args: argparse.Namespace, docs: int) -> tuple[float, str]:
    """Bulk load ``docs`` documents with their texts; ``(seconds, a document of the newest
    cluster)``."""
    corpus = IngestCorpus(
        seed=args.seed, words=args.words, dup_rate=args.dup_rate, edit_rate=args.edit_rate
    )
    records = [r for chunk, _, _ in corpus.chunks(docs) for r in chunk]
    started = time.perf_counter()
    with DedupStore(url, schema=schema, keep_text=True) as store:
        store.ingest(records, bulk=True)
        seconds = time.perf_counter() - started
        *_, newest = store.clusters()
    return seconds, newest.members[-1]


def write(
    url: str, schema: str, out: Path, max_bytes: int | None, workers: int | Literal["auto"]
) -> ReportSummary:
    with DedupStore(url, schema=schema) as store:
        return store.report(out, max_bytes=max_bytes, workers=workers)


def open_in_browser(path: Path, search: str) -> Opened:
    """Times of :class:`Opened` for the report at ``path`` (``search``: an id to find)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        started = time.perf_counter()
        page.goto(path.as_uri(), wait_until="domcontentloaded")
        page.wait_for_selector("article.item")
        first = time.perf_counter() - started
        pages = int(page.locator("nav.pager input").first.get_attribute("max") or "1")
        field = page.locator("nav.pager input").first
        started = time.perf_counter()
        field.fill(str(max(1, pages // 2)))
        field.dispatch_event("change")
        page.wait_for_selector("article.item")
        middle = time.perf_counter() - started
        started = time.perf_counter()
        page.fill("#search", search)
        page.wait_for_function("document.querySelectorAll('article.item').length === 1")
        found = time.perf_counter() - started - 0.12  # the search waits 0.12 s for typing
        browser.close()
    return Opened(first, middle, max(found, 0.0))


def run(args: argparse.Namespace) -> None:
    engine = sa.create_engine(normalize_url(args.url))
    print(
        f"report benchmark: {args.words} words per document, dup rate {args.dup_rate}, "
        f"edit rate {args.edit_rate}, seed {args.seed}; {os.cpu_count()} cores"
    )
    header = (
        f"{'documents':>10} {'clusters':>9} {'pairs':>7} {'with texts':>10} {'load s':>7} "
        f"{'report s':>9} {'MB':>7} {'pages':>6}"
    )
    if args.browser:
        header += f" {'open s':>7} {'page s':>7} {'search s':>8}"
    print(header)
    with tempfile.TemporaryDirectory() as workdir:
        for docs in args.docs:
            schema = f"bench_report_{os.getpid()}"
            drop_schema(engine, schema)
            try:
                load_seconds, member = load(args.url, schema, args, docs)
                out = Path(workdir) / f"report-{docs}.html"
                summary = write(args.url, schema, out, args.max_bytes, args.workers)
                line = (
                    f"{docs:>10,} {summary.clusters:>9,} {summary.pairs:>7,} "
                    f"{summary.pairs_with_texts:>10,} {load_seconds:>7.1f} "
                    f"{summary.seconds:>9.1f} {summary.bytes / 2**20:>7.1f} {summary.pages:>6}"
                )
                if args.browser:
                    opened = open_in_browser(out, member)
                    line += (
                        f" {opened.first_page:>7.2f} {opened.middle_page:>7.2f} "
                        f"{opened.search:>8.2f}"
                    )
                print(line, flush=True)
                if args.keep_report:
                    kept = args.keep_report / out.name
                    kept.write_bytes(out.read_bytes())
            finally:
                drop_schema(engine, schema)
    engine.dispose()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add_url(parser, "database")
    add(
        "--docs",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[10_000, 100_000],
        help="store sizes, comma-separated (default 10000,100000)",
    )
    add("--words", type=int, default=120, help="mean words per document (default 120)")
    add("--dup-rate", type=float, default=0.17, help="share of edited copies (default 0.17)")
    add("--edit-rate", type=float, default=0.02, help="share of a copy's words replaced")
    add_seed(parser, 1, "corpus seed")
    add("--max-bytes", type=int, default=None, help="the report's byte budget (default 64 MiB)")
    add(
        "--workers",
        type=lambda v: v if v == "auto" else int(v),
        default="auto",
        help="processes aligning pairs (default auto, as dedup-store report)",
    )
    add("--browser", action="store_true", help="also time opening it in chromium")
    add("--keep-report", type=Path, default=None, help="copy the reports into this directory")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    run(parse_args(argv))


if __name__ == "__main__":
    main()
