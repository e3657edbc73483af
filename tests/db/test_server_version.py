"""A server older than PostgreSQL 14 is refused when a store opens, with its version and the
minimum. The server is the real one; only the version it reports is made older."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, inspect, text

from dedup_store import DedupStore, UnsupportedServerError
from dedup_store.db.server import engine as db_engine
from tests.conftest import SqlRecorder
from tests.test_cli import CliHelper
from tests.test_cli import cli as cli

REFUSAL = (
    "PostgreSQL 13.11 is too old: dedup_store needs PostgreSQL 14 or newer "
    "(server_version_num 130011 < 140000)"
)


@pytest.fixture
def older_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reports PostgreSQL 13.11."""
    monkeypatch.setattr(db_engine, "server_version_num", lambda conn: 130011)


@pytest.mark.usefixtures("older_server")
def test_a_store_on_an_older_server_is_refused_before_anything_is_made(
    engine: Engine, schema: str
) -> None:
    with pytest.raises(UnsupportedServerError) as refused:
        DedupStore(engine, schema=schema)
    assert (refused.value.server_version, refused.value.minimum) == (130011, 140000)
    assert str(refused.value) == REFUSAL
    assert schema not in inspect(engine).get_schema_names()


@pytest.mark.usefixtures("older_server")
def test_the_command_line_says_so_with_exit_code_7(cli: CliHelper) -> None:
    for command in (["init"], ["stats"]):
        result = cli(*command)
        assert (result.exit_code, result.stderr) == (7, f"error: {REFUSAL}\n")


def test_the_version_is_the_servers_and_read_without_a_statement(
    engine: Engine, schema: str, sql_recorder: SqlRecorder
) -> None:
    with engine.connect() as conn:
        shown = int(conn.execute(text("SHOW server_version_num")).scalar_one())
        sent = len(sql_recorder.statements)
        assert db_engine.server_version_num(conn) == shown >= db_engine.MIN_SERVER_VERSION
        assert len(sql_recorder.statements) == sent
    with DedupStore(engine, schema=schema) as store:
        assert store.stats().documents == 0
