"""The store's settings that are not fingerprint parameters (whether it keeps texts, the rule
that picks each cluster's canonical document, which may change at any time), and the documents
a person declared canonical.

The canonical document of each cluster is computed by the view ``cluster_canonical``: the
member a person declared most recently, else the one the rule picks (``oldest``: the first
stored; ``longest``: the longest canonical text; ``meta:FIELD``: the largest value of that
field of ``meta``, ``meta:FIELD:min`` the smallest; ties go to the oldest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from sqlalchemy import Connection, text

from dedup_store.db.schema.names import qualified
from dedup_store.errors import InvalidParamsError

RULES = ("oldest", "longest")


@dataclasses.dataclass(frozen=True)
class StoreSettings:
    """A store's settings.

    Attributes:
        keep_text: documents are stored with their original text (``documents.body``).
        canonical_rule: the rule that picks each cluster's canonical document.
    """

    keep_text: bool = False
    canonical_rule: str = "oldest"


def check_rule(rule: str) -> str:
    """``rule`` when it is a canonical rule, else :class:`InvalidParamsError`."""
    if rule in RULES:
        return rule
    parts = rule.split(":")
    field_rule = parts[0] == "meta" and len(parts) in (2, 3) and bool(parts[1].strip())
    if field_rule and (len(parts) == 2 or parts[2] in ("min", "max")):
        return rule if parts[-1] != "max" else f"meta:{parts[1]}"
    raise InvalidParamsError(
        f"unknown canonical rule {rule!r}: use oldest, longest, meta:FIELD (largest value) "
        "or meta:FIELD:min (smallest value)"
    )


def load(conn: Connection, schema: str) -> StoreSettings:
    """The store's settings."""
    row = conn.execute(
        text(f"SELECT keep_text, canonical_rule FROM {qualified(schema, 'settings')} WHERE id = 1")
    ).first()
    return StoreSettings() if row is None else StoreSettings(bool(row[0]), str(row[1]))


def save(conn: Connection, schema: str, settings: StoreSettings) -> None:
    """Record the store's settings."""
    conn.execute(
        text(
            f"INSERT INTO {qualified(schema, 'settings')} (id, keep_text, canonical_rule) "
            "VALUES (1, :keep, :rule) ON CONFLICT (id) DO UPDATE "
            "SET keep_text = excluded.keep_text, canonical_rule = excluded.canonical_rule"
        ),
        {"keep": settings.keep_text, "rule": check_rule(settings.canonical_rule)},
    )


def choose_canonical(conn: Connection, schema: str, external_id: str, reviewer: str | None) -> None:
    """Declare document ``external_id`` the canonical one of its cluster."""
    conn.execute(
        text(
            f"INSERT INTO {qualified(schema, 'canonical_choices')} "
            "(external_id, reviewer, chosen_at) "
            "VALUES (:id, :reviewer, clock_timestamp()) ON CONFLICT (external_id) DO UPDATE "
            "SET reviewer = excluded.reviewer, chosen_at = clock_timestamp()"
        ),
        {"id": external_id, "reviewer": reviewer},
    )


def canonical_of(conn: Connection, schema: str, labels: Iterable[int]) -> dict[int, str]:
    """``{cluster id: external id of its canonical document}``."""
    rows = conn.execute(
        text(
            f"SELECT cluster_id, canonical FROM {qualified(schema, 'cluster_canonical')} "
            "WHERE cluster_id = ANY(:labels)"
        ),
        {"labels": list(labels)},
    )
    return {int(row[0]): str(row[1]) for row in rows}
