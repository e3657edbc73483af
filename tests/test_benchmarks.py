"""Every benchmark script imports against the package as it is now, so a module moved or
renamed in ``dedup_store`` cannot leave a benchmark broken until someone next runs it."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
MODULES = sorted(info.name for info in pkgutil.iter_modules([str(BENCHMARKS)]))


def test_the_benchmarks_are_found() -> None:
    assert {"op_cost", "http", "ingest", "realtext", "load"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports(name: str) -> None:
    module = importlib.import_module(f"benchmarks.{name}")
    assert module.__name__ == f"benchmarks.{name}"
