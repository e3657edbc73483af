"""Candidate pairs of a Spark load: documents grouped by equal keys, hot buckets re-keyed.

Band, block and sample keys of the load's documents and of the stored ones are grouped by
``(kind, slot, key)`` (partitioned and sorted by it); each group gives the pairs the local
ingest's batches find through that key (:func:`dedup_store.spark.pairs.group_pairs`) and, for
a hot band or block key, its owners.
The owners' secondary keys are computed from their signatures and SimHashes
(:mod:`dedup_store.core.rekey`), grouped with the stored ``secondary_keys`` rows, and each
secondary group gives the pairs the batches' windowed lookups find
(:func:`dedup_store.spark.secondary.window_pairs`). The new ``hot_keys`` and
``secondary_keys`` rows are those the local ingest writes.
"""

from __future__ import annotations

import dataclasses
from functools import partial

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from sqlalchemy import Connection, text

from dedup_store.core import rekey
from dedup_store.core.params import FingerprintParams
from dedup_store.db.schema.names import qualified
from dedup_store.spark import secondary
from dedup_store.spark.pairs import BAND, BLOCK, GROUP_OUTPUT, SAMPLE, pairs_of_sorted
from dedup_store.spark.stored import StoredRows, slotted_keys

_PAIRS = "a bigint, b bigint, kind tinyint"


@dataclasses.dataclass
class Grouped:
    """What grouping the keys of a load gives.

    Attributes:
        candidates: ``(a, b, block_only, sampled)``: pairs sharing a key, older first, ``b``
            new (persisted).
        secondary: ``(kind, slot, key, doc_id)``: the ``secondary_keys`` rows to write.
        hot_keys: ``(kind, slot, key)`` of the keys the load makes hot.
        cached: the frames to release after the load.
    """

    candidates: DataFrame
    secondary: DataFrame
    hot_keys: list[tuple[int, int, int]]
    cached: list[DataFrame]


@dataclasses.dataclass(frozen=True)
class Load:
    """The load's documents and ids: ``docs`` (with ``id``, ``batch`` and fingerprints),
    ``firsts`` (ids of the first documents of their exact group), the first new id, and the
    largest id stored before the load."""

    docs: DataFrame
    firsts: DataFrame
    first: int
    last: int


def group_keys(
    conn: Connection, load: Load, stored: StoredRows, params: FingerprintParams
) -> Grouped:
    """The candidate pairs of a load, and the hot and secondary keys it writes."""
    hot_limit = params.hot_key_limit
    kinds = frozenset(k for k in (BAND, BLOCK) if rekey.rekeyed(params, k))
    was_hot = stored.hot_keys(conn) if kinds else []
    pairs_of = partial(
        pairs_of_sorted, hot_limit=hot_limit, rekeyed=kinds, was_hot=frozenset(was_hot)
    )
    found = _sorted_keys(load, stored).mapInArrow(pairs_of, GROUP_OUTPUT).persist()
    cached = [found]
    pairs = found.where(F.col("hot").isNull()).select("a", "b", "kind")
    owners = found.where(F.col("hot").isNotNull())
    empty = load.docs.sparkSession.createDataFrame([], "kind tinyint, slot int, key bigint")
    rows = empty.withColumn("doc_id", F.lit(0).cast("bigint"))
    hot_keys: list[tuple[int, int, int]] = []
    if kinds and owners.limit(1).count():
        keyed = _owner_keys(load, owners, stored, params).persist()
        cached.append(keyed)
        keyed_all = keyed.unionByName(_stored_secondary(stored)) if was_hot else keyed
        pairs = pairs.unionByName(_secondary_pairs(keyed_all, hot_limit))
        rows = keyed.select("kind", "slot", F.col("skey").alias("key"), F.col("id").alias("doc_id"))
        made_hot = owners.where(F.col("hot") >= 0).select("kind", "slot", "key").distinct()
        hot_keys = [(int(k), int(s), int(key)) for k, s, key in made_hot.collect()]
    candidates = pairs.groupBy("a", "b").agg(
        F.bool_and(F.col("kind") == BLOCK).alias("block_only"),
        F.bool_or(F.col("kind") == SAMPLE).alias("sampled"),
    )
    return Grouped(candidates, rows, hot_keys, cached)


