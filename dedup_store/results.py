"""Plain value types returned by :class:`dedup_store.DedupStore` (no database code here)."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, overload


class Status(enum.StrEnum):
    """What adding (or checking) a document found."""

    NEW = "new"
    EXACT_DUPLICATE = "exact_duplicate"
    NEAR_DUPLICATE = "near_duplicate"
    SKIPPED = "skipped"
    """The external id was already stored and ``update`` was not asked for."""
    UPDATED = "updated"
    """The external id was already stored and its text was replaced (``update=True``)."""
    EXCERPT = "excerpt"
    """Only excerpt matches: it contains, or is contained in, a stored document without being
    a near-duplicate of it (reported, but not merged into its cluster by default)."""

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, methods: Iterable[str], merging: Collection[str]) -> Status:
        """The status of a document whose matches have ``methods``.

        Args:
            methods: the method of each match.
            merging: the methods whose matches merge clusters in the store.
        """
        found = set(methods)
        if "exact" in found:
            return cls.EXACT_DUPLICATE
        if found & set(merging):
            return cls.NEAR_DUPLICATE
        return cls.EXCERPT if found else cls.NEW


class Method(enum.StrEnum):
    """How a match was found and verified, in the order of preference: a pair that several
    methods accept is reported with the first, and matches are listed in this order.

    The scoring statement (``dedup_store.db.matches.scoring``) and the ``edges`` table's CHECK
    constraint are written from this enum (a test says they agree).
    """

    EXACT = "exact"
    MINHASH = "minhash"
    SIMHASH = "simhash"
    CONTAINMENT = "containment"

    def __str__(self) -> str:
        return self.value

    @property
    def rank(self) -> int:
        """Position in the order of preference (0: exact)."""
        return _METHOD_RANK[self]


_METHOD_RANK = {method: rank for rank, method in enumerate(Method)}
#: The methods by value: a dict lookup, where ``Method(value)`` costs a call into ``enum``.
_METHOD_OF = {method.value: method for method in Method}


@dataclasses.dataclass(frozen=True)
class Document:
    """One input record.

    Attributes:
        id: the caller's external id (unique in the store).
        text: the document text (plain text or HTML).
        meta: JSON-serializable metadata kept with the document.
        source: where the record came from (file name), for error messages.
        line: line (or record) number in ``source``.
    """

    id: str
    text: str
    meta: Mapping[str, Any] | None = None
    source: str | None = None
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class Scores:
    """The scores of a verified pair of documents, shared by :class:`Match`, :class:`Pair` and
    :class:`MatchRow`: each is the fields that name its pair, then these.

    Attributes:
        jaccard: Jaccard similarity of the shingle sets (exact or estimated, per the store's
            ``verify`` mode).
        containment: share of the smaller document's shingles inside the larger one.
        hamming: Hamming distance of the two SimHashes.
        meta_score: agreement of the signatures of the two documents' metadata sets (an
            estimate of their Jaccard); ``None`` unless both have one (``meta_fields``).
        score: the combined score, ``(1 - meta_weight) * jaccard + meta_weight *
            meta_score``, or ``jaccard`` without a ``meta_score``.
    """

    jaccard: float
    containment: float
    hamming: int
    meta_score: float | None
    score: float


# A dataclass's fields are its bases' in reverse order of the MRO, then its own: a class
# ``C(Scores, Head)`` has the fields of ``Head``, then the scores, then those of ``C``.


@dataclasses.dataclass(frozen=True)
class _Matched:
    external_id: str
    method: Method


@dataclasses.dataclass(frozen=True)
class Match(Scores, _Matched):
    """A stored document that matches another one, with the :class:`Scores` of the pair.

    Attributes:
        external_id: the matching document's id.
        method: the first method that verified the pair (exact before minhash before simhash
            before containment).
    """

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {  # dataclasses.asdict's, written out: an answer has many of these
            "external_id": self.external_id,
            "method": self.method.value,
            "jaccard": self.jaccard,
            "containment": self.containment,
            "hamming": self.hamming,
            "meta_score": self.meta_score,
            "score": self.score,
        }


@dataclasses.dataclass(frozen=True)
class AddResult:
    """The outcome of adding one document.

    Attributes:
        external_id: the document's id.
        status: new, exact or near duplicate, skipped or updated.
        matches: the stored documents it matched, best first.
        cluster_id: the id of its cluster (the internal id of its representative member).
    """

    external_id: str
    status: Status
    matches: list[Match]
    cluster_id: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "id": self.external_id,
            "status": self.status.value,
            "cluster_id": self.cluster_id,
            "matches": [m.to_dict() for m in self.matches],
        }


Unmade: TypeAlias = "tuple[str, Status, Sequence[MatchRow], int | None]"
"""An :class:`AddResult` not made yet: its external id, status, matches as the store returned
them (:func:`sorted_matches` orders them), and cluster."""


class BatchResults(Sequence[AddResult]):
    """The results of a stored batch, in input order, each made when it is read.

    A record of a large load is mostly a new document without matches: it is kept as an
    external id and a cluster. Those with matches keep their statuses and unsorted matches. So a
    caller that only counts them (:meth:`IngestSummary.count_all`) makes no :class:`AddResult`.

    Args:
        external_ids: each record's id, in input order.
        clusters: each record's cluster, for those not in ``others``.
        others: ``{index: result}`` of the records that are not new documents without matches.
    """

    def __init__(
        self,
        external_ids: Sequence[str],
        clusters: Sequence[int | None],
        others: Mapping[int, Unmade],
    ) -> None:
        self._ids, self._clusters, self._others = external_ids, clusters, others

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> AddResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[AddResult]: ...

    def __getitem__(self, index: int | slice) -> AddResult | list[AddResult]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("result index out of range")
        other = self._others.get(index)
        if other is not None:
            external_id, status, rows, cluster = other
            return AddResult(external_id, status, sorted_matches(rows), cluster)
        return AddResult(self._ids[index], Status.NEW, [], self._clusters[index])

    def __iter__(self) -> Iterator[AddResult]:
        for index in range(len(self)):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"BatchResults({list(self)!r})"

    def status_counts(self) -> collections.Counter[Status]:
        """How many results have each status, without making them."""
        counts = collections.Counter(other[1] for other in self._others.values())
        plain = len(self) - len(self._others)
        if plain:
            counts[Status.NEW] += plain
        return counts


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """What :meth:`DedupStore.check` found for a text (nothing is stored).

    Attributes:
        status: new, exact or near duplicate, or excerpt (as :meth:`DedupStore.add` would say).
        matches: the stored documents it matches, best first.
        cluster_id: the cluster it would join (``None``: a cluster of its own).
    """

    status: Status
    matches: list[Match]
    cluster_id: int | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "status": self.status.value,
            "cluster_id": self.cluster_id,
            "matches": [m.to_dict() for m in self.matches],
        }


@dataclasses.dataclass(frozen=True)
class _Found:
    doc_id: int
    external_id: str
    cluster_id: int
    method: str


@dataclasses.dataclass(frozen=True)
class MatchRow(Scores, _Found):
    """A verified match as the store's statements return it, columns named as its fields:
    stored document ``doc_id`` (of ``cluster_id``) matched ``new_id`` (the document a batch
    added; ``None`` for ``check`` and ``similar``) by ``method``, with the :class:`Scores`.
    """

    new_id: int | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> MatchRow:
        """The match in ``row``, a statement's row read by column name: the columns named as
        the fields (``new_id`` may be missing), others ignored."""
        return cls(**{name: row[name] for name in _MATCH_ROW_FIELDS if name in row})

    @property
    def rank(self) -> tuple[int, float, str]:
        """Sort key, best first: by method, then by decreasing combined score, then by id."""
        return (_METHOD_RANK[_METHOD_OF[self.method]], -self.score, self.external_id)

    def match(self) -> Match:
        """The match as the caller sees it."""
        return Match(
            self.external_id,
            _METHOD_OF[self.method],
            self.jaccard,
            self.containment,
            self.hamming,
            self.meta_score,
            self.score,
        )


_MATCH_ROW_FIELDS = tuple(field.name for field in dataclasses.fields(MatchRow))


def sorted_matches(rows: Iterable[MatchRow]) -> list[Match]:
    """The matches of ``rows``, best first (:attr:`MatchRow.rank`)."""
    return [row.match() for row in sorted(rows, key=lambda r: r.rank)]


def joined_cluster(rows: Iterable[MatchRow], merging: Collection[str]) -> int | None:
    """The cluster a document with matches ``rows`` joins: that of its best merging match."""
    best = min((r for r in rows if r.method in merging), key=lambda r: r.rank, default=None)
    return best.cluster_id if best else None


@dataclasses.dataclass(frozen=True)
class RecordError:
    """A record that could not be added (reported by :meth:`DedupStore.ingest`)."""

    source: str | None
    line: int | None
    external_id: str | None
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}: " if self.source and self.line else ""
        what = f"document {self.external_id!r}: " if self.external_id else ""
        return f"{where}{what}{self.message}"


@dataclasses.dataclass
class IngestSummary:
    """Counts of one :meth:`DedupStore.ingest` run."""

    documents: int = 0
    """Records stored or skipped (bad records aside)."""
    new: int = 0
    exact_duplicates: int = 0
    near_duplicates: int = 0
    """New documents with a merging match (``minhash``, ``simhash``; ``containment`` when the
    store merges excerpts)."""
    skipped: int = 0
    """Known ids, not replaced (and ids repeated in the input)."""
    updated: int = 0
    excerpts: int = 0
    """New documents whose only matches are excerpts."""
    errors: int = 0
    """Bad records (reported, not stored)."""
    clusters: int | None = None
    """Clusters in the store afterwards, single documents included, when counted
    (``ingest(count_clusters=True)``)."""
    duplicate_clusters: int | None = None
    """Of those, the clusters of two documents or more (what ``clusters()`` lists)."""
    seconds: float = 0.0
    bulk: bool = False
    """Whether the run was one bulk load (see :meth:`DedupStore.ingest`)."""
    index_seconds: float = 0.0
    """Of ``seconds``, the time a bulk load spent building the store's lookup indexes."""

    def count(self, result: AddResult) -> None:
        """Add one result to the counts."""
        self.count_all([result])

    def count_all(self, results: Iterable[AddResult]) -> None:
        """Add results to the counts."""
        if isinstance(results, BatchResults):
            counts = results.status_counts()
        else:
            counts = collections.Counter(r.status for r in results)
        for status, number in counts.items():
            field = _STATUS_COUNTS[status]
            setattr(self, field, getattr(self, field) + number)
            self.documents += number

    @property
    def documents_per_second(self) -> float:
        """Records handled per second of the run."""
        return self.documents / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**dataclasses.asdict(self), "documents_per_second": self.documents_per_second}


