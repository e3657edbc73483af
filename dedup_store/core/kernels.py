"""The kernels of the core, behind one interface: compiled when built, or the reference.

:data:`backend` is chosen once, at import: the :class:`CompiledBackend` over the extension module
:mod:`dedup_store.core._kernels` when it was built, else (no C compiler at install time), or when
the environment variable ``DEDUP_STORE_KERNELS`` is ``reference``, the
:class:`~dedup_store.core.reference.ReferenceBackend`, which gives the same values, more slowly.
Both take and give numpy arrays (or strings and bytes where text goes in or out).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
from collections.abc import Iterable, Iterator
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import xxhash

if TYPE_CHECKING:
    from dedup_store.core.reference import ReferenceBackend

from dedup_store.config import ENV_KERNELS
from dedup_store.core.arrays import I32, I64, U32, U64, distinct
from dedup_store.core.mixing import COMBINE


class DocumentConstants(NamedTuple):
    """The arguments of :meth:`Backend.one_document` that depend on the parameters only."""

    #: The MinHash permutations.
    a: U64
    b: U64
    #: The winnowing window (0: no excerpt keys).
    window: int
    #: Min-hashes per band (0: no band keys), and the salt of each band.
    rows: int
    band_salts: U64
    #: The SimHash block masks, and the salt of each.
    masks: U64
    mask_salts: U64


class OneDocument(NamedTuple):
    """What :meth:`Backend.one_document` makes of one document (read-only arrays)."""

    shingles: U64
    signature: U32
    band_keys: U64
    simhash: int
    block_keys: U64
    sample_keys: U64


class Backend(Protocol):
    """The kernel operations of the core; every call site goes through :data:`backend`."""

    #: ``compiled`` or ``reference``.
    name: str

    def word_bytes(self, text: str) -> bytes:
        """The runs of letters, digits and marks of ``text`` (NFKC, casefolded, without CJK
        text) as UTF-8, separated by spaces (any number of them)."""

    def fold_fullwidth(self, text: str) -> str:
        """``text`` with characters whose NFKC form is one character possibly replaced by it
        (the NFKC form of the result is that of ``text``)."""

    def script_tokens(self, text: str, classes: bytes, join: bool) -> tuple[list[str], bytes]:
        """The CJK runs and other words of ``text`` in order, with one byte per token, its kind
        (``CJK_KIND`` or ``WORD_KIND``), by the class of every code point (``classes``: 2 CJK,
        1 word, 0 separator); with ``join``, a CJK run goes on across separators, which are left
        out of it, up to the next word."""

    def canonical_words(
        self, body: bytes, sizes: I64, stop_words: frozenset[str] | None
    ) -> tuple[bytes, I64, U64]:
        """Words of documents of space-separated UTF-8 words (``sizes[d]`` bytes for document
        ``d``, one space after each but the last), stop words left out.

        Returns:
            ``(text, counts, hashes)``: each document's words joined by single spaces, the
            documents joined by line breaks; words per document; xxh3-64 of every word.
        """

    def token_hashes(self, tokens: list[str]) -> U64:
        """xxh3-64 of each token's UTF-8 bytes."""

    def shingle_hashes(self, hashes: U64, lengths: I64, n: int) -> U64:
        """Hash of every ``n``-gram of token hashes of each segment (``lengths`` tokens each; a
        shorter segment gives one shingle of all its tokens), mixed with
        :func:`~dedup_store.core.mixing.mix64`."""

    def combine_groups(self, groups: U64, salts: U64) -> U64:
        """One hash of every group of a ``(rows, groups, width)`` array: shape ``(rows, groups)``
        (see :func:`dedup_store.core.hashing.combine_groups`)."""

    def minhash_minima(self, shingles: U64, offsets: I64, a: U64, b: U64) -> U32:
        """Top 32 bits of ``min(a[i] * x + b[i])`` over the shingles ``x`` of each document:
        shape ``(documents, len(a))``; every document needs a shingle."""

    def simhash_majority(self, features: U64, offsets: I64) -> U64:
        """Per document, the bits set in more than half of its features (as one ``uint64``)."""

    def simhash_weighted(self, features: U64, offsets: I64, weights: I64) -> U64:
        """Per document, the bits whose features' integer ``weights`` (one per feature, each at
        most ``2**40``) add up to more than half of all its weights (as one ``uint64``)."""

    def winnow(self, sequence: U64, offsets: I64, w: int) -> tuple[U64, I64]:
        """Distinct minima of the windows of ``w`` values of each document (its minimum when it
        is shorter), sorted, concatenated, with their offsets."""

    def intersection_sizes(self, values: I32, offsets: I64, left: I64, right: I64) -> I64:
        """How many values of sorted group ``left[p]`` group ``right[p]`` holds, per pair."""

    def high_halves(self, values: U64, offsets: I64) -> I32:
        """The high 32 bits of the values of each (sorted) group, as ``int32``, each group
        sorted."""

    def masked_keys(self, values: U64, masks: U64, salts: U64) -> U64:
        """``mix64((values[i] & masks[j]) ^ salts[j])`` for every value and every mask (with its
        salt): shape ``(len(values), len(masks))``."""

    def salted_mix(self, values: U64, salts: U64) -> U64:
        """``mix64(values[i] ^ salts[i])`` for every value (as many salts as values)."""

    def one_document(self, tokens: U64, n: int, constants: DocumentConstants) -> OneDocument:
        """The fingerprint of one document of token hashes (at least one) in one call, as the
        other kernels make it: its sorted distinct :meth:`shingle_hashes` of ``n`` tokens, their
        :meth:`minhash_minima`, the :meth:`combine_groups` of the signature's bands, the
        :meth:`simhash_majority` of the tokens, its :meth:`masked_keys` and the :meth:`winnow`
        of its shingles in order, with the ``constants`` of :class:`DocumentConstants`."""


