"""What a review report shows: plain values, read from the store or made by hand (no database
code here)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

#: The methods of stored edges, in the order the report lists them; ``confirmed`` is a pair a
#: person declared a duplicate that no fingerprint matched.
METHODS = ("exact", "minhash", "simhash", "containment", "confirmed")


@dataclasses.dataclass(frozen=True)
class Member:
    """A document of a cluster.

    Attributes:
        external_id: the caller's id.
        created_at: when it was stored.
        length: characters of its canonical text.
        words: words of its canonical text.
        canonical: whether it is the canonical document of its cluster.
    """

    external_id: str
    created_at: dt.datetime
    length: int
    words: int
    canonical: bool = False


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A person's decision on a pair.

    Attributes:
        verdict: ``duplicate`` or ``not_duplicate``.
        note, reviewer: as given with the decision.
        decided_at: when it was recorded.
        cut: the pairs of documents whose edges the verdict cut to part the two.
    """

    verdict: str
    note: str | None
    reviewer: str | None
    decided_at: dt.datetime
    cut: tuple[tuple[str, str], ...] = ()


@dataclasses.dataclass(frozen=True)
class ReportPair:
    """A pair of documents: a stored edge, or a pair a person confirmed without one.

    Attributes:
        a, b: external ids, ``a`` the older document.
        method: one of :data:`METHODS`.
        jaccard, containment, hamming, meta_score, score: the edge's scores (``None`` for a
            confirmed pair without an edge; ``meta_score`` ``None`` without metadata sets).
        verdict: the decision on the pair, ``None`` while undecided.
        text_a, text_b: the original texts, ``None`` when the store does not keep them.
        cluster_a, cluster_b: the clusters of the two documents (different for a pair that
            does not merge: an excerpt, or a pair declared not a duplicate).
        cut_by: the pair of the verdict that cut this edge, if one did.
    """

    a: str
    b: str
    method: str
    jaccard: float | None
    containment: float | None
    hamming: int | None
    meta_score: float | None
    score: float | None
    verdict: Verdict | None = None
    text_a: str | None = None
    text_b: str | None = None
    cluster_a: int | None = None
    cluster_b: int | None = None
    cut_by: tuple[str, str] | None = None


@dataclasses.dataclass(frozen=True)
class ReportCluster:
    """A cluster with its members and the pairs inside it.

    Attributes:
        cluster_id: the cluster's id (as ``dedup-store clusters`` shows it).
        members: oldest first.
        pairs: the pairs whose documents are both members.
        canonical: external id of the canonical member (``None`` when the store names none).
        chosen: how the canonical member was chosen: ``declared`` or the rule's name.
    """

    cluster_id: int
    members: tuple[Member, ...]
    pairs: tuple[ReportPair, ...]
    canonical: str | None = None
    chosen: str | None = None

    @property
    def size(self) -> int:
        """Number of members."""
        return len(self.members)


#: One entry of a report: a cluster, or a pair across two clusters.
ReportItem = ReportCluster | ReportPair


@dataclasses.dataclass(frozen=True)
class Overview:
    """Counts over what the report covers.

    Attributes:
        schema: the store's schema.
        documents: documents covered.
        clusters: clusters of two or more documents.
        documents_in_clusters: documents in those clusters.
        pairs: pairs the report lists (edges, and confirmed pairs without one).
        edges_by_method: stored edges per method.
        cluster_sizes: ``{size: clusters of that size}`` (sizes 2 and up).
        similarity: ``{method: counts per similarity bucket}``, each list of
            :attr:`buckets` counts of Jaccard in ``[i / buckets, (i + 1) / buckets)`` (the last
            bucket includes 1).
        buckets: the number of similarity buckets.
        verdicts: ``{verdict: pairs}``.
        keep_text: whether the store keeps the documents' texts.
        cluster: the document whose cluster alone the report covers (``None``: all of them).
        params: the store's parameters worth showing.
    """

    schema: str
    documents: int
    clusters: int
    documents_in_clusters: int
    pairs: int
    edges_by_method: dict[str, int]
    cluster_sizes: dict[int, int]
    similarity: dict[str, list[int]]
    buckets: int
    verdicts: dict[str, int] = dataclasses.field(default_factory=dict)
    keep_text: bool = False
    cluster: str | None = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class ReportSummary:
    """What a written report holds.

    Attributes:
        path: the file written.
        bytes: its size.
        clusters: clusters in it.
        pairs: pairs in it.
        pairs_with_texts: pairs whose texts are shown side by side.
        pairs_over_budget: pairs that kept their scores but not their texts, as the file
            reached its byte budget.
        pages: pages of the report.
        seconds: time spent reading the store and writing the file.
    """

    path: Path
    bytes: int
    clusters: int
    pairs: int
    pairs_with_texts: int
    pairs_over_budget: int
    pages: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**dataclasses.asdict(self), "path": str(self.path)}
