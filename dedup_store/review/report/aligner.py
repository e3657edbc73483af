"""Where the report's pairs are aligned word by word: in the calling thread, or ahead of the
writer in worker processes.

Aligning the two texts of every pair is most of the time a large report takes. With workers,
:class:`ProcessAligner` sends the texts of the next items' pairs, in chunks, to that many
processes while the calling process reads the store and writes the file; the items come back
in their order, each with the views of its pairs.

As in :mod:`dedup_store.ingest.workers`, the processes are started with the ``spawn`` method, so a
program that writes a report with workers must do so under ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Literal

from dedup_store.plumbing import Closing
from dedup_store.review.report.diff import pair_diff
from dedup_store.review.report.model import ReportCluster, ReportItem, ReportPair
from dedup_store.review.report.pages import View

#: Pairs whose texts go to a process at once.
CHUNK_PAIRS = 256
#: ``workers="auto"`` starts processes for a report of at least this many pairs with texts.
AUTO_PAIRS = 4000


def pairs_of(item: ReportItem) -> tuple[ReportPair, ...]:
    """The pairs of an item."""
    return item.pairs if isinstance(item, ReportCluster) else (item,)


def auto_workers(workers: int | Literal["auto"], pairs: int) -> int:
    """The processes ``workers`` asks for, for a report of ``pairs`` pairs with texts."""
    if workers != "auto":
        if workers < 0:
            raise ValueError(f"workers must be 0 or more, got {workers}")
        return workers
    cores = os.cpu_count() or 1
    return cores if cores >= 2 and pairs >= AUTO_PAIRS else 0


class ProcessAligner(Closing):
    """Align the pairs of the next items in ``workers`` processes.

    Args:
        workers: processes to start.
        max_words: words of each text a view covers at most.
        html: how texts are read (the store's ``html`` parameter).
    """

    def __init__(self, workers: int, max_words: int, html: str) -> None:
        self.max_words, self.html = max_words, html
        self.ahead = workers + 1
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_ignore_interrupts,
        )

    def stream(
        self, items: Iterable[ReportItem], wanted: Callable[[ReportPair], bool]
    ) -> Iterator[tuple[ReportItem, list[View]]]:
        """``items`` in order, each with the views of its pairs (``None`` for a pair that
        ``wanted`` refused when its turn to be sent came)."""
        waiting: collections.deque[tuple[list[ReportItem], list[bool], Future[list[View]]]]
        waiting = collections.deque()
        chunk: list[ReportItem] = []
        sent: list[bool] = []
        for item in items:
            chunk.append(item)
            sent += [wanted(pair) for pair in pairs_of(item)]
            if sum(sent) >= CHUNK_PAIRS:
                waiting.append((chunk, sent, self._submit(chunk, sent)))
                chunk, sent = [], []
            while len(waiting) > self.ahead:
                yield from _ready(*waiting.popleft())
        if chunk:
            waiting.append((chunk, sent, self._submit(chunk, sent)))
        while waiting:
            yield from _ready(*waiting.popleft())

    def _submit(self, chunk: list[ReportItem], sent: list[bool]) -> Future[list[View]]:
        pairs = [pair for item in chunk for pair in pairs_of(item)]
        texts = [
            (p.text_a or "", p.text_b or "") for p, send in zip(pairs, sent, strict=True) if send
        ]
        return self._pool.submit(align_chunk, texts, self.max_words, self.html)

    def close(self) -> None:
        """End the processes (pending chunks are dropped)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def align_chunk(texts: list[tuple[str, str]], max_words: int, html: str) -> list[View]:
    """In a worker process: the view of each pair of texts."""
    return [pair_diff(a, b, max_words=max_words, html=html) for a, b in texts]


def _ready(
    chunk: list[ReportItem], sent: list[bool], future: Future[list[View]]
) -> Iterator[tuple[ReportItem, list[View]]]:
    """The items of a chunk with their views, once its process has aligned them."""
    views = iter(future.result())
    flags = iter(sent)
    for item in chunk:
        yield item, [next(views) if next(flags) else None for _ in pairs_of(item)]


def _ignore_interrupts() -> None:
    """Leave ``SIGINT`` to the calling process (it stops the report and ends the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
