"""Word-level alignment of two documents: the passages they share and the words that differ.

This is what shows a reviewer why two documents match. Both documents are read as a reader sees
them: HTML becomes its visible text (:func:`~dedup_store.core.canonical.html_to_text`), and all
offsets point into that text, so a renderer highlights the words as written, in their original
case and punctuation.

*Words* are those of canonical text (:mod:`dedup_store.core.canonical`): a run of letters,
digits and marks is a word, and each Han, Hiragana or Katakana character is a word of its own
(Chinese and Japanese text has no spaces; the store shingles it by characters too). Words are
compared by a normal form, Unicode NFKC and casefolded, so ``Hello,`` and ``hello`` are the same
word, and a change of punctuation or spacing alone is no difference. Unlike canonical text,
alignment keeps stop words and does not stem: it shows the text.

The alignment itself is :func:`dedup_store.core.seqdiff.diff_tokens`, an anchored diff whose
work is bounded by the length of the input, whatever the input.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from dedup_store.core.canonical import html_to_text, looks_like_html
from dedup_store.core.params import HtmlMode
from dedup_store.core.scripts import CJK_KIND, TOKEN, WORD_KIND
from dedup_store.core.seqdiff import diff_tokens
from dedup_store.errors import InvalidParamsError

RunKind = Literal["equal", "replace", "delete", "insert"]

# ASCII letters and digits to small letters, everything else to a space
_ASCII_WORDS = str.maketrans({i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)})
_ASCII_CLASSES = np.array([WORD_KIND if chr(i).isalnum() else 0 for i in range(128)], np.uint8)


@dataclasses.dataclass(frozen=True)
class Run:
    """A stretch of the alignment: words the same on both sides, or a change.

    Offsets are characters of :attr:`Alignment.text_a` and :attr:`Alignment.text_b`, half-open,
    from the start of the first word of the run to the end of its last word. A run without words
    on one side (``insert`` has none in ``a``, ``delete`` none in ``b``) has an empty range
    there, just after the word before it (at 0 if there is none).

    Attributes:
        kind: ``equal``, ``replace``, ``delete`` (words only in ``a``) or ``insert`` (only in
            ``b``).
        a_start: where the run starts in ``text_a``.
        a_end: where it ends in ``text_a``.
        b_start: where it starts in ``text_b``.
        b_end: where it ends in ``text_b``.
        a_words: words of ``a`` in the run.
        b_words: words of ``b`` in the run.
    """

    kind: RunKind
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    a_words: int
    b_words: int


@dataclasses.dataclass(frozen=True)
class Alignment:
    """Two documents aligned word by word.

    Attributes:
        text_a: the visible text of the first document (HTML turned to text), which the runs'
            ``a`` offsets refer to.
        text_b: the visible text of the second document.
        runs: the runs in order; together they cover the aligned words of both texts, each
            once. Two adjacent runs are never both changes, nor both equal.
        words_a: words of ``text_a``.
        words_b: words of ``text_b``.
        truncated: whether only the first ``max_words`` words of a side were aligned (the runs
            then end there).
    """

    text_a: str
    text_b: str
    runs: tuple[Run, ...]
    words_a: int
    words_b: int
    truncated: bool

    @property
    def shared_words(self) -> int:
        """Words in equal runs (the same number on both sides)."""
        return sum(run.a_words for run in self.runs if run.kind == "equal")

    @property
    def shared_runs(self) -> tuple[Run, ...]:
        """The equal runs, in order."""
        return tuple(run for run in self.runs if run.kind == "equal")

    @property
    def differing_runs(self) -> tuple[Run, ...]:
        """The runs that are changes (replace, delete, insert), in order."""
        return tuple(run for run in self.runs if run.kind != "equal")

    def a_text(self, run: Run) -> str:
        """The words of ``run`` in ``text_a``, as written (empty for an insert)."""
        return self.text_a[run.a_start : run.a_end]

    def b_text(self, run: Run) -> str:
        """The words of ``run`` in ``text_b``, as written (empty for a delete)."""
        return self.text_b[run.b_start : run.b_end]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict: the counts, and every run with its fields and texts."""
        return {
            "words_a": self.words_a,
            "words_b": self.words_b,
            "shared_words": self.shared_words,
            "truncated": self.truncated,
            "runs": [
                dataclasses.asdict(run) | {"a_text": self.a_text(run), "b_text": self.b_text(run)}
                for run in self.runs
            ],
        }


@dataclasses.dataclass(frozen=True)
class Words:
    """The words of a text.

    Attributes:
        starts: offset of each word in the text.
        ends: offset just after each word.
        keys: the normal form each word is compared by.
    """

    starts: list[int]
    ends: list[int]
    keys: list[str]

    def __len__(self) -> int:
        return len(self.keys)

    def head(self, count: int) -> Words:
        """The first ``count`` words."""
        return Words(self.starts[:count], self.ends[:count], self.keys[:count])


