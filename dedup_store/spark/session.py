"""The Spark session the command line and the tests use."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def spark_session(
    master: str = "local[*]", app_name: str = "dedup-store", driver_memory: str | None = None
) -> SparkSession:
    """A Spark session (the active one when there is one) whose Python workers run this
    interpreter, with Arrow transfers on and the web UI off.

    Args:
        master: the Spark master URL, e.g. ``local[*]`` or ``spark://host:7077``.
        app_name: the application's name.
        driver_memory: the driver JVM's heap (``spark.driver.memory``, e.g. ``4g``; in local
            mode the executors share it), when this call starts the JVM.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    return (
        builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.adaptive.enabled", "true")
        .getOrCreate()
    )
