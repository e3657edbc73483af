"""How an alignment of two documents (:mod:`dedup_store.core.align`) is shown to a reviewer.

:func:`alignment_text` is the inline view for a terminal, in the manner of
``git diff --word-diff``: the words of the first document, with deleted words as ``[-…-]`` (red,
struck through) and inserted ones as ``{+…+}`` (green), so that it reads without colour too.
Long equal stretches are shortened to their first and last words. :func:`alignment_json` is the
same for ``--format json``.

Between two words, the view shows what the first document has there (spaces, line breaks,
punctuation), and around inserted words what the second has. Characters a terminal would act on
are shown escaped (:func:`dedup_store.cli.render.escape`); line breaks and tabs are kept.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from dedup_store.cli.render import escape
from dedup_store.core.align import Alignment, Run, word_spans

#: Style of equal words (none: the terminal's own).
EQUAL_STYLE = ""
#: Style of deleted words, with their ``[-`` ``-]`` markers.
DELETE_STYLE = "red strike"
#: Style of inserted words, with their ``{+`` ``+}`` markers.
INSERT_STYLE = "green"
#: Style of the marker that stands for the middle of a shortened equal run.
ELIDED_STYLE = "dim"


def alignment_text(alignment: Alignment, *, context_words: int = 12) -> Text:
    """The alignment inline, for a terminal.

    Args:
        alignment: the two documents aligned.
        context_words: an equal run of more than three times this many words (and more than
            three) shows only its first and last ``context_words`` words, around a dim
            ``… N equal words …``.
    """
    out = Text()
    a, b = alignment.text_a, alignment.text_b
    at_a = at_b = 0
    after_insert = False
    for run in alignment.runs:
        # the text before a run's words: the second document's around inserted words
        if run.kind == "insert" or after_insert:
            _plain(out, b[at_b : run.b_start])
        else:
            _plain(out, a[at_a : run.a_start])
        if run.kind == "equal":
            _equal(out, alignment, run, context_words)
        if run.kind in ("delete", "replace"):
            _marked(out, "[-", alignment.a_text(run), "-]", DELETE_STYLE)
        if run.kind in ("insert", "replace"):
            _marked(out, "{+", alignment.b_text(run), "+}", INSERT_STYLE)
        at_a, at_b = max(at_a, run.a_end), run.b_end
        after_insert = run.kind == "insert"
    if alignment.truncated:
        out.append(" … only the first words were aligned …", style=ELIDED_STYLE)
    else:
        _plain(out, b[at_b:] if after_insert else a[at_a:])
    return out


def alignment_json(alignment: Alignment, *, context_words: int | None = None) -> dict[str, Any]:
    """The alignment as a JSON-able dict (:meth:`~dedup_store.core.align.Alignment.to_dict`).

    Args:
        alignment: the two documents aligned.
        context_words: when given, the texts of each equal run of more than three times this
            many words (and more than three) keep only its first and last ``context_words``
            words, joined by ``" … "``, and the run gets ``"elided_words"``: how many words
            were left out.
    """
    data = alignment.to_dict()
    if context_words is None:
        return data
    for run, row in zip(alignment.runs, data["runs"], strict=True):
        if run.kind != "equal":
            continue
        parts = _shortened(alignment.text_a, run.a_start, run.a_end, context_words)
        if parts is None:
            continue
        head, elided, tail = parts
        row["a_text"] = f"{head} … {tail}" if head else "…"
        b_parts = _shortened(alignment.text_b, run.b_start, run.b_end, context_words)
        if b_parts is not None:
            row["b_text"] = f"{b_parts[0]} … {b_parts[2]}" if b_parts[0] else "…"
        row["elided_words"] = elided
    return data


def _equal(out: Text, alignment: Alignment, run: Run, context_words: int) -> None:
    parts = _shortened(alignment.text_a, run.a_start, run.a_end, context_words)
    if parts is None:
        _plain(out, alignment.a_text(run), EQUAL_STYLE)
        return
    head, elided, tail = parts
    if head:
        _plain(out, head, EQUAL_STYLE)
        out.append(" ")
    out.append(f"… {elided} equal words …", style=ELIDED_STYLE)
    if tail:
        out.append(" ")
        _plain(out, tail, EQUAL_STYLE)


def _shortened(text: str, start: int, end: int, context_words: int) -> tuple[str, int, str] | None:
    """``(first words, words left out, last words)`` of ``text[start:end]``, or ``None`` when
    it is short enough to be shown whole."""
    spans = word_spans(text, start, end)
    if len(spans) <= max(3 * context_words, 3):
        return None
    if context_words == 0:
        return "", len(spans), ""
    head = text[start : spans[context_words - 1][1]]
    tail = text[spans[-context_words][0] : end]
    return head, len(spans) - 2 * context_words, tail


def _marked(out: Text, opening: str, words: str, closing: str, style: str) -> None:
    out.append(opening, style=style)
    _plain(out, words, style)
    out.append(closing, style=style)


def _plain(out: Text, text: str, style: str = "") -> None:
    """Append document text, terminal controls escaped (line breaks and tabs kept)."""
    if text:
        out.append(escape(text.replace("\r\n", "\n"), keep="\n\t"), style=style)
