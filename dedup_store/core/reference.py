"""The reference kernels: the simplest correct numpy and plain Python for every kernel operation.

They give exactly the values of the compiled kernels (:mod:`dedup_store.core.kernels`), much more
slowly: they run where the package was built without a C compiler, or when asked for with
``DEDUP_STORE_KERNELS=reference``, and the tests compare the two.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import xxhash
from numpy.lib.stride_tricks import sliding_window_view

from dedup_store.core.arrays import I32, I64, U32, U64
from dedup_store.core.kernels import (
    DocumentConstants,
    OneDocument,
    each_token_hash,
    one_document_in_steps,
)
from dedup_store.core.mixing import COMBINE, SPLITMIX_GAMMA, mix64
from dedup_store.core.scripts import CJK_KIND, WORD_KIND

# everything but letters, digits and marks
_NON_WORD = re.compile(r"[\W_]+")
_TOP_HALF = np.uint64(32)


class ReferenceBackend:
    """The kernel operations in numpy and plain Python (see :class:`~.kernels.Backend`)."""

    name = "reference"

    def word_bytes(self, text: str) -> bytes:
        """The runs of letters, digits and marks of ``text``, one space between two, as UTF-8."""
        return _NON_WORD.sub(" ", text).encode("utf-8")

    def fold_fullwidth(self, text: str) -> str:
        """``text`` unchanged (folding fullwidth forms first only saves time)."""
        return text

    def script_tokens(self, text: str, classes: bytes, join: bool) -> tuple[list[str], bytes]:
        """The CJK runs and words of ``text``, character by character."""
        pairs: list[tuple[str, str]] = []
        run: list[str] = []
        run_kind = 0
        for char in text:
            kind = classes[ord(char)]
            if kind == run_kind and kind:
                run.append(char)
            elif kind or not (join and run_kind == CJK_KIND):
                # a separator ends a word (and, unless joined, a CJK run); a letter ends a run
                _flush(pairs, run, run_kind)
                run, run_kind = ([char], kind) if kind else ([], 0)
        _flush(pairs, run, run_kind)
        kinds = bytes(CJK_KIND if cjk else WORD_KIND for cjk, _ in pairs)
        return [cjk or word for cjk, word in pairs], kinds

    def canonical_words(
        self, body: bytes, sizes: I64, stop_words: frozenset[str] | None
    ) -> tuple[bytes, I64, U64]:
        """The words of each document, split on spaces, stop words dropped, one at a time."""
        stops = frozenset(w.encode("utf-8") for w in stop_words or ())
        documents: list[bytes] = []
        counts: list[int] = []
        words: list[bytes] = []
        start = 0
        for size in sizes.tolist():
            if start + size > len(body):
                raise ValueError("document sizes exceed the body")
            kept = [w for w in body[start : start + size].split(b" ") if w and w not in stops]
            documents.append(b" ".join(kept))
            counts.append(len(kept))
            words.extend(kept)
            start += size + 1
        hashes = np.fromiter(map(xxhash.xxh3_64_intdigest, words), np.uint64, count=len(words))
        return b"\n".join(documents), np.array(counts, dtype=np.int64), hashes

    @staticmethod
    def token_hashes(tokens: list[str]) -> U64:
        """xxh3-64 of each token, one at a time."""
        return each_token_hash(tokens)

    def shingle_hashes(self, hashes: U64, lengths: I64, n: int) -> U64:
        """Every shingle's tokens combined position by position, then mixed."""
        counts = np.maximum(lengths - n + 1, 1)
        firsts = np.cumsum(counts) - counts
        starts = np.repeat(np.cumsum(lengths) - lengths, counts)
        starts += np.arange(int(counts.sum())) - np.repeat(firsts, counts)
        widths = np.repeat(np.minimum(lengths, n), counts)
        acc = np.zeros(len(starts), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(n):
                inside = np.flatnonzero(widths > j)
                acc[inside] += hashes[starts[inside] + j] * COMBINE[j]
        return mix64(acc)

    def combine_groups(self, groups: U64, salts: U64) -> U64:
        """Each group's salt and values times their multipliers, summed, then mixed."""
        with np.errstate(over="ignore"):
            acc = np.empty(groups.shape[:2], dtype=np.uint64)
            acc[...] = salts * SPLITMIX_GAMMA
            for j in range(groups.shape[2]):
                acc += groups[:, :, j] * COMBINE[j]
        return mix64(acc)

    def minhash_minima(self, shingles: U64, offsets: I64, a: U64, b: U64) -> U32:
        """Every permutation of every shingle, one document at a time."""
        _check_groups(offsets, len(shingles), "shingle")
        signatures = np.empty((len(offsets) - 1, len(a)), dtype=np.uint32)
        with np.errstate(over="ignore"):
            for d, (lo, hi) in enumerate(itertools.pairwise(offsets.tolist())):
                permuted = a[:, None] * shingles[None, lo:hi] + b[:, None]
                signatures[d] = permuted.min(axis=1) >> _TOP_HALF
        return signatures

    def simhash_majority(self, features: U64, offsets: I64) -> U64:
        """Every bit of every feature counted, one document at a time."""
        _check_groups(offsets, len(features), "feature")
        out = np.empty(len(offsets) - 1, dtype=np.uint64)
        for d, (lo, hi) in enumerate(itertools.pairwise(offsets.tolist())):
            as_bytes = features[lo:hi].view(np.uint8).reshape(-1, 8)
            counts = np.unpackbits(as_bytes, axis=1, bitorder="little").sum(axis=0)
            out[d] = np.packbits(counts * 2 > hi - lo, bitorder="little").view("<u8")[0]
        return out

    def simhash_weighted(self, features: U64, offsets: I64, weights: I64) -> U64:
        """Every bit of every feature times its weight, one document at a time."""
        _check_groups(offsets, len(features), "feature")
        if len(weights) != len(features):
            raise ValueError("one weight per feature is needed")
        out = np.empty(len(offsets) - 1, dtype=np.uint64)
        for d, (lo, hi) in enumerate(itertools.pairwise(offsets.tolist())):
            as_bytes = features[lo:hi].view(np.uint8).reshape(-1, 8)
            bits = np.unpackbits(as_bytes, axis=1, bitorder="little").astype(np.int64)
            votes = (bits * weights[lo:hi, None]).sum(axis=0)
            total = int(weights[lo:hi].sum())
            out[d] = np.packbits(votes * 2 > total, bitorder="little").view("<u8")[0]
        return out

    def winnow(self, sequence: U64, offsets: I64, w: int) -> tuple[U64, I64]:
        """The minimum of every window, one document at a time, made distinct and sorted."""
        _check_groups(offsets, len(sequence), "value")
        keys = [np.empty(0, dtype=np.uint64)]
        for lo, hi in itertools.pairwise(offsets.tolist()):
            part = sequence[lo:hi]
            if len(part) < w:
                keys.append(part.min(keepdims=True))
            else:
                keys.append(np.unique(sliding_window_view(part, w).min(axis=1)))
        key_offsets = np.zeros(len(offsets), dtype=np.int64)
        np.cumsum([len(k) for k in keys[1:]], out=key_offsets[1:])
        return np.concatenate(keys), key_offsets

    def intersection_sizes(self, values: I32, offsets: I64, left: I64, right: I64) -> I64:
        """One binary search of the shorter group into the other per pair."""
        groups = len(offsets) - 1
        pairs = np.concatenate([left, right])
        if np.any(np.diff(offsets) < 0) or np.any((pairs < 0) | (pairs >= groups)):
            raise ValueError("pairs outside the groups")
        result = np.zeros(len(left), dtype=np.int64)
        for p, (a, b) in enumerate(zip(left.tolist(), right.tolist(), strict=True)):
            x, y = values[offsets[a] : offsets[a + 1]], values[offsets[b] : offsets[b + 1]]
            short, long = (x, y) if len(x) <= len(y) else (y, x)
            if len(long) == 0:
                continue
            at = np.searchsorted(long, short).clip(max=len(long) - 1)
            result[p] = np.count_nonzero(long[at] == short)
        return result

    def high_halves(self, values: U64, offsets: I64) -> I32:
        """Each group's high halves as ``int32``, sorted one group at a time."""
        if len(offsets) == 0 or offsets[0] < 0 or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must describe groups of values")
        if offsets[-1] > len(values):
            raise ValueError("offsets must describe groups of values")
        halves = (values >> _TOP_HALF).astype(np.uint32).view(np.int32)
        parts = [np.sort(halves[lo:hi]) for lo, hi in itertools.pairwise(offsets.tolist())]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)

    def masked_keys(self, values: U64, masks: U64, salts: U64) -> U64:
        """Every value masked by every mask, salted and mixed, in one broadcast."""
        if len(masks) != len(salts):
            raise ValueError("masked_keys: as many salts as masks")
        return mix64((values[:, None] & masks[None, :]) ^ salts[None, :])

    def salted_mix(self, values: U64, salts: U64) -> U64:
        """Each value XORed with its salt, mixed."""
        if len(values) != len(salts):
            raise ValueError("salted_mix: a salt and a writable place per value")
        return mix64(values ^ salts)

    def one_document(self, tokens: U64, n: int, constants: DocumentConstants) -> OneDocument:
        """The other reference kernels, one after the other, on a batch of one document."""
        return one_document_in_steps(self, tokens, n, constants)


def _flush(pairs: list[tuple[str, str]], run: list[str], kind: int) -> None:
    """Add a finished run of characters of ``kind`` (none when it is 0) to the token pairs."""
    if kind == CJK_KIND:
        pairs.append(("".join(run), ""))
    elif kind == WORD_KIND:
        pairs.append(("", "".join(run)))


def _check_groups(offsets: I64, total: int, item: str) -> None:
    """Refuse groups that are not each at least one value of the ``total`` (as the kernels do)."""
    if len(offsets) == 0 or int(offsets[0]) < 0 or int(offsets[-1]) > total:
        raise ValueError(f"every document needs at least one {item}")
    if np.any(np.diff(offsets) <= 0):
        raise ValueError(f"every document needs at least one {item}")