def align_texts(
    text_a: str, text_b: str, *, html: str = "auto", max_words: int | None = None
) -> Alignment:
    """Align two documents word by word.

    Args:
        text_a: the first document.
        text_b: the second document.
        html: whether the documents are HTML: ``auto`` decides for each by
            :func:`~dedup_store.core.canonical.looks_like_html`, ``always`` or ``never`` force
            it (as the store's ``html`` parameter).
        max_words: align only the first ``max_words`` words of each side (all of them if
            ``None``).

    Raises:
        InvalidParamsError: ``html`` is not one of the modes, or ``max_words`` is negative.
    """
    if html not in get_args(HtmlMode):
        raise InvalidParamsError(f"html must be one of auto, always, never, got {html!r}")
    if max_words is not None and (
        not isinstance(max_words, int) or isinstance(max_words, bool) or max_words < 0
    ):
        raise InvalidParamsError(f"max_words must be a whole number >= 0, got {max_words!r}")
    text_a, text_b = visible_text(text_a, html), visible_text(text_b, html)
    words_a, words_b = text_words(text_a), text_words(text_b)
    aligned_a, aligned_b = words_a, words_b
    if max_words is not None:
        aligned_a, aligned_b = words_a.head(max_words), words_b.head(max_words)
    diff = diff_tokens(aligned_a.keys, aligned_b.keys)
    runs = tuple(
        _run(kind, aligned_a, alo, ahi, aligned_b, blo, bhi)
        for kind, alo, ahi, blo, bhi in diff.opcodes
    )
    truncated = len(aligned_a) < len(words_a) or len(aligned_b) < len(words_b)
    return Alignment(text_a, text_b, runs, len(words_a), len(words_b), truncated)


def visible_text(text: str, html: str = "auto") -> str:
    """The text a reader sees: ``text`` itself, or, for HTML, its text content."""
    if html == "always" or (html == "auto" and looks_like_html(text)):
        return html_to_text(text)
    return text


def text_words(text: str) -> Words:
    """The words of ``text`` (see the module docstring), with their offsets and normal forms."""
    if text.isascii():
        starts, ends = _spans(_ASCII_CLASSES[np.frombuffer(text.encode("ascii"), np.uint8)])
        return Words(starts, ends, text.translate(_ASCII_WORDS).split())
    points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    starts, ends = _spans(_point_classes(points)[points])
    tokens = [text[s:e] for s, e in zip(starts, ends, strict=True)]
    normal = {token: _normal_form(token) for token in set(tokens)}
    return Words(starts, ends, list(map(normal.__getitem__, tokens)))


def _spans(classes: npt.NDArray[np.uint8]) -> tuple[list[int], list[int]]:
    """Word starts and ends from the class of each character: runs of word characters, and
    each CJK character alone."""
    edges = np.diff((classes == WORD_KIND).view(np.int8), prepend=0, append=0)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    cjk = np.flatnonzero(classes == CJK_KIND)
    if len(cjk):
        # a CJK character lies outside every word run: put in order apart, starts and ends
        # still pair up
        starts = np.insert(starts, np.searchsorted(starts, cjk), cjk)
        ends = np.insert(ends, np.searchsorted(ends, cjk + 1), cjk + 1)
    return starts.tolist(), ends.tolist()


def _point_classes(points: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint8]:
    """A table of the class of every code point up to the largest of ``points``, right for
    those in ``points`` (the others are 0)."""
    wide = np.unique(points[points >= 128])
    table = np.zeros(int(wide[-1]) + 1 if len(wide) else 128, dtype=np.uint8)
    table[:128] = _ASCII_CLASSES
    table[wide] = [_char_class(chr(point)) for point in wide.tolist()]
    return table


@lru_cache(maxsize=65536)
def _char_class(char: str) -> int:
    """:data:`~dedup_store.core.reference.CJK_KIND`, :data:`WORD_KIND` or 0 (a separator), as
    :data:`dedup_store.core.scripts.TOKEN` (the definition canonical text uses) sees it."""
    match = TOKEN.fullmatch(char)
    if match is None:
        return 0
    return CJK_KIND if match.group(1) else WORD_KIND


def _normal_form(word: str) -> str:
    """NFKC, casefolded, without the characters that are no word characters after that."""
    key = unicodedata.normalize("NFKC", word).casefold()
    if key.isalnum():
        return key
    return "".join(ch for ch in key if _char_class(ch))


def _run(kind: RunKind, a: Words, alo: int, ahi: int, b: Words, blo: int, bhi: int) -> Run:
    a_start, a_end = _offsets(a, alo, ahi)
    b_start, b_end = _offsets(b, blo, bhi)
    return Run(kind, a_start, a_end, b_start, b_end, ahi - alo, bhi - blo)


def _offsets(words: Words, lo: int, hi: int) -> tuple[int, int]:
    """Character range of words ``lo`` to ``hi``; for no words, the end of the word before."""
    if lo < hi:
        return words.starts[lo], words.ends[hi - 1]
    point = words.ends[lo - 1] if lo else 0
    return point, point


def word_spans(text: str, start: int = 0, end: int | None = None) -> Sequence[tuple[int, int]]:
    """``(start, end)`` offsets in ``text`` of the words of ``text[start:end]``."""
    words = text_words(text[start:end])
    return [(start + s, start + e) for s, e in zip(words.starts, words.ends, strict=True)]
