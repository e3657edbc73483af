"""An ingest killed with SIGKILL takes its fingerprinting processes with it."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[1]
WORDS = [f"word{i}" for i in range(3000)]


def _corpus(path: Path, documents: int) -> Path:
    """A JSONL file of ``documents`` unrelated texts of 60 words."""
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as out:
        for number in range(documents):
            text = " ".join(rng.choice(WORDS) for _ in range(60))
            out.write(json.dumps({"id": f"doc-{number}", "text": text}) + "\n")
    return path


def _alive(process: psutil.Process) -> bool:
    """Whether ``process`` still runs (a zombie waiting to be reaped does not)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_for_workers(parent: psutil.Process, timeout_s: float) -> list[psutil.Process]:
    """The parent's descendants once its fingerprinting process and resource tracker run."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        children = parent.children(recursive=True)
        lines = []
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                lines.append(" ".join(child.cmdline()))
        if any("spawn_main" in line for line in lines) and any(
            "resource_tracker" in line for line in lines
        ):
            return children
        time.sleep(0.1)
    pytest.fail("the ingest did not start its fingerprinting process in time")


def test_killing_an_ingest_ends_its_worker_processes(
    tmp_path: Path, database_url: str, schema: str
) -> None:
    corpus = _corpus(tmp_path / "corpus.jsonl", 40_000)
    command = [sys.executable, "-m", "dedup_store", "--db-url", database_url, "--schema", schema]
    command += ["ingest", "--workers", "1", "--batch-size", "500", "--quiet", str(corpus)]
    ingest = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    descendants: list[psutil.Process] = []
    try:
        descendants = _wait_for_workers(psutil.Process(ingest.pid), timeout_s=60)
        time.sleep(1.0)  # the worker is fingerprinting batches by now
        assert ingest.poll() is None, "the ingest ended before it could be killed"
        os.kill(ingest.pid, signal.SIGKILL)
        ingest.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in descendants) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [p.pid for p in descendants if _alive(p)]
        assert survivors == [], f"processes outlived the killed ingest: {survivors}"
    finally:
        if ingest.poll() is None:
            ingest.kill()
        for process in descendants:  # whatever survived this test's assertion
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        ingest.wait(timeout=10)
