"""The report's data: items (clusters, and pairs across clusters) as JSON, cut into pages, with
the pairs' texts kept within the file's byte budget.

Each page is one inert ``<script type="application/json">`` block that the browser parses only
when the page is shown. Beside the pages the report carries an index (per item: its kind, key,
page, size, and the method and similarity of each of its pairs, so that filters run over the
whole report without parsing the pages) and the external ids of each item (parsed on the first
search).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dedup_store.review.report.model import METHODS, Member, ReportCluster, ReportItem, ReportPair

#: Bytes a pair and a member take in their page and in the index, besides their external ids
#: (each pair's ids appear up to four times, a member's twice).
PAIR_BASE = 160
MEMBER_BASE = 64
#: The external id length assumed before any is seen, and the least assumed after.
_ID_CHARS, _MIN_ID_CHARS = 40, 16
#: The view of a pair's texts (:func:`dedup_store.review.report.diff.pair_diff`), ``None``: none.
View = dict[str, Any] | None
_METHOD_CODES = {method: code for code, method in enumerate(METHODS)}


def dumps(value: Any) -> str:
    """``value`` as compact JSON that is safe inside a ``<script>`` element (no ``<``)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c")


def block(name: str, body: str) -> str:
    """An inert data block of the report: ``body`` (JSON) as a ``<script>`` element."""
    return f'<script type="application/json" id="{name}">{body}</script>\n'


@dataclasses.dataclass
class Budget:
    """The bytes the pairs' texts may still take.

    A pair's texts are kept when the file, with them, still leaves room for the scores and
    members of every pair and member to come; so the file stays within ``limit`` unless the
    report without any text is larger. Once a pair's texts do not fit, no later pair's do (a
    reader finds texts up to one point of the report, not here and there after it).

    Attributes:
        limit: the file's byte budget.
        pairs, members: pairs and members the report will hold in all.
        used: bytes written or promised so far (the fixed parts of the file included).
    """

    limit: int
    pairs: int
    members: int
    used: int = 0
    pairs_seen: int = 0
    members_seen: int = 0
    id_chars: int = 0
    ids_seen: int = 0
    full: bool = False

    def reserve(self) -> int:
        """Bytes kept for the pairs and members still to come."""
        chars = self.id_chars // self.ids_seen if self.ids_seen else _ID_CHARS
        chars = max(chars, _MIN_ID_CHARS)
        pairs_left = max(0, self.pairs - self.pairs_seen)
        members_left = max(0, self.members - self.members_seen)
        return pairs_left * (PAIR_BASE + 4 * chars) + members_left * (MEMBER_BASE + 2 * chars)

    def allows(self, size: int) -> bool:
        """Whether ``size`` more bytes of text fit (never again once they did not)."""
        self.full = self.full or self.used + size + self.reserve() > self.limit
        return not self.full

    def count_ids(self, *ids: str) -> None:
        """Learn the length of external ids."""
        self.id_chars += sum(len(i) for i in ids)
        self.ids_seen += len(ids)


