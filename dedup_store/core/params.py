"""Fingerprint parameters: every choice that changes a fingerprint or a match, in one value."""

from __future__ import annotations

import dataclasses
import json
import math
import operator
from functools import cached_property, lru_cache, reduce
from itertools import pairwise
from typing import Any, Literal, get_args

from dedup_store.errors import InvalidParamsError, ParamsMismatchError

#: MinHash band schemes.
Scheme = Literal["threshold", "broder"]
#: Whether input is HTML.
HtmlMode = Literal["auto", "always", "never"]
#: How candidates are scored.
VerifyMode = Literal["exact", "estimate"]
#: How the features of a SimHash are weighted.
SimhashWeights = Literal["count", "tfidf", "tfidf-length"]

BRODER_SUPER_SHINGLES = 6
#: The format of :meth:`FingerprintParams.to_json` (3 added ``canonical_version``, 4
#: ``simhash_weights``, ``meta_fields`` and ``meta_weight``, 5 ``simhash_key_max_shingles``).
PARAMS_FORMAT = 5
#: The canonicalization of new fingerprints (see :mod:`dedup_store.core.canonical`).
CANONICAL_VERSION = 2
#: Values of parameters that stores written with an older format did not record: they keep
#: the rules they were built with.
LEGACY_VALUES: dict[int, dict[str, Any]] = {
    1: {
        "simhash_min_jaccard": 0.0,
        "containment_merges": True,
        "hot_key_limit": 0,
        "max_excerpt_keys": 0,
        "canonical_version": 1,
        "simhash_weights": "count",
        "simhash_key_max_shingles": 0,
    },
    2: {
        "canonical_version": 1,
        "max_excerpt_keys": 0,
        "simhash_weights": "count",
        "simhash_key_max_shingles": 0,
    },
    3: {"simhash_weights": "count", "simhash_key_max_shingles": 0},
    4: {"simhash_key_max_shingles": 0},
}
#: The longest name of a metadata field (:attr:`FingerprintParams.meta_fields`).
MAX_META_FIELD = 100


