"""``ingest --engine spark`` that cannot run says why in one line with its exit code: the spark
extra missing, a master URL Spark does not take, a master that does not answer."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dedup_store.errors import SparkError

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[1]
WITHOUT_PYSPARK = (
    "import sys\n"
    "sys.modules['pyspark'] = None  # as if the spark extra were not installed\n"
    "from dedup_store.cli import main\n"
    "sys.argv = ['dedup-store', *sys.argv[1:]]\n"
    "main()\n"
)


def ingest(
    url: str, schema: str, corpus: Path, *args: str, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    program = ["-c", code] if code else ["-m", "dedup_store"]
    options = ["--db-url", url, "--schema", schema, "ingest", "--engine", "spark", *args]
    return subprocess.run(
        [sys.executable, *program, *options, str(corpus)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "one.jsonl"
    path.write_text('{"id": "a", "text": "a short text about rivers and stones"}\n')
    return path


def test_without_the_spark_extra(database_url: str, schema: str, corpus: Path) -> None:
    result = ingest(database_url, schema, corpus, code=WITHOUT_PYSPARK)
    assert result.returncode == SparkError.exit_code
    assert result.stderr == (
        "error: dedup_store.spark needs pyspark and pyarrow: install the spark extra with "
        "pip install 'dedup-store[spark]'\n"
    )


@pytest.mark.parametrize("master", ["bogus", "spark:/host:7077", "local[x]", "spark://"])
def test_a_master_url_spark_does_not_take(
    database_url: str, schema: str, corpus: Path, master: str
) -> None:
    result = ingest(database_url, schema, corpus, "--spark-master", master)
    assert result.returncode == SparkError.exit_code
    assert result.stderr == (
        f"error: not a Spark master URL: {master!r} (expected local, local[N], local[*], "
        "spark://HOST:PORT, yarn or k8s://...)\n"
    )


def test_a_master_that_does_not_answer(database_url: str, schema: str, corpus: Path) -> None:
    started = time.monotonic()
    result = ingest(database_url, schema, corpus, "--spark-master", "spark://127.0.0.1:1")
    assert time.monotonic() - started < 30
    assert result.returncode == SparkError.exit_code
    assert result.stderr.startswith(
        "error: cannot reach the Spark master spark://127.0.0.1:1 (127.0.0.1:1: "
    )
    assert len(result.stderr.splitlines()) == 1
