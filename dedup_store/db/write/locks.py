"""Who waits for whom among the writers of a store: the advisory locks they take.

Every writer takes the store's lock, a transaction-scoped advisory lock of two integer keys
(:func:`store_key`), in one of two modes:

* **shared** by an ``add`` (one document, or a batch of them): under it, the add also takes an
  exclusive transaction-scoped advisory lock on each key it probes and writes (:func:`keys_of`):
  its exact hash, each band and block key with its slot, its kept excerpt keys, its external id
  and the external ids that verdicts pair it with. Two documents that could match each other
  share at least one of those keys, so the second to lock waits until the first commits, and
  then sees its rows: no edge is missed, while adds of unrelated documents never wait for each
  other. The keys are taken in one statement, in ascending order, so two adds never deadlock
  over them.
* **exclusive** by work that rewrites the store broadly (delete, verdicts, settle, a bulk load,
  a Spark load, ``update=True`` adds, stores with weighted SimHash features, creating the
  store), and by an add whose keys are more than :data:`MAX_KEY_LOCKS` (the locks live in the
  server's shared lock table).

Clusters are labels on documents (union-find kept as ``cluster_id``). An add that joins one
existing cluster takes its label's lock shared (in its own statement, then reads the label again
through row locks: :mod:`dedup_store.db.write.single`); one that merges clusters takes their labels'
locks exclusively (:func:`lock_labels`), then reads the labels again with a new snapshot and
locks any label that moved meanwhile, until none did. A merge therefore never misses a member
that a concurrent add gave the old label.

An add inside a caller's transaction holds its locks until the caller commits: the store's lock
shared (so exclusive work waits for the caller's transaction), its keys (so only an add that
could match its document waits). The guarantee needs READ COMMITTED, where each statement sees
what committed before it started: a transaction at REPEATABLE READ or SERIALIZABLE is refused
for writing (:func:`check_isolation`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

import numpy as np
from sqlalchemy import Connection, text

from dedup_store.core import kernels
from dedup_store.core.arrays import I64, U64, distinct
from dedup_store.core.fingerprint import Fingerprint, FingerprintBatch
from dedup_store.core.mixing import mix64
from dedup_store.db.schema.encoding import (
    BAND,
    BLOCK,
    SAMPLE,
    sample_columns,
    sparse_excerpt_keys,
    top32,
)
from dedup_store.db.server.array_params import Int8Array
from dedup_store.errors import DatabaseError

#: An add with more key locks than this takes the store's lock exclusively instead.
MAX_KEY_LOCKS = 512
#: A caller's transaction whose adds together would hold more key locks than this takes the
#: store's lock exclusively instead (each lock takes a place in the server's shared lock table,
#: ``max_locks_per_transaction`` times ``max_connections`` places, 6,400 by default).
TRANSACTION_KEY_LOCKS = 2048
#: Kinds of locked key beside :data:`~dedup_store.db.schema.encoding.BAND`, ``BLOCK`` and
#: ``SAMPLE``.
EXACT, EXTERNAL_ID = 3, 4
#: The isolation levels at which a writer's statements see what committed before them.
READ_COMMITTED = ("read committed", "read uncommitted")

#: The store's lock, shared, then the ``keys`` in the order given (ascending), one by one; the
#: transaction's isolation level. The keys wait for the store's lock (a gating filter).
_SHARED_CTES = """
    WITH store AS MATERIALIZED (
        SELECT pg_advisory_xact_lock_shared(CAST(:space AS integer), 0) AS held
    ),
    keyed AS MATERIALIZED (
        SELECT count(pg_advisory_xact_lock(u.k)) AS n
        FROM unnest(CAST(:keys AS bigint[])) AS u(k)
        WHERE (SELECT count(*) FROM store) = 1
    )"""
SHARED_SQL = (
    _SHARED_CTES
    + """
    SELECT current_setting('transaction_isolation'), (SELECT n FROM keyed)
"""
)
#: :data:`SHARED_SQL`, then the locks of cluster labels ``:labels``, exclusive, in the order of
#: their lock keys (:data:`LABELS_SQL`): an add that merges them.
SHARED_LABELS_SQL = (
    _SHARED_CTES
    + """,
    labeled AS MATERIALIZED (
        SELECT count(pg_advisory_xact_lock(s.k)) AS n FROM (
            SELECT hashint8extended(u.l, CAST(:seed AS bigint)) AS k
            FROM unnest(CAST(:labels AS bigint[])) AS u(l)
            WHERE (SELECT n FROM keyed) IS NOT NULL
            ORDER BY 1 OFFSET 0
        ) s
    )
    SELECT current_setting('transaction_isolation'), (SELECT n FROM labeled)
