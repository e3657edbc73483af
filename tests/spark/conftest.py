"""One local Spark session (two cores) for every Spark test of the session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` Spark session, stopped at the end of the test session."""
    from dedup_store.spark import spark_session

    session = spark_session("local[2]", "dedup-store-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
