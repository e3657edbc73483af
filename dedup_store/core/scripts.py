"""Characters by script, as canonical text sees them: CJK, word characters and separators.

*CJK characters* are those of the Han, Hiragana and Katakana scripts; *word characters* are the
letters, digits and marks of every other script; everything else *separates*. How tokens are
made of them is told in :mod:`dedup_store.core.canonical`.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import regex

from dedup_store.core import kernels

#: The classes of code points of :func:`script_classes` (0 separates).
WORD_KIND, CJK_KIND = 1, 2

_CJK_CLASS = r"\p{Han}\p{Hiragana}\p{Katakana}"
#: A token: a CJK run (first group) or a run of word characters (second group).
TOKEN = regex.compile(rf"(?V1)([{_CJK_CLASS}]+)|([[\p{{L}}\p{{N}}\p{{M}}]--[{_CJK_CLASS}]]+)")
#: One CJK character.
CJK_CHAR = regex.compile(rf"[{_CJK_CLASS}]")
_ANY_CJK = regex.compile(rf"[{_CJK_CLASS}]")
# No Han, Hiragana or Katakana character lies below this one (U+2E80, the first CJK radical).
_AT_OR_ABOVE_FIRST_CJK = re.compile("[\u2e80-\U0010ffff]")
_KANA = re.compile("[\u3040-\u30ff]")
_AT_OR_ABOVE_CYRILLIC = re.compile("[\u0400-\U0010ffff]")
_NOT_CYRILLIC = re.compile("[^\u0400-\u04ff]+")


def script_tokens(text: str, join: bool = False) -> list[tuple[str, str]]:
    """``TOKEN.findall(text)``: ``(run, "")`` for a CJK run, ``("", word)`` for another word.

    With ``join``, a CJK run goes on across separators, which are left out of it, up to the next
    word. One scan classifies each character by :func:`script_classes`.
    """
    tokens, kinds = script_runs(text, join)
    return [(t, "") if k == CJK_KIND else ("", t) for t, k in zip(tokens, kinds, strict=True)]


def script_runs(text: str, join: bool = False) -> tuple[list[str], bytes]:
    """The tokens of :func:`script_tokens` in order, and one byte per token: its kind,
    ``CJK_KIND`` or ``WORD_KIND`` (no pair per token)."""
    return kernels.backend.script_tokens(text, script_classes(), join)


@lru_cache(maxsize=1)
def script_classes() -> bytes:
    """The class of every code point as :data:`TOKEN` sees it: 2 for Han, Hiragana and
    Katakana, 1 for other letters, digits and marks, 0 for the rest.

    Taken from the ``regex`` module itself (its Unicode tables decide), by matching both classes
    against every code point once: about 0.06 s, the first time CJK text is tokenized. The
    string of every code point (surrogates left out) is decoded from UTF-32 in one call.
    """
    points = np.concatenate([np.arange(0xD800), np.arange(0xE000, 0x110000)]).astype("<u4")
    every = points.tobytes().decode("utf-32-le")
    classes = np.zeros(0x110000, dtype=np.uint8)
    for match in TOKEN.finditer(every):
        kind = CJK_KIND if match.start(1) >= 0 else WORD_KIND
        classes[points[match.start() : match.end()]] = kind
    return classes.tobytes()


def is_cjk(token: str) -> bool:
    """Whether a canonical token is a CJK run (shingled by characters): its first character is a
    Han, Hiragana or Katakana one (looked up in :func:`script_classes`) from U+3040 on.

    This is how ``canonical_version`` 1 tells them apart: a run that starts with a CJK character
    below U+3040 (a radical, ``々``, ``〇``) counts as a word there.
    """
    first = token[0]
    return first >= "\u3040" and script_classes()[ord(first)] == CJK_KIND


def starts_cjk(token: str) -> bool:
    """Whether a canonical token is a CJK run: its first character is a Han, Hiragana or
    Katakana one (``canonical_version`` 2 on; all of them lie at or above U+2E80)."""
    first = token[0]
    return first >= "\u2e80" and script_classes()[ord(first)] == CJK_KIND


def has_cjk(text: str, start: int = 0) -> bool:
    """Whether ``text`` (from position ``start``) contains any Han, Hiragana or Katakana
    character."""
    # all of them lie at or above the first CJK radical: most text is ruled out by one scan for
    # such a character (the standard library's, much faster than the script classes of regex)
    first = _AT_OR_ABOVE_FIRST_CJK.search(text, start)
    if first is None:
        return False
    return _ANY_CJK.search(text, first.start()) is not None


def guess_language(canonical_text: str) -> str:
    """``en``/``ru``/``zh``/``ja`` or ``und``, from the script of a canonical text (best effort).

    Cyrillic text is ``ru`` when more than half of its non-space characters are Cyrillic.
    """
    if canonical_text.isascii():
        return "en"
    # Cyrillic and CJK characters lie at or above U+0400: one scan rules out the text of a
    # Latin script with accents, the most common that is not ASCII, and the scans that follow
    # start where the first such character is
    first = _AT_OR_ABOVE_CYRILLIC.search(canonical_text)
    if first is None:
        return "und"
    if has_cjk(canonical_text, first.start()):
        return "ja" if _KANA.search(canonical_text, first.start()) else "zh"
    cyrillic = len(_NOT_CYRILLIC.sub("", canonical_text[first.start() :]))
    return "ru" if cyrillic * 2 > len(canonical_text) - canonical_text.count(" ") else "und"
