"""Canonical text: HTML, Unicode, stop words, stemming, scripts."""

from __future__ import annotations

import unicodedata

import pytest

from dedup_store.core import (
    FingerprintParams,
    canonical_tokens,
    canonicalize,
    fingerprint,
    html_to_text,
    kernels,
)
from dedup_store.core.canonical import FOLDS_INTO_A_WORD, _word_bytes, canonical_batch
from dedup_store.core.kernels import Backend
from dedup_store.core.scripts import has_cjk

PLAIN = FingerprintParams(stopwords=False)


def test_html_drops_scripts_styles_comments_and_head() -> None:
    page = (
        "<html><head><title>Title words</title><style>.x{color:red}</style></head><body>"
        "<script>var hidden = 1;</script><!-- secret note --><p>Visible text</p>"
        "<noscript>fallback</noscript></body></html>"
    )
    assert canonicalize(page, PLAIN) == "visible text"


def test_html_decodes_entities() -> None:
    assert canonicalize("<p>caf&eacute; &amp; cr&#232;me&nbsp;br&ucirc;l&#xE9;e</p>", PLAIN) == (
        "café crème brûlée"
    )


def test_html_blocks_become_breaks_and_inline_tags_do_not() -> None:
    page = "<div>alpha</div><div>beta</div><p>gamma<br>delta</p><ul><li>one</li><li>two</li></ul>"
    assert canonicalize(page, PLAIN) == "alpha beta gamma delta one two"
    assert canonicalize("<p>un<b>break</b>able</p>", PLAIN) == "unbreakable"
    assert "\n" in html_to_text("<p>a</p><p>b</p>")


def test_html_mode_auto_always_never() -> None:
    markup = "<p>Fish &amp; chips</p>"
    assert canonicalize(markup, PLAIN) == "fish chips"
    assert canonicalize(markup, FingerprintParams(stopwords=False, html="never")) == (
        "p fish amp chips p"
    )
    # plain text with a stray angle bracket is not HTML under auto, but is under always
    text = "a < b and c > d &amp; e"
    assert canonicalize(text, PLAIN) == "a b and c d amp e"
    assert canonicalize(text, FingerprintParams(stopwords=False, html="always")) == (
        "a b and c d e"
    )


def test_nfkc_casefold_and_punctuation() -> None:
    text = "ＦＵＬＬ ｗｉｄｔｈ — the ﬁle's STRASSE/straße, №5 ½!"
    assert canonical_tokens(text, PLAIN) == [
        "full",
        "width",
        "the",
        "file",
        "s",
        "strasse",
        "strasse",
        "no5",
        "1",
        "2",
    ]


def test_whitespace_and_underscores_separate_words() -> None:
    assert canonicalize("snake_case\tand\u00a0nbsp\u2003em space", PLAIN) == (
        "snake case and nbsp em space"
    )


def test_english_stop_words_on_ascii_and_non_ascii_text_alike() -> None:
    params = FingerprintParams()
    assert canonicalize("The cat and the hat", params) == "cat hat"
    assert canonicalize("The café and the hat", params) == "café hat"


def test_russian_stop_words() -> None:
    params = FingerprintParams()
    assert canonicalize("Он сказал, что это было не так", params) == "сказал"
    assert canonicalize("Он сказал, что это было не так", PLAIN) == "он сказал что это было не так"


def test_chinese_stop_words() -> None:
    params = FingerprintParams()
    assert canonicalize("我们的河水", params) == "河水"
    assert canonicalize("我们的河水", PLAIN) == "我们的河水"


def test_stemming_on_and_off() -> None:
    text = "Running runners ran; бегущие бегуны бегали"
    plain = canonical_tokens(text, PLAIN)
    assert plain == ["running", "runners", "ran", "бегущие", "бегуны", "бегали"]
    stemmed = canonical_tokens(text, FingerprintParams(stopwords=False, stem=True))
    assert stemmed == ["run", "runner", "ran", "бегущ", "бегун", "бега"]


def test_stemming_leaves_cjk_runs_alone() -> None:
    params = FingerprintParams(stopwords=False, stem=True)
    assert canonical_tokens("connections 中文分词", params) == ["connect", "中文分词"]


def test_mixed_script_keeps_runs_apart() -> None:
    tokens = canonical_tokens("Release 2.4 поддерживает中文分词and Latin", PLAIN)
    assert tokens == ["release", "2", "4", "поддерживает", "中文分词", "and", "latin"]


@pytest.mark.parametrize("text", ["", "   ", "!!! ... ---", "<p> </p>", "<script>x()</script>"])
def test_nothing_left(text: str) -> None:
    assert canonical_tokens(text, PLAIN) == []


def test_cjk_text_joins_across_spaces_line_breaks_and_punctuation() -> None:
    packed = "河水整夜不断上涨到了早上低处田地已经淹没"
    for spaced in [
        "河 水 整 夜 不 断 上 涨 到 了 早 上 低 处 田 地 已 经 淹 没",
        "河水整夜不断上涨，到了早上，低处田地已经淹没。",
        "河水整夜\n不断上涨, 到了\r\n早上\u3000低处田地\u00a0已经\u200b淹没...",
        "「河水」整夜不断上涨——到了早上（低处）田地已经淹没！",
    ]:
        assert canonical_tokens(spaced, PLAIN) == [packed]


