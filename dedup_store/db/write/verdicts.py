"""A reviewer's verdicts on pairs of documents.

A verdict is kept by the two documents' external ids, ordered by the server (``a < b``), so it
stays in force when either document is deleted and added again or updated. How verdicts shape
the clusters: :mod:`dedup_store.db.write.reclustering`. Verdicts never contradict each other
(:func:`require_consistent`): no pair judged ``not_duplicate`` is joined by a chain of pairs
judged ``duplicate``, as no cut could part it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
from collections import deque
from collections.abc import Iterable, Sequence

from sqlalchemy import Connection, text

from dedup_store.db.schema.names import qualified
from dedup_store.errors import InvalidParamsError

DUPLICATE, NOT_DUPLICATE = "duplicate", "not_duplicate"


@dataclasses.dataclass(frozen=True)
class VerdictRow:
    """A stored verdict: the pair (external ids, ``a < b`` as the server orders text), the
    decision, the reviewer's note and name, and when it was made."""

    a: str
    b: str
    verdict: str
    note: str | None
    reviewer: str | None
    decided_at: dt.datetime


_COLUMNS = "a, b, verdict, note, reviewer, decided_at"


def record(
    conn: Connection,
    schema: str,
    pair: tuple[str, str],
    verdict: str,
    note: str | None,
    reviewer: str | None,
) -> VerdictRow:
    """Store (or replace) the verdict on ``pair``; returns it as stored."""
    row = conn.execute(
        text(
            f"INSERT INTO {qualified(schema, 'verdicts')} AS v ({_COLUMNS}) "
            "VALUES (least(:x, :y), greatest(:x, :y), :verdict, :note, :reviewer, now()) "
            "ON CONFLICT (a, b) DO UPDATE SET verdict = excluded.verdict, note = excluded.note, "
            f"reviewer = excluded.reviewer, decided_at = excluded.decided_at RETURNING {_COLUMNS}"
        ),
        {"x": pair[0], "y": pair[1], "verdict": verdict, "note": note, "reviewer": reviewer},
    ).one()
    return VerdictRow(*row)


def clear(conn: Connection, schema: str, pair: tuple[str, str]) -> bool:
    """Delete the verdict on ``pair``; whether there was one."""
    deleted = conn.execute(
        text(
            f"DELETE FROM {qualified(schema, 'verdicts')} "
            "WHERE a = least(:x, :y) AND b = greatest(:x, :y)"
        ),
        {"x": pair[0], "y": pair[1]},
    )
    return bool(deleted.rowcount)


def of_pair(conn: Connection, schema: str, pair: tuple[str, str]) -> VerdictRow | None:
    """The verdict on ``pair``, if any."""
    row = conn.execute(
        text(
            f"SELECT {_COLUMNS} FROM {qualified(schema, 'verdicts')} "
            "WHERE a = least(:x, :y) AND b = greatest(:x, :y)"
        ),
        {"x": pair[0], "y": pair[1]},
    ).first()
    return None if row is None else VerdictRow(*row)


def all_rows(conn: Connection, schema: str) -> list[VerdictRow]:
    """Every verdict, newest first."""
    rows = conn.execute(
        text(f"SELECT {_COLUMNS} FROM {qualified(schema, 'verdicts')} ORDER BY decided_at DESC")
    )
    return [VerdictRow(*row) for row in rows]


def cluster_labels(conn: Connection, schema: str, external_ids: Iterable[str]) -> set[int]:
    """The clusters of the stored documents among ``external_ids``."""
    labels = conn.execute(
        text(
            f"SELECT cluster_id FROM {qualified(schema, 'documents')} WHERE external_id = ANY(:e)"
        ),
        {"e": list(external_ids)},
    ).scalars()
    return set(labels)


def partners(conn: Connection, schema: str, external_ids: Sequence[str]) -> list[str]:
    """The external ids that verdicts pair with any of ``external_ids``."""
    rows = conn.execute(
        text(
            f"SELECT b FROM {qualified(schema, 'verdicts')} WHERE a = ANY(:e) "
            f"UNION SELECT a FROM {qualified(schema, 'verdicts')} WHERE b = ANY(:e)"
        ),
        {"e": list(external_ids)},
    ).scalars()
    return list(rows)


class ConfirmedChains:
    """The pairs judged ``duplicate``, as a graph of external ids."""

    def __init__(self, rows: Iterable[tuple[str, str, str]]) -> None:
        self.confirmed: dict[str, list[str]] = {}
        for a, b, verdict in rows:
            if verdict == DUPLICATE:
                self.confirmed.setdefault(a, []).append(b)
                self.confirmed.setdefault(b, []).append(a)

    def chain(self, a: str, b: str) -> list[str] | None:
        """The shortest chain of confirmed pairs from ``a`` to ``b``, if any."""
        before: dict[str, str] = {a: a}
        queue = deque([a])
        while queue:
            node = queue.popleft()
            if node == b:
                chain = [b]
                while chain[-1] != a:
                    chain.append(before[chain[-1]])
                return chain[::-1]
            for other in self.confirmed.get(node, ()):
                if other not in before:
                    before[other] = node
                    queue.append(other)
        return None


def _verdict_triples(conn: Connection, schema: str) -> list[tuple[str, str, str]]:
    rows = conn.execute(
        text(f"SELECT a, b, verdict FROM {qualified(schema, 'verdicts')} ORDER BY a, b")
    )
    return [(str(a), str(b), str(verdict)) for a, b, verdict in rows]


def confirmed_chains(conn: Connection, schema: str) -> ConfirmedChains:
    """The store's pairs judged ``duplicate``, to follow chains through."""
    return ConfirmedChains(_verdict_triples(conn, schema))


def require_consistent(conn: Connection, schema: str, pair: tuple[str, str]) -> None:
    """Refuse the verdict just recorded on ``pair`` when it contradicts others: a pair judged
    ``not_duplicate`` that a chain of pairs judged ``duplicate`` joins.

    Raises:
        InvalidParamsError: naming the pair and the chain (clear one of them first).
    """
    rows = _verdict_triples(conn, schema)
    chains = ConfirmedChains(rows)
    for a, b, verdict in rows:
        if verdict != NOT_DUPLICATE:
            continue
        chain = chains.chain(a, b)
        if chain is not None and (pair[0] in chain or pair[1] in chain):
            links = ", ".join(f"{x} = {y}" for x, y in itertools.pairwise(chain))
            raise InvalidParamsError(
                f"{a!r} and {b!r} are judged not duplicates, but the duplicate verdicts "
                f"{links} join them; clear one of those verdicts first"
            )