class CompiledBackend:
    """The kernels of the extension module :mod:`dedup_store.core._kernels`."""

    name = "compiled"

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def word_bytes(self, text: str) -> bytes:
        words: bytes = self.module.word_bytes(text)
        return words

    def fold_fullwidth(self, text: str) -> str:
        folded: str = self.module.fold_fullwidth(text)
        return folded

    def script_tokens(self, text: str, classes: bytes, join: bool) -> tuple[list[str], bytes]:
        tokens: list[str]
        kinds: bytes
        tokens, kinds = self.module.script_tokens(text, classes, join)
        return tokens, kinds

    def canonical_words(
        self, body: bytes, sizes: I64, stop_words: frozenset[str] | None
    ) -> tuple[bytes, I64, U64]:
        table = None if stop_words is None else _stop_set(stop_words)
        text, counts, hashes = self.module.canonical_words(
            body, np.ascontiguousarray(sizes, dtype=np.int64), table, xxhash.xxh3_64_intdigest
        )
        return text, np.frombuffer(counts, dtype=np.int64), np.frombuffer(hashes, dtype=np.uint64)

    def token_hashes(self, tokens: list[str]) -> U64:
        """xxh3-64 of each token: the tokens joined by spaces go through the word kernel, whose
        words are the tokens exactly when it gives back the same text and as many words (an
        empty token leaves a space at an end or two together, a space inside one makes more
        words); otherwise one token at a time."""
        if tokens:
            body = " ".join(tokens).encode("utf-8")
            text, _, hashes = self.canonical_words(body, np.array([len(body)]), None)
            if text == body and len(hashes) == len(tokens):
                return hashes
        return each_token_hash(tokens)

    def shingle_hashes(self, hashes: U64, lengths: I64, n: int) -> U64:
        result = self.module.shingle_hashes(_u64(hashes), _i64(lengths), n, COMBINE)
        return np.frombuffer(result, dtype=np.uint64)

    def combine_groups(self, groups: U64, salts: U64) -> U64:
        rows, count, width = groups.shape
        combined = self.module.combine_groups(_u64(groups), count, width, _u64(salts), COMBINE)
        return np.frombuffer(combined, dtype=np.uint64).reshape(rows, count)

    def minhash_minima(self, shingles: U64, offsets: I64, a: U64, b: U64) -> U32:
        signatures = np.empty((len(offsets) - 1, len(a)), dtype=np.uint32)
        self.module.minhash_minima(_u64(shingles), _i64(offsets), a, b, signatures)
        return signatures

    def simhash_majority(self, features: U64, offsets: I64) -> U64:
        majority = self.module.simhash_majority(_u64(features), _i64(offsets))
        return np.frombuffer(majority, dtype=np.uint64).copy()

    def simhash_weighted(self, features: U64, offsets: I64, weights: I64) -> U64:
        majority = self.module.simhash_weighted(_u64(features), _i64(offsets), _i64(weights))
        return np.frombuffer(majority, dtype=np.uint64).copy()

    def winnow(self, sequence: U64, offsets: I64, w: int) -> tuple[U64, I64]:
        keys, key_offsets = self.module.winnow(_u64(sequence), _i64(offsets), w)
        return np.frombuffer(keys, dtype=np.uint64), np.frombuffer(key_offsets, dtype=np.int64)

    def intersection_sizes(self, values: I32, offsets: I64, left: I64, right: I64) -> I64:
        counts = self.module.intersection_sizes(values, offsets, left, right)
        return np.frombuffer(counts, dtype=np.int64).copy()

    def high_halves(self, values: U64, offsets: I64) -> I32:
        halves = self.module.high_halves(_u64(values), _i64(offsets))
        return np.frombuffer(halves, dtype=np.int32)

    def masked_keys(self, values: U64, masks: U64, salts: U64) -> U64:
        keys = np.empty((len(values), len(masks)), dtype=np.uint64)
        self.module.masked_keys(_u64(values), _u64(masks), _u64(salts), keys)
        return keys

    def salted_mix(self, values: U64, salts: U64) -> U64:
        mixed = np.empty(len(values), dtype=np.uint64)
        self.module.salted_mix(_u64(values), _u64(salts), mixed)
        return mixed

    def one_document(self, tokens: U64, n: int, constants: DocumentConstants) -> OneDocument:
        shingles, signature, bands, simhash, blocks, samples = self.module.one_document(
            _u64(tokens), n, COMBINE, *constants
        )
        return OneDocument(
            np.frombuffer(shingles, dtype=np.uint64),
            np.frombuffer(signature, dtype=np.uint32),
            np.frombuffer(bands, dtype=np.uint64),
            simhash,
            np.frombuffer(blocks, dtype=np.uint64),
            np.frombuffer(samples, dtype=np.uint64),
        )

    def multimap_insert(
        self, table_keys: U64, table_ids: I64, keys: U64, ids: I64, cap: int
    ) -> int:
        """Insert ``(keys[i], ids[i])`` into an open-addressing table unless it holds ``cap``
        entries of the key (0: no limit); returns how many were inserted (see
        :class:`dedup_store.core.keyindex.HashedKeys`)."""
        inserted: int = self.module.multimap_insert(
            table_keys, table_ids, _u64(keys), _i64(ids), cap
        )
        return inserted

    def multimap_rehash(
        self, table_keys: U64, table_ids: I64, grown_keys: U64, grown_ids: I64
    ) -> None:
        """Empty the larger ``grown`` table and insert every entry of the table into it, each
        key's entries in the order they were inserted."""
        self.module.multimap_rehash(table_keys, table_ids, grown_keys, grown_ids)

    def multimap_find(self, table_keys: U64, table_ids: I64, keys: U64) -> tuple[I64, U64]:
        """Every ``(id, key)`` entry of the distinct ``keys``, key by key, in insertion order."""
        ids, found = self.module.multimap_find(table_keys, table_ids, _u64(keys))
        return np.frombuffer(ids, dtype=np.int64), np.frombuffer(found, dtype=np.uint64)