def test_a_word_between_cjk_text_ends_the_token_not_the_character_windows() -> None:
    assert canonical_tokens("中文 Python 分词", PLAIN) == ["中文", "python", "分词"]
    assert canonical_tokens("2019年12月3日", PLAIN) == ["2019", "年", "12", "月", "3", "日"]
    # the CJK tokens of a document are one sequence of characters: the same shingles
    # wherever the word stands
    moved = fingerprint("中文Python分词", PLAIN), fingerprint("中文分词 python", PLAIN)
    assert moved[0].shingles.tolist() == moved[1].shingles.tolist()


def test_chinese_stop_words_are_found_across_spaces() -> None:
    assert canonicalize("我 们 的 河 水", FingerprintParams()) == "河水"


def test_version_1_keeps_each_cjk_run_apart() -> None:
    old = FingerprintParams(stopwords=False, canonical_version=1)
    tokens = canonical_tokens("中 文，分词 Python 算法", old)
    assert tokens == ["中", "文", "分词", "python", "算法"]
    assert len(fingerprint("中 文，分词", old).shingles) == 3
    assert len(fingerprint("中 文，分词", PLAIN).shingles) == 2


def _separators() -> list[str]:
    """Every dash, connector (such as the underscore) and space of Unicode, line and paragraph
    separators, the minus sign and the zero-width space."""
    categories = {"Pd", "Pc", "Zs", "Zl", "Zp"}
    chars = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in categories]
    return [*chars, "\u2212", "\u200b", "\t", "\r\n"]


def test_every_dash_underscore_and_space_splits_words(backend: Backend) -> None:
    separators = _separators()
    assert {"\u2010", "\u2011", "\u2015", "\u00a0", "\u2009", "\u202f", "\u3000", "\uff3f"} <= set(
        separators
    )
    texts = [f"Foo{c}bar слово{c}Дело" for c in separators]
    words = canonical_batch(texts, PLAIN)
    assert words is not None
    assert words.texts == ["foo bar слово дело"] * len(texts)
    for c, text in zip(separators, texts, strict=True):
        assert canonicalize(text, PLAIN) == "foo bar слово дело", f"U+{ord(c[-1]):04X}"
        assert canonicalize(f"中文{c}分词 x{c}y", PLAIN) == "中文分词 x y", f"U+{ord(c[-1]):04X}"


def test_a_cjk_run_that_starts_below_u3040_is_shingled_by_characters() -> None:
    # 〇 (U+3007), 々 (U+3005) and the radicals lie below U+3040; version 1 took such a run for
    # a word, version 2 shingles it by characters like any other CJK text
    text = "〇一九年，河水整夜不断上涨，到了早上。"
    assert len(fingerprint(text, PLAIN).shingles) == len("〇一九年河水整夜不断上涨到了早上") - 2
    old = FingerprintParams(stopwords=False, canonical_version=1)
    assert len(fingerprint(text, old).shingles) == 1 + 6 + 2
    stemmed = FingerprintParams(stopwords=False, stem=True)
    assert canonical_tokens(text, stemmed) == ["〇一九年河水整夜不断上涨到了早上"]


def _word_bytes_unfolded(text: str) -> bytes | None:
    """What the word bytes of a non-ASCII text are by definition: its NFKC case folded through
    the word kernel; ``None`` for text with CJK characters."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return None if has_cjk(folded) else kernels.backend.word_bytes(folded)


def test_only_u0345_folds_into_a_word() -> None:
    # mostly ASCII text is folded after the word kernel has made spaces of all but letters and
    # digits: that is only right if no other character folds into a letter or digit
    found = [
        chr(c)
        for c in range(0x110000)
        if not 0xD800 <= c <= 0xDFFF
        and not chr(c).isalnum()
        and any(f.isalnum() for f in chr(c).casefold())
    ]
    assert found == [FOLDS_INTO_A_WORD]


def test_mostly_ascii_text_is_folded_as_the_general_path_folds_it(backend: Backend) -> None:
    # every character of the Basic Multilingual Plane but surrogates and some above it, each in
    # ASCII text, and a few at once (letters that fold to two, to a letter and a mark, capitals)
    chars = [chr(c) for c in range(0x80, 0x10000) if not 0xD800 <= c <= 0xDFFF]
    chars += [chr(c) for c in range(0x10000, 0x110000, 97)]
    texts = [f"Plain ASCII text, with{c}one CHARACTER of another kind {c}" for c in chars]
    texts += ["Straße İstanbul ŉ ΣΑΣ Ǆ ﬁ ½ Æsir ᏸ " * 40, "Naïve café\n" * 300 + "\u0345 ok"]
    for text in texts:
        expected = _word_bytes_unfolded(text)
        actual = _word_bytes(text, PLAIN)
        assert (actual is None) == (expected is None), ascii(text)
        assert expected is None or (actual is not None and actual.split() == expected.split())
