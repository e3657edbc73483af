"""Seeded synthetic documents and near-duplicates built from real English words.

The vocabulary is read from the licence texts every Debian system ships in
``/usr/share/common-licenses`` (falling back to ``/usr/share/doc``), and words are drawn with their
observed frequencies, so the documents have a realistic Zipf-like word distribution. Everything is
deterministic for a given seed, so benchmarks are repeatable and comparable across runs.

Example::

    from benchmarks.synthetic import Corpus
    corpus = Corpus(seed=7)
    docs = corpus.documents(1000, words=40)
    copy = corpus.near_duplicate(docs[0], edit_rate=0.05)
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np

_SOURCES = (Path("/usr/share/common-licenses"), Path("/usr/share/doc"))
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
_MAX_SOURCE_BYTES = 4 * 1024 * 1024
_MIN_VOCABULARY = 500


def _read_sources() -> Counter[str]:
    counts: Counter[str] = Counter()
    budget = _MAX_SOURCE_BYTES
    for root in _SOURCES:
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            if path.suffix in {".gz", ".xz", ".bz2", ".png", ".html"}:
                continue
            try:
                text = path.read_bytes()[:budget].decode("utf-8", errors="ignore")
            except OSError:
                continue
            counts.update(_WORD.findall(text))
            budget -= len(text)
            if budget <= 0:
                return counts
        if len(counts) >= _MIN_VOCABULARY:
            return counts
    return counts


def word_frequencies() -> tuple[list[str], np.ndarray]:
    """The vocabulary (sorted, for determinism) and each word's sampling probability."""
    counts = _read_sources()
    if len(counts) < _MIN_VOCABULARY:
        raise RuntimeError(
            f"found only {len(counts)} distinct words under {', '.join(map(str, _SOURCES))}"
        )
    words = sorted(counts)
    weights = np.array([counts[w] for w in words], dtype=np.float64)
    return words, weights / weights.sum()


class Corpus:
    """A seeded source of documents and of near-duplicates of them.

    Args:
        seed: seed of every random choice.
    """

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.words, self.probabilities = word_frequencies()

    def _draw(self, count: int) -> list[str]:
        picks = self.rng.choice(len(self.words), size=count, p=self.probabilities)
        return [self.words[i] for i in picks]

    def document(self, words: int) -> str:
        """One document of ``words`` words, with sentence punctuation and capitals."""
        tokens = self._draw(words)
        out: list[str] = []
        sentence_left = 0
        for token in tokens:
            if sentence_left == 0:
                if out:
                    out[-1] += "."
                token = token.capitalize()
                sentence_left = int(self.rng.integers(6, 20))
            out.append(token)
            sentence_left -= 1
        return " ".join(out) + "."

    def documents(self, count: int, words: int, jitter: float = 0.25) -> list[str]:
        """``count`` documents of about ``words`` words each (length varies by ``±jitter``)."""
        low, high = max(1, int(words * (1 - jitter))), int(words * (1 + jitter)) + 1
        return [self.document(int(self.rng.integers(low, high))) for _ in range(count)]

    def near_duplicate(self, text: str, edit_rate: float = 0.05) -> str:
        """A copy of ``text`` with about ``edit_rate`` of its words replaced, deleted, inserted."""
        tokens = text.split()
        edits = max(1, round(len(tokens) * edit_rate))
        for _ in range(edits):
            position = int(self.rng.integers(0, len(tokens)))
            action = int(self.rng.integers(0, 3))
            if action == 0:
                tokens[position] = self._draw(1)[0]
            elif action == 1 and len(tokens) > 1:
                del tokens[position]
            else:
                tokens.insert(position, self._draw(1)[0])
        return " ".join(tokens)

    def with_near_duplicates(
        self, count: int, words: int, duplicate_share: float = 0.3, edit_rate: float = 0.05
    ) -> tuple[list[str], list[tuple[int, int]]]:
        """Documents where about ``duplicate_share`` of them are near-duplicates of earlier ones.

        Returns:
            ``(documents, pairs)``: each pair is ``(original index, duplicate index)``.
        """
        docs: list[str] = []
        pairs: list[tuple[int, int]] = []
        for i in range(count):
            if docs and self.rng.random() < duplicate_share:
                source = int(self.rng.integers(0, len(docs)))
                docs.append(self.near_duplicate(docs[source], edit_rate))
                pairs.append((source, i))
            else:
                docs.append(self.document(words))
        return docs, pairs
