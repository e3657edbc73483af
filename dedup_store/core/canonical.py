"""Canonical text: HTML to text, Unicode NFKC, casefold, punctuation out, stop words out.

The canonical form of a document is a list of tokens. Word tokens are runs of letters, digits and
marks of non-CJK scripts; CJK tokens are whole runs of Han, Hiragana and Katakana characters
(shingled later as character n-grams). The canonical *text* is the tokens joined by single spaces.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from functools import lru_cache
from importlib import resources

import regex
import snowballstemmer
from selectolax.lexbor import LexborHTMLParser

from dedup_store.core.params import FingerprintParams

_CJK_CLASS = r"\p{Han}\p{Hiragana}\p{Katakana}"
_TOKEN = regex.compile(rf"(?V1)(?P<cjk>[{_CJK_CLASS}]+)|[[\p{{L}}\p{{N}}\p{{M}}]--[{_CJK_CLASS}]]+")
_CJK_CHAR = regex.compile(rf"[{_CJK_CLASS}]")
# Fast path for text without CJK: the standard library's word runs (letters, digits, marks).
_ANY_CJK = regex.compile(rf"[{_CJK_CLASS}]")
_WORD = re.compile(r"[^\W_]+")
# ASCII fast path: capitals to small letters, everything but letters and digits to a space.
_ASCII_TABLE = str.maketrans({i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)})
_CYRILLIC = regex.compile(r"\p{Cyrillic}")
_HTML_HINT = re.compile(
    r"<(?:!doctype|!--|html|head|body|p|div|br|span|a|b|i|em|strong|script|style|table|tr|td|"
    r"ul|ol|li|h[1-6]|article|section|nav|header|footer|main|img|meta|link|title)[\s>/]",
    re.IGNORECASE,
)
_DROPPED_ELEMENTS = "head,script,style,noscript,template,svg,iframe,object"
_BLOCK_ELEMENTS = (
    "address,article,aside,blockquote,br,dd,details,dialog,div,dl,dt,fieldset,figcaption,figure,"
    "footer,form,h1,h2,h3,h4,h5,h6,header,hr,li,main,nav,ol,p,pre,section,summary,table,td,th,tr,ul"
)


def looks_like_html(text: str) -> bool:
    """Whether ``text`` contains markup of common HTML elements (the ``auto`` rule)."""
    return _HTML_HINT.search(text) is not None


def html_to_text(markup: str) -> str:
    """Text content of an HTML document or fragment.

    Scripts, styles, the ``<head>`` and comments are dropped, entities decoded, and block elements
    become line breaks so that words of adjacent blocks never run together.
    """
    tree = LexborHTMLParser(markup)
    for node in tree.css(_DROPPED_ELEMENTS):
        node.decompose()
    for node in tree.css(_BLOCK_ELEMENTS):
        node.insert_before("\n")
    root = tree.root
    return "" if root is None else root.text(separator="")


@lru_cache(maxsize=1)
def stopwords() -> frozenset[str]:
    """English, Russian and Chinese stop words (casefolded, NFKC)."""
    words: set[str] = set()
    data = resources.files("dedup_store.core") / "data"
    for lang in ("en", "ru", "zh"):
        text = (data / f"stopwords_{lang}.txt").read_text(encoding="utf-8")
        words.update(unicodedata.normalize("NFKC", w).casefold() for w in text.split())
    return frozenset(words)


@lru_cache(maxsize=1)
def _cjk_stopword_pattern() -> regex.Pattern[str]:
    cjk = sorted((w for w in stopwords() if _CJK_CHAR.match(w)), key=len, reverse=True)
    return regex.compile("|".join(regex.escape(w) for w in cjk))


@lru_cache(maxsize=2)
def _stemmer(language: str) -> snowballstemmer.stemmer:
    return snowballstemmer.stemmer(language)


def canonical_tokens(text: str, params: FingerprintParams) -> list[str]:
    """The canonical tokens of a document (see the module docstring)."""
    if params.html == "always" or (params.html == "auto" and looks_like_html(text)):
        text = html_to_text(text)
    if text.isascii():
        # NFKC leaves ASCII alone and casefold is lower(): the table does both steps at once
        tokens = text.translate(_ASCII_TABLE).split()
        if params.stopwords:
            tokens = _drop_stopwords(tokens)
    else:
        text = unicodedata.normalize("NFKC", text).casefold()
        if _ANY_CJK.search(text) is None:
            tokens = _WORD.findall(text)
            if params.stopwords:
                tokens = _drop_stopwords(tokens)
        else:
            tokens = _mixed_tokens(text, params.stopwords)
    if params.stem:
        tokens = _stem(tokens)
    return tokens


def _drop_stopwords(tokens: list[str]) -> list[str]:
    return list(itertools.filterfalse(stopwords().__contains__, tokens))


def _mixed_tokens(text: str, drop_stopwords: bool) -> list[str]:
    """Tokens of text that has CJK runs (the slower, script-aware path)."""
    stops = stopwords() if drop_stopwords else frozenset()
    tokens: list[str] = []
    for match in _TOKEN.finditer(text):
        token = match.group()
        if match.group("cjk") is not None:
            if drop_stopwords:
                token = _cjk_stopword_pattern().sub("", token)
            if token:
                tokens.append(token)
        elif token not in stops:
            tokens.append(token)
    return tokens


def _stem(tokens: list[str]) -> list[str]:
    english, russian = _stemmer("english"), _stemmer("russian")
    out = []
    for token in tokens:
        if is_cjk(token):
            out.append(token)
        elif _CYRILLIC.match(token):
            out.append(russian.stemWord(token))
        else:
            out.append(english.stemWord(token))
    return out


def is_cjk(token: str) -> bool:
    """Whether a canonical token is a CJK run (shingled by characters)."""
    return token[0] >= "\u3040" and _CJK_CHAR.match(token) is not None


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains any Han, Hiragana or Katakana character."""
    return _ANY_CJK.search(text) is not None


def canonicalize(text: str, params: FingerprintParams) -> str:
    """The canonical text: canonical tokens joined by single spaces."""
    return " ".join(canonical_tokens(text, params))
