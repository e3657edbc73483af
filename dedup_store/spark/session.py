"""The Spark session the command line and the tests use, and the check of a master URL."""

from __future__ import annotations

import os
import re
import socket
import sys

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from dedup_store.errors import SparkError

#: The master URLs Spark takes (its own patterns), besides ``spark://HOST:PORT[,HOST:PORT]``.
_MASTER = re.compile(
    r"local|local\[([0-9]+|\*)\]|local\[([0-9]+|\*)\s*,\s*([0-9]+)\]"
    r"|local-cluster\[\s*[0-9]+\s*,\s*[0-9]+\s*,\s*[0-9]+\s*\]|yarn|k8s://.+"
)
_STANDALONE = re.compile(r"spark://(.+)")
_HOST_PORT = re.compile(r"(?P<host>[^\s:,/\[\]]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")
#: Seconds a standalone master has to accept a connection before it is taken for absent.
MASTER_TIMEOUT_S = 5.0


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

    Raises:
        SparkError: ``master`` is no master URL, does not answer, or the session did not start.
    """
    check_master(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    try:
        return (
            builder.master(master)
            .appName(app_name)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.sql.adaptive.enabled", "true")
            .getOrCreate()
        )
    except (PySparkException, Py4JError) as error:
        reason = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
        raise SparkError(f"Spark did not start at {master}: {reason}") from error


def check_master(master: str, timeout_s: float = MASTER_TIMEOUT_S) -> None:
    """Refuse a master URL that Spark would refuse, or a standalone master that does not
    accept a connection within ``timeout_s`` seconds (Spark itself retries for a minute, with
    a Java stack trace each time).

    Raises:
        SparkError: naming the URL and, for a standalone master, why it cannot be reached.
    """
    if _MASTER.fullmatch(master):
        return
    standalone = _STANDALONE.fullmatch(master)
    addresses = [_HOST_PORT.fullmatch(a) for a in standalone[1].split(",")] if standalone else []
    if not addresses or not all(addresses):
        raise SparkError(
            f"not a Spark master URL: {master!r} (expected local, local[N], local[*], "
            "spark://HOST:PORT, yarn or k8s://...)"
        )
    failures = []
    for address in addresses:
        assert address is not None
        host, port = address["host"].strip("[]"), int(address["port"])
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
            return
        except OSError as error:
            failures.append(f"{host}:{port}: {error.strerror or error}")
    raise SparkError(f"cannot reach the Spark master {master} ({'; '.join(failures)})")
