"""The language guessed from a canonical text's script, and where CJK text is found."""

from __future__ import annotations

import pytest

from dedup_store.core.scripts import guess_language, has_cjk


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("plain ascii words", "en"),
        ("café crème brûlée © 2024", "und"),  # accents only: no scan beyond the first one
        ("copyright © 2024 мир", "und"),  # a little Cyrillic after Latin
        ("привет мир и все", "ru"),
        ("naïve привет мир и все остальные", "ru"),  # Cyrillic after a Latin accent
        ("é 中文文本", "zh"),
        ("é 日本語のテキスト", "ja"),  # kana after the first Han character
        ("é \ufeff\ufffd ωλ", "und"),  # above U+0400, neither Cyrillic nor CJK
        ("\U0001f600 emoji", "und"),
    ],
)
def test_the_script_decides_the_language(text: str, language: str) -> None:
    assert guess_language(text) == language


def test_cjk_is_looked_for_from_a_position() -> None:
    assert has_cjk("abc 中")
    assert has_cjk("中 abc", 0)
    assert not has_cjk("中 abc", 1)
    assert not has_cjk("abc \ufeff é")
