"""What a reviewer sees and says: explanations of a pair's match, verdicts on pairs.

:class:`Explanation` is computed from what the store holds (exact Jaccard and containment over
the stored shingle sets, the SimHashes' Hamming distance, the metadata score, the keys the two
documents share, their stored edge and any verdict) and, when both texts are at hand (kept by a
store made with ``keep_text``, or given by the caller), their word alignment.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dedup_store.core.params import FingerprintParams
from dedup_store.core.simhash import hamming
from dedup_store.db.reports.explain import StoredDocument, StoredPair
from dedup_store.db.write.reclustering import CutEdge
from dedup_store.db.write.verdicts import VerdictRow
from dedup_store.results import Method

if TYPE_CHECKING:
    from dedup_store.core.align import Alignment

#: Words of each side an explanation aligns at most (the rest is reported as truncated).
EXPLAIN_MAX_WORDS = 400_000
_MASK64 = (1 << 64) - 1


class Verdict(enum.StrEnum):
    """A reviewer's decision on a pair."""

    DUPLICATE = "duplicate"
    NOT_DUPLICATE = "not_duplicate"


@dataclasses.dataclass(frozen=True)
class Review:
    """A stored verdict: the pair (``a < b`` as the server orders text), the decision, the
    reviewer's note and name, when it was made, and the match edges it cut to part the pair
    (a ``not_duplicate`` verdict on a pair that edges join; weakest first)."""

    a: str
    b: str
    verdict: Verdict
    note: str | None
    reviewer: str | None
    decided_at: dt.datetime
    cut: tuple[CutEdge, ...] = ()

    @classmethod
    def of(cls, row: VerdictRow, cut: Iterable[CutEdge] = ()) -> Review:
        """The verdict as the caller sees it, with the edges it cut (those of any verdict may
        be given: the verdict's own are kept)."""
        own = tuple(c for c in cut if (c.verdict_a, c.verdict_b) == (row.a, row.b))
        return cls(row.a, row.b, Verdict(row.verdict), row.note, row.reviewer, row.decided_at, own)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            **fields,
            "verdict": self.verdict.value,
            "decided_at": self.decided_at.isoformat(),
            "cut": [{"a": c.a, "b": c.b, "method": c.method, "score": c.score} for c in self.cut],
        }


@dataclasses.dataclass(frozen=True)
class Explanation:
    """Why two stored documents match, or do not.

    Attributes:
        a, b: the documents' ids, as asked.
        method: the method of their stored edge; ``None`` when the store holds none.
        jaccard: exact Jaccard similarity of the stored shingle sets.
        containment_a: share of ``a``'s shingles found in ``b`` (``a`` as an excerpt of ``b``).
        containment_b: share of ``b``'s shingles found in ``a``.
        shingles_a, shingles_b, shared_shingles: the sizes of the sets and of their intersection.
        hamming: Hamming distance of the two SimHashes.
        meta_score: agreement of the metadata signatures (``None`` unless both have one).
        score: the combined score.
        exact: both have the same canonical text (one exact group).
        shared_band_slots, shared_block_slots: the MinHash band and SimHash block key slots
            whose keys the two share (how the lookup finds the pair).
        shared_excerpt_keys: excerpt keys both hold.
        same_cluster: both are in one cluster.
        verdict: a reviewer's verdict on the pair, if any.
        alignment: the word alignment of the two texts; ``None`` without them.
    """

    a: str
    b: str
    method: Method | None
    jaccard: float
    containment_a: float
    containment_b: float
    shingles_a: int
    shingles_b: int
    shared_shingles: int
    hamming: int
    meta_score: float | None
    score: float
    exact: bool
    shared_band_slots: list[int]
    shared_block_slots: list[int]
    shared_excerpt_keys: int
    same_cluster: bool
    verdict: Review | None
    alignment: Alignment | None

    @property
    def found_by(self) -> list[str]:
        """The key kinds through which the store finds the pair."""
        kinds = [
            ("exact", self.exact),
            ("minhash bands", bool(self.shared_band_slots)),
            ("simhash blocks", bool(self.shared_block_slots)),
            ("excerpt keys", self.shared_excerpt_keys > 0),
        ]
        return [name for name, found in kinds if found]

    def scores(self) -> dict[str, Any]:
        """The figures of the explanation, without the alignment."""
        fields = {f.name for f in dataclasses.fields(self)} - {"verdict", "alignment"}
        values = {name: getattr(self, name) for name in sorted(fields)}
        values["method"] = None if self.method is None else self.method.value
        return {**values, "found_by": self.found_by}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            **self.scores(),
            "verdict": None if self.verdict is None else self.verdict.to_dict(),
            "alignment": None if self.alignment is None else self.alignment.to_dict(),
        }


def given_text_is_stored(stored: StoredDocument, text: str, params: FingerprintParams) -> bool:
    """Whether ``text`` has the stored document's shingles (its own text, or one that differs
    only in what canonicalization drops: markup, case, punctuation, spacing)."""
    from dedup_store.core.fingerprint import fingerprint
    from dedup_store.db.schema.encoding import top32

    given = np.unique(top32(fingerprint(text, params).shingles))
    return bool(np.array_equal(given, np.unique(stored.shingles)))


def explain_pair(
    stored: StoredPair,
    params: FingerprintParams,
    verdict: VerdictRow | None,
    texts: tuple[str | None, str | None],
) -> Explanation:
    """The explanation of ``stored`` (:func:`dedup_store.db.reports.explain.stored_pair`), with the
    two texts (either ``None``: no alignment)."""
    a, b = stored.a, stored.b
    set_a, set_b = np.unique(a.shingles), np.unique(b.shingles)
    shared = int(np.intersect1d(set_a, set_b, assume_unique=True).size)
    union = set_a.size + set_b.size - shared
    meta = _meta_score(a.meta_signature, b.meta_signature)
    jaccard = shared / union if union else 1.0
    score = (
        jaccard if meta is None else (1 - params.meta_weight) * jaccard + params.meta_weight * meta
    )
    return Explanation(
        a=a.external_id,
        b=b.external_id,
        method=None if stored.edge is None else Method(stored.edge[0]),
        jaccard=jaccard,
        containment_a=shared / set_a.size if set_a.size else 0.0,
        containment_b=shared / set_b.size if set_b.size else 0.0,
        shingles_a=int(set_a.size),
        shingles_b=int(set_b.size),
        shared_shingles=shared,
        hamming=hamming(a.simhash & _MASK64, b.simhash & _MASK64),
        meta_score=meta,
        score=score,
        exact=a.exact_hash == b.exact_hash,
        shared_band_slots=stored.shared_band_slots,
        shared_block_slots=stored.shared_block_slots,
        shared_excerpt_keys=stored.excerpt_keys,
        same_cluster=a.cluster_id == b.cluster_id,
        verdict=None if verdict is None else Review.of(verdict),
        alignment=_alignment(texts, params),
    )


def _meta_score(a: list[int] | None, b: list[int] | None) -> float | None:
    if a is None or b is None or not len(a):
        return None
    return float(np.mean(np.asarray(a) == np.asarray(b)))


def _alignment(texts: tuple[str | None, str | None], params: FingerprintParams) -> Alignment | None:
    text_a, text_b = texts
    if text_a is None or text_b is None:
        return None
    from dedup_store.core.align import align_texts

    return align_texts(text_a, text_b, html=params.html, max_words=EXPLAIN_MAX_WORDS)
