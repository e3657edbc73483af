"""What the store holds of a pair of documents, for an explanation of their match: both
documents' fingerprints and texts, their stored edge, the band and block keys each indexes,
and the excerpt keys they share."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from dedup_store.core.params import FingerprintParams
from dedup_store.db.rows import key_rows
from dedup_store.db.schema.ddl import key_slots
from dedup_store.db.schema.encoding import BAND
from dedup_store.db.schema.names import qualified
from dedup_store.errors import UnknownDocumentError


@dataclasses.dataclass(frozen=True)
class StoredDocument:
    """One document's stored fingerprint (``first``: the first of its exact group, which holds
    the group's keys)."""

    id: int
    external_id: str
    first: int
    cluster_id: int
    exact_hash: bytes
    simhash: int
    shingles: list[int]
    meta_signature: list[int] | None
    body: str | None


@dataclasses.dataclass(frozen=True)
class StoredPair:
    """Both documents, their edge (``method, jaccard, containment, hamming, meta_score``; ``None``
    without one), the band and block key slots whose keys they share, and their shared excerpt
    keys."""

    a: StoredDocument
    b: StoredDocument
    edge: tuple[Any, ...] | None
    shared_band_slots: list[int]
    shared_block_slots: list[int]
    excerpt_keys: int


#: The columns of a :class:`StoredDocument`, named as its fields.
_DOCUMENT = (
    "id, external_id, coalesce(exact_of, id) AS first, cluster_id, exact_hash, simhash, "
    "shingles, meta_signature, body"
)


def stored_pair(
    conn: Connection, schema: str, params: FingerprintParams, a: str, b: str
) -> StoredPair:
    """What the store holds of documents ``a`` and ``b`` (external ids).

    Raises:
        UnknownDocumentError: either is not stored.
    """
    s = qualified(schema)
    rows = conn.execute(
        text(f"SELECT {_DOCUMENT} FROM {s}.documents WHERE external_id = ANY(:ids)"),
        {"ids": [a, b]},
    ).all()
    found = {row.external_id: StoredDocument(**row._mapping) for row in rows}
    for external_id in (a, b):
        if external_id not in found:
            raise UnknownDocumentError(external_id)
    first, second = found[a], found[b]
    edge = conn.execute(
        text(
            f"SELECT method, jaccard, containment, hamming, meta_score FROM {s}.edges "
            "WHERE a = least(:x, :y) AND b = greatest(:x, :y)"
        ),
        {"x": first.id, "y": second.id},
    ).first()
    bands, blocks = _shared_slots(conn, schema, params, first.first, second.first)
    return StoredPair(
        first, second, None if edge is None else tuple(edge), bands, blocks,
        _shared_excerpt_keys(conn, schema, first, second),
    )  # fmt: skip


def _shared_slots(
    conn: Connection, schema: str, params: FingerprintParams, x: int, y: int
) -> tuple[list[int], list[int]]:
    """The band slots and the block slots whose keys documents ``x`` and ``y`` share."""
    slots = key_slots(params)
    if x == y:  # one exact group: every key
        return (
            [slot for kind, _, slot in slots if kind == BAND],
            [slot for kind, _, slot in slots if kind != BAND],
        )
    stored = conn.execute(
        text(
            "SELECT id, signature, simhash, shingle_count FROM "
            f"{qualified(schema, 'documents')} WHERE id = ANY(:ids) AND exact_of IS NULL"
        ),
        {"ids": [x, y]},
    ).all()
    if len(stored) != 2:
        return [], []
    _, bands, blocks = key_rows.stored_keys(params, stored)
    keys = np.concatenate([bands, blocks], axis=1).tolist()
    rows = {int(row[0]): keys[i] for i, row in enumerate(stored)}
    shared = [
        (kind, slot)
        for (kind, _, slot), kx, ky in zip(slots, rows[x], rows[y], strict=True)
        if kx == ky
    ]
    return (
        [slot for kind, slot in shared if kind == BAND],
        [slot for kind, slot in shared if kind != BAND],
    )


def _shared_excerpt_keys(
    conn: Connection, schema: str, a: StoredDocument, b: StoredDocument
) -> int:
    """The excerpt keys (sample keys, held by the first of each exact group) both share."""
    if a.first == b.first:
        return 0
    s = qualified(schema)
    return int(
        conn.execute(
            text(f"""
            SELECT count(*) FROM (
                SELECT unnest(shingles) AS key FROM {s}.documents WHERE id = :x
                INTERSECT SELECT unnest(shingles) FROM {s}.documents WHERE id = :y
            ) k
            WHERE EXISTS (SELECT 1 FROM {s}.sample_keys t WHERE t.key = k.key AND t.doc_id = :x)
              AND EXISTS (SELECT 1 FROM {s}.sample_keys t WHERE t.key = k.key AND t.doc_id = :y)
            """),
            {"x": a.first, "y": b.first},
        ).scalar_one()
    )