def one_document_in_steps(
    backend: Backend, tokens: U64, n: int, constants: DocumentConstants
) -> OneDocument:
    """:meth:`Backend.one_document` by the other kernels of ``backend``, one after the other, on
    a batch of one document."""
    a, b, w, rows, band_salts, masks, mask_salts = constants
    if len(tokens) == 0 or len(a) != len(b) or len(masks) != len(mask_salts):
        raise ValueError("one_document: arguments do not agree")
    ordered = backend.shingle_hashes(tokens, np.array([len(tokens)], dtype=np.int64), n)
    shingles = distinct(ordered)
    signature = backend.minhash_minima(shingles, np.array([0, len(shingles)]), a, b)[0]
    bands = len(band_salts) if rows else 0
    wide = signature[: bands * rows].astype(np.uint64).reshape(1, bands, rows)
    none = np.empty(0, dtype=np.uint64)
    band_keys = backend.combine_groups(wide, band_salts)[0] if bands else none
    simhash = backend.simhash_majority(tokens, np.array([0, len(tokens)], dtype=np.int64))
    block_keys = backend.masked_keys(simhash, masks, mask_salts)[0]
    ends = np.array([0, len(ordered)], dtype=np.int64)
    samples = backend.winnow(ordered, ends, w)[0] if w else none
    return OneDocument(shingles, signature, band_keys, int(simhash[0]), block_keys, samples)


