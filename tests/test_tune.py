"""``dedup-store db tune``: sizes need a unit, and a machine too small for valid settings is
refused rather than given settings PostgreSQL refuses."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from dedup_store.cli import app
from dedup_store.db.server import tuning

#: A size as postgresql.conf takes it: a positive number of kB, MB, GB or TB.
VALID_SIZE = re.compile(r"'[1-9][0-9]*(kB|MB|GB|TB)'")
SIZED = ["shared_buffers", "effective_cache_size", "maintenance_work_mem"]


def tune(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["db", "tune", *args])
    return result.exit_code, result.stdout, result.stderr


def settings_of(conf: str) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in conf.splitlines() if not line.startswith("#")]
    return dict(line.split(" = ") for line in lines)


@pytest.mark.parametrize("memory", ["64", "64 ", "1.5"])
def test_a_size_without_a_unit_is_refused(memory: str) -> None:
    code, stdout, stderr = tune("--memory", memory)
    assert (code, stdout) == (2, "")
    assert f"{memory.strip()!r} has no unit: give one, e.g. 64GB or 512MB" in stderr


@pytest.mark.parametrize("memory", ["1MB", "100MB", "511MB", "4kB"])
def test_too_little_memory_for_valid_settings_is_refused(memory: str) -> None:
    code, stdout, stderr = tune("--memory", memory)
    assert (code, stdout) == (2, "")
    assert "too little memory for a server" in stderr
    assert "at least 512MB" in stderr


@pytest.mark.parametrize("memory", ["512MB", "512MiB", "1GB", "1.5g", "64GB", "2TB"])
def test_every_size_is_one_postgresql_takes(memory: str) -> None:
    code, stdout, stderr = tune("--memory", memory, "--cores", "2")
    assert code == 0, stderr
    settings = settings_of(stdout)
    for name in SIZED:
        assert VALID_SIZE.fullmatch(settings[name]), (name, settings[name])


def test_sizes_of_postgresql_style() -> None:
    assert tuning.parse_size("64GB") == 64 * 2**30
    assert tuning.parse_size("512MB") == 512 * 2**20
    assert tuning.parse_size("8kB") == 8 * 2**10
    assert tuning.parse_size("2tb") == 2 * 2**40
    with pytest.raises(ValueError, match="has no unit"):
        tuning.parse_size("64")


def test_the_note_speaks_when_the_indexes_outgrow_shared_buffers() -> None:
    mb = 2**20
    assert (
        tuning.memory_note({"tables": 900 * mb, "indexes": 100 * mb, "shared_buffers": 128 * mb})
        is None
    )
    assert tuning.memory_note({}) is None
    note = tuning.memory_note({"tables": 900 * mb, "indexes": 420 * mb, "shared_buffers": 128 * mb})
    assert note is not None
    assert "420MB" in note and "128MB" in note and "dedup-store db tune" in note
