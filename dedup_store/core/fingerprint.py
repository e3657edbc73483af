"""Fingerprints of documents, computed for a whole batch at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from dedup_store.core.arrays import I64, U32, U64
from dedup_store.core.canonical import (
    CanonicalBatch,
    batch_runs,
    canonical_tokens,
    canonical_word_batch,
)
from dedup_store.core.document import one_document
from dedup_store.core.features import NO_FEATURES, weighted_features
from dedup_store.core.hashing import exact_hashes
from dedup_store.core.lsh import band_keys
from dedup_store.core.minhash import estimate_jaccard, minhash_signatures
from dedup_store.core.params import FingerprintParams
from dedup_store.core.shingles import (
    Segments,
    group_by_document,
    shingle,
    split_segments,
    unique_per_document,
)
from dedup_store.core.simhash import (
    hamming,
    simhash_batch,
    simhash_integer_weighted,
    stored_block_keys,
)
from dedup_store.core.validation import validate_texts
from dedup_store.core.weights import DocumentFrequencies, FeatureIndex, feature_weights
from dedup_store.core.winnow import winnow
from dedup_store.errors import EmptyDocumentError

#: Caller-supplied SimHash feature weights: a mapping or a function of the feature text.
FeatureWeights = Mapping[str, float] | Callable[[str], float]

#: Rows are fingerprinted in runs of about this many tokens, so that the arrays of every step
#: stay in the processor cache.
_TOKENS_PER_CHUNK = 1 << 14


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """The fingerprint of one document. Comparisons refuse fingerprints of other params."""

    params: FingerprintParams
    canonical_text: str
    exact_hash: bytes
    token_count: int
    shingles: U64
    signature: U32
    band_keys: I64
    simhash: int
    block_keys: I64
    sample_keys: U64

    def _same_params(self, other: Fingerprint) -> None:
        self.params.require_same(other.params, "cannot compare fingerprints")

    def jaccard(self, other: Fingerprint) -> float:
        """Exact Jaccard similarity of the two shingle sets."""
        self._same_params(other)
        inter = len(np.intersect1d(self.shingles, other.shingles, assume_unique=True))
        return inter / (len(self.shingles) + len(other.shingles) - inter)

    def containment(self, other: Fingerprint) -> float:
        """Share of the smaller shingle set that lies inside the larger one."""
        self._same_params(other)
        inter = len(np.intersect1d(self.shingles, other.shingles, assume_unique=True))
        return inter / min(len(self.shingles), len(other.shingles))

    def estimated_jaccard(self, other: Fingerprint) -> float:
        """Jaccard similarity estimated from the MinHash signatures."""
        self._same_params(other)
        return estimate_jaccard(self.signature, other.signature)

    def hamming(self, other: Fingerprint) -> int:
        """Hamming distance of the two SimHashes."""
        self._same_params(other)
        return hamming(self.simhash, other.simhash)


@dataclasses.dataclass(frozen=True)
class FingerprintRows:
    """The array fields of :class:`FingerprintBatch`, for a run of consecutive rows or all of
    them (see there)."""

    shingles: U64
    shingle_offsets: I64
    signatures: U32
    band_keys: I64
    simhashes: U64
    block_keys: I64
    sample_keys: U64
    sample_offsets: I64
    features: U64
    feature_offsets: I64
    feature_counts: I64
    feature_lengths: I64

    @classmethod
    def concatenate(cls, parts: list[FingerprintRows]) -> FingerprintRows:
        """The rows of all ``parts``, in order."""
        if len(parts) == 1:
            return parts[0]
        return cls(
            shingles=np.concatenate([p.shingles for p in parts]),
            shingle_offsets=_join_offsets([p.shingle_offsets for p in parts]),
            signatures=np.concatenate([p.signatures for p in parts]),
            band_keys=np.concatenate([p.band_keys for p in parts]),
            simhashes=np.concatenate([p.simhashes for p in parts]),
            block_keys=np.concatenate([p.block_keys for p in parts]),
            sample_keys=np.concatenate([p.sample_keys for p in parts]),
            sample_offsets=_join_offsets([p.sample_offsets for p in parts]),
            features=np.concatenate([p.features for p in parts]),
            feature_offsets=_join_offsets([p.feature_offsets for p in parts]),
            feature_counts=np.concatenate([p.feature_counts for p in parts]),
            feature_lengths=np.concatenate([p.feature_lengths for p in parts]),
        )


@dataclasses.dataclass(frozen=True)
class FingerprintBatch(FingerprintRows):
    """Fingerprints of a batch of documents, as arrays with one row per non-empty document.

    Attributes:
        params: the parameters used.
        source_index: position in the input of each row.
        empty_index: input positions of documents empty after canonicalization (no row).
        canonical_texts, exact_hashes, token_counts: per row.
        shingles, shingle_offsets: sorted distinct shingle hashes of row ``i`` are
            ``shingles[shingle_offsets[i]:shingle_offsets[i + 1]]``.
        signatures: ``(rows, num_perm)`` MinHash signatures.
        band_keys: ``(rows, band_key_count)``.
        simhashes: one per row.
        block_keys: ``(rows, block_key_count)``.
        sample_keys, sample_offsets: winnowed excerpt-index keys per row (empty when the excerpt
            index is off).
        features, feature_offsets, feature_counts, feature_lengths: with weighted SimHash
            features (``simhash_weights`` other than ``count``), the distinct features of each
            row (sorted), how often the row has each, and each one's length in UTF-8 bytes
            (:func:`reweighted` weighs them); empty otherwise.
        feature_index: with weighted SimHash features, their :class:`FeatureIndex`.
    """

    params: FingerprintParams
    source_index: I64
    empty_index: list[int]
    canonical_texts: list[str]
    exact_hashes: list[bytes]
    token_counts: I64
    feature_index: FeatureIndex | None = None

    @classmethod
    def of_rows(
        cls,
        rows: FingerprintRows,
        params: FingerprintParams,
        source_index: I64,
        empty_index: list[int],
        canonical_texts: list[str],
        exact_hashes: list[bytes],
        token_counts: I64,
    ) -> FingerprintBatch:
        """A batch of ``rows`` and the per-document fields."""
        arrays = {f.name: getattr(rows, f.name) for f in dataclasses.fields(FingerprintRows)}
        return cls(
            **arrays,
            params=params,
            source_index=source_index,
            empty_index=empty_index,
            canonical_texts=canonical_texts,
            exact_hashes=exact_hashes,
            token_counts=token_counts,
        )

    def __len__(self) -> int:
        return len(self.source_index)

    @cached_property
    def shingle_counts(self) -> I64:
        """Number of distinct shingles per row."""
        return np.diff(self.shingle_offsets)

    def row(self, i: int) -> Fingerprint:
        """The fingerprint of row ``i``."""
        s0, s1 = self.shingle_offsets[i], self.shingle_offsets[i + 1]
        k0, k1 = self.sample_offsets[i], self.sample_offsets[i + 1]
        return Fingerprint(
            params=self.params,
            canonical_text=self.canonical_texts[i],
            exact_hash=self.exact_hashes[i],
            token_count=int(self.token_counts[i]),
            shingles=self.shingles[s0:s1],
            signature=self.signatures[i],
            band_keys=self.band_keys[i],
            simhash=int(self.simhashes[i]),
            block_keys=self.block_keys[i],
            sample_keys=self.sample_keys[k0:k1],
        )


def fingerprint(
    text: str,
    params: FingerprintParams | None = None,
    weights: FeatureWeights | None = None,
    frequencies: DocumentFrequencies | None = None,
) -> Fingerprint:
    """Fingerprint one document.

    ``frequencies`` are the store's document frequencies of its SimHash features, for weighted
    parameters (see :func:`fingerprint_batch`).

    Raises:
        InvalidDocumentError: the text cannot be stored
            (:func:`~dedup_store.core.validation.validate_text`).
        EmptyDocumentError: nothing is left after canonicalization.
    """
    batch = fingerprint_batch([text], params, weights, frequencies)
    if batch.empty_index:
        raise EmptyDocumentError()
    return batch.row(0)


def fingerprint_batch(
    texts: Sequence[str],
    params: FingerprintParams | None = None,
    weights: FeatureWeights | None = None,
    frequencies: DocumentFrequencies | None = None,
) -> FingerprintBatch:
    """Fingerprint many documents at once (numpy across the whole batch).

    Documents empty after canonicalization get no row; their input positions are listed in
    ``empty_index``. Invalid text raises :class:`~dedup_store.errors.InvalidDocumentError`
    naming its position.

    Args:
        texts: the documents.
        params: the fingerprint parameters (defaults if ``None``).
        weights: caller-supplied SimHash feature weights (only with ``simhash_weights``
            ``count``: a store's own weights come from ``frequencies``).
        frequencies: with weighted parameters, the store's document frequencies of the batch's
            SimHash features before the batch (``None``: an empty store); the batch's own
            documents are counted in (:func:`reweighted`).
    """
    validate_texts(texts)
    batch = fingerprint_valid_texts(texts, params or FingerprintParams(), weights)
    return reweighted(batch, frequencies) if batch.params.weighted else batch


def reweighted(
    batch: FingerprintBatch, frequencies: DocumentFrequencies | None, rows: I64 | None = None
) -> FingerprintBatch:
    """``batch`` with its SimHashes and block keys weighted by document frequencies.

    Args:
        batch: fingerprints made with weighted parameters (they hold their features).
        frequencies: the store's frequencies of the batch's features before the batch
            (``None``: an empty store).
        rows: the rows that count into the frequencies with the store's (the rows to be
            written); ``None``: all.
    """
    params = batch.params
    if not params.weighted:
        return batch
    index = batch.feature_index or feature_index(batch)
    weights = feature_weights(params, index, frequencies or DocumentFrequencies.empty(), rows)
    simhashes = simhash_integer_weighted(index.values.view(np.uint64), index.offsets, weights)
    keys = document_block_keys(simhashes, batch.shingle_counts, params)
    return dataclasses.replace(batch, simhashes=simhashes, block_keys=keys, feature_index=index)


def document_block_keys(simhashes: U64, shingle_counts: I64, params: FingerprintParams) -> I64:
    """The block keys of documents with ``simhashes`` and ``shingle_counts`` (distinct
    shingles) under ``params``
    (:func:`~dedup_store.core.simhash.stored_block_keys`): with the excerpt index off, every
    document's SimHash is looked up by block keys, as nothing else finds a long document's
    near-duplicates below ``threshold``."""
    longest = params.simhash_key_max_shingles if params.containment > 0 else 0
    return stored_block_keys(
        simhashes, shingle_counts, params.simhash_blocks, params.simhash_k, longest
    )


def fingerprint_valid_texts(
    texts: Sequence[str], params: FingerprintParams, weights: FeatureWeights | None = None
) -> FingerprintBatch:
    """:func:`fingerprint_batch` of texts that
    :func:`~dedup_store.core.validation.validate_text` has accepted already (the ingest
    pipeline checks every record once, with its id and metadata); with weighted parameters, its
    SimHashes are still to be weighted (:func:`reweighted`)."""
    if weights is not None and params.weighted:
        raise ValueError("feature weights are given by the store with weighted simhash_weights")
    batch = _fingerprint_texts(texts, params, weights)
    if not params.weighted:
        return batch
    return dataclasses.replace(batch, feature_index=feature_index(batch))


def feature_index(batch: FingerprintBatch) -> FeatureIndex:
    """The :class:`FeatureIndex` of a batch of weighted fingerprints (with the features' lengths
    when its weights need them)."""
    lengths = batch.feature_lengths if batch.params.simhash_weights == "tfidf-length" else None
    return FeatureIndex.of(batch.features, batch.feature_offsets, batch.feature_counts, lengths)


def _fingerprint_texts(
    texts: Sequence[str], params: FingerprintParams, weights: FeatureWeights | None
) -> FingerprintBatch:
    """:func:`fingerprint_valid_texts` but the feature index."""
    if weights is None:
        split = canonical_word_batch(texts, params)
        if split is not None:
            words, cjk = split
            if len(texts) == 1 and not cjk and not params.weighted and words.token_counts[0]:
                return _one_document(words, params)
            plain = _fingerprint_canonical(words, params)
            return _with_cjk_documents(texts, params, plain, cjk) if cjk else plain
    return fingerprint_tokens([canonical_tokens(t, params) for t in texts], params, weights)


def _one_document(words: CanonicalBatch, params: FingerprintParams) -> FingerprintBatch:
    """The fingerprint of one non-empty document of words under unweighted ``params``: what
    :func:`_fingerprint_canonical` makes of it, in whole-document steps (a single ``check`` or
    ``add`` would pay more for the batch's bookkeeping than for its hashing)."""
    one = one_document(words.token_hashes, params)
    shingles, signatures = one.shingles, one.signature.reshape(1, -1)
    shingle_offsets = np.array([0, len(shingles)], dtype=np.int64)
    simhashes = np.array([one.simhash], dtype=np.uint64)
    bands = one.band_keys.view(np.int64)[None, :]
    if params.scheme != "threshold":
        bands = band_keys(signatures, params)
    blocks = one.block_keys.view(np.int64)[None, :]
    longest = params.simhash_key_max_shingles if params.containment > 0 else 0
    if longest and len(shingles) > longest:  # whole keys (document_block_keys)
        blocks = document_block_keys(simhashes, shingle_offsets[1:], params)
    sample_keys = one.sample_keys
    sample_offsets = np.array([0, len(sample_keys)], dtype=np.int64)
    features, _, feature_counts, feature_lengths = NO_FEATURES
    return FingerprintBatch(
        shingles=shingles,
        shingle_offsets=shingle_offsets,
        signatures=signatures,
        band_keys=bands,
        simhashes=simhashes,
        block_keys=blocks,
        sample_keys=sample_keys,
        sample_offsets=sample_offsets,
        features=features,
        feature_offsets=np.zeros(2, dtype=np.int64),
        feature_counts=feature_counts,
        feature_lengths=feature_lengths,
        params=params,
        source_index=np.zeros(1, dtype=np.int64),
        empty_index=[],
        canonical_texts=words.texts,
        exact_hashes=exact_hashes(words.texts),
        token_counts=words.token_counts,
    )


def _with_cjk_documents(
    texts: Sequence[str], params: FingerprintParams, plain: FingerprintBatch, cjk: list[int]
) -> FingerprintBatch:
    """The fingerprints of ``texts`` from ``plain``, those of the documents without CJK text (in
    order), and those of the documents at positions ``cjk``, fingerprinted from their tokens."""
    left_out = set(cjk)
    plain_positions = [i for i in range(len(texts)) if i not in left_out]
    mixed = fingerprint_tokens([canonical_tokens(texts[i], params) for i in cjk], params)
    return _interleave(params, [(plain, plain_positions), (mixed, cjk)])


def _interleave(
    params: FingerprintParams, parts: list[tuple[FingerprintBatch, list[int]]]
) -> FingerprintBatch:
    """One batch of the rows of ``parts`` in input order; ``(batch, positions)`` gives the input
    position of each of the batch's own input positions."""
    sources = [np.asarray(positions, dtype=np.int64)[b.source_index] for b, positions in parts]
    order = np.argsort(np.concatenate(sources), kind="stable")
    batches = [b for b, _ in parts]

    def rows(name: str) -> np.ndarray:
        return np.concatenate([getattr(b, name) for b in batches])[order]

    def listed(name: str) -> list[Any]:
        joined = [item for b in batches for item in getattr(b, name)]
        return [joined[i] for i in order.tolist()]

    arrays: dict[str, np.ndarray] = {}
    ragged = (
        ("shingles", "shingle_offsets"),
        ("sample_keys", "sample_offsets"),
        ("features", "feature_offsets"),
    )
    for values, offsets in ragged:
        arrays[values], arrays[offsets] = _gather(batches, values, offsets, order)
    for name in ("feature_counts", "feature_lengths"):
        arrays[name], _ = _gather(batches, name, "feature_offsets", order)
    for field in dataclasses.fields(FingerprintRows):
        if field.name not in arrays:  # one row per document
            arrays[field.name] = rows(field.name)
    return FingerprintBatch.of_rows(
        FingerprintRows(**arrays),
        params,
        np.concatenate(sources)[order],
        sorted(p[i] for b, p in parts for i in b.empty_index),
        listed("canonical_texts"),
        listed("exact_hashes"),
        rows("token_counts"),
    )


def _gather(
    batches: list[FingerprintBatch], values: str, offsets: str, order: I64
) -> tuple[np.ndarray, I64]:
    """The ragged rows ``values[offsets[i]:offsets[i + 1]]`` of the concatenated ``batches``, in
    ``order``, with their new offsets."""
    joined = np.concatenate([getattr(b, values) for b in batches])
    starts = _join_offsets([getattr(b, offsets) for b in batches])
    lengths = np.diff(starts)[order]
    new_offsets = np.zeros(len(order) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    index = np.repeat(starts[:-1][order] - new_offsets[:-1], lengths)
    index += np.arange(int(new_offsets[-1]), dtype=np.int64)
    return joined[index], new_offsets


def fingerprint_tokens(
    all_tokens: Sequence[list[str]],
    params: FingerprintParams | None = None,
    weights: FeatureWeights | None = None,
) -> FingerprintBatch:
    """Fingerprint documents given as canonical token lists (see :func:`canonical_tokens`).

    This is :func:`fingerprint_batch` after canonicalization: callers that already hold canonical
    tokens skip that step. Empty token lists are listed in ``empty_index``.
    """
    params = params or FingerprintParams()
    kept = [i for i, tokens in enumerate(all_tokens) if tokens]
    token_lists = [all_tokens[i] for i in kept]
    canonical = [" ".join(tokens) for tokens in token_lists]
    token_counts = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(kept))

    def segments(first: int, last: int) -> tuple[Segments, Segments]:
        join_cjk = params.canonical_version >= 2
        return split_segments(token_lists[first:last], canonical[first:last], join_cjk)

    empty = [i for i, tokens in enumerate(all_tokens) if not tokens]
    return _assemble(params, kept, empty, canonical, token_counts, segments, weights)


def _fingerprint_canonical(batch: CanonicalBatch, params: FingerprintParams) -> FingerprintBatch:
    """Fingerprint documents from their canonical texts and token hashes (word tokens only)."""
    kept = np.flatnonzero(batch.token_counts).tolist()
    empty = np.flatnonzero(batch.token_counts == 0).tolist()
    token_counts = batch.token_counts[kept]
    token_offsets = np.concatenate([[0], np.cumsum(token_counts)]).tolist()

    def segments(first: int, last: int) -> tuple[Segments, Segments]:
        hashes = batch.token_hashes[token_offsets[first] : token_offsets[last]]
        owner = np.arange(last - first, dtype=np.int64)
        words = Segments(hashes, token_counts[first:last], owner, [])
        return words, Segments.build([])

    canonical = batch.texts if not empty else [batch.texts[i] for i in kept]
    return _assemble(params, kept, empty, canonical, token_counts, segments, None)


def _assemble(
    params: FingerprintParams,
    kept: list[int],
    empty: list[int],
    canonical: list[str],
    token_counts: I64,
    segments: Callable[[int, int], tuple[Segments, Segments]],
    weights: FeatureWeights | None,
) -> FingerprintBatch:
    """The fingerprints of the ``kept`` documents, whose segments ``segments(first, last)`` gives
    for each run of rows."""
    parts = [
        _fingerprint_rows(
            last - first,
            *segments(first, last),
            params,
            weights,
            canonical[first:last],
        )
        for first, last in batch_runs(token_counts, _TOKENS_PER_CHUNK)
    ]
    return FingerprintBatch.of_rows(
        FingerprintRows.concatenate(parts),
        params,
        np.asarray(kept, dtype=np.int64),
        empty,
        canonical,
        exact_hashes(canonical),
        token_counts,
    )


def _join_offsets(offsets: list[I64]) -> I64:
    """Offsets of concatenated runs, from each run's own offsets (each starting at 0)."""
    bases = np.cumsum([0] + [int(o[-1]) for o in offsets[:-1]])
    shifted = [o[1:] + base for o, base in zip(offsets, bases.tolist(), strict=True)]
    return np.concatenate([offsets[0][:1], *shifted])


def _fingerprint_rows(
    n: int,
    words: Segments,
    chars: Segments,
    params: FingerprintParams,
    weights: FeatureWeights | None,
    canonical: list[str],
) -> FingerprintRows:
    """The array fields of the fingerprints of ``n`` non-empty documents, from their segments
    (and, for weighted parameters, their canonical texts, whose words are the segments')."""
    word_shingles, word_owner = shingle(words, params.shingle_size)
    char_shingles, char_owner = shingle(chars, params.cjk_shingle_size)
    ordered, owner = word_shingles, word_owner
    if len(char_shingles):
        ordered = np.concatenate([word_shingles, char_shingles])
        owner = np.concatenate([word_owner, char_owner])
    shingles, shingle_offsets = unique_per_document(ordered, owner, n)
    signatures = minhash_signatures(shingles, shingle_offsets, params.num_perm, params.seed)
    if params.weighted:  # weighed once the whole batch is fingerprinted (reweighted)
        simhashes = np.zeros(n, dtype=np.uint64)
        features = weighted_features(words, chars, char_shingles, char_owner, params, canonical)
    else:
        simhashes = _simhashes(words, chars, char_shingles, char_owner, n, params, weights)
        features = NO_FEATURES
    sample_keys, sample_offsets = _samples(ordered, owner, n, params)
    return FingerprintRows(
        shingles=shingles,
        shingle_offsets=shingle_offsets,
        signatures=signatures,
        band_keys=band_keys(signatures, params),
        simhashes=simhashes,
        block_keys=document_block_keys(simhashes, np.diff(shingle_offsets), params),
        sample_keys=sample_keys,
        sample_offsets=sample_offsets,
        features=features[0],
        feature_offsets=features[1] if params.weighted else np.zeros(n + 1, dtype=np.int64),
        feature_counts=features[2],
        feature_lengths=features[3],
    )


def _simhashes(
    words: Segments,
    chars: Segments,
    char_shingles: U64,
    char_owner: I64,
    n: int,
    params: FingerprintParams,
    weights: FeatureWeights | None,
) -> U64:
    """SimHash over word tokens and CJK character shingles, term-frequency weighted."""
    if weights is None and len(char_shingles) == 0 and len(words.lengths) == n:
        # one word segment per document, in order: the features are already grouped
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(words.lengths, out=offsets[1:])
        return simhash_batch(words.hashes, offsets)
    word_owner = np.repeat(words.owner, words.lengths)
    features = np.concatenate([words.hashes, char_shingles])
    owner = np.concatenate([word_owner, char_owner])
    grouped, offsets = group_by_document(features, owner, n)
    if weights is None:
        return simhash_batch(grouped, offsets)
    texts = words.text + _char_shingle_texts(chars, params.cjk_shingle_size)
    weight_of = _weight_function(weights)
    feature_weights = np.fromiter(map(weight_of, texts), dtype=np.float32, count=len(texts))
    order = np.argsort(owner, kind="stable")
    return simhash_batch(grouped, offsets, feature_weights[order])


def _weight_function(weights: FeatureWeights) -> Callable[[str], float]:
    if isinstance(weights, Mapping):
        table = weights
        return lambda feature: float(table.get(feature, 1.0))
    return weights


def _char_shingle_texts(chars: Segments, n: int) -> list[str]:
    """The text of each CJK shingle, in the order :func:`shingle` produces them."""
    out: list[str] = []
    start = 0
    for length in chars.lengths.tolist():
        run = "".join(chars.text[start : start + length])
        out.extend([run] if length < n else [run[i : i + n] for i in range(length - n + 1)])
        start += length
    return out


def _samples(ordered: U64, owner: I64, n: int, params: FingerprintParams) -> tuple[U64, I64]:
    """Winnowed excerpt-index keys, or nothing when the excerpt index is off."""
    if params.containment == 0:
        return np.empty(0, dtype=np.uint64), np.zeros(n + 1, dtype=np.int64)
    sequence, offsets = group_by_document(ordered, owner, n)
    return winnow(sequence, offsets, params.winnow_window)
