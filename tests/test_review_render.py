"""How an alignment is shown: inline word diff for a terminal, and JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.text import Text

from dedup_store.cli.alignment import (
    DELETE_STYLE,
    ELIDED_STYLE,
    INSERT_STYLE,
    alignment_json,
    alignment_text,
)
from dedup_store.core.align import align_texts, text_words

GPL3 = Path("/usr/share/common-licenses/GPL-3")


def gpl_words(count: int) -> str:
    """The first ``count`` words of the GPL, as canonical text has them, joined by spaces."""
    return " ".join(text_words(GPL3.read_text(encoding="utf-8")).keys[:count])


def styled(text: Text, style: str) -> list[str]:
    """The pieces of ``text`` in ``style``."""
    return [text.plain[span.start : span.end] for span in text.spans if span.style == style]


def test_a_small_pair_reads_like_a_word_diff() -> None:
    a = "The quick brown fox jumps over the lazy dog. It was not amused."
    b = "The quick red fox jumps over the very lazy dog. It was amused."
    text = alignment_text(align_texts(a, b))
    assert text.plain == (
        "The quick [-brown-]{+red+} fox jumps over the {+very+} lazy dog. It was [-not-] amused."
    )
    assert styled(text, DELETE_STYLE) == ["[-", "brown", "-]", "[-", "not", "-]"]
    assert styled(text, INSERT_STYLE) == ["{+", "red", "+}", "{+", "very", "+}"]


def test_edits_at_both_ends_and_spacing_of_each_side() -> None:
    a = "# Title\n\nbody text here."
    b = "# New Title\n\nbody text here, and more."
    assert alignment_text(align_texts(a, b)).plain == (
        "# {+New+} Title\n\nbody text here, {+and more+}."
    )
    assert alignment_text(align_texts("Old title: rest", "title: rest")).plain == (
        "[-Old-] title: rest"
    )


def test_with_colour_on_a_terminal() -> None:
    console = Console(force_terminal=True, color_system="standard", width=200)
    with console.capture() as capture:
        console.print(alignment_text(align_texts("keep old", "keep new")))
    out = capture.get()
    assert "\x1b[" in out and "old" in out and "new" in out
    # red and struck through, green
    assert "\x1b[9;31m" in out or "\x1b[31;9m" in out
    assert "\x1b[32m" in out


def test_long_equal_runs_are_shortened_around_a_dim_marker() -> None:
    paragraph = gpl_words(200)
    a = paragraph + " first ending"
    b = paragraph + " second ending"
    text = alignment_text(align_texts(a, b), context_words=3)
    words = paragraph.split()
    marker = "… 194 equal words …"
    assert text.plain == (
        f"{' '.join(words[:3])} {marker} {' '.join(words[-3:])} [-first-]{{+second+}} ending"
    )
    assert styled(text, ELIDED_STYLE) == [marker]
    # short runs are shown whole; no context at all leaves only the marker
    assert "…" not in alignment_text(align_texts(a, b), context_words=100).plain
    assert alignment_text(align_texts(a, b), context_words=0).plain.startswith(
        "… 200 equal words … [-first-]"
    )


def test_terminal_controls_in_the_text_are_escaped() -> None:
    text = alignment_text(align_texts("safe \x1b[31m text\r\nline", "safe \x1b[31m text\nline"))
    assert "\x1b" not in text.plain and "\\x1b" in text.plain
    assert text.plain == "safe \\x1b[31m text\nline"


def test_json_has_every_run_and_can_shorten_equal_ones() -> None:
    paragraph = gpl_words(50)
    alignment = align_texts(paragraph + " tail", paragraph.upper() + " end")
    full = alignment_json(alignment)
    assert full == alignment.to_dict()
    json.dumps(full)
    assert [run["kind"] for run in full["runs"]] == ["equal", "replace"]
    short = alignment_json(alignment, context_words=2)
    first = short["runs"][0]
    words = paragraph.split()
    assert first["a_text"] == f"{words[0]} {words[1]} … {words[-2]} {words[-1]}"
    assert first["b_text"] == first["a_text"].upper()
    assert first["elided_words"] == 46 and first["a_words"] == 50
    assert short["runs"][1] == full["runs"][1]


def test_a_truncated_alignment_says_so_at_its_end() -> None:
    alignment = align_texts("one two three four five", "one two three six seven", max_words=3)
    text = alignment_text(alignment)
    assert text.plain == "one two three … only the first words were aligned …"
    assert styled(text, ELIDED_STYLE) == [" … only the first words were aligned …"]
