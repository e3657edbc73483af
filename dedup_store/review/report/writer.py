"""The review report: one self-contained HTML file (style, script and data inline; nothing
loaded from elsewhere) that a browser opens from disk.

The overview (counts and two SVG charts) is plain HTML. Clusters, largest first, and then the
pairs across clusters are data: pages of JSON in inert ``<script type="application/json">``
blocks, parsed by the page's script only when shown, so a report of a large store opens at
once. The pairs' word alignments are computed here; their texts stop at the file's byte budget,
after which pairs keep their scores only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import os
import time
from collections.abc import Iterable
from html import escape
from importlib import resources
from pathlib import Path
from typing import IO, Literal

from dedup_store.outputs import writable_target, written_beside
from dedup_store.review.report import svg
from dedup_store.review.report.aligner import ProcessAligner, auto_workers
from dedup_store.review.report.diff import pair_diff
from dedup_store.review.report.model import METHODS, Overview, ReportItem, ReportSummary
from dedup_store.review.report.pages import Budget, PageBuilder, block

#: The default byte budget of a report.
DEFAULT_MAX_BYTES = 64 << 20
#: Words of each text a pair's alignment covers at most.
DEFAULT_MAX_WORDS = 5000
#: Items (clusters, or pairs across clusters) per page.
DEFAULT_PAGE_ITEMS = 50


@dataclasses.dataclass(frozen=True)
class ReportOptions:
    """How a report is written.

    Attributes:
        max_bytes: the file's byte budget: once reached, pairs keep their scores but not their
            texts (the rest of the report is always written).
        max_words: words of each text a pair's alignment covers at most.
        page_items: clusters (or pairs across clusters) per page.
        html: whether the texts are HTML, whose markup the view leaves out (``auto``,
            ``always``, ``never``: the store's ``html`` parameter).
        workers: processes that align the next pairs while the file is written
            (:mod:`dedup_store.review.report.aligner`); 0 aligns them in the calling thread;
            ``auto`` starts one per core for a report of a few thousand pairs with texts.
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_words: int = DEFAULT_MAX_WORDS
    page_items: int = DEFAULT_PAGE_ITEMS
    html: str = "auto"
    workers: int | Literal["auto"] = 0

    @classmethod
    def of(
        cls,
        *,
        max_bytes: int | None = None,
        max_words: int | None = None,
        html: str = "auto",
        workers: int | Literal["auto"] = 0,
    ) -> ReportOptions:
        """The options with the given values, the defaults for those ``None``."""
        return cls(
            max_bytes=DEFAULT_MAX_BYTES if max_bytes is None else max_bytes,
            max_words=DEFAULT_MAX_WORDS if max_words is None else max_words,
            html=html,
            workers=workers,
        )

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_words < 1 or self.page_items < 1:
            raise ValueError(
                "max_bytes, max_words and page_items must be positive, got "
                f"{self.max_bytes}, {self.max_words}, {self.page_items}"
            )


def write_report(
    out: str | os.PathLike[str],
    overview: Overview,
    items: Iterable[ReportItem],
    options: ReportOptions = ReportOptions(),
    *,
    started: float | None = None,
) -> ReportSummary:
    """Write the report of ``overview`` and ``items`` (clusters largest first, then pairs
    across clusters) to ``out``.

    The file is written next to ``out`` and renamed over it when complete: only over a regular
    file (a symbolic link is followed, and the file it names replaced); any other kind of file
    at ``out`` (a device, a FIFO, a folder) is refused.

    Args:
        out: the file to write.
        overview: counts over what the report covers.
        items: the clusters and pairs across clusters, in the order shown.
        options: byte budget, alignment cap and page size.
        started: :func:`time.perf_counter` when the work began (default: now).

    Raises:
        OutputError: ``out`` is not a regular file, or the report cannot be written there.
    """
    started = time.perf_counter() if started is None else started
    path = writable_target(Path(out), "the report")
    head, tail = _head(overview), _tail()
    budget = Budget(options.max_bytes, overview.pairs, overview.documents_in_clusters)
    diff = None
    if overview.keep_text:
        diff = functools.partial(pair_diff, max_words=options.max_words, html=options.html)
    builder = PageBuilder(budget, diff, options.max_words, page_items=options.page_items)
    # the index's notes take no more digits than with every pair over the budget
    notes = {
        "max_bytes": options.max_bytes,
        "max_words": options.max_words,
        "over_budget": overview.pairs,
    }
    empty = block("report-index", builder.index_json(**notes)) + block("report-ids", "[]")
    budget.used = len(head.encode()) + len(tail.encode()) + len(empty.encode())
    with (
        written_beside(path, "the report") as partial,
        partial.open("w", encoding="utf-8", newline="\n") as f,
    ):
        f.write(head)
        _write_items(f, builder, items, options)
        notes["over_budget"] = builder.over_budget
        f.write(block("report-index", builder.index_json(**notes)))
        f.write(block("report-ids", builder.ids_json()))
        f.write(tail)
    return ReportSummary(
        path=path,
        bytes=path.stat().st_size,
        clusters=builder.clusters,
        pairs=builder.pairs,
        pairs_with_texts=builder.with_texts,
        pairs_over_budget=builder.over_budget,
        pages=builder.pages,
        seconds=round(time.perf_counter() - started, 3),
    )


def _write_items(
    f: IO[str], builder: PageBuilder, items: Iterable[ReportItem], options: ReportOptions
) -> None:
    """The pages of ``items``, their pairs aligned here or in worker processes."""
    workers = auto_workers(options.workers, builder.budget.pairs if builder.diff else 0)
    if workers == 0:
        for item in items:
            _write_page(f, builder, builder.add(item))
    else:
        with ProcessAligner(workers, options.max_words, options.html) as aligner:
            for item, views in aligner.stream(items, builder.wanted):
                _write_page(f, builder, builder.add(item, views))
    _write_page(f, builder, builder.finish())


def _write_page(f: IO[str], builder: PageBuilder, page: str | None) -> None:
    if page is not None:
        f.write(block(f"page-{builder.pages - 1}", page))


@functools.cache
def _asset(name: str) -> str:
    """A file of the report's style or script."""
    return resources.files("dedup_store.review.report").joinpath("static", name).read_text("utf-8")


def _head(overview: Overview) -> str:
    """Everything before the data: the document head, the overview, the controls."""
    title = f"Duplicates in store {overview.schema}"
    if overview.cluster is not None:
        title = f"Cluster of {overview.cluster} in store {overview.schema}"
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="dedup_store">
<title>{escape(title)}</title>
<style>
{_asset("report.css")}</style>
</head>
<body>
<header class="top">
<h1>{escape(title)}</h1>
<p class="sub">{escape(_subtitle(overview))}</p>
</header>
<main>
{_overview(overview)}
{_CONTROLS}
</main>
<noscript><p class="note">This report draws its clusters and pairs with JavaScript; allow
scripts for this file to see them.</p></noscript>
"""


def _tail() -> str:
    return f"<script>\n{_asset('report.js')}</script>\n</body>\n</html>\n"


def _subtitle(overview: Overview) -> str:
    written = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"written {written}"]
    names = {"threshold": "threshold", "simhash_k": "SimHash k", "containment": "containment"}
    parts += [f"{label} {overview.params[k]}" for k, label in names.items() if k in overview.params]
    if not overview.keep_text:
        parts.append("texts not kept")
    return " · ".join(parts)


def _overview(overview: Overview) -> str:
    figures = [
        (overview.documents, "documents"),
        (overview.clusters, "clusters of 2 or more"),
        (overview.documents_in_clusters, "documents in them"),
        (overview.pairs, "pairs"),
        (overview.verdicts.get("duplicate", 0), "confirmed by a person"),
        (overview.verdicts.get("not_duplicate", 0), "declared not duplicates"),
    ]
    cards = "".join(
        f'<div class="figure"><b>{value:,}</b><span>{escape(label)}</span></div>'
        for value, label in figures
    )
    methods = "".join(
        f'<tr><td><span class="swatch" style="background:{svg.METHOD_COLOURS[m]}"></span>'
        f"{m}</td><td>{overview.edges_by_method.get(m, 0):,}</td></tr>"
        for m in METHODS
        if m != "confirmed"
    )
    note = "" if overview.keep_text else _NO_TEXT_NOTE
    return f"""<section id="overview" class="overview" aria-label="Overview">
<div class="figures">{cards}</div>
<div class="charts">
<table class="by-method"><caption>Edges by method</caption>{methods}</table>
<figure>{svg.size_chart(overview.cluster_sizes)}</figure>
<figure>{svg.similarity_chart(overview.similarity, overview.buckets)}</figure>
</div>
{note}
</section>"""


_NO_TEXT_NOTE = """<p class="note">This store does not keep the documents' texts, so pairs show
their scores only. A store made with <code>dedup-store init --keep-text</code> keeps them, and
its report shows each pair's texts side by side with the changed words highlighted.</p>"""

_CONTROLS = """<section id="review" aria-label="Clusters and pairs">
<form id="controls" class="controls" onsubmit="return false">
<fieldset id="methods"><legend>Methods</legend></fieldset>
<fieldset class="range"><legend>Jaccard similarity</legend>
<label>from <input id="sim-min" type="number" min="0" max="1" step="0.01" value="0"></label>
<label>to <input id="sim-max" type="number" min="0" max="1" step="0.01" value="1"></label>
</fieldset>
<fieldset class="find"><legend>Find a document</legend>
<input id="search" type="search" placeholder="external id" autocomplete="off"
 aria-label="Find a document by its external id">
</fieldset>
<button id="reset" type="button">Show all</button>
</form>
<p id="budget-note" class="note" hidden></p>
<p id="status" class="status" aria-live="polite"></p>
<nav class="pager" aria-label="Pages"></nav>
<div id="items"></div>
<nav class="pager" aria-label="Pages"></nav>
</section>"""
