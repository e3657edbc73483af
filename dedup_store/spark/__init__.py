"""Ingest a corpus with Apache Spark into the same store the local ingest writes.

Needs the ``spark`` extra (``pip install 'dedup-store[spark]'``): importing this package without
pyspark raises an :class:`ImportError` that names it.

:func:`ingest_records` fingerprints the documents on the executors with the same core as the
local ingest (:func:`~dedup_store.core.fingerprint.fingerprint_batch` over Arrow batches), finds
candidate pairs by grouping equal band, block and sample keys, verifies them with the store's
definitions, labels clusters by connected components, and COPYs documents, sample keys and edges
into the store from the executors, one connection per partition.
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as error:  # pragma: no cover - only without the extra
    raise ImportError(
        "dedup_store.spark needs pyspark and pyarrow: install the spark extra with "
        "pip install 'dedup-store[spark]'"
    ) from error

from dedup_store.spark.fingerprints import fingerprint_dataframe
from dedup_store.spark.ingest import SparkIngest, ingest_dataframe, ingest_records
from dedup_store.spark.session import check_master, spark_session

__all__ = [
    "SparkIngest",
    "check_master",
    "fingerprint_dataframe",
    "ingest_dataframe",
    "ingest_records",
    "spark_session",
]
