"""Backups of a store with the PostgreSQL client tools that match its server, ``psql`` on it,
and an embedded data directory that went missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner, Result

from dedup_store.cli import app
from dedup_store.db.server import embedded
from tests.conftest import drop_schema
from tests.test_embedded import data_dir as data_dir

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = str(ROOT / "examples")


def run(*args: str, url: str | None = None, schema: str = "dedup") -> Result:
    options = ["--db-url", url] if url else []
    env = {"DEDUP_STORE_URL": None, "DEDUP_STORE_SCHEMA": None}
    return CliRunner().invoke(app, [*options, "--schema", schema, *args], env=env)


def ok(*args: str, url: str | None = None, schema: str = "dedup") -> Result:
    result = run(*args, url=url, schema=schema)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    return result


def contents(url: str | None, schema: str) -> tuple[Any, Any]:
    """Every document with its cluster and best match, and every duplicate pair."""
    exported = json.loads(ok("export", "-f", "json", url=url, schema=schema).stdout)
    pairs = json.loads(ok("pairs", "-f", "json", url=url, schema=schema).stdout)
    return exported, pairs


@pytest.mark.db
def test_dump_and_restore_on_a_server_of_ones_own(
    tmp_path: Path, engine: Engine, database_url: str, schema: str
) -> None:
    ok("ingest", "--quiet", EXAMPLES, url=database_url, schema=schema)
    before = contents(database_url, schema)
    backup = tmp_path / "store.dump"
    dumped = ok("db", "dump", str(backup), url=database_url, schema=schema)
    assert backup.read_bytes().startswith(b"PGDMP")  # pg_dump's custom format
    assert f"schema {schema} dumped to {backup}" in dumped.stdout
    refused = run("db", "restore", str(backup), url=database_url, schema=schema)
    assert refused.exit_code == 7
    assert f"schema {schema!r} already exists in this database" in refused.stderr
    drop_schema(engine, schema)
    ok("db", "restore", str(backup), url=database_url, schema=schema)
    assert contents(database_url, schema) == before
    elsewhere = run("db", "restore", str(backup), url=database_url, schema="t_elsewhere")
    assert elsewhere.exit_code == 7
    assert f"holds the store of schema {schema!r}" in elsewhere.stderr


@pytest.mark.db
def test_a_dump_is_written_beside_its_file_and_only_over_a_regular_one(
    tmp_path: Path, database_url: str, schema: str
) -> None:
    """``db dump /dev/full`` handed the device to pg_dump; a dump is now renamed over a regular
    file (a link's target) when complete, and any other path is refused with one line."""
    ok("ingest", "--quiet", EXAMPLES, url=database_url, schema=schema)
    for path, message in (
        ("/dev/full", "/dev/full is not a regular file: write the dump to a file"),
        (str(tmp_path / "missing" / "s.dump"), "cannot write the dump to"),
    ):
        refused = run("db", "dump", path, url=database_url, schema=schema)
        assert refused.exit_code == 1, refused.stdout
        assert refused.stderr.startswith("error: ") and message in refused.stderr
        assert refused.stderr.count("\n") == 1
    target = tmp_path / "target.dump"
    target.write_text("old")
    link = tmp_path / "link.dump"
    link.symlink_to(target)
    ok("db", "dump", str(link), url=database_url, schema=schema)
    assert link.is_symlink() and target.read_bytes().startswith(b"PGDMP")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.dump", "target.dump"]


@pytest.mark.db
def test_db_status_prints_a_url_psql_takes(database_url: str, schema: str) -> None:
    status = json.loads(ok("db", "status", "-f", "json", url=database_url, schema=schema).stdout)
    assert status["url"].startswith("postgresql://")
    answer = subprocess.run(
        ["psql", status["url"], "-At", "-c", "SELECT 6 * 7"], capture_output=True, text=True
    )
    assert answer.stdout.strip() == "42", answer.stderr


def cli_process(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEDUP_STORE_")}
    env |= {"PYTHONPATH": str(ROOT), embedded.ENV_DATA_DIR: str(data)}
    return subprocess.run(
        [sys.executable, "-m", "dedup_store", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_embedded_server_dumped_lost_and_restored(data_dir: Path, tmp_path: Path) -> None:
    first = ok("ingest", "--quiet", EXAMPLES)
    assert first.stderr == (
        f"starting the embedded PostgreSQL server in {data_dir} (first run takes a few seconds); "
        "it keeps running for the next commands: `dedup-store db stop` stops it\n"
    )
    before = contents(None, "dedup")
    assert ok("stats").stderr == ""  # the server runs: nothing to say
    status = json.loads(ok("db", "status", "-f", "json").stdout)
    assert status["url"].startswith("postgresql://postgres@/postgres?host=")

    # the system's pg_dump 15 cannot dump PostgreSQL 18, and says what to do
    older = run("db", "dump", str(tmp_path / "x.dump"), url=status["url"])
    assert older.exit_code == 7
    assert "is older than the server (PostgreSQL 18)" in older.stderr
    assert len(older.stderr.splitlines()) == 1

    # the embedded server's own pg_dump and psql
    backup = tmp_path / "store.dump"
    ok("db", "dump", str(backup))
    assert backup.read_bytes().startswith(b"PGDMP")
    psql = cli_process("db", "psql", "-At", "-c", "SELECT count(*) FROM documents", data=data_dir)
    assert (psql.returncode, psql.stdout.strip()) == (0, "101"), psql.stderr

    ok("db", "stop")
    shutil.rmtree(data_dir)
    lost = run("stats")
    assert lost.exit_code == 7
    assert f"the embedded database in {data_dir} is gone" in lost.stderr
    assert "dedup-store db restore FILE" in lost.stderr
    assert not (data_dir / "pgdata" / "PG_VERSION").exists()

    restored = ok("db", "restore", str(backup))
    assert f"starting the embedded PostgreSQL server in {data_dir}" in restored.stderr
    assert contents(None, "dedup") == before