"""
)
#: The store's lock, exclusive; the transaction's isolation level.
EXCLUSIVE_SQL = """
    SELECT current_setting('transaction_isolation'), count(*)
    FROM (SELECT pg_advisory_xact_lock(CAST(:space AS integer), 0) OFFSET 0) s
"""
#: The locks of cluster labels ``:labels``, exclusive, in the order of their lock keys.
LABELS_SQL = """
    SELECT count(pg_advisory_xact_lock(s.k)) FROM (
        SELECT hashint8extended(u.l, CAST(:seed AS bigint)) AS k
        FROM unnest(CAST(:labels AS bigint[])) AS u(l)
        ORDER BY 1 OFFSET 0
    ) s
"""


def _digest(value: bytes, size: int) -> int:
    return int.from_bytes(hashlib.blake2b(value, digest_size=size).digest(), "little")


@lru_cache(maxsize=64)
def store_key(schema: str) -> int:
    """The first key of the store's lock (the second is 0): 31 bits of the schema's name."""
    return _digest(f"dedup:{schema}".encode(), 4) & 0x7FFFFFFF


@lru_cache(maxsize=64)
def label_seed(schema: str) -> int:
    """The seed of ``hashint8extended(cluster_id, seed)``, the lock key of a cluster label."""
    return _digest(f"dedup-label:{schema}".encode(), 8) - (1 << 63)


@lru_cache(maxsize=256)
def _tags(schema: str, kind: int, slots: int) -> U64:
    """The mixed tags of the keys of ``kind`` in slots 1 to ``slots`` (0: the one tag of a
    kind without slots), of the store in ``schema``."""
    seed = _digest(f"dedup-key:{schema}".encode(), 8)
    at = np.arange(1, slots + 1, dtype=np.uint64) if slots else np.zeros(1, dtype=np.uint64)
    return mix64(np.uint64(seed) ^ (np.uint64(kind) << np.uint64(48)) ^ at)


def _lock_keys(schema: str, parts: Sequence[tuple[int, int, np.ndarray]]) -> I64:
    """The sorted distinct lock keys of ``parts``: ``(kind, slots, values)``, the values of a
    slotted kind a row of ``slots`` per document, flattened (64-bit values, or 32-bit excerpt
    keys)."""
    values = np.concatenate([v.astype(np.int64, copy=False).view(np.uint64) for *_, v in parts])
    tags = np.concatenate(
        [np.tile(_tags(schema, kind, slots), len(v) // max(slots, 1)) for kind, slots, v in parts]
    )
    return distinct(mix64(values ^ tags).view(np.int64))


def _ids(external_ids: Iterable[str]) -> U64:
    return np.array(
        [_digest(i.encode("utf-8", "surrogatepass"), 8) for i in external_ids], dtype=np.uint64
    )


def _exacts(exact_hashes: Iterable[bytes]) -> U64:
    return np.array([int.from_bytes(h[:8], "little") for h in exact_hashes], dtype=np.uint64)


def id_keys(schema: str, external_ids: Iterable[str]) -> I64:
    """The sorted lock keys of external ids."""
    return _lock_keys(schema, [(EXTERNAL_ID, 0, _ids(external_ids))])


def keys_of(schema: str, fp: Fingerprint, external_id: str) -> I64:
    """The sorted lock keys of one document (:mod:`module docs <dedup_store.db.write.locks>`):
    those :func:`batch_keys` gives it, with the tags of its fixed keys made once per store."""
    kept = sparse_excerpt_keys(top32(fp.sample_keys), fp.params.max_excerpt_keys)
    bands, blocks = fp.band_keys, fp.block_keys
    values = np.concatenate(
        [
            _exacts([fp.exact_hash]),
            _ids([external_id]),
            bands.view(np.uint64),
            blocks.view(np.uint64),
            kept.astype(np.int64).view(np.uint64),
        ]
    )
    fixed, sample_tag = _fixed_tags(schema, len(bands), len(blocks))
    tags = np.concatenate([fixed, np.full(len(kept), sample_tag, dtype=np.uint64)])
    return distinct(kernels.backend.salted_mix(values, tags).view(np.int64))


@lru_cache(maxsize=64)
def _fixed_tags(schema: str, bands: int, blocks: int) -> tuple[U64, np.uint64]:
    """The tags of the keys every document has, in the order :func:`keys_of` lists them (its
    exact hash, its external id, its ``bands`` band keys and ``blocks`` block keys), and the tag
    of its excerpt keys."""
    parts = [(EXACT, 0), (EXTERNAL_ID, 0), (BAND, bands), (BLOCK, blocks)]
    fixed = np.concatenate([_tags(schema, kind, slots) for kind, slots in parts])
    return fixed, _tags(schema, SAMPLE, 0)[0]


def batch_keys(schema: str, batch: FingerprintBatch, external_ids: Iterable[str]) -> I64:
    """The sorted lock keys of every row of ``batch`` and of ``external_ids`` (those of its
    records, and of the partners that verdicts name)."""
    rows = np.arange(len(batch), dtype=np.int64)
    kept, _ = sample_columns(batch, rows, rows)
    bands, blocks = batch.band_keys, batch.block_keys
    return _lock_keys(
        schema,
        [
            (EXACT, 0, _exacts(batch.exact_hashes)),
            (BAND, bands.shape[1], bands.reshape(-1)),
            (BLOCK, blocks.shape[1], blocks.reshape(-1)),
            (SAMPLE, 0, kept),
            (EXTERNAL_ID, 0, _ids(external_ids)),
        ],
    )


def lock_statement(
    schema: str, keys: I64 | None, labels: Sequence[int] = ()
) -> tuple[str, dict[str, object], bool]:
    """The statement that takes the store's lock (shared with ``keys`` and then the cluster
    ``labels``, exclusive without keys or with more than :data:`MAX_KEY_LOCKS`), its ``:name``
    parameters, and whether it is the shared one. Its row: the isolation level
    (:func:`check_isolation`), a count."""
    if keys is None or len(keys) > MAX_KEY_LOCKS:
        return EXCLUSIVE_SQL, {"space": store_key(schema)}, False
    parameters: dict[str, object] = {"space": store_key(schema), "keys": Int8Array(keys)}
    if not labels:
        return SHARED_SQL, parameters, True
    parameters.update(seed=label_seed(schema), labels=_literal(sorted(labels)))
    return SHARED_LABELS_SQL, parameters, True


def _literal(values: Iterable[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def check_isolation(level: str) -> None:
    """Refuse to write in a transaction that does not see what committed before each statement.

    Raises:
        DatabaseError: the transaction is at REPEATABLE READ or SERIALIZABLE.
    """
    if level not in READ_COMMITTED:
        raise DatabaseError(
            f"dedup_store writes at READ COMMITTED, but the transaction is at {level.upper()}:"
            " a snapshot taken before a concurrent add committed cannot see its document, and"
            " their match would be missed; write in a READ COMMITTED transaction"
        )


def lock_store(
    conn: Connection, schema: str, keys: I64 | None = None, labels: Sequence[int] = ()
) -> bool:
    """Take the store's lock until the transaction ends: shared with the lock of each of
    ``keys`` and then of cluster ``labels`` (exclusive), or exclusive (``keys`` ``None``, or
    too many of them); returns whether shared.

    Raises:
        DatabaseError: the transaction is not at READ COMMITTED (:func:`check_isolation`).
    """
    statement, parameters, shared = transaction_lock_statement(conn, schema, keys, labels)
    level = conn.execute(text(statement), parameters).one()[0]
    check_isolation(level)
    return shared


def transaction_lock_statement(
    conn: Connection, schema: str, keys: I64 | None = None, labels: Sequence[int] = ()
) -> tuple[str, dict[str, object], bool]:
    """:func:`lock_statement` for the transaction of ``conn``: the keys are locked unless the
    transaction would then hold too many key locks (:func:`room_for`)."""
    if keys is not None and not room_for(conn, schema, len(keys)):
        keys = None
    return lock_statement(schema, keys, labels)


def room_for(conn: Connection, schema: str, count: int) -> bool:
    """Whether the transaction of ``conn`` may take ``count`` more key locks (counted per
    transaction on the connection, as a caller's transaction may hold many adds)."""
    if count > MAX_KEY_LOCKS:
        return False
    transaction = conn.get_transaction()
    held = conn.info.setdefault("dedup_store.key_locks", {})
    before, total = held.get(schema, (None, 0))
    if before is not transaction:
        total = 0
    if total + count > TRANSACTION_KEY_LOCKS:
        return False
    held[schema] = (transaction, total + count)
    return True


def lock_labels(
    conn: Connection,
    schema: str,
    read: Callable[[], Mapping[int, int]],
    first: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """Lock the cluster labels that ``read`` gives (``{document: label}``; ``first``: as read
    before) exclusively, read them again, and lock the ones that moved meanwhile, until none
    did; returns the last read.

    ``read`` must run a statement of its own (a new snapshot, after the locks are granted).
    """
    held: set[int] = set()
    labels = dict(read() if first is None else first)
    while not set(labels.values()) <= held:
        wanted = set(labels.values()) - held
        literal = _literal(sorted(wanted))
        conn.execute(text(LABELS_SQL), {"seed": label_seed(schema), "labels": literal})
        held |= wanted
        labels = dict(read())
    return labels