#: The field of :class:`IngestSummary` that counts each status.
_STATUS_COUNTS = {
    Status.NEW: "new",
    Status.EXACT_DUPLICATE: "exact_duplicates",
    Status.NEAR_DUPLICATE: "near_duplicates",
    Status.SKIPPED: "skipped",
    Status.UPDATED: "updated",
    Status.EXCERPT: "excerpts",
}


@dataclasses.dataclass(frozen=True)
class Cluster:
    """A cluster of near-duplicate documents.

    Attributes:
        cluster_id: internal id of the representative member. A merge keeps the id of the
            larger cluster (of the older one on a tie), a split leaves it to the part that holds
            the representative, and an update that changes nothing keeps everything; it changes
            only when the cluster is merged into a larger one, or its representative is deleted
            or updated with another text or metadata (the rest takes its oldest member's id).
        representative: external id of the member whose internal id is ``cluster_id``.
        members: external ids, oldest first.
        first_seen, last_seen: creation times of the oldest and newest member.
        canonical: external id of the member to point ``rel=canonical`` at: the one a person
            declared, else the one the store's canonical rule picks.
    """

    cluster_id: int
    representative: str
    members: list[str]
    first_seen: dt.datetime
    last_seen: dt.datetime
    canonical: str | None = None

    @property
    def size(self) -> int:
        """Number of members."""
        return len(self.members)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "cluster_id": self.cluster_id,
            "representative": self.representative,
            "canonical": self.canonical,
            "size": self.size,
            "members": self.members,
            "first_seen": self.first_seen.isoformat(),
            "last_seen": self.last_seen.isoformat(),
        }


