"""Where batches are fingerprinted: worker processes give what the calling thread gives."""

from __future__ import annotations

import signal

from dedup_store import Document, FingerprintParams
from dedup_store.core.validation import DEFAULT_MAX_BYTES
from dedup_store.ingest.prepared import PreparedBatch
from dedup_store.ingest.workers import PrepareSettings, preparer


def _batches() -> list[list[Document]]:
    words = [
        "river",
        "stone",
        "harbor",
        "lantern",
        "meadow",
        "copper",
        "signal",
        "orchard",
        "velvet",
        "summit",
    ]
    return [
        [
            Document(f"b{b}-{i}", " ".join(words[(i + j * b) % len(words)] for j in range(12)))
            for i in range(30)
        ]
        + [Document(f"b{b}-bad", "\x00 not text")]
        for b in range(4)
    ]


def _shown(prepared: PreparedBatch) -> tuple[object, ...]:
    return (
        [d.id for d in prepared.documents],
        prepared.row_position,
        [(position, error.message) for position, error, _ in prepared.errors],
        prepared.batch.signatures.tolist(),
        prepared.batch.simhashes.tolist(),
        prepared.encoded_rows(False),
        [part.tolist() for part in prepared.stored_shingles or ()],
    )


def test_worker_processes_prepare_what_the_calling_thread_prepares() -> None:
    """The first batch is prepared in the calling thread (its future is done when ``submit``
    returns) while the processes start; every batch equals the calling thread's."""
    settings = PrepareSettings(FingerprintParams(), DEFAULT_MAX_BYTES, False, False)
    batches = _batches()
    with preparer(settings, 2) as workers, preparer(settings, 0) as local:
        futures = []
        for number, batch in enumerate(batches):
            futures.append(workers.submit(batch, {}, number * len(batch)))
            if number == 0:
                assert futures[0].done()
        expected = [local.submit(b, {}, n * len(b)).result() for n, b in enumerate(batches)]
        actual = [future.result(timeout=120) for future in futures]
    assert [_shown(p) for p in actual] == [_shown(p) for p in expected]
    assert all(len(p.errors) == 1 for p in actual)
    # the shingles come back as the store keeps them, not as 64-bit hashes
    assert all(p.stored_shingles is not None for p in actual)
    assert all(len(p.batch.shingles) == 0 for p in actual[1:])


def test_processes_given_no_batch_are_ended_without_waiting_for_them_to_start() -> None:
    """A load of one batch (prepared in the calling thread) does not wait at its end for the
    processes started meanwhile to finish importing."""
    settings = PrepareSettings(FingerprintParams(), DEFAULT_MAX_BYTES, False, False)
    batch = _batches()[0]
    with preparer(settings, 1) as workers:
        prepared = workers.submit(batch, {}, 0).result()
        processes = list(workers._pool._processes.values())  # type: ignore[attr-defined]
        assert processes, "the process starts with the first batch"
    # terminated (a process waited for would have ended by itself, with exit code 0)
    assert [p.exitcode for p in processes] == [-signal.SIGTERM]
    assert len(prepared.errors) == 1


def test_auto_starts_a_worker_only_with_a_core_to_spare() -> None:
    """A load keeps this process and the server's backend busy: ``workers="auto"`` adds a
    fingerprinting process on three cores or more, for a bulk load or a large known load."""
    from dedup_store.service import BULK_MINIMUM, _auto_workers

    large = [("id", "text")] * BULK_MINIMUM
    small = large[:10]
    assert _auto_workers(iter(small), bulk=True, cores=2) == 0
    assert _auto_workers(large, bulk=False, cores=2) == 0
    assert _auto_workers(iter(small), bulk=True, cores=3) == 1
    assert _auto_workers(large, bulk=False, cores=8) == 1
    assert _auto_workers(small, bulk=False, cores=8) == 0
    assert _auto_workers(iter(small), bulk=False, cores=8) == 0
