"""Where batches are fingerprinted: in the calling thread, or in worker processes.

Fingerprinting (canonicalization, shingling, MinHash, SimHash, the COPY fields of the rows) is
pure Python and numpy work that holds the interpreter lock, and so does most of writing a
batch (its lookups, joins and encodings). With ``workers`` > 0, :class:`ProcessPreparer`
fingerprints the next batches in that many processes while the calling process writes, so on
a machine with cores to spare the two no longer take turns.

The processes are started with the ``spawn`` method (forking a process that has threads and
open connections is not safe): the calling program's main module is imported again in each of
them, so a script that ingests must do so under ``if __name__ == "__main__":``, as every
program that uses :mod:`multiprocessing` must. The processes ignore ``SIGINT``: an interrupt
stops the load in the calling process, which ends them. They also die with the calling process
when it is killed (``kill -9``), rather than waiting forever for work: on Linux the kernel sends
them ``SIGKILL`` when it dies (``PR_SET_PDEATHSIG``), elsewhere a thread of theirs watches it.
Their end takes :mod:`multiprocessing`'s resource tracker with it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

from dedup_store.core.params import FingerprintParams
from dedup_store.ingest.prepared import PreparedBatch, prepare_batch
from dedup_store.plumbing import Closing
from dedup_store.results import Document


@dataclasses.dataclass(frozen=True)
class PrepareSettings:
    """How a batch is prepared: the store's parameters, largest text, whether known ids are
    replaced, and whether the text is kept (see
    :func:`dedup_store.ingest.prepared.prepare_batch`)."""

    params: FingerprintParams
    max_bytes: int
    update: bool
    keep_text: bool


class Preparer(Closing):
    """Fingerprint each batch in the calling thread when it is submitted."""

    #: batches submitted before the first result is needed
    ahead = 0

    def __init__(self, settings: PrepareSettings) -> None:
        self.settings = settings

    def submit(
        self, documents: list[Document], known: Mapping[str, int], first: int
    ) -> Future[PreparedBatch]:
        """The batch prepared (``known``: its ids already stored; ``first``: the number of its
        first record in the input)."""
        future: Future[PreparedBatch] = Future()
        try:
            future.set_result(prepare(documents, known, first, self.settings))
        except Exception as error:
            future.set_exception(error)
        return future

    def close(self) -> None:
        """Release what the preparer holds (nothing here)."""


class ProcessPreparer(Preparer):
    """Fingerprint batches in ``workers`` processes, up to ``workers + 1`` batches ahead of the
    one being written.

    The documents go to a process and do not come back: it returns the fingerprints and the
    encoded rows, and :meth:`submit`'s future gives the batch with its documents restored.

    A spawned process takes most of a second to start (it imports numpy and this package), so
    the first batch is fingerprinted in the calling thread while the processes start: its
    writing does not wait for them. A load of that one batch does not wait for them either: at
    :meth:`close`, processes never given a batch are ended, started or not.
    """

    def __init__(self, settings: PrepareSettings, workers: int) -> None:
        super().__init__(settings)
        self.ahead = workers + 1
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(os.getpid(),),
        )
        self._workers, self._started, self._sent = workers, False, False

    def submit(
        self, documents: list[Document], known: Mapping[str, int], first: int
    ) -> Future[PreparedBatch]:
        if not self._started:
            self._started = True
            for _ in range(self._workers):
                self._pool.submit(_started)
            return super().submit(documents, known, first)
        columns = _columns(documents)
        self._sent = True
        remote = self._pool.submit(prepare_detached, columns, dict(known), first, self.settings)
        local: Future[PreparedBatch] = Future()

        def restore(done: Future[PreparedBatch]) -> None:
            error = done.exception()
            if error is not None:
                local.set_exception(error)
                return
            prepared = done.result()
            prepared.documents = documents
            local.set_result(prepared)

        remote.add_done_callback(restore)
        return local

    def close(self) -> None:
        """End the processes (a batch being fingerprinted is finished first; processes that
        were never given one are terminated, not waited for while they start)."""
        if not self._sent:
            processes: dict[int, Any] = getattr(self._pool, "_processes", None) or {}
            for process in list(processes.values()):
                process.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)


def preparer(settings: PrepareSettings, workers: int) -> Preparer:
    """A :class:`ProcessPreparer` with ``workers`` processes, or with 0 a :class:`Preparer`."""
    if workers < 0:
        raise ValueError(f"workers must be 0 or more, got {workers}")
    return ProcessPreparer(settings, workers) if workers else Preparer(settings)


def prepare(
    documents: list[Document], known: Mapping[str, int], first: int, settings: PrepareSettings
) -> PreparedBatch:
    """Validate and fingerprint a batch, encode its rows' COPY fields and make its shingles as
    the store keeps them."""
    prepared = prepare_batch(
        documents, settings.params, known, settings.update, settings.max_bytes, first
    )
    prepared.encoded_rows(settings.keep_text)
    prepared.store_shingles()
    return prepared


def prepare_detached(
    columns: DocumentColumns, known: Mapping[str, int], first: int, settings: PrepareSettings
) -> PreparedBatch:
    """In a worker process: :func:`prepare` of the documents sent as :func:`_columns`, returned
    without them (the caller has them), without their canonical texts, which only the encoded
    rows need, and without their 64-bit shingles, which the caller uses only as the store keeps
    them (half of what would come back for long documents)."""
    documents = [Document(*fields) for fields in zip(*columns, strict=True)]
    prepared = prepare(documents, known, first, settings)
    prepared.documents = []
    prepared.batch = dataclasses.replace(
        prepared.batch, canonical_texts=[], shingles=np.empty(0, dtype=np.uint64)
    )
    return prepared


#: The fields of a batch's documents, one list per field of :class:`Document`.
DocumentColumns = tuple[list[Any], ...]


def _columns(documents: list[Document]) -> DocumentColumns:
    """The documents' fields, field by field: five lists pickle several times faster than the
    documents they hold."""
    names = [field.name for field in dataclasses.fields(Document)]
    return tuple([getattr(d, name) for d in documents] for name in names)


def _started() -> None:
    """Nothing: a task that makes the pool start a process (which imports this module)."""


def _init_worker(parent: int) -> None:
    """Leave ``SIGINT`` to the calling process ``parent`` (it stops the load and ends the
    workers), and die with it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


#: ``prctl`` option: the signal the kernel sends a process when its parent dies (Linux).
_PR_SET_PDEATHSIG = 1
#: Seconds between two looks at the parent where the kernel cannot be asked to signal.
PARENT_POLL_S = 0.5


def die_with_parent(parent: int) -> None:
    """End this process when ``parent`` (the process that started it) dies.

    On Linux the kernel sends ``SIGKILL`` on the parent's death; elsewhere a daemon thread
    looks every :data:`PARENT_POLL_S` seconds whether this process has been re-parented. A
    parent already gone ends this process at once.
    """
    if not (sys.platform.startswith("linux") and _set_death_signal(signal.SIGKILL)):
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    if os.getppid() != parent:
        os._exit(1)


def _set_death_signal(signum: int) -> bool:
    """Ask the kernel for ``signum`` when the parent dies; whether it agreed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(1)