def _u64(values: U64) -> U64:
    return np.ascontiguousarray(values, dtype=np.uint64)


def _i64(values: I64) -> I64:
    return np.ascontiguousarray(values, dtype=np.int64)


#: Values per bucket of the compiled kernel's stop set: four entries of five fields.
_STOP_WAYS = 4
_STOP_FIELDS = 5


@lru_cache(maxsize=4)
def _stop_set(stop_words: frozenset[str]) -> tuple[U64, bytes]:
    return kernel_stop_set(stop_words)


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


def _load() -> ModuleType | None:
    try:
        return importlib.import_module("dedup_store.core._kernels")
    except ImportError:
        return None


def _compiled() -> CompiledBackend | None:
    module = _load()
    return None if module is None else CompiledBackend(module)


#: The compiled kernels, or ``None`` when the extension module was not built.
COMPILED: CompiledBackend | None = _compiled()


def each_token_hash(tokens: list[str]) -> U64:
    """xxh3-64 of each token, one at a time."""
    hashes = (xxhash.xxh3_64_intdigest(token.encode("utf-8")) for token in tokens)
    return np.fromiter(hashes, dtype=np.uint64, count=len(tokens))


@lru_cache(maxsize=1)
def reference() -> ReferenceBackend:
    """The reference kernels (numpy and plain Python), imported when first asked for: a build
    with compiled kernels runs without them (``REFERENCE`` is the same object)."""
    from dedup_store.core.reference import ReferenceBackend

    return ReferenceBackend()


def __getattr__(name: str) -> Any:
    if name == "REFERENCE":
        return reference()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def choose(requested: str | None) -> Backend:
    """The reference kernels when ``requested`` is ``reference`` or nothing was compiled, else
    the compiled ones."""
    if requested == "reference" or COMPILED is None:
        return reference()
    return COMPILED


#: The kernels every call site runs, chosen once at import.
backend: Backend = choose(os.environ.get(ENV_KERNELS))


@contextlib.contextmanager
def use(chosen: Backend) -> Iterator[Backend]:
    """Run the kernels ``chosen`` within the block, then those in use before (for tests and
    benchmarks that compare the two; it changes :data:`backend` for every thread)."""
    global backend
    saved, backend = backend, chosen
    try:
        yield chosen
    finally:
        backend = saved
