"""Canonical text: HTML, Unicode, stop words, stemming, scripts."""

from __future__ import annotations

import pytest

from dedup_store.core import FingerprintParams, canonical_tokens, canonicalize, html_to_text

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
        "full", "width", "the", "file", "s", "strasse", "strasse", "no5", "1", "2"
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
