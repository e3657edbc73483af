"""A fast, streaming, seeded generator of documents with near-duplicates, for the ingest benchmark.

Documents are sequences of word indices into the vocabulary of :func:`benchmarks.synthetic.
word_frequencies` (English words with their observed frequencies), drawn with numpy for a whole
chunk at once. A share ``dup_rate`` of the documents are near-duplicates: a copy of the word
indices of one of the ``recent`` previous documents with a few positions replaced by new words
(``edit_rate`` of the words, at least one). Only those recent documents are held in memory, so a
run of any size needs bounded memory; everything is deterministic for a given seed.

Example::

    from benchmarks.ingest_corpus import IngestCorpus
    corpus = IngestCorpus(seed=1, words=40)
    for chunk in corpus.chunks(100_000, 10_000):
        for external_id, text in chunk:
            ...
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

from benchmarks.synthetic import word_frequencies

Indices = npt.NDArray[np.int32]


@dataclasses.dataclass
class GeneratedFile:
    """What :meth:`IngestCorpus.write` produced.

    Attributes:
        path: the file, one ``id<TAB>text`` line per document.
        documents: number of documents.
        near_duplicates: how many of them were made as edited copies of a recent document.
        seconds: time spent generating and writing.
        bytes: size of the file.
        kept: word indices of the documents whose positions were asked for, by position.
    """

    path: Path
    documents: int
    near_duplicates: int
    seconds: float
    bytes: int
    kept: dict[int, Indices]


class IngestCorpus:
    """A seeded stream of documents of about ``words`` words, some near-duplicates of others.

    Args:
        seed: seed of every random choice.
        words: mean document length in words (lengths vary uniformly by ``±jitter``).
        dup_rate: share of documents made as near-duplicates of a recent document.
        edit_rate: share of a near-duplicate's words replaced (at least one word).
        jitter: relative spread of the document lengths.
        recent: how many previous documents a near-duplicate may copy.
    """

    def __init__(
        self,
        seed: int = 1,
        words: int = 40,
        dup_rate: float = 0.2,
        edit_rate: float = 0.02,
        jitter: float = 0.25,
        recent: int = 10_000,
    ) -> None:
        if words < 1 or not 0.0 <= dup_rate <= 1.0 or not 0.0 <= edit_rate <= 1.0:
            raise ValueError(
                f"need words >= 1 and rates in [0, 1], got words={words}, "
                f"dup_rate={dup_rate}, edit_rate={edit_rate}"
            )
        vocabulary, probabilities = word_frequencies()
        self.vocabulary = np.array(vocabulary, dtype=object)
        self._cdf = np.cumsum(probabilities)
        self._cdf[-1] = 1.0
        self.words, self.dup_rate, self.edit_rate = words, dup_rate, edit_rate
        self.low = max(1, round(words * (1 - jitter)))
        self.high = max(self.low, round(words * (1 + jitter)))
        self.recent = recent
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self._fresh_rng = np.random.default_rng([seed, 1])

    # -- word indices ---------------------------------------------------------------------------

    def draw(self, count: int, rng: np.random.Generator | None = None) -> Indices:
        """``count`` word indices drawn with the vocabulary's frequencies."""
        uniform = (rng or self.rng).random(count)
        return np.searchsorted(self._cdf, uniform, side="right").astype(np.int32)

    def edit(self, indices: Indices, rng: np.random.Generator | None = None) -> Indices:
        """A copy of ``indices`` with ``edit_rate`` of the positions (at least one) replaced."""
        rng = rng or self.rng
        copy = indices.copy()
        edits = min(len(copy), max(1, round(len(copy) * self.edit_rate)))
        positions = rng.choice(len(copy), size=edits, replace=False)
        copy[positions] = self.draw(edits, rng)
        return copy

    def text(self, indices: Indices) -> str:
        """The document text of a sequence of word indices."""
        return " ".join(self.vocabulary[indices]) + "."

    def _chunk_indices(self, count: int, history: list[Indices]) -> tuple[list[Indices], int]:
        """Word indices of the next ``count`` documents; ``history`` holds the recent ones."""
        lengths = self.rng.integers(self.low, self.high + 1, size=count)
        duplicate = self.rng.random(count) < self.dup_rate
        flat = self.draw(int(lengths[~duplicate].sum()))
        offsets = np.concatenate(([0], np.cumsum(lengths[~duplicate])))
        picks = self.rng.random(count)
        docs: list[Indices] = []
        fresh = copies = 0
        for i in range(count):
            if duplicate[i] and history:
                source = history[-1 - int(picks[i] * min(len(history), self.recent))]
                doc = self.edit(source)
                copies += 1
            elif duplicate[i]:
                doc = self.draw(int(lengths[i]))
            else:
                doc = flat[offsets[fresh] : offsets[fresh + 1]]
                fresh += 1
            docs.append(doc)
            history.append(doc)
        del history[: max(0, len(history) - self.recent)]
        return docs, copies

    # -- documents ------------------------------------------------------------------------------

    def chunks(
        self, count: int, chunk_size: int = 10_000, keep: Collection[int] = ()
    ) -> Iterator[tuple[list[tuple[str, str]], int, dict[int, Indices]]]:
        """The ``count`` documents in chunks of ``(id, text)``, ids ``d0000000``, ``d0000001``, ...

        Yields:
            ``(documents, near-duplicates in the chunk, {position: word indices})`` where the
            last item holds the documents of the chunk whose positions are in ``keep``.
        """
        history: list[Indices] = []
        keep_set = set(keep)
        for start in range(0, count, chunk_size):
            size = min(chunk_size, count - start)
            docs, duplicates = self._chunk_indices(size, history)
            texts = [(f"d{start + i:07d}", self.text(doc)) for i, doc in enumerate(docs)]
            kept = {start + i: doc for i, doc in enumerate(docs) if start + i in keep_set}
            yield texts, duplicates, kept

    def write(
        self, path: Path, count: int, chunk_size: int = 10_000, keep: Collection[int] = ()
    ) -> GeneratedFile:
        """Generate ``count`` documents into ``path`` (one ``id<TAB>text`` line each)."""
        started = time.perf_counter()
        duplicates = 0
        kept: dict[int, Indices] = {}
        with path.open("w", encoding="utf-8") as out:
            for docs, chunk_duplicates, chunk_kept in self.chunks(count, chunk_size, keep):
                out.writelines(f"{external_id}\t{text}\n" for external_id, text in docs)
                duplicates += chunk_duplicates
                kept.update(chunk_kept)
        seconds = time.perf_counter() - started
        return GeneratedFile(path, count, duplicates, seconds, path.stat().st_size, kept)

    def fresh_texts(self, count: int) -> list[str]:
        """``count`` new documents from a separate random stream (not in :meth:`chunks`)."""
        rng = self._fresh_rng
        lengths = rng.integers(self.low, self.high + 1, size=count)
        return [self.text(self.draw(int(n), rng)) for n in lengths]

    def near_duplicate_texts(self, sources: list[Indices]) -> list[str]:
        """An edited copy of each document in ``sources`` (separate random stream)."""
        return [self.text(self.edit(doc, self._fresh_rng)) for doc in sources]


def read_documents(
    path: Path, limit: int | None = None, start: int = 0
) -> Iterator[tuple[str, str]]:
    """The ``(id, text)`` records of a file written by :meth:`IngestCorpus.write`: ``limit``
    of them (default all) from position ``start``."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines):
            if number < start:
                continue
            if limit is not None and number >= start + limit:
                return
            external_id, text = line.rstrip("\n").split("\t", 1)
            yield external_id, text
