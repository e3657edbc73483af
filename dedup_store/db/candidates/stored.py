"""What a write finds of the documents stored before it (:class:`StoredKeys`), and the rows a
batch inserts (:func:`new_rows`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import CursorResult, text

from dedup_store.core.arrays import I32, I64, U64
from dedup_store.core.fingerprint import FingerprintBatch
from dedup_store.db.candidates import lookup
from dedup_store.db.candidates.lookup import Found, KeyGroup, KeyQuery, Reach, connection_of
from dedup_store.db.rows import key_rows
from dedup_store.db.rows.batch_rows import HeldRows, NewRows, allocate_ids
from dedup_store.db.schema import encoding
from dedup_store.db.schema.encoding import BAND, StoredShingles, array_literal
from dedup_store.db.schema.names import qualified
from dedup_store.db.server.array_params import Int8Array

_ARRAY_HEADER = 20  # bytes before the elements of a one-dimensional array_send


def new_rows(
    conn: Reach,
    schema: str,
    batch: FingerprintBatch,
    rows: I64,
    ids: I64,
    stored: StoredKeys,
    stored_shingles: StoredShingles | None,
) -> NewRows:
    """The batch's ``rows`` to be written with ids ``ids``, each with the first document of its
    exact group (stored, or an earlier row of the batch); ``stored_shingles``: the shingles as
    stored of every row of the batch, if they were made with its fingerprints."""
    hashes = [batch.exact_hashes[r] for r in rows.tolist()]
    first_of = stored.firsts(conn, schema, list(set(hashes)))
    pairs = zip(hashes, ids.tolist(), strict=True)
    firsts = np.array([first_of.setdefault(h, doc_id) for h, doc_id in pairs], dtype=np.int64)
    exact_of = np.where(firsts == ids, 0, firsts)
    return NewRows(batch, rows, ids, exact_of, stored_shingles)


def find_documents(conn: Reach, schema: str, external_ids: Sequence[str]) -> dict[str, int]:
    """``{external id: internal id}`` for the stored ones among ``external_ids``."""
    documents = qualified(schema, "documents")
    select = f"SELECT external_id, id FROM {documents} WHERE external_id = ANY(:ids)"
    return {row[0]: row[1] for row in _query(conn, select, ids=list(external_ids))}


class StoredKeys:
    """Where a write finds what the documents stored before it own: the store's tables and
    indexes (:data:`INDEXED`) or, during a bulk load, memory (the subclass
    :class:`dedup_store.db.bulk.load.LoadedKeys`).

    Attributes:
        bulk_load: a bulk load answers (it holds the store's lock exclusively, and analyzes and
            builds the lookup indexes it dropped at its end).
        frozen: the rows are written frozen (``COPY ... FREEZE``, into an empty store).
        held: where the batches' sample keys and key rows wait for larger COPYs (``None``:
            each batch writes its own).
        reviewed: the store may hold verdicts or cut edges that bear on a batch's documents
            (``False``: it holds neither, and none are written while it answers).
    """

    bulk_load = False
    frozen = False
    held: HeldRows | None = None
    reviewed = True

    def allocate_ids(self, conn: Reach, schema: str, count: int, shared: bool) -> I64:
        """``count`` new document ids, ascending (``shared``: the store's lock is held shared,
        as :func:`~dedup_store.db.write.batch.allocate_ids` says)."""
        return allocate_ids(connection_of(conn), schema, count, shared)

    def find(self, conn: Reach, schema: str, query: KeyQuery) -> Found:
        """What :func:`find_keys` returns."""
        return lookup.find_keys(connection_of(conn), schema, query)

    def members(
        self, conn: Reach, schema: str, kind: int, slot: int, keys: list[int]
    ) -> tuple[I64, I64]:
        """``(ids, keys)`` of the stored documents owning ``keys`` in one slot, by id."""
        salt = encoding.slot_salt(kind, slot)
        tagged = np.array(keys, dtype=np.int64) ^ np.int64(salt)
        ids, found = _query(
            conn,
            "SELECT array_agg(k.doc_id ORDER BY k.doc_id), "
            "array_agg(k.key # CAST(:salt AS bigint) ORDER BY k.doc_id) "
            f"FROM {key_rows.both_tiers(schema)} k WHERE k.key = ANY(CAST(:keys AS bigint[]))",
            keys=Int8Array(tagged),
            salt=salt,
        ).one()
        return np.array(ids or [], dtype=np.int64), np.array(found or [], dtype=np.int64)

    def firsts(self, conn: Reach, schema: str, hashes: list[bytes]) -> dict[bytes, int]:
        """``{exact hash: id}`` of the stored first documents of the exact groups ``hashes``."""
        rows = _query(
            conn,
            f"SELECT exact_hash, id FROM {qualified(schema, 'documents')} "
            "WHERE exact_hash = ANY(CAST(:hashes AS bytea[])) AND exact_of IS NULL",
            hashes=encoding.bytea_array_literal(hashes),
        )
        return {bytes(row[0]): int(row[1]) for row in rows}

    def documents(self, conn: Reach, schema: str, external_ids: list[str]) -> dict[str, int]:
        """``{external id: id}`` of the stored documents among ``external_ids``."""
        return find_documents(conn, schema, external_ids)

    def summaries(self, conn: Reach, schema: str, ids: I64) -> tuple[I64, I64]:
        """Shingle counts and SimHashes (signed 64-bit, as stored) of the stored documents
        ``ids`` (distinct, ascending), in that order."""
        if len(ids) == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        counts, simhashes = _query(
            conn,
            "SELECT array_agg(shingle_count ORDER BY id), array_agg(simhash ORDER BY id) "
            f"FROM {qualified(schema, 'documents')} WHERE id = ANY(CAST(:i AS bigint[]))",
            i=Int8Array(ids),
        ).one()
        return np.array(counts, dtype=np.int64), np.array(simhashes, dtype=np.int64)

    def known_simhashes(self, ids: I64) -> tuple[npt.NDArray[np.bool_], U64]:
        """Which stored documents ``ids`` have their SimHash at hand (none here), and those."""
        return np.zeros(len(ids), dtype=bool), np.zeros(len(ids), dtype=np.uint64)

    def shingles(self, conn: Reach, schema: str, ids: I64) -> tuple[I64, I32]:
        """The sorted shingles as stored of the stored documents ``ids`` (distinct,
        ascending): ``(offsets, values)``, document ``i``'s being
        ``values[offsets[i]:offsets[i + 1]]``."""
        if len(ids) == 0:
            return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32)
        blobs = _query(  # read in PostgreSQL's binary array form
            conn,
            f"SELECT array_send(shingles) FROM {qualified(schema, 'documents')} "
            "WHERE id = ANY(CAST(:i AS bigint[])) ORDER BY id",
            i=Int8Array(ids),
        ).scalars()
        arrays = [np.sort(encoding.int4_array(blob)) for blob in blobs]
        offsets = np.cumsum([0] + [len(a) for a in arrays], dtype=np.int64)
        values = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int32)
        return offsets, values

    def promoted(self, kind: int, slot: int, keys: list[int]) -> None:
        """``keys`` of a slot became hot (here: recorded in ``hot_keys`` already)."""

    def member_values(
        self, conn: Reach, schema: str, kind: int, ids: I64, num_perm: int
    ) -> npt.NDArray[Any]:
        """The MinHash signatures (``kind`` band: ``(n, num_perm)`` uint32) or SimHashes
        (block: uint64) of the stored documents ``ids`` (ascending), in that order."""
        if len(ids) == 0:
            return np.empty((0, num_perm) if kind == BAND else 0, dtype=np.uint64)
        value = "array_send(signature)" if kind == BAND else "int8send(simhash)"
        blob = _query(
            conn,
            f"SELECT string_agg({value}, ''::bytea ORDER BY id) "
            f"FROM {qualified(schema, 'documents')} WHERE id = ANY(CAST(:ids AS bigint[]))",
            ids=Int8Array(ids),
        ).scalar_one()
        if kind != BAND:
            return np.frombuffer(blob, dtype=">i8").astype(np.int64).view(np.uint64)
        width = _ARRAY_HEADER + 8 * num_perm
        matrix = np.frombuffer(blob, dtype=np.uint8).reshape(len(ids), width)[:, _ARRAY_HEADER:]
        pairs = np.ascontiguousarray(matrix).view(">i4").reshape(len(ids), num_perm, 2)
        return pairs[:, :, 1].astype(np.int32).view(np.uint32)

    def windows(
        self, conn: Reach, schema: str, groups: list[KeyGroup], hot_limit: int
    ) -> list[tuple[I64, I64]]:
        """Per group of secondary keys, ``(ids, keys)``: for each of its distinct keys the
        ``hot_limit`` stored documents of its :func:`window`."""
        s = qualified(schema)
        branches, parameters = [], {}
        for number, group in enumerate(groups):
            parameters[f"g{number}"] = array_literal(group.uniques.tolist())
            probe = lookup.window(s, hot_limit, str(int(group.kind)), str(int(group.slot)))
            branches.append(
                f"SELECT {number} AS grp, f.doc_id AS id, n.key "
                f"FROM unnest(CAST(:g{number} AS bigint[])) AS n(key) "
                f"CROSS JOIN LATERAL ({probe}) f"
            )
        statement = (
            "SELECT grp, array_agg(id), array_agg(key) "
            f"FROM ({' UNION ALL '.join(branches)}) found GROUP BY grp"
        )
        empty = np.empty(0, dtype=np.int64)
        hits = [(empty, empty)] * len(groups)
        for number, ids, keys in _query(conn, statement, **parameters):
            hits[number] = (np.array(ids, dtype=np.int64), np.array(keys, dtype=np.int64))
        return hits

    def add_secondary(
        self, kinds: npt.NDArray[np.int16], slots: npt.NDArray[np.int16], keys: I64, docs: I64
    ) -> None:
        """``secondary_keys`` rows written with the batch being written (or before it)."""

    def added(self, new: NewRows, external_ids: list[str]) -> None:
        """The rows of ``new`` were written, with their ``external_ids``."""


def _query(conn: Reach, statement: str, **parameters: Any) -> CursorResult[*tuple[Any, ...]]:
    """Run ``statement`` with ``parameters`` on the connection of ``conn``."""
    return connection_of(conn).execute(text(statement), parameters)


INDEXED = StoredKeys()
