"""The rows of the key tiers' tables (:data:`dedup_store.db.schema.ddl.TIER_TABLES`).

A first document's row holds its band keys and its block keys, one ``bigint`` column per slot.
Both are functions of what ``documents`` keeps of the document, its MinHash signature, its
SimHash and its shingle count (:func:`dedup_store.core.lsh.band_keys`,
:func:`dedup_store.core.fingerprint.document_block_keys`),
so the keys are stored in the tier tables only. A writer takes them from the batch's
fingerprints (:func:`key_rows`); a document that enters a tier after it was written (an exact
copy that takes a deleted first document's place, or every document of a store upgraded from
revision 0007) gets its row computed from its stored signature and SimHash
(:func:`add_stored_keys`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import Connection, text

from dedup_store.core.arrays import I64, U32, U64
from dedup_store.core.fingerprint import document_block_keys
from dedup_store.core.lsh import band_keys
from dedup_store.core.params import FingerprintParams
from dedup_store.db.schema import ddl
from dedup_store.db.schema.encoding import BAND, BLOCK, KEY_COLUMNS
from dedup_store.db.schema.names import qualified, quote
from dedup_store.db.server import binary_copy

#: Documents read per statement when rows are computed from stored fingerprints.
CHUNK = 50_000


def key_columns(params: FingerprintParams) -> tuple[str, ...]:
    """The columns of a tier table of a store with ``params``: the id, then one per slot."""
    return ("id", *(ddl.key_column(column, slot) for _, column, slot in ddl.key_slots(params)))


def key_rows(ids: I64, bands: I64, blocks: I64) -> tuple[tuple[str, ...], bytes]:
    """The columns and binary COPY rows of a tier table for the documents ``ids``, whose band
    and block keys are the rows of ``bands`` and ``blocks``."""
    columns: list[tuple[np.ndarray, str]] = [(ids, ">i8")]
    names = ["id"]
    for kind, matrix in ((BAND, bands), (BLOCK, blocks)):
        for slot in range(1, matrix.shape[1] + 1):
            columns.append((matrix[:, slot - 1], ">i8"))
            names.append(ddl.key_column(KEY_COLUMNS[kind], slot))
    return tuple(names), binary_copy.fixed_prefix(len(columns), columns)


def stored_keys(
    params: FingerprintParams, signatures: U32, simhashes: U64, shingle_counts: I64
) -> tuple[I64, I64]:
    """The band keys and the block keys of documents with the stored ``signatures``,
    ``simhashes`` and ``shingle_counts``."""
    blocks = document_block_keys(simhashes, shingle_counts, params)
    return band_keys(signatures, params), blocks


def add_stored_keys(
    conn: Connection,
    schema: str,
    params: FingerprintParams,
    tier: str,
    after: int = 0,
    through: int | None = None,
    ids: Sequence[int] | None = None,
) -> int:
    """Add to ``tier``'s table the rows of the first documents (not exact copies) with ids in
    ``(after, through]`` (``through`` ``None``: no bound; with ``ids``, only those), computed
    from their stored signatures and SimHashes; returns how many.

    Reads :data:`CHUNK` documents at a time, in id order.
    """
    conditions = ["exact_of IS NULL", "id > :after"]
    conditions += [] if through is None else ["id <= :through"]
    conditions += [] if ids is None else ["id = ANY(:ids)"]
    select = text(
        f"SELECT id, signature, simhash, shingle_count FROM {qualified(schema, 'documents')} "
        f"WHERE {' AND '.join(conditions)} ORDER BY id LIMIT {CHUNK}"
    )
    bound = {"through": through, "ids": None if ids is None else list(ids)}
    added = 0
    while rows := conn.execute(select, {"after": int(after), **bound}).all():
        doc_ids = np.array([row[0] for row in rows], dtype=np.int64)
        signatures = np.array([row[1] for row in rows], dtype=np.int64).astype(np.int32)
        simhashes = np.array([row[2] for row in rows], dtype=np.int64)
        counts = np.array([row[3] for row in rows], dtype=np.int64)
        bands, blocks = stored_keys(
            params, signatures.view(np.uint32), simhashes.view(np.uint64), counts
        )
        names, payload = key_rows(doc_ids, bands, blocks)
        binary_copy.copy_payload(conn, schema, ddl.TIER_TABLES[tier], names, payload)
        added += len(rows)
        after = int(doc_ids[-1])
    return added


def settle_recent(conn: Connection, schema: str, params: FingerprintParams) -> None:
    """Move every row of the recent tier's table into the settled one's, leaving it empty
    (``TRUNCATE``: its indexes are emptied without being read)."""
    names = ", ".join(quote(column) for column in key_columns(params))
    settled, recent = (qualified(schema, ddl.TIER_TABLES[t]) for t in (ddl.SETTLED, ddl.RECENT))
    conn.execute(text(f"INSERT INTO {settled} ({names}) SELECT {names} FROM {recent}"))
    conn.execute(text(f"TRUNCATE {recent}"))


def create_key_tables(conn: Connection, schema: str, params: FingerprintParams) -> None:
    """Create the tier tables of ``params`` if the store lacks them, with the rows of its first
    documents (computed from their stored fingerprints: a store upgraded from revision 0007)."""
    missing = [
        tier
        for tier, table in ddl.TIER_TABLES.items()
        if not conn.execute(
            text("SELECT to_regclass(:t) IS NOT NULL"), {"t": qualified(schema, table)}
        ).scalar_one()
    ]
    if not missing:
        return
    columns = ", ".join(f"{quote(c)} bigint NOT NULL" for c in key_columns(params))
    bound = ddl.settled_through(conn, schema)
    for tier in missing:
        storage = f" WITH ({ddl.RECENT_STORAGE})" if tier == ddl.RECENT else ""
        table = qualified(schema, ddl.TIER_TABLES[tier])
        conn.execute(text(f"CREATE TABLE {table} ({columns}){storage}"))
        if tier == ddl.SETTLED:
            ddl.create_settled_trigger(conn, schema)
            add_stored_keys(conn, schema, params, tier, 0, bound)
        else:
            add_stored_keys(conn, schema, params, tier, bound)
        ddl.create_id_index(conn, schema, tier)