def _sorted_keys(load: Load, stored: StoredRows) -> DataFrame:
    """``(kind, slot, key, id, batch)`` of every key of the new first documents and of the
    stored ones, partitioned by key and sorted by key in each partition (a sort, not a
    ``collect_list`` per key: most keys are owned by one document)."""
    firsts = load.docs.select("id", "batch", "band_keys", "block_keys", "sample_keys").join(
        load.firsts, "id"
    )
    samples = firsts.select("id", "batch", F.explode("sample_keys").alias("key")).select(
        F.lit(SAMPLE).alias("kind"),
        F.lit(0).alias("slot"),
        F.col("key").cast("bigint").alias("key"),
        "id",
        "batch",
    )
    keys = slotted_keys(firsts).unionByName(samples).unionByName(stored.keys())
    return (
        keys.select(
            F.col("kind").cast("tinyint").alias("kind"),
            F.col("slot").cast("int").alias("slot"),
            "key",
            "id",
            "batch",
        )
        .repartition("kind", "slot", "key")
        .sortWithinPartitions("kind", "slot", "key", "id")
    )


def _owner_keys(
    load: Load, owners: DataFrame, stored: StoredRows, params: FingerprintParams
) -> DataFrame:
    """The secondary keys of the owners of hot keys whose ``secondary_keys`` rows the load
    writes (:data:`~dedup_store.spark.secondary.SECONDARY_SCHEMA`): its new documents' (with
    the largest id stored before their batch, ``top``) and the stored owners of the keys it
    makes hot."""
    columns: list[Column | str] = [
        "kind", "slot", "key", F.col("a").alias("id"), F.col("b").alias("batch"), "hot"
    ]  # fmt: skip
    new = owners.where(F.col("b") >= 0).select(*columns)
    lows = load.docs.groupBy("batch").agg(F.min("id").alias("low"))
    top = F.when(F.col("low") > load.first, F.col("low") - 1).otherwise(F.lit(load.last))
    tops = lows.select("batch", top.cast("bigint").alias("top"))
    fingerprints = load.docs.select("id", "signature", "simhash")
    new = new.join(tops, "batch").join(fingerprints, "id")
    old = owners.where(F.col("b") < 0).select(*columns)
    if old.limit(1).count():
        old = old.withColumn("top", F.lit(-1).cast("bigint")).join(stored.signatures(), "id")
        new = new.unionByName(old)
    settings = params.to_dict()
    keyed: DataFrame = new.mapInArrow(
        partial(secondary.owner_keys, settings=settings), secondary.SECONDARY_SCHEMA
    )
    return keyed


def _stored_secondary(stored: StoredRows) -> DataFrame:
    """The stored ``secondary_keys`` rows as owners stored before the load, of keys hot
    before it."""
    minus_one = F.lit(-1).cast("bigint")
    return stored.secondary().select(
        "kind",
        "slot",
        "skey",
        "id",
        minus_one.alias("batch"),
        minus_one.alias("hot"),
        minus_one.alias("top"),
    )


def _secondary_pairs(keyed: DataFrame, hot_limit: int) -> DataFrame:
    """``(a, b, kind)`` the lookups of the secondary keys ``keyed`` find."""
    groups = (
        keyed.groupBy("kind", "slot", "skey")
        .agg(
            F.collect_list(F.struct("id", "batch", "hot", "top")).alias("members"),
            F.max("batch").alias("newest"),
        )
        .where((F.size("members") > 1) & (F.col("newest") >= 0))
        .select(
            "kind",
            "skey",
            F.col("members.id").alias("ids"),
            F.col("members.batch").alias("batches"),
            F.col("members.hot").alias("hots"),
            F.col("members.top").alias("tops"),
        )
    )
    return groups.mapInArrow(partial(secondary.pairs_of_secondary, hot_limit=hot_limit), _PAIRS)


def record_hot(conn: Connection, schema: str, keys: list[tuple[int, int, int]]) -> None:
    """Insert the keys a load made hot into ``hot_keys``."""
    if not keys:
        return
    kinds, slots, values = (list(column) for column in zip(*keys, strict=True))
    conn.execute(
        text(
            f"INSERT INTO {qualified(schema, 'hot_keys')} (kind, slot, key) "
            "SELECT * FROM unnest(CAST(:kinds AS smallint[]), CAST(:slots AS smallint[]), "
            "CAST(:keys AS bigint[])) ON CONFLICT DO NOTHING"
        ),
        {"kinds": kinds, "slots": slots, "keys": values},
    )
