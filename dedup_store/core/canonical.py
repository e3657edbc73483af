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
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from importlib import resources

import numpy as np
import numpy.typing as npt
import regex
import snowballstemmer
import xxhash
from selectolax.lexbor import LexborHTMLParser

from dedup_store.core import kernels
from dedup_store.core.hashing import U64, XXH3_SHORT_MAX, xxh3_64_short
from dedup_store.core.params import FingerprintParams
from dedup_store.core.scripts import CJK_CHAR, script_tokens, starts_cjk
from dedup_store.core.scripts import has_cjk as has_cjk
from dedup_store.core.scripts import is_cjk as is_cjk

I64 = npt.NDArray[np.int64]

_WORD = re.compile(r"[^\W_]+")
# ASCII fast path: capitals to small letters, everything but letters and digits to a space.
_ASCII_TABLE = str.maketrans({i: chr(i).lower() if chr(i).isalnum() else " " for i in range(128)})
# The same for ASCII bytes (other bytes never occur where it is used).
_ASCII_BYTES = bytes(ord(_ASCII_TABLE[i]) if i < 128 else ord(" ") for i in range(256))
_CYRILLIC = regex.compile(r"\p{Cyrillic}")
# Everything but letters, digits and marks (the complement of _WORD).
_NON_WORD = re.compile(r"[\W_]+")
# Batches in numpy: spaces around the joined text, so that 8-byte reads never leave it.
_PAD = b" " * 8
# bytes of text canonicalized per run of numpy passes (they stay in cache)
_BYTES_PER_RUN = 1 << 17
_SPACE = ord(" ")
_NEWLINE = ord("\n")
_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [2**64 - 1], dtype=np.uint64)
_CACHE_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)
_STOP_TABLE_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
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

    Chinese and Japanese text is seldom NFKC only for its fullwidth punctuation; with the
    compiled kernels those characters are replaced by their (single-character) compatibility
    decompositions first, which leaves the NFKC form as it was, and a text that is then
    normalized is not normalized again (the check is much cheaper than the normalization).
    """
    if kernels.compiled is not None:
        text = kernels.compiled.fold_fullwidth(text)
        if unicodedata.is_normalized("NFKC", text):
            return text
    return unicodedata.normalize("NFKC", text)


def _drop_stopwords(tokens: list[str]) -> list[str]:
    return list(itertools.filterfalse(stopwords().__contains__, tokens))


def _mixed_tokens(text: str, drop_stopwords: bool, join: bool) -> list[str]:
    """Tokens of text that has CJK runs (the slower, script-aware path).

    With ``join``, CJK runs go on across separators (see the module docstring). CJK stop words
    are removed from each CJK run (a run left empty is no token); as no stop word holds a line
    break, that is one substitution over the runs joined by line breaks.
    """
    pairs = script_tokens(text, join)
    if not drop_stopwords:
        return [cjk or word for cjk, word in pairs]
    runs = iter(_cjk_stopword_pattern().sub("", "\n".join(c for c, _ in pairs if c)).split("\n"))
    stops = stopwords()
    tokens: list[str] = []
    for cjk, word in pairs:
        if cjk:
            run = next(runs)
            if run:
                tokens.append(run)
        elif word not in stops:
            tokens.append(word)
    return tokens


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
    """Canonical texts and token hashes of a batch of documents, in numpy across the batch.

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
    text = _nfkc(text).casefold()
    if has_cjk(text):
        return None
    if kernels.compiled is not None:
        word_bytes: bytes = kernels.compiled.word_bytes(text)
        return word_bytes
    return _NON_WORD.sub(" ", text).encode("utf-8")


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
    separator byte (a space) after each document but the last. The compiled kernel does it in one
    pass when it is built, :func:`_numpy_run` otherwise.
    """
    if kernels.compiled is None:
        return _numpy_run(body, sizes, drop_stopwords)
    table = _kernel_stop_table() if drop_stopwords else None
    text, counts, hashes = kernels.compiled.canonical_words(
        body, sizes, table, xxhash.xxh3_64_intdigest
    )
    return CanonicalBatch(
        texts=text.decode("utf-8").split("\n") if len(sizes) else [],
        token_counts=np.frombuffer(counts, dtype=np.int64),
        token_hashes=np.frombuffer(hashes, dtype=np.uint64),
    )


#: Values per bucket of the compiled kernel's stop set: four entries of five fields.
_STOP_WAYS = 4
_STOP_FIELDS = 5


@lru_cache(maxsize=1)
def _kernel_stop_table() -> tuple[U64, bytes]:
    """The stop words as the compiled kernel looks them up (:func:`kernel_stop_set`)."""
    return kernel_stop_set(stopwords())


def kernel_stop_set(stop_words: Iterable[str]) -> tuple[U64, bytes]:
    """An exact set of words as the compiled kernel looks them up, ``(table, blob)``.

    Each word goes into the less full of two buckets of four entries, chosen by the low bits of
    its xxh3-64 and of the upper half of it; the smallest power of two of buckets where no bucket
    overflows is used. An entry holds the word's hash, its first eight bytes (little-endian,
    zero past its end), its last eight bytes if it is longer than 8 (else 0), its length and the
    offset of its bytes in ``blob``. The table is the five fields as planes, each one value per
    entry, bucket after bucket.
    """
    words = sorted(word.encode("utf-8") for word in stop_words)
    offsets = itertools.accumulate((len(word) for word in words), initial=0)
    entries = [
        (xxhash.xxh3_64_intdigest(word), *_head_tail(word), len(word), offset)
        for word, offset in zip(words, offsets, strict=False)
    ]
    buckets = 1
    while True:
        table = np.zeros((_STOP_FIELDS, buckets, _STOP_WAYS), dtype=np.uint64)
        filled = [0] * buckets
        for entry in entries:
            first, second = entry[0] % buckets, (entry[0] >> 32) % buckets
            bucket = first if filled[first] <= filled[second] else second
            if filled[bucket] == _STOP_WAYS:
                break
            table[:, bucket, filled[bucket]] = entry
            filled[bucket] += 1
        else:
            return table.reshape(-1), b"".join(words)
        buckets *= 2


def _head_tail(word: bytes) -> tuple[int, int]:
    """A word's first eight bytes (zero past its end) and, above 8 bytes, its last eight."""
    head = int.from_bytes(word[:8], "little")
    return head, int.from_bytes(word[-8:], "little") if len(word) > 8 else 0


