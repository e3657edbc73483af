"""``python -m dedup_store`` from a checkout, without installing it: ``--version`` tells the
kernels that run there, and a store is made and loaded from the repository root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
BACKEND = "from dedup_store.core import kernels; print(kernels.backend.name)"


def run_in(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with ``tree`` as the working directory and nothing on PYTHONPATH, so the
    ``dedup_store`` imported is the one of that tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUP_STORE_")}
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, *args], cwd=tree, env=env, capture_output=True, text=True, timeout=300
    )


def checkout(destination: Path) -> Path:
    """A copy of the repository's tracked files: a source tree where nothing was compiled."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    for name in filter(None, listed.split("\0")):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return destination


def test_version_from_the_repository_root_names_the_kernels_that_run() -> None:
    version = run_in(ROOT, "-m", "dedup_store", "--version")
    assert version.returncode == 0, version.stderr
    running = run_in(ROOT, "-c", BACKEND).stdout.strip()
    assert version.stdout.splitlines() == [
        f"dedup-store {VERSION}",
        f"source tree: {ROOT}",
        f"fingerprint kernels: {running}",
    ]


def test_version_in_a_source_tree_where_the_kernels_are_not_compiled(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "checkout")
    version = run_in(tree, "-m", "dedup_store", "--version")
    assert version.returncode == 0, version.stderr
    assert run_in(tree, "-c", BACKEND).stdout.strip() == "reference"
    assert version.stdout.splitlines() == [
        f"dedup-store {VERSION}",
        f"source tree: {tree}",
        "fingerprint kernels: reference (not compiled in this source tree; "
        "python setup.py build_ext --inplace compiles them)",
    ]


@pytest.mark.db
def test_init_and_ingest_from_the_repository_root(database_url: str, schema: str) -> None:
    store = ["-m", "dedup_store", "--db-url", database_url, "--schema", schema]
    init = run_in(ROOT, *store, "init", "--format", "json")
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["schema"] == schema
    ingest = run_in(ROOT, *store, "ingest", "--json", "examples/")
    assert ingest.returncode == 0, ingest.stderr
    summary = json.loads(ingest.stdout)
    assert (summary["documents"], summary["new"], summary["errors"]) == (101, 90, 0)
