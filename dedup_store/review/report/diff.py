"""A pair's word alignment as the segments the report's side-by-side view draws.

A segment is a short list, its first item the kind:

- ``[0, text]``: words both documents share, written the same way in both;
- ``[0, text_a, text_b]``: shared words written differently (line breaks, case, punctuation);
- ``[1, text_a, text_b]``: words of ``a`` replaced by words of ``b``;
- ``[2, text_a]``: words only ``a`` has (deleted);
- ``[3, text_b]``: words only ``b`` has (inserted).

The text between two runs of words (spaces, punctuation) joins the shared text around it, so
the two columns show each document's text in full, in order, up to where the alignment stops.
"""

from __future__ import annotations

from typing import Any

from dedup_store.core.align import Alignment, align_texts

EQUAL, REPLACE, DELETE, INSERT = 0, 1, 2, 3
_KINDS = {"equal": EQUAL, "replace": REPLACE, "delete": DELETE, "insert": INSERT}

Segment = list[Any]


def pair_diff(text_a: str, text_b: str, *, max_words: int, html: str = "auto") -> dict[str, Any]:
    """The side-by-side view of two texts: ``segments``, whether the alignment stopped at
    ``max_words`` (``truncated``), the words of each text and the words they share.

    Args:
        text_a, text_b: the two texts.
        max_words: words of each text the alignment covers at most.
        html: whether the texts are HTML (``auto`` detects markup): the view shows their
            visible text.
    """
    alignment = align_texts(text_a, text_b, html=html, max_words=max_words)
    return {
        "segments": segments(alignment),
        "truncated": bool(alignment.truncated),
        "words_a": alignment.words_a,
        "words_b": alignment.words_b,
        "shared": alignment.shared_words,
    }


def segments(alignment: Alignment) -> list[Segment]:
    """The segments of ``alignment``, in order; adjacent shared text is merged."""
    text_a, text_b = alignment.text_a, alignment.text_b
    out: list[Segment] = []
    at_a = at_b = 0
    for run in alignment.runs:
        _shared(out, text_a[at_a : run.a_start], text_b[at_b : run.b_start])
        piece_a = text_a[run.a_start : run.a_end]
        piece_b = text_b[run.b_start : run.b_end]
        kind = _KINDS[run.kind]
        if kind == EQUAL:
            _shared(out, piece_a, piece_b)
        elif kind == REPLACE:
            out.append([REPLACE, piece_a, piece_b])
        elif kind == DELETE:
            out.append([DELETE, piece_a])
        else:
            out.append([INSERT, piece_b])
        at_a, at_b = max(at_a, run.a_end), max(at_b, run.b_end)
    if not alignment.truncated:
        _shared(out, text_a[at_a:], text_b[at_b:])
    return out


def _shared(out: list[Segment], piece_a: str, piece_b: str) -> None:
    """Append shared text, merged with a shared segment before it."""
    if not piece_a and not piece_b:
        return
    if out and out[-1][0] == EQUAL:
        last = out.pop()
        before_a = last[1]
        before_b = last[2] if len(last) == 3 else last[1]
        piece_a, piece_b = before_a + piece_a, before_b + piece_b
    out.append([EQUAL, piece_a] if piece_a == piece_b else [EQUAL, piece_a, piece_b])