def _numpy_run(body: bytes, sizes: I64, drop_stopwords: bool) -> CanonicalBatch:
    """:func:`_canonical_run` in numpy passes over the whole run."""
    # spaces after the body up to a multiple of 8 bytes, at least 9: every 8-byte read at a
    # word's position stays inside
    raw = _PAD + body + _PAD + _PAD[: 8 - len(body) % 8]
    aligned = np.frombuffer(raw, dtype="<u8")
    starts, ends = _word_spans(raw)
    heads = _read_words(aligned, starts)
    # a word of up to 8 bytes is its key; a longer one has its first 8 bytes as key
    keys = heads & _LOW_BYTES[np.minimum(ends - starts, 8)]
    if drop_stopwords:
        keep = np.flatnonzero(~_stopword_mask(raw, keys, starts, ends))
        starts, ends, heads, keys = starts[keep], ends[keep], heads[keep], keys[keep]
    # each document's words start between its first byte and the next document's
    doc_starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes + 1, out=doc_starts[1:])
    counts = np.diff(np.searchsorted(starts, doc_starts + len(_PAD)))
    return CanonicalBatch(
        texts=_joined_words(raw, starts, ends, counts),
        token_counts=counts,
        token_hashes=_word_hashes(raw, aligned, keys, heads, starts, ends),
    )


def _read_words(aligned: U64, at: I64) -> U64:
    """The 8 bytes at each byte offset ``at`` (little-endian), from the text as aligned words.

    Two aligned reads and shifts per offset: much cheaper than reading unaligned words.
    """
    index = at >> 3
    shift = (at & 7).astype(np.uint64) << np.uint64(3)
    low = aligned[index] >> shift
    index += 1
    # shifted in two steps: a shift by 64 bits (offsets that are multiples of 8) gives zero
    high = (aligned[index] << np.uint64(1)) << (np.uint64(63) - shift)
    words: U64 = low | high
    return words


def _word_spans(raw: bytes) -> tuple[I64, I64]:
    """Start and end offsets of the runs of non-space bytes (``raw`` starts and ends in space)."""
    word = np.frombuffer(raw, dtype=np.uint8) != _SPACE
    edges = np.flatnonzero(word[1:] != word[:-1]) + 1
    return edges[0::2], edges[1::2]


@dataclasses.dataclass(frozen=True)
class _StopTable:
    """An exact lookup of the stop words by their first 8 bytes (UTF-8, little-endian integer).

    A word of up to 8 bytes read as the integer ``key`` (zero past its end) is a stop word when
    ``keys[slot] == key`` and ``short[slot]``, with ``slot = (key * multiplier) >> shift`` (no
    two keys share a slot). A longer word whose first 8 bytes are such a key with ``long[slot]``
    may be one of ``long_words``, which is checked on its bytes.
    """

    keys: U64
    short: npt.NDArray[np.bool_]
    long: npt.NDArray[np.bool_]
    multiplier: np.uint64
    shift: np.uint64
    long_words: frozenset[bytes]


@lru_cache(maxsize=1)
def _stop_table() -> _StopTable:
    encoded = [word.encode("utf-8") for word in stopwords()]
    short = {int.from_bytes(w, "little") for w in encoded if len(w) <= 8}
    long_words = frozenset(w for w in encoded if len(w) > 8)
    long = {int.from_bytes(w[:8], "little") for w in long_words}
    keys = sorted(short | long)
    for bits in range(12, 33):
        for multiplier in _STOP_TABLE_MULTIPLIERS:
            slots = [(key * multiplier % 2**64) >> (64 - bits) for key in keys]
            if len(set(slots)) == len(keys):
                table = np.zeros(1 << bits, dtype=np.uint64)
                table[slots] = keys
                return _StopTable(
                    keys=table,
                    short=np.isin(table, list(short)) & (table != 0),
                    long=np.isin(table, list(long)) & (table != 0),
                    multiplier=np.uint64(multiplier),
                    shift=np.uint64(64 - bits),
                    long_words=long_words,
                )
    raise AssertionError("no collision-free stop word table")  # pragma: no cover