@dataclasses.dataclass(frozen=True)
class FingerprintParams:
    """Everything that decides how a document is fingerprinted and when two documents match.

    Attributes:
        shingle_size: Words per shingle for non-CJK text.
        cjk_shingle_size: Characters per shingle for Chinese/Japanese runs.
        num_perm: Number of min-hashes in a MinHash signature.
        scheme: ``threshold`` (bands chosen for ``threshold``) or ``broder`` (6 super-shingles,
            near-duplicate when at least 2 are equal, looked up via the 15 pairwise keys).
        threshold: Target Jaccard similarity: candidates must reach it to become matches.
        false_negative_weight: Weight of the missed-pair area when choosing bands (0..1); the
            false-positive area gets ``1 - false_negative_weight``. Candidates are verified, so a
            false positive costs time, a false negative costs recall.
        simhash_k: Hamming distance at or below which two SimHashes match.
        simhash_blocks: Number of blocks the 64 bits are split into (must exceed ``simhash_k``).
        simhash_weights: How each occurrence of a SimHash feature (a word, or a CJK character
            shingle) votes: ``count`` (1), ``tfidf`` (the feature's smoothed inverse document
            frequency in the store, kept in SQL) or ``tfidf-length`` (that times a normal
            curve over the feature's length in UTF-8 bytes, mean 4.51, standard deviation
            2.207, 1 at its peak); see :mod:`dedup_store.core.weights`.
        simhash_key_max_shingles: The most distinct shingles a document may have for its
            SimHash to be looked up by block keys (``0``: no limit; with ``containment`` 0,
            every document is). A longer document's block key slots hold keys of its whole
            SimHash, which meet only an equal SimHash: the SimHashes of long texts agree in
            most bits, so their block keys meet ever more unrelated documents as a store
            grows, while the MinHash bands and the excerpt keys find their near-duplicates.
            Its SimHash is still stored, and a pair those keys find still matches within
            ``simhash_k``.
        simhash_min_jaccard: Jaccard similarity a pair within ``simhash_k`` must also reach to
            match (SimHash alone lets shared boilerplate decide).
        containment: Containment threshold for excerpts (share of the smaller document inside the
            larger one); ``0`` turns the excerpt index off.
        containment_merges: Whether an excerpt match (the smaller document inside the larger
            one) merges the two documents' clusters; by default it is reported, not merged.
        hot_key_limit: Most documents one key leads to (``0``: no limit). An excerpt key shared
            by more documents is boilerplate and ignored; a band or block key yields its
            ``hot_key_limit`` oldest documents, and one shared by more is re-keyed: its bucket is
            split by secondary keys (:mod:`dedup_store.core.rekey`), each leading to at most
            ``hot_key_limit`` documents, so one lookup costs the same however templated the
            store is and still meets the near-duplicates in the bucket.
        max_excerpt_keys: About the most excerpt keys a document writes and looks up (``0``:
            all). A document with more keeps those that are multiples of a power of two ``s``;
            an excerpt of it is still found when it holds about ``s`` keys or more, so long
            documents cost few key rows and lookups.
        winnow_window: Winnowing window (in shingles) for the excerpt index: any shared run of
            ``winnow_window + shingle_size - 1`` words is guaranteed to share an index key.
        stopwords: Drop English, Russian and Chinese stop words.
        stem: Apply Snowball stemming (English and Russian).
        html: Whether input is HTML: ``auto`` detects markup, ``always`` or ``never`` force it.
        verify: ``exact`` scores candidates by exact Jaccard over stored shingle hashes;
            ``estimate`` by MinHash signature agreement.
        seed: Seed of the min-hash permutations.
        canonical_version: How text becomes canonical tokens and CJK shingles: ``2`` (CJK text
            joined across spaces, punctuation and other words) or ``1``, the canonicalization
            of stores made before it (each CJK run on its own), kept so that their
            fingerprints stay as they were.
        meta_fields: The fields of a document's ``meta`` that hold sets (tags, keywords,
            categories, cited links): a document's metadata set is the union of their members,
            each normalized and qualified by its field (:mod:`dedup_store.core.metadata`).
            Empty: metadata plays no part.
        meta_weight: ``1 - mu``: the weight of the metadata score (the MinHash estimate of the
            Jaccard of two metadata sets) in the combined score of a pair of documents that
            both have metadata, ``(1 - meta_weight) * jaccard + meta_weight * metadata``; a
            pair matched by ``exact``, ``minhash`` or ``simhash`` must also reach ``threshold``
            with it.
    """

    shingle_size: int = 4
    cjk_shingle_size: int = 3
    num_perm: int = 84
    scheme: Scheme = "threshold"
    threshold: float = 0.8
    false_negative_weight: float = 0.95
    simhash_k: int = 3
    simhash_blocks: int = 5
    simhash_min_jaccard: float = 0.3
    simhash_key_max_shingles: int = 200
    simhash_weights: SimhashWeights = "count"
    containment: float = 0.8
    containment_merges: bool = False
    hot_key_limit: int = 50
    max_excerpt_keys: int = 64
    winnow_window: int = 16
    stopwords: bool = True
    stem: bool = False
    html: HtmlMode = "auto"
    verify: VerifyMode = "exact"
    seed: int = 1
    canonical_version: int = CANONICAL_VERSION
    meta_fields: tuple[str, ...] = ()
    meta_weight: float = 0.15

    def __post_init__(self) -> None:
        _check_int(self, "shingle_size", 1, 64)
        _check_int(self, "cjk_shingle_size", 1, 64)
        _check_int(self, "num_perm", 2, 1024)
        _check_int(self, "simhash_k", 0, 16)
        _check_int(self, "simhash_blocks", 2, 16)
        _check_int(self, "winnow_window", 1, 1024)
        _check_int(self, "simhash_key_max_shingles", 0, 2**31 - 1)
        _check_int(self, "hot_key_limit", 0, 100_000)
        _check_int(self, "max_excerpt_keys", 0, 1_000_000)
        _check_int(self, "seed", 0, 2**63 - 1)
        _check_int(self, "canonical_version", 1, CANONICAL_VERSION)
        _check_choice(self, "scheme", Scheme)
        _check_choice(self, "html", HtmlMode)
        _check_choice(self, "verify", VerifyMode)
        _check_choice(self, "simhash_weights", SimhashWeights)
        _check_unit(self, "threshold", open_low=True)
        _check_unit(self, "false_negative_weight", open_low=True)
        _check_unit(self, "containment")
        _check_unit(self, "simhash_min_jaccard")
        _check_unit(self, "meta_weight")
        _check_fields(self)
        for name in ("stopwords", "stem", "containment_merges"):
            if not isinstance(getattr(self, name), bool):
                value = getattr(self, name)
                raise InvalidParamsError(f"{name} must be true or false, got {value!r}")
        if self.simhash_blocks <= self.simhash_k:
            raise InvalidParamsError(
                f"simhash_blocks must exceed simhash_k (pigeonhole rule), "
                f"got simhash_blocks={self.simhash_blocks}, simhash_k={self.simhash_k}"
            )
        if self.scheme == "broder" and self.num_perm < BRODER_SUPER_SHINGLES:
            raise InvalidParamsError(
                f"scheme 'broder' needs num_perm >= {BRODER_SUPER_SHINGLES}, got {self.num_perm}"
            )
        if math.comb(self.simhash_blocks, self.simhash_k) > 256:
            raise InvalidParamsError(
                f"simhash_blocks={self.simhash_blocks}, simhash_k={self.simhash_k} gives "
                f"{math.comb(self.simhash_blocks, self.simhash_k)} block keys per document "
                "(max 256)"
            )

    # -- derived values -------------------------------------------------------------------

    @property
    def weighted(self) -> bool:
        """Whether SimHash features are weighted by the store's document frequencies."""
        return self.simhash_weights != "count"

    @property
    def uses_meta(self) -> bool:
        """Whether documents' metadata sets enter their scores."""
        return bool(self.meta_fields)

    @property
    def lowest_jaccard(self) -> float:
        """The lowest Jaccard a pair can match with by ``minhash`` or ``simhash``: with
        metadata sets, a Jaccard ``j`` with agreeing sets scores ``(1 - meta_weight) * j +
        meta_weight``, which reaches ``threshold`` from ``j >= (threshold - meta_weight) / (1 -
        meta_weight)``."""
        lowest = self.threshold
        if self.uses_meta:
            weight = self.meta_weight
            lowest = 0.0 if weight >= 1 else max(0.0, (self.threshold - weight) / (1 - weight))
        return min(lowest, self.simhash_min_jaccard)

    @cached_property
    def bands(self) -> tuple[int, int]:
        """``(b, r)``: number of bands and min-hashes per band.

        For ``broder`` these are the 6 super-shingles of ``num_perm // 6`` min-hashes.
        """
        if self.scheme == "broder":
            return BRODER_SUPER_SHINGLES, self.num_perm // BRODER_SUPER_SHINGLES
        return optimal_bands(self.threshold, self.num_perm, self.false_negative_weight)

    @property
    def band_key_count(self) -> int:
        """How many band keys one document gets (15 mega-shingles for ``broder``)."""
        b, _ = self.bands
        return math.comb(b, 2) if self.scheme == "broder" else b

    @property
    def block_key_count(self) -> int:
        """How many SimHash block keys one document gets: C(m, m - k)."""
        return math.comb(self.simhash_blocks, self.simhash_blocks - self.simhash_k)

    # -- serialization --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a plain dict (JSON-ready; ``meta_fields`` as a list)."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["meta_fields"] = list(self.meta_fields)
        return data

    def to_json(self) -> str:
        """The parameters as a JSON object with sorted keys and a format number."""
        return json.dumps({"format": PARAMS_FORMAT, **self.to_dict()}, sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FingerprintParams:
        """Build parameters from :meth:`to_dict` output; unknown names are an error."""
        data = {k: v for k, v in data.items() if k != "format"}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidParamsError(f"unknown fingerprint parameters: {', '.join(unknown)}")
        fields = data.get("meta_fields")
        if isinstance(fields, list):
            data["meta_fields"] = tuple(fields)
        return cls(**data)

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> FingerprintParams:
        """Parameters as a store recorded them (:meth:`to_json`), in any format so far.

        Parameters a store of an older format did not record take the values that store was
        built with (:data:`LEGACY_VALUES`), not today's defaults.
        """
        legacy = LEGACY_VALUES.get(data.get("format", 1), {})
        return cls.from_dict({**legacy, **data})

    @classmethod
    def from_json(cls, text: str) -> FingerprintParams:
        """Parse :meth:`to_json` output."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InvalidParamsError(f"fingerprint parameters are not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise InvalidParamsError("fingerprint parameters must be a JSON object")
        return cls.from_stored(data)

    # -- comparison -----------------------------------------------------------------------

    def diff(self, other: FingerprintParams) -> dict[str, tuple[Any, Any]]:
        """``{name: (ours, theirs)}`` for every parameter that differs."""
        ours, theirs = self.to_dict(), other.to_dict()
        return {k: (ours[k], theirs[k]) for k in ours if ours[k] != theirs[k]}

    def require_same(self, other: FingerprintParams, context: str = "", hint: str = "") -> None:
        """Raise :class:`ParamsMismatchError` naming every difference (after ``context``, then
        ``hint``: the way out), if there is one."""
        differences = self.diff(other)
        if differences:
            raise ParamsMismatchError(differences, context, hint)


def _check_int(p: FingerprintParams, name: str, low: int, high: int) -> None:
    value = getattr(p, name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidParamsError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def _check_unit(p: FingerprintParams, name: str, open_low: bool = False) -> None:
    value = getattr(p, name)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not (0.0 < value <= 1.0 if open_low else 0.0 <= value <= 1.0):
        bound = "(0, 1]" if open_low else "[0, 1]"
        raise InvalidParamsError(f"{name} must be a number in {bound}, got {value!r}")


def _check_fields(p: FingerprintParams) -> None:
    fields = p.meta_fields
    if not isinstance(fields, tuple) or not all(
        isinstance(f, str) and f.strip() == f and 0 < len(f) <= MAX_META_FIELD for f in fields
    ):
        raise InvalidParamsError(
            "meta_fields must be names of fields (non-empty, at most "
            f"{MAX_META_FIELD} characters, no surrounding spaces), got {fields!r}"
        )
    if len(set(fields)) != len(fields):
        raise InvalidParamsError(f"meta_fields must be distinct, got {fields!r}")


def _check_choice(p: FingerprintParams, name: str, choices: Any) -> None:
    value = getattr(p, name)
    allowed = get_args(choices)
    if value not in allowed:
        raise InvalidParamsError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")


#: Points of each curve that :func:`optimal_bands` integrates.
_POINTS = 257


def _grid(start: float, stop: float) -> list[float]:
    """``_POINTS`` evenly spaced values from ``start`` to ``stop``, as ``numpy.linspace``."""
    step = (stop - start) / (_POINTS - 1)
    return [*(i * step + start for i in range(_POINTS - 1)), stop]


def _power(x: float, n: int) -> float:
    """``x**n``; a square is a product, as numpy takes it."""
    return x * x if n == 2 else x**n


def _sum(values: list[float]) -> float:
    """The pairwise sum of ``values``, added in the order numpy adds them."""
    count = len(values)
    if count < 8:
        return reduce(operator.add, values, -0.0)
    if count <= 128:
        whole = count - count % 8
        lanes = [reduce(operator.add, values[j:whole:8]) for j in range(8)]
        total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + (
            (lanes[4] + lanes[5]) + (lanes[6] + lanes[7])
        )
        return reduce(operator.add, values[whole:], total)
    half = count // 2
    half -= half % 8
    return _sum(values[:half]) + _sum(values[half:])


def _area(curve: list[float], widths: list[float]) -> float:
    """The trapezoid integral of ``curve`` over points ``widths`` apart."""
    return _sum([(a + b) * w for (a, b), w in zip(pairwise(curve), widths, strict=True)]) / 2.0


@lru_cache(maxsize=16)
def band_error_areas(threshold: float, num_perm: int) -> tuple[tuple[int, int, float, float], ...]:
    """``(b, r, false-positive area, false-negative area)`` of every ``b`` bands of ``r`` rows.

    Every ``b * r <= num_perm``, in increasing ``b``, then ``r``. Each area is a trapezoid
    integral over 257 points.
    """
    low = _grid(0.0, threshold)
    high = _grid(threshold, 1.0)
    low_widths = [b - a for a, b in pairwise(low)]
    high_widths = [b - a for a, b in pairwise(high)]
    low_misses: dict[int, list[float]] = {}
    high_misses: dict[int, list[float]] = {}
    areas: list[tuple[int, int, float, float]] = []
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            if r not in low_misses:
                low_misses[r] = [1.0 - _power(s, r) for s in low]
                high_misses[r] = [1.0 - _power(s, r) for s in high]
            fp = _area([1.0 - _power(m, b) for m in low_misses[r]], low_widths)
            fn = _area([_power(m, b) for m in high_misses[r]], high_widths)
            areas.append((b, r, fp, fn))
    return tuple(areas)


#: What :func:`optimal_bands` chooses for 84 min-hashes and a false-negative weight of 0.95
#: (the defaults), by threshold in steps of 0.05: integrating the curves takes about 0.1 s,
#: which every command that opens such a store would pay (``tests/core/test_band_choice.py``
#: integrates them again).
DEFAULT_CHOICES: dict[float, tuple[int, int]] = {
    0.05: (84, 1), 0.1: (44, 1), 0.15: (28, 1), 0.2: (20, 1), 0.25: (42, 2), 0.3: (41, 2),
    0.35: (29, 2), 0.4: (22, 2), 0.45: (28, 3), 0.5: (26, 3), 0.55: (19, 3), 0.6: (21, 4),
    0.65: (17, 4), 0.7: (16, 5), 0.75: (14, 6), 0.8: (12, 7), 0.85: (9, 9), 0.9: (7, 12),
    0.95: (4, 18),
}  # fmt: skip


@lru_cache(maxsize=64)
def optimal_bands(threshold: float, num_perm: int, false_negative_weight: float) -> tuple[int, int]:
    """Choose ``(b, r)`` with ``b * r <= num_perm`` minimizing the weighted error areas.

    The probability that a pair of Jaccard ``s`` shares a band is ``1 - (1 - s**r)**b``; the
    false-positive area is its integral over ``[0, threshold]``, the false-negative area the
    integral of its complement over ``[threshold, 1]`` (as datasketch's MinHashLSH chooses).
    The choices at the default ``num_perm`` and ``false_negative_weight`` are
    :data:`DEFAULT_CHOICES`.
    """
    if (num_perm, false_negative_weight) == (84, 0.95) and threshold in DEFAULT_CHOICES:
        return DEFAULT_CHOICES[threshold]
    return integrated_bands(threshold, num_perm, false_negative_weight)


def integrated_bands(
    threshold: float, num_perm: int, false_negative_weight: float
) -> tuple[int, int]:
    """:func:`optimal_bands` by integrating the error curves (:func:`band_error_areas`)."""
    best: tuple[float, int, int] = (math.inf, 0, 0)
    for b, r, fp, fn in band_error_areas(threshold, num_perm):
        error = fp * (1.0 - false_negative_weight) + fn * false_negative_weight
        if error < best[0]:
            best = (error, b, r)
    return best[1], best[2]
