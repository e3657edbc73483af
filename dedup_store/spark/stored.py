"""What the store held before a Spark load, read on the executors by id ranges."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

import psycopg
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType
from sqlalchemy import Connection, create_engine, text

from dedup_store.core.params import FingerprintParams
from dedup_store.db.candidates.lookup import salts_sql
from dedup_store.db.rows import key_rows
from dedup_store.db.schema.names import qualified
from dedup_store.spark.pairs import BAND, BLOCK, SAMPLE


class StoredRows:
    """The store's rows before the load, read on the executors by id ranges."""

    def __init__(
        self, spark: SparkSession, dsn: str, schema: str, last: int, params: FingerprintParams
    ) -> None:
        self.spark, self.dsn, self.schema, self.last, self.params = spark, dsn, schema, last, params
        self.s = qualified(schema)

    def _read(
        self, select: str, table: str, ddl: str, id_column: str = "id", where: str = ""
    ) -> DataFrame:
        condition = f"{id_column} >= %(lo)s AND {id_column} < %(hi)s" + (
            f" AND {where}" if where else ""
        )
        return read_stored(
            self.spark,
            self.dsn,
            f"SELECT {select} FROM {self.s}.{table} WHERE {condition}",
            ddl,
            self.last,
        )

    def exact_hashes(self) -> DataFrame:
        return self._read(
            "id, exact_hash", "documents", "id bigint, exact_hash binary", where="exact_of IS NULL"
        )

    def keys(self) -> DataFrame:
        """``(kind, slot, key, id, batch)`` of the stored documents' lookup keys."""
        # the first documents' band and block keys, untagged
        slotted = read_stored(
            self.spark,
            self.dsn,
            "SELECT k.kind::int, k.slot::int, k.key # t.salt, k.doc_id "
            f"FROM {key_rows.both_tiers(self.schema)} k JOIN ({salts_sql(self.params)}) t "
            "ON t.kind = k.kind AND t.slot = k.slot "
            "WHERE k.doc_id >= %(lo)s AND k.doc_id < %(hi)s",
            "kind int, slot int, key bigint, id bigint",
            self.last,
        )
        samples = self._read("doc_id, key", "sample_keys", "doc_id bigint, key int", "doc_id")
        return slotted.withColumn("batch", F.lit(-1).cast("bigint")).unionByName(
            samples.select(
                F.lit(SAMPLE).alias("kind"),
                F.lit(0).alias("slot"),
                F.col("key").cast("bigint").alias("key"),
                F.col("doc_id").alias("id"),
                F.lit(-1).cast("bigint").alias("batch"),
            )
        )

    def features(self) -> DataFrame:
        signature = ", signature" if self.params.verify != "exact" else ""
        ddl = (
            "id bigint, exact_hash binary, simhash bigint, shingle_count int, "
            "shingles array<int>, cluster_id bigint"
            + (", signature array<int>" if signature else "")
        )
        return self._read(
            f"id, exact_hash, simhash, shingle_count, shingles, cluster_id{signature}",
            "documents",
            ddl,
            where="exact_of IS NULL",
        )

    def signatures(self) -> DataFrame:
        """``(id, signature, simhash)`` of the stored first documents."""
        return self._read(
            "id, signature, simhash",
            "documents",
            "id bigint, signature array<int>, simhash bigint",
            where="exact_of IS NULL",
        )

    def secondary(self) -> DataFrame:
        """``(kind, slot, skey, id)`` of the stored ``secondary_keys`` rows."""
        return self._read(
            "kind, slot, key, doc_id",
            "secondary_keys",
            "kind tinyint, slot int, skey bigint, id bigint",
            "doc_id",
        )

    def hot_keys(self, conn: Connection) -> list[tuple[int, int, int]]:
        """``(kind, slot, key)`` of the store's hot keys (read on the driver: they are few)."""
        found = conn.execute(text(f"SELECT kind, slot, key FROM {self.s}.hot_keys"))
        return [(int(kind), int(slot), int(key)) for kind, slot, key in found]


def read_stored(spark: SparkSession, dsn: str, query: str, ddl: str, last: int) -> DataFrame:
    """The rows of ``query`` (with ``%(lo)s``/``%(hi)s`` id bounds) for ids up to ``last``,
    read by as many executors as the session has cores, one id range each."""
    schema = cast(StructType, StructType.fromDDL(ddl))
    if last <= 0:
        return spark.createDataFrame([], schema)
    parts = max(1, min(spark.sparkContext.defaultParallelism, last))
    step = last // parts + 1
    arrow_schema = to_arrow_schema(schema)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with psycopg.connect(dsn) as conn:
            for batch in batches:
                for part in batch.column("id").to_pylist():
                    bounds = {"lo": part * step, "hi": (part + 1) * step}
                    rows = conn.execute(query, bounds).fetchall()
                    columns: list[Sequence[Any]] = (
                        list(zip(*rows, strict=True)) if rows else [() for _ in arrow_schema]
                    )
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array(list(c), f.type)
                            for c, f in zip(columns, arrow_schema, strict=True)
                        ],
                        schema=arrow_schema,
                    )

    return spark.range(parts, numPartitions=parts).mapInArrow(run, schema)


def last_id(url: str, schema: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text(f"SELECT coalesce(max(id), 0) FROM {qualified(schema)}.documents")
            )
            return int(found.scalar_one())
    finally:
        engine.dispose()


def slotted_keys(rows: DataFrame) -> DataFrame:
    """``(kind, slot, key, id, batch)`` of the band and block keys of ``(id, batch, band_keys,
    block_keys)`` rows."""
    parts = []
    for kind, column in ((BAND, "band_keys"), (BLOCK, "block_keys")):
        parts.append(
            rows.select("id", "batch", F.posexplode(column).alias("pos", "key")).select(
                F.lit(kind).alias("kind"),
                (F.col("pos") + 1).alias("slot"),
                "key",
                "id",
                "batch",
            )
        )
    return parts[0].unionByName(parts[1])
