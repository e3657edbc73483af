"""One local Spark session (two cores) for all the Spark tests, stopped after the last one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="package")
def spark() -> Iterator[Any]:
    """A ``local[2]`` Spark session shared by the Spark tests."""
    from dedup_store.spark import spark_session

    session = spark_session("local[2]", "dedup-store-tests", driver_memory="2g")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