@dataclasses.dataclass
class PageBuilder:
    """Turns items into pages and the index.

    Args:
        budget: the byte budget of the texts.
        diff: makes the side-by-side view of two texts (see
            :func:`dedup_store.review.report.diff.pair_diff`); ``None`` when the store keeps no
            texts.
        max_words: words of each text the view covers at most.
        page_items: most items per page.
        page_bytes: a page closes once it holds this many bytes.
    """

    budget: Budget
    diff: Callable[[str, str], dict[str, Any]] | None
    max_words: int
    page_items: int = 50
    page_bytes: int = 2 << 20
    index: list[list[Any]] = dataclasses.field(default_factory=list)
    ids: list[list[str]] = dataclasses.field(default_factory=list)
    pages: int = 0
    clusters: int = 0
    pairs: int = 0
    with_texts: int = 0
    over_budget: int = 0
    _page: list[str] = dataclasses.field(default_factory=list)
    _page_bytes: int = 0
    _text_bytes: int = 0
    _views: Iterator[View] | None = None

    def add(self, item: ReportItem, views: Sequence[View] | None = None) -> str | None:
        """Add ``item``; returns a finished page's JSON when this item closed one.

        Args:
            item: a cluster, or a pair across clusters.
            views: the views of its pairs made beforehand (``None`` for a pair not aligned);
                without them the pairs are aligned here.
        """
        self._text_bytes = 0
        self._views = None if views is None else iter(views)
        entry = self._cluster(item) if isinstance(item, ReportCluster) else self._pair_item(item)
        # the entry in its page and its rows in the index and ids, each with its comma
        size = len(entry.encode()) + len(dumps(self.index[-1])) + len(dumps(self.ids[-1])) + 3
        if not self._page:
            size += len(block(f"page-{self.pages}", "[]"))
        # the texts were counted as they were taken; the pairs and members leave the reserve
        self.budget.used += size - self._text_bytes
        self.budget.pairs_seen += len(self.index[-1][4]) // 2
        self.budget.members_seen += len(self.ids[-1]) if self.index[-1][0] == 0 else 0
        self._page.append(entry)
        self._page_bytes += size
        if len(self._page) >= self.page_items or self._page_bytes >= self.page_bytes:
            return self.finish()
        return None

    def finish(self) -> str | None:
        """The JSON of the page being filled, if it holds anything; the next page starts."""
        if not self._page:
            return None
        page = "[" + ",".join(self._page) + "]"
        self._page, self._page_bytes = [], 0
        self.pages += 1
        return page

    def index_json(self, **notes: Any) -> str:
        """The index: the methods, ``notes``, and per item ``[kind, key, page, size, [method,
        Jaccard in thousandths or -1, ...]]`` (kind 0: a cluster, its id the key; kind 1: a
        pair across clusters, no key)."""
        return dumps({"methods": list(METHODS), **notes, "items": self.index})

    def ids_json(self) -> str:
        """The external ids of each item, in the index's order."""
        return dumps(self.ids)

    def _cluster(self, cluster: ReportCluster) -> str:
        self.clusters += 1
        self.budget.count_ids(*(m.external_id for m in cluster.members))
        pairs = [self._pair(p) for p in cluster.pairs]
        self._index(0, cluster.cluster_id, cluster.size, cluster.pairs)
        self.ids.append([m.external_id for m in cluster.members])
        entry = {
            "k": "c",
            "id": cluster.cluster_id,
            "canonical": cluster.canonical,
            "chosen": cluster.chosen,
            "members": [_member(m) for m in cluster.members],
            "pairs": pairs,
        }
        return dumps(entry)

    def _pair_item(self, pair: ReportPair) -> str:
        self._index(1, None, 2, (pair,))
        self.ids.append([pair.a, pair.b])
        return dumps({"k": "p", **self._pair(pair), "ca": pair.cluster_a, "cb": pair.cluster_b})

    def _index(self, kind: int, key: int | None, size: int, pairs: tuple[ReportPair, ...]) -> None:
        flat: list[int] = []
        for pair in pairs:  # a pair without an edge has no similarity: -1
            similarity = -1 if pair.jaccard is None else round(pair.jaccard * 1000)
            flat += [_METHOD_CODES[pair.method], similarity]
        self.index.append([kind, key, self.pages, size, flat])

    def _pair(self, pair: ReportPair) -> dict[str, Any]:
        self.pairs += 1
        self.budget.count_ids(pair.a, pair.b)
        entry: dict[str, Any] = {
            "a": pair.a,
            "b": pair.b,
            "m": pair.method,
            "j": pair.jaccard,
            "c": pair.containment,
            "h": pair.hamming,
            "ms": pair.meta_score,
            "s": pair.score,
            "v": _verdict(pair),
        }
        if pair.cut_by is not None:  # a verdict cut this edge
            entry["x"] = list(pair.cut_by)
        entry.update(self._texts(pair))
        return entry

    def wanted(self, pair: ReportPair) -> bool:
        """Whether the pair's texts are worth aligning: both are there, and a view of them
        could still fit in the budget."""
        if self.diff is None or pair.text_a is None or pair.text_b is None:
            return False
        # the view holds at least the shorter text, or its first max_words words (of a
        # letter and a space at least)
        return self.budget.allows(min(len(pair.text_a), len(pair.text_b), 2 * self.max_words))

    def _texts(self, pair: ReportPair) -> dict[str, Any]:
        """The side-by-side view of the pair, or why there is none."""
        given = None if self._views is None else next(self._views)  # one for every pair
        if self.diff is None:
            return {"t": "none"}
        if pair.text_a is None or pair.text_b is None:
            return {"t": "missing"}
        view = given
        if self._views is None and self.wanted(pair):
            view = self.diff(pair.text_a, pair.text_b)
        if view is None:
            self.over_budget += 1
            return {"t": "budget"}
        segments = dumps(view["segments"])
        if not self.budget.allows(len(segments.encode())):
            self.over_budget += 1
            return {"t": "budget"}
        self.with_texts += 1
        self.budget.used += len(segments.encode())
        self._text_bytes += len(segments.encode())
        return {
            "t": "text",
            "d": view["segments"],
            "tr": view["truncated"],
            "wa": view["words_a"],
            "wb": view["words_b"],
            "sh": view["shared"],
        }


def _member(member: Member) -> list[Any]:
    return [
        member.external_id,
        _when(member.created_at),
        member.length,
        member.words,
        1 if member.canonical else 0,
    ]


def _verdict(pair: ReportPair) -> list[Any] | None:
    v = pair.verdict
    if v is None:
        return None
    cut = [[list(c) for c in v.cut]] if v.cut else []
    return [v.verdict, v.note, v.reviewer, _when(v.decided_at), *cut]


def _when(moment: dt.datetime) -> str:
    """``moment`` in UTC, to the minute."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")
