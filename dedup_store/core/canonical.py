"""Canonical text: HTML to text, Unicode NFKC, casefold, punctuation out, stop words out.

The canonical form of a document is a list of tokens, and its canonical *text* is the tokens
joined by single spaces. Characters are of three kinds: CJK characters (Han, Hiragana and
Katakana), word characters (the letters, digits and marks of every other script) and separators
(everything else: whitespace of every width, punctuation, dashes, hyphens, underscores, quotes
and symbols, in every width and compatibility form that NFKC leaves).

- A *word token* is a run of word characters: any separator, and a CJK character, ends it. So
  every dash, hyphen, underscore, no-break, thin or ideographic space splits words exactly as an
  ASCII hyphen or space does.
- A *CJK token* is a run of CJK characters. With ``canonical_version`` 2 (the default) it runs on
  across separators, which are left out of it, up to the next word token: ``中 文，分词`` is the
  one token ``中文分词``, while ``中文 Python 分词`` is ``中文``, ``python``, ``分词``. Spacing,
  line breaks and punctuation inside CJK text thus never change its tokens. Chinese stop words
  are removed from the joined token.
- Shingles (:mod:`dedup_store.core.shingles`): a document's word tokens are one sequence,
  shingled as word n-grams; with version 2 its CJK tokens, in order, are one sequence of
  characters, shingled as character n-grams (so a word or a number between CJK text does not
  cut the character windows either).

``canonical_version`` 1, the canonicalization of stores made before version 2, keeps every run
of CJK characters between separators as a token of its own, shingled on its own.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import regex

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U64
from dedup_store.core.params import FingerprintParams
from dedup_store.core.scripts import CJK_CHAR, CJK_KIND, script_runs, starts_cjk
from dedup_store.core.scripts import has_cjk as has_cjk
from dedup_store.core.scripts import is_cjk as is_cjk

if TYPE_CHECKING:
    import snowballstemmer

_WORD = re.compile(r"[^\W_]+")
# ASCII fast path: capitals to small letters, everything but letters and digits to a space.
_ASCII_TABLE = str.maketrans({i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)})
# The same for ASCII bytes (other bytes never occur where it is used).
_ASCII_BYTES = bytes(ord(_ASCII_TABLE[i]) if i < 128 else ord(" ") for i in range(256))
_ASCII_CODES = bytes(range(128))
CJK_KIND_BYTE = bytes([CJK_KIND])
#: The characters that are not letters or digits but whose case folding holds one (U+0345,
#: COMBINING GREEK YPOGEGRAMMENI, folds to a small iota).
FOLDS_INTO_A_WORD = "\u0345"
# Mostly ASCII text is folded in bytes (:func:`_folded_word_bytes`) when its non-ASCII
# characters take at most one byte of UTF-8 in this many characters, and at most this many
# distinct letters change.
_NON_ASCII_SHARE = 8
# characters of text at least in a piece normalized on its own (:func:`_nfkc`)
_NFKC_PIECE = 4096
_MOST_REPLACED = 48
_CYRILLIC = regex.compile(r"\p{Cyrillic}")
# bytes of text canonicalized per run (they stay in cache)
_BYTES_PER_RUN = 1 << 17
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
    return "<" in text and _HTML_HINT.search(text) is not None


def html_to_text(markup: str) -> str:
    """Text content of an HTML document or fragment.

    Scripts, styles, the ``<head>`` and comments are dropped, entities decoded, and block elements
    become line breaks so that words of adjacent blocks never run together.
    """
    from selectolax.lexbor import LexborHTMLParser  # loaded for the first HTML document

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
def _cjk_stopword_pattern() -> re.Pattern[str]:
    """The CJK stop words, longest first (a literal alternation: the standard library's engine
    skips to the positions where one can start, about twice as fast as regex's)."""
    cjk = sorted((w for w in stopwords() if CJK_CHAR.match(w)), key=len, reverse=True)
    return re.compile("|".join(re.escape(w) for w in cjk))


@lru_cache(maxsize=2)
def _stemmer(language: str) -> snowballstemmer.stemmer:
    import snowballstemmer  # loaded by the first store that stems

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
        text = _nfkc(text).casefold()
        if not has_cjk(text):
            tokens = _WORD.findall(text)
            if params.stopwords:
                tokens = _drop_stopwords(tokens)
        else:
            tokens = _mixed_tokens(text, params.stopwords, params.canonical_version >= 2)
    if params.stem:
        tokens = _stem(tokens, starts_cjk if params.canonical_version >= 2 else is_cjk)
    return tokens


def _nfkc(text: str) -> str:
    """``unicodedata.normalize("NFKC", text)``.

    Chinese and Japanese text is seldom NFKC only for its fullwidth punctuation; the compiled
    kernels replace those characters by their (single-character) compatibility decompositions
    first, which leaves the NFKC form as it was, and a text that is then normalized is not
    normalized again (the check is much cheaper than the normalization).
    """
    text = kernels.backend.fold_fullwidth(text)
    if unicodedata.is_normalized("NFKC", text):
        return text
    if len(text) <= _NFKC_PIECE:
        return unicodedata.normalize("NFKC", text)
    # A line break composes with nothing and nothing composes across it (it is a starter that
    # no composition starts or ends with): the NFKC of a text is that of its pieces cut before
    # line breaks, and in most texts seldom NFKC most pieces are normalized already.
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = text.find("\n", start + _NFKC_PIECE)
        end = len(text) if end < 0 else end
        piece = text[start:end]
        normalized = unicodedata.is_normalized("NFKC", piece)
        pieces.append(piece if normalized else unicodedata.normalize("NFKC", piece))
        start = end
    return "".join(pieces)


def _drop_stopwords(tokens: list[str]) -> list[str]:
    return list(itertools.filterfalse(stopwords().__contains__, tokens))


def _mixed_tokens(text: str, drop_stopwords: bool, join: bool) -> list[str]:
    """Tokens of text that has CJK runs (the slower, script-aware path).

    With ``join``, CJK runs go on across separators (see the module docstring). CJK stop words
    are removed from each CJK run (a run left empty is no token); as no stop word holds a line
    break, that is one substitution over the runs joined by line breaks. The words between two
    runs are filtered at once.
    """
    tokens, kinds = script_runs(text, join)
    if not drop_stopwords:
        return tokens
    runs_at = []
    at = kinds.find(CJK_KIND_BYTE)
    while at >= 0:
        runs_at.append(at)
        at = kinds.find(CJK_KIND_BYTE, at + 1)
    stop = stopwords().__contains__
    if not runs_at:
        return list(itertools.filterfalse(stop, tokens))
    cleaned = _cjk_stopword_pattern().sub("", "\n".join([tokens[i] for i in runs_at]))
    kept: list[str] = []
    start = 0
    for at, run in zip(runs_at, cleaned.split("\n"), strict=True):
        kept.extend(itertools.filterfalse(stop, tokens[start:at]))
        if run:
            kept.append(run)
        start = at + 1
    kept.extend(itertools.filterfalse(stop, tokens[start:]))
    return kept


def _stem(tokens: list[str], cjk: Callable[[str], bool]) -> list[str]:
    """Tokens stemmed as English or Russian words, CJK runs (``cjk``) left as they are."""
    english, russian = _stemmer("english"), _stemmer("russian")
    out = []
    for token in tokens:
        if cjk(token):
            out.append(token)
        elif _CYRILLIC.match(token):
            out.append(russian.stemWord(token))
        else:
            out.append(english.stemWord(token))
    return out


def canonicalize(text: str, params: FingerprintParams) -> str:
    """The canonical text: canonical tokens joined by single spaces."""
    return " ".join(canonical_tokens(text, params))


@dataclasses.dataclass(frozen=True)
class CanonicalBatch:
    """Canonical texts of a batch of documents, with the hash of every canonical token.

    Attributes:
        texts: the canonical text of each document (empty when no token is left).
        token_counts: canonical tokens per document.
        token_hashes: xxh3-64 of each token's UTF-8 bytes, all documents concatenated.
    """

    texts: list[str]
    token_counts: I64
    token_hashes: U64


def canonical_batch(texts: Sequence[str], params: FingerprintParams) -> CanonicalBatch | None:
    """Canonical texts and token hashes of a batch of documents, across the batch at once.

    The same texts and tokens as :func:`canonical_tokens`, without a Python string per token.
    ``None`` when a document has CJK text (shingled by characters) or stemming is on.
    """
    split = canonical_word_batch(texts, params)
    if split is None or split[1]:
        return None
    return split[0]


def canonical_word_batch(
    texts: Sequence[str], params: FingerprintParams
) -> tuple[CanonicalBatch, list[int]] | None:
    """:func:`canonical_batch` of the documents without CJK text, and the positions of those
    with CJK text (left out); ``None`` when stemming is on."""
    if params.stem:
        return None
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    parts: list[CanonicalBatch] = []
    cjk: list[int] = []
    for first, last in batch_runs(lengths, _BYTES_PER_RUN):
        body, sizes, left_out = _run_word_bytes(texts[first:last], params)
        cjk.extend(first + i for i in left_out)
        parts.append(_canonical_run(body, sizes, params.stopwords))
    if len(parts) == 1:
        return parts[0], cjk
    batch = CanonicalBatch(
        texts=[text for part in parts for text in part.texts],
        token_counts=np.concatenate([part.token_counts for part in parts]),
        token_hashes=np.concatenate([part.token_hashes for part in parts]),
    )
    return batch, cjk


def _run_word_bytes(
    texts: Sequence[str], params: FingerprintParams
) -> tuple[bytes, I64, list[int]]:
    """The words (before stop words) of every document without CJK text as UTF-8, one space
    after each document but the last, with each document's size in bytes, and the positions of
    the documents with CJK text, which are left out.

    Plain ASCII text without HTML markup is translated in one pass over the joined documents;
    otherwise document by document (:func:`_word_bytes`).
    """
    joined = " ".join(texts)
    plain = params.html == "never" or (params.html == "auto" and not looks_like_html(joined))
    if plain and joined.isascii():
        sizes = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        return joined.encode("ascii").translate(_ASCII_BYTES), sizes, []
    pieces: list[bytes] = []
    cjk: list[int] = []
    for position, text in enumerate(texts):
        piece = _word_bytes(text, params)
        if piece is None:
            cjk.append(position)
        else:
            pieces.append(piece)
    sizes = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    return b" ".join(pieces), sizes, cjk


def _word_bytes(text: str, params: FingerprintParams) -> bytes | None:
    """The document's words (before stop words) separated by spaces, as UTF-8; ``None`` if it
    has CJK text. The words are those of :func:`canonical_tokens`, path for path."""
    if params.html == "always" or (params.html == "auto" and looks_like_html(text)):
        text = html_to_text(text)
    if text.isascii():
        return text.encode("ascii").translate(_ASCII_BYTES)
    text = _nfkc(text)
    folded = _folded_word_bytes(text)
    if folded is not None:
        return folded
    text = text.casefold()
    if has_cjk(text):
        return None
    return kernels.backend.word_bytes(text)


def _folded_word_bytes(text: str) -> bytes | None:
    """``word_bytes(text.casefold())`` for mostly ASCII text without CJK text (NFKC already);
    ``None`` for other text.

    Case folding maps each character on its own, and so does the word kernel, which makes a
    space of every character but letters and digits: of the word bytes of the text unfolded,
    the ASCII letters are made small, and each of the few distinct other letters whose folding
    differs is replaced by the word bytes of its folding, one pass each (no folding holds a
    character that folding changes). The one character that is not a letter or digit but whose
    folding holds one, U+0345, leaves the text to the general path. The distinct non-ASCII
    characters are found in the text's UTF-8 bytes with the ASCII ones left out.
    """
    try:
        others = text.encode("utf-8").translate(None, _ASCII_CODES)
    except UnicodeEncodeError:  # a lone surrogate
        return None
    if len(others) * _NON_ASCII_SHARE > len(text):
        return None
    chars = set(others.decode("utf-8"))
    if FOLDS_INTO_A_WORD in chars or has_cjk("".join(chars)):
        return None
    replaced = [(c.encode("utf-8"), _folded_char(c)) for c in chars if c.isalnum()]
    replaced = [(char, folded) for char, folded in replaced if char != folded]
    if len(replaced) > _MOST_REPLACED:
        return None
    words = kernels.backend.word_bytes(text).lower()
    for char, folded in replaced:
        words = words.replace(char, folded)
    return words


@lru_cache(maxsize=4096)
def _folded_char(char: str) -> bytes:
    """The word bytes of a character case folded: the UTF-8 of each letter or digit of its
    folding, a space for anything else (as the word kernel makes them)."""
    return "".join(c if c.isalnum() else " " for c in char.casefold()).encode("utf-8")


def batch_runs(sizes: I64, limit: int) -> list[tuple[int, int]]:
    """``(first, last)`` ranges of consecutive items of about ``limit`` in total size.

    Every item is in exactly one range; an empty batch gives the one range ``(0, 0)``.
    """
    n = len(sizes)
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if n else 0
    if total <= limit:
        return [(0, n)]
    cuts = np.searchsorted(ends, np.arange(limit, total, limit), side="right").tolist()
    bounds = sorted({0, n, *(cut for cut in cuts if 0 < cut < n)})
    if len(bounds) == 1:
        return [(0, n)]
    return list(itertools.pairwise(bounds))


def _canonical_run(body: bytes, sizes: I64, drop_stopwords: bool) -> CanonicalBatch:
    """:func:`canonical_batch` of a run of documents small enough to stay in cache.

    ``body`` holds the documents' word bytes (``sizes[d]`` bytes for document ``d``), one
    separator byte (a space) after each document but the last.
    """
    stops = stopwords() if drop_stopwords else None
    text, counts, hashes = kernels.backend.canonical_words(body, sizes, stops)
    return CanonicalBatch(
        texts=text.decode("utf-8").split("\n") if len(sizes) else [],
        token_counts=counts,
        token_hashes=hashes,
    )