@dataclasses.dataclass(frozen=True)
class _Ends:
    a: str
    b: str
    method: Method


@dataclasses.dataclass(frozen=True)
class Pair(Scores, _Ends):
    """A stored match edge between two documents (``a`` is the older one), with the
    :class:`Scores` of its ``method``'s verdict.

    Attributes:
        found_at: when the edge was stored.
        excerpt: for an excerpt match (method ``containment``), the id of the smaller document,
            the one contained in the other; ``None`` for other methods.
        verdict: a reviewer's verdict on the pair (``duplicate``, ``not_duplicate``); ``None``
            while undecided.
        via_exact_of: the pair has no stored edge of its own, it is implied through exact
            copies (``DedupStore.pairs(expand=True)``, where every pair has the scores and
            ``found_at`` of the best stored edge between the two documents' exact groups).
    """

    found_at: dt.datetime
    excerpt: str | None = None
    verdict: str | None = None
    via_exact_of: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            **dataclasses.asdict(self),
            "method": self.method.value,
            "found_at": self.found_at.isoformat(),
        }


@dataclasses.dataclass(frozen=True)
class Stats:
    """Counts over the whole store.

    Attributes:
        hottest_excerpt_keys: the five excerpt keys shared by the most documents, named by rank
            and the oldest document holding them (``"#1 in post-001"``), with their document
            counts (one shared by more than ``hot_key_limit`` is boilerplate, ignored by
            lookups).
        hot_keys: per kind (``band``, ``block``), how many keys are hot (their buckets are split
            by secondary keys).
        hottest_keys: the five largest hot buckets, named by rank, kind, slot and their oldest
            document (``"#1 band 3 in post-001"``), with their document counts.
        recent_documents: documents in the recent tier of the key indexes (added since the
            last bulk load or :meth:`~dedup_store.DedupStore.settle`; exact copies included).
        settings: the store's settings (``keep_text``, ``canonical_rule``) and how many
            ``verdicts`` reviewers gave.
        storage: bytes of the store's ``tables`` (with their TOAST) and ``indexes``, and the
            server's ``shared_buffers`` (:func:`~dedup_store.db.server.tuning.memory_note`).
        replicas: with replicas, each one as last seen (``servers``: URL, up, lag in seconds,
            WAL position replayed) and the counts of reads served by replicas and by the
            primary, of replica failures and of replicas skipped for their lag.
    """

    documents: int
    clusters: int
    duplicate_clusters: int
    documents_in_duplicate_clusters: int
    edges: int
    edges_by_method: dict[str, int]
    params: dict[str, Any]
    schema: str
    hottest_excerpt_keys: dict[str, int] = dataclasses.field(default_factory=dict)
    hot_keys: dict[str, int] = dataclasses.field(default_factory=dict)
    hottest_keys: dict[str, int] = dataclasses.field(default_factory=dict)
    recent_documents: int = 0
    settings: dict[str, Any] = dataclasses.field(default_factory=dict)
    storage: dict[str, int] = dataclasses.field(default_factory=dict)
    replicas: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)