def _stopword_mask(raw: bytes, key: U64, starts: I64, ends: I64) -> npt.NDArray[np.bool_]:
    """Which words of ``raw`` are stop words (exactly: longer words are checked on their bytes).

    ``key`` holds each word's first (up to) 8 bytes as a little-endian integer.
    """
    table = _stop_table()
    lengths = ends - starts
    with np.errstate(over="ignore"):
        slot = ((key * table.multiplier) >> table.shift).astype(np.intp)
    stop: npt.NDArray[np.bool_] = table.keys[slot] == key
    stop &= table.short[slot]
    # words of more than 8 bytes: a stop word only if one of the long ones
    longer = np.flatnonzero(lengths > 8)
    if len(longer):
        long_slot = slot[longer]
        hit = (table.keys[long_slot] == key[longer]) & table.long[long_slot]
        stop[longer] = False
        for i in longer[hit].tolist():
            stop[i] = raw[starts[i] : ends[i]] in table.long_words
    return stop


def _joined_words(raw: bytes, starts: I64, ends: I64, counts: I64) -> list[str]:
    """Each document's words joined by single spaces (``counts`` words per document).

    Every word is gathered with the byte after it (a space), the byte after each document's last
    word becomes a line break, and one decode and one split of the whole run give the texts.
    """
    if len(starts) == 0:
        return [""] * len(counts)
    spans = ends - starts + 1
    span_ends = np.cumsum(spans)
    total = int(span_ends[-1])
    source = np.repeat(starts - (span_ends - spans), spans)
    source += np.arange(total, dtype=np.int64)
    chars = np.frombuffer(raw, dtype=np.uint8)[source]
    filled = counts > 0
    chars[span_ends[np.cumsum(counts)[filled] - 1] - 1] = _NEWLINE
    texts: list[str] = chars.tobytes().decode("utf-8").split("\n")
    if filled.all():
        return texts[:-1]
    found = iter(texts)
    return [next(found) if has_words else "" for has_words in filled.tolist()]


class _WordHashCache:
    """xxh3-64 of words of up to 8 bytes, direct-mapped by the word as an integer (its key).

    A slot holds the last word filed there (key 0, which no word has, when empty) and its hash.
    Lookups and updates hold the lock, so a key is never read with another word's hash.
    """

    def __init__(self, bits: int) -> None:
        self.keys = np.zeros(1 << bits, dtype=np.uint64)
        self.hashes = np.zeros(1 << bits, dtype=np.uint64)
        self.shift = np.uint64(64 - bits)
        self.lock = threading.Lock()

    def slots(self, keys: U64) -> I64:
        """The slot of each key."""
        with np.errstate(over="ignore"):
            slot: I64 = ((keys * _CACHE_MULTIPLIER) >> self.shift).astype(np.intp)
        return slot


_WORD_HASH_CACHE = _WordHashCache(15)


def _word_hashes(raw: bytes, aligned: U64, keys: U64, heads: U64, starts: I64, ends: I64) -> U64:
    """xxh3-64 of every word of ``raw`` (``aligned`` is ``raw`` as 8-byte words), given each
    word's key and the 8 bytes from its start (``heads``); words of up to 8 bytes through the
    cache of the words seen."""
    cache = _WORD_HASH_CACHE
    short = ends - starts <= 8
    longer = np.flatnonzero(~short)
    slot = cache.slots(keys)
    with cache.lock:
        hashes = cache.hashes[slot]
        misses = np.flatnonzero((cache.keys[slot] != keys) & short)
        if len(misses):
            fresh = _computed_hashes(raw, aligned, heads[misses], starts[misses], ends[misses])
            hashes[misses] = fresh
            # equal slots of several new words: the last one is filed, key and hash alike
            cache.keys[slot[misses]] = keys[misses]
            cache.hashes[slot[misses]] = fresh
    if len(longer):
        hashes[longer] = _computed_hashes(raw, aligned, heads[longer], starts[longer], ends[longer])
    return hashes


def _computed_hashes(raw: bytes, aligned: U64, heads: U64, starts: I64, ends: I64) -> U64:
    """xxh3-64 of the words of ``raw`` from ``starts`` to ``ends``, computed."""
    lengths = ends - starts
    tails = _read_words(aligned, ends - 8)
    hashes = xxh3_64_short(heads, tails, lengths.astype(np.uint64))
    for i in np.flatnonzero(lengths > XXH3_SHORT_MAX).tolist():
        hashes[i] = xxhash.xxh3_64_intdigest(raw[starts[i] : ends[i]])
    return hashes
