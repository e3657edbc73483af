"""Word-level alignment: why two documents match, word by word."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.realtext_corpus import copyright_docs
from dedup_store.core.align import Alignment, Run, align_texts, text_words, word_spans
from dedup_store.errors import InvalidParamsError

GPL3 = Path("/usr/share/common-licenses/GPL-3")
MIT_GRANT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    'software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction, including without limitation the rights to use, copy, modify, merge, "
    "publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons "
    "to whom the Software is furnished to do so, subject to the following conditions:"
)


def kinds(alignment: Alignment) -> list[str]:
    return [run.kind for run in alignment.runs]


def keys(text: str) -> list[str]:
    return text_words(text).keys


def check_runs(alignment: Alignment) -> None:
    """The runs cover every aligned word of both sides once, in order, and say true things."""
    at_a = at_b = 0
    previous: Run | None = None
    for run in alignment.runs:
        assert at_a <= run.a_start <= run.a_end and at_b <= run.b_start <= run.b_end
        a_slice, b_slice = alignment.a_text(run), alignment.b_text(run)
        # the offsets slice exactly the run's words: from a word's start to a word's end
        assert len(keys(a_slice)) == run.a_words and len(keys(b_slice)) == run.b_words
        assert a_slice == a_slice.strip() and b_slice == b_slice.strip()
        expected = {
            "equal": run.a_words == run.b_words > 0,
            "replace": run.a_words > 0 and run.b_words > 0,
            "delete": run.a_words > 0 == run.b_words,
            "insert": run.b_words > 0 == run.a_words,
        }
        assert expected[run.kind], run
        if run.kind == "equal":
            assert keys(a_slice) == keys(b_slice)
        if previous is not None:
            # never two changes in a row, nor two equal runs
            assert (previous.kind == "equal") != (run.kind == "equal")
        at_a, at_b, previous = run.a_end, run.b_end, run
    if not alignment.truncated:
        assert sum(run.a_words for run in alignment.runs) == alignment.words_a
        assert sum(run.b_words for run in alignment.runs) == alignment.words_b


# -- small known pairs --------------------------------------------------------------------------


def test_identical_texts_are_one_equal_run() -> None:
    text = "  The quick brown fox\njumps over the lazy dog.  "
    alignment = align_texts(text, text)
    assert alignment.runs == (Run("equal", 2, 45, 2, 45, 9, 9),)
    assert alignment.a_text(alignment.runs[0]) == "The quick brown fox\njumps over the lazy dog"
    assert alignment.shared_words == alignment.words_a == alignment.words_b == 9
    assert alignment.differing_runs == () and not alignment.truncated


def test_a_changed_word_is_a_replace_between_equal_runs() -> None:
    alignment = align_texts(
        "The quick brown fox jumps over the lazy dog.", "The quick red fox jumps over the lazy dog."
    )
    assert kinds(alignment) == ["equal", "replace", "equal"]
    changed = alignment.differing_runs[0]
    assert (alignment.a_text(changed), alignment.b_text(changed)) == ("brown", "red")
    assert alignment.shared_words == 8
    check_runs(alignment)


def test_an_inserted_word_has_an_empty_range_in_a() -> None:
    alignment = align_texts("one two three four", "one two extra three four")
    assert kinds(alignment) == ["equal", "insert", "equal"]
    inserted = alignment.runs[1]
    assert alignment.b_text(inserted) == "extra"
    # just after the word before it
    assert (inserted.a_start, inserted.a_end, inserted.a_words) == (7, 7, 0)
    check_runs(alignment)


def test_a_deleted_sentence_has_an_empty_range_in_b() -> None:
    a = "First sentence stays. This one goes away now. Last sentence stays too."
    b = "First sentence stays. Last sentence stays too."
    alignment = align_texts(a, b)
    assert kinds(alignment) == ["equal", "delete", "equal"]
    deleted = alignment.runs[1]
    assert alignment.a_text(deleted) == "This one goes away now"
    assert deleted.b_start == deleted.b_end == len("First sentence stays")
    check_runs(alignment)


def test_a_moved_paragraph_is_deleted_in_one_place_and_inserted_in_another() -> None:
    paragraphs = GPL3.read_text(encoding="utf-8").split("\n\n")[3:10]
    moved = paragraphs[1]
    reordered = [paragraphs[0], *paragraphs[2:], moved]
    alignment = align_texts("\n\n".join(paragraphs), "\n\n".join(reordered))
    assert kinds(alignment) == ["equal", "delete", "equal", "insert"]
    deleted, inserted = alignment.runs[1], alignment.runs[3]
    # from the first word's start to the last word's end
    assert alignment.a_text(deleted) == moved.strip().rstrip(".") == alignment.b_text(inserted)
    assert alignment.shared_words == alignment.words_a - len(keys(moved))
    check_runs(alignment)


def test_punctuation_case_and_spacing_alone_are_no_difference() -> None:
    a = "Hello, World! It's a   well-known\nexample; isn't it?"
    b = "hello world -- it s A WELL KNOWN example (isn't it)"
    alignment = align_texts(a, b)
    assert kinds(alignment) == ["equal"]
    # words are runs of letters and digits: "isn't" is "isn" and "t" on both sides
    assert alignment.shared_words == 11
    # offsets keep each text as written
    assert alignment.a_text(alignment.runs[0]) == a[:-1]
    assert alignment.b_text(alignment.runs[0]) == b[:-1]


def test_unicode_compatibility_forms_compare_equal() -> None:
    alignment = align_texts("ＦＵＬＬ ｗｉｄｔｈ ﬁle STRASSE", "full width file straße")
    assert kinds(alignment) == ["equal"]


def test_html_is_aligned_as_its_visible_text() -> None:
    page = (
        "<html><head><title>Not shown</title><style>p{color:red}</style></head><body>"
        "<h1>Fish &amp; chips</h1><p>A <b>classic</b> dish.</p><script>var x = 1;</script>"
        "</body></html>"
    )
    plain = "Fish & chips\nA classic dish."
    alignment = align_texts(page, plain)
    assert kinds(alignment) == ["equal"] and alignment.shared_words == 5
    assert "<" not in alignment.text_a and "Not shown" not in alignment.text_a
    assert alignment.a_text(alignment.runs[0]) == "Fish & chips\nA classic dish"
    # never: the markup is text, its tags are words
    raw = align_texts(page, plain, html="never")
    assert raw.text_a == page and raw.words_a > alignment.words_a
    assert raw.shared_words == 5 and len(raw.differing_runs) > 0
    # always: even text that auto-detection takes for plain text
    assert align_texts("a &amp; b", "a b", html="always").text_a == "a & b"


def test_chinese_is_compared_character_by_character() -> None:
    a = "我们今天去公园散步。天气很好！"
    b = "我们明天去公园散步，天气非常好。"
    alignment = align_texts(a, b)
    assert alignment.words_a == 13 and alignment.words_b == 14
    changes = [(alignment.a_text(r), alignment.b_text(r)) for r in alignment.differing_runs]
    assert changes == [("今", "明"), ("很", "非常")]
    check_runs(alignment)


def test_japanese_and_latin_words_mixed() -> None:
    a = "私は東京に住んでいます。I live in Tokyo."
    b = "私は大阪に住んでいます。I live in Osaka."
    alignment = align_texts(a, b)
    changes = [(alignment.a_text(r), alignment.b_text(r)) for r in alignment.differing_runs]
    assert changes == [("東京", "大阪"), ("Tokyo", "Osaka")]
    check_runs(alignment)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("", "", []),
        ("...", " -- ", []),
        ("", "two words", ["insert"]),
        ("two words", "", ["delete"]),
        ("two words", "?!", ["delete"]),
    ],
)
def test_empty_sides(a: str, b: str, expected: list[str]) -> None:
    alignment = align_texts(a, b)
    assert kinds(alignment) == expected
    check_runs(alignment)


def test_max_words_aligns_only_the_first_words() -> None:
    a = "one two three four five six"
    b = "one two three four changed six"
    alignment = align_texts(a, b, max_words=3)
    assert alignment.truncated and kinds(alignment) == ["equal"]
    assert (alignment.words_a, alignment.words_b, alignment.shared_words) == (6, 6, 3)
    assert not align_texts(a, b, max_words=6).truncated


@pytest.mark.parametrize(("option", "value"), [("html", "sometimes"), ("max_words", -1)])
def test_bad_options_are_refused(option: str, value: object) -> None:
    with pytest.raises(InvalidParamsError, match=option):
        align_texts("a", "b", **{option: value})  # type: ignore[arg-type]


def test_to_dict_has_the_runs_and_their_texts() -> None:
    alignment = align_texts("Alpha beta gamma.", "alpha BETA delta")
    data = alignment.to_dict()
    assert data["words_a"] == data["words_b"] == 3 and data["shared_words"] == 2
    assert data["truncated"] is False
    assert data["runs"] == [
        {"kind": "equal", "a_start": 0, "a_end": 10, "b_start": 0, "b_end": 10,
         "a_words": 2, "b_words": 2, "a_text": "Alpha beta", "b_text": "alpha BETA"},
        {"kind": "replace", "a_start": 11, "a_end": 16, "b_start": 11, "b_end": 16,
         "a_words": 1, "b_words": 1, "a_text": "gamma", "b_text": "delta"},
    ]  # fmt: skip


def test_word_spans_slice_the_words_of_a_stretch() -> None:
    text = "one, two (three) four"
    assert [text[s:e] for s, e in word_spans(text, 5, 16)] == ["two", "three"]


# -- properties ---------------------------------------------------------------------------------

_WORDS = st.sampled_from(["alpha", "Beta", "gamma", "delta", "the", "a", "Straße", "中", "文"])
_SEPARATORS = st.sampled_from([" ", "  ", "\n", ", ", ". ", " - ", "\n\n", "", "!"])
_TEXT = st.lists(st.tuples(_WORDS, _SEPARATORS), max_size=60).map(
    lambda pairs: "".join(w + s for w, s in pairs)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_TEXT, _TEXT)
def test_runs_cover_every_word_of_both_sides_in_order(a: str, b: str) -> None:
    alignment = align_texts(a, b)
    check_runs(alignment)
    assert alignment.shared_words <= min(alignment.words_a, alignment.words_b)
    assert align_texts(a, a).shared_words == alignment.words_a


@settings(max_examples=100, deadline=None)
@given(_TEXT, _TEXT, st.integers(0, 30))
def test_runs_cover_the_first_max_words(a: str, b: str, max_words: int) -> None:
    alignment = align_texts(a, b, max_words=max_words)
    check_runs(alignment)
    aligned_a = sum(run.a_words for run in alignment.runs)
    aligned_b = sum(run.b_words for run in alignment.runs)
    assert (aligned_a, aligned_b) == (
        min(alignment.words_a, max_words),
        min(alignment.words_b, max_words),
    )
    assert alignment.truncated == (max(alignment.words_a, alignment.words_b) > max_words)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.text())
def test_any_unicode_text(a: str, b: str) -> None:
    check_runs(align_texts(a, b, html="never"))
    check_runs(align_texts(a + b, b + a, html="never"))


# -- real text ----------------------------------------------------------------------------------


def _long_copyright_text() -> str:
    """The first copyright file (in package order) of 400 to 3000 words."""
    return next(d.text for d in copyright_docs() if 400 <= len(d.text.split()) <= 3000)


def test_a_copyright_file_against_a_lightly_edited_copy() -> None:
    original = _long_copyright_text()
    spans = word_spans(original)
    n = len(spans)
    replaced, inserted_before, deleted = n // 4, n // 2, range(3 * n // 4, 3 * n // 4 + 12)
    edited = original
    # edit from the end, so the offsets of the earlier edits stay right
    edited = edited[: spans[deleted.start][0]] + edited[spans[deleted.stop][0] :]
    edited = edited[: spans[inserted_before][0]] + "quietly " + edited[spans[inserted_before][0] :]
    start, end = spans[replaced]
    edited = edited[:start] + "zebra" + edited[end:]
    alignment = align_texts(original, edited)
    check_runs(alignment)
    assert kinds(alignment) == ["equal", "replace", "equal", "insert", "equal", "delete", "equal"]
    replace, insert, delete = alignment.differing_runs
    assert (alignment.a_text(replace), alignment.b_text(replace)) == (original[start:end], "zebra")
    assert alignment.b_text(insert) == "quietly"
    assert delete.a_words == 12
    assert alignment.shared_words == n - 13


def _copyrights_with(paragraph: list[str], without: list[list[str]]) -> list[str]:
    """Copyright files (in package order) whose words hold ``paragraph``'s once and none of the
    word sequences ``without``."""
    found = []
    for doc in copyright_docs():
        words = f" {' '.join(keys(doc.text))} "
        if words.count(f" {' '.join(paragraph)} ") == 1 and not any(
            f" {' '.join(other)} " in words for other in without
        ):
            found.append(doc.text)
    return found


def test_two_packages_sharing_a_licence_paragraph_show_it_as_an_equal_run() -> None:
    grant = keys(MIT_GRANT)
    # files with the MIT licence and no other common licence text (whose passages could come
    # in another order than the MIT one and be the longer shared stretch)
    others = [keys("Redistribution and use in source"), keys("GNU General Public License")]
    texts = _copyrights_with(grant, others)
    first = texts[0]
    second = next(t for t in texts[1:] if keys(t) != keys(first))
    alignment = align_texts(first, second)
    check_runs(alignment)
    shared = [f" {' '.join(keys(alignment.a_text(run)))} " for run in alignment.shared_runs]
    assert sum(f" {' '.join(grant)} " in run for run in shared) == 1
    assert len(alignment.differing_runs) > 0


# -- bounds -------------------------------------------------------------------------------------


def test_a_repeated_word_aligns_in_few_runs() -> None:
    # the same word 100,000 times, against a copy with a word changed at each end
    a = " ".join(["word"] * 100_000)
    b = "other " + " ".join(["word"] * 99_998) + " other"
    alignment = align_texts(a, b)
    assert len(alignment.runs) == 3 and alignment.runs[1].kind == "equal"
    assert alignment.shared_words == 99_998


def test_unrelated_texts_are_few_runs() -> None:
    rng = random.Random(5)
    vocabulary = [f"w{k}" for k in range(5000)]
    a = " ".join(rng.choice(vocabulary) for _ in range(20_000))
    b = " ".join(rng.choice(vocabulary) for _ in range(20_000))
    alignment = align_texts(a, b)
    assert kinds(alignment) == ["replace"]
