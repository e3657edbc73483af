"""Database selection, URL normalization and password redaction."""

from __future__ import annotations

import ast
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from dedup_store import config
from dedup_store.db.server import embedded, location
from dedup_store.errors import DatabaseError, InvalidNameError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.ENV_URL, raising=False)
    monkeypatch.delenv(config.ENV_SCHEMA, raising=False)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql://u@h:5432/db", "postgresql+psycopg://u@h:5432/db"),
        ("postgres://u:p@h/db", "postgresql+psycopg://u:p@h/db"),
        ("postgresql+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        ("postgres+psycopg://u@h/db", "postgresql+psycopg://u@h/db"),
        (
            "postgresql://u:p%40ss@h/db?sslmode=require",
            "postgresql+psycopg://u:p%40ss@h/db?sslmode=require",
        ),
    ],
)
def test_normalize_url(given: str, expected: str) -> None:
    assert config.normalize_url(given) == expected


@pytest.mark.parametrize("bad", ["sqlite:///x.db", "mysql://u:secret@h/db", "not a url"])
def test_normalize_rejects_other_databases_without_leaking(bad: str) -> None:
    with pytest.raises(DatabaseError) as info:
        config.normalize_url(bad)
    assert "secret" not in str(info.value)


def test_explicit_url_wins_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.ENV_URL, "postgresql://env@h/db")
    assert location.resolve_url("postgresql://arg@h/db") == "postgresql+psycopg://arg@h/db"
    assert location.describe_source("postgresql://arg@h/db") == "argument"


def test_environment_url_wins_over_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.ENV_URL, "postgres://env@h/db")
    assert location.resolve_url(None) == "postgresql+psycopg://env@h/db"
    assert location.describe_source(None) == "environment"


def test_embedded_when_nothing_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(embedded.ENV_DATA_DIR, str(tmp_path / "data"))
    assert location.describe_source(None) == "embedded"
    try:
        url = location.resolve_url(None)
        assert url == embedded.status().url
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            assert conn.execute(sa.text("select 1")).scalar_one() == 1
        engine.dispose()
    finally:
        embedded.stop()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://bob:hunter2@db:5432/x", "postgresql://bob:***@db:5432/x"),
        ("postgresql+psycopg://bob:p%40ss@db/x", "postgresql+psycopg://bob:***@db/x"),
        (
            "postgresql://bob@db/x?password=hunter2&sslmode=require",
            "postgresql://bob@db/x?password=***&sslmode=require",
        ),
        ("postgresql://bob@db/x", "postgresql://bob@db/x"),
        ("postgresql://app:p@ssw0rd@host/db", "postgresql://app:***@host/db"),
        ("postgresql://app:a@b:c/d@host:5/db?x=1", "postgresql://app:***@host:5/db?x=1"),
        ("postgresql://:only@host/db", "postgresql://:***@host/db"),
    ],
)
def test_redact(url: str, expected: str) -> None:
    assert config.redact(url) == expected


def test_redact_accepts_sqlalchemy_url() -> None:
    url = sa.engine.make_url("postgresql+psycopg://bob:hunter2@db/x")
    assert "hunter2" not in config.redact(url)


def test_redact_hides_an_unencoded_at_sign_of_a_parsed_url() -> None:
    # SQLAlchemy ends the password at the first "@" and takes "ssw0rd@host" for the host
    url = sa.engine.make_url("postgresql+psycopg://app:p@ssw0rd@host/db")
    assert config.redact(url) == "postgresql+psycopg://app:***@host/db"


def test_driver_message_with_the_rest_of_an_unencoded_password_is_scrubbed() -> None:
    url = "postgresql://app:p@ssw0rd@host/db"
    message = 'failed to resolve host "ssw0rd@host": connecting as app with p@ssw0rd'
    scrubbed = config.scrub(message, config.passwords_of(url))
    assert "ssw0rd" not in scrubbed
    assert config.passwords_of("postgresql://app:s3cr%40t@db/x")[:2] == ["s3cr%40t", "s3cr@t"]


def test_scrub_hides_passwords_in_messages() -> None:
    message = (
        "could not connect to postgresql://bob:hunter2@db/x; "
        "dsn: host=db password=hunter2 user=bob; again password='hun ter2'"
    )
    scrubbed = config.scrub(message)
    assert "hunter2" not in scrubbed and "hun ter2" not in scrubbed
    assert "postgresql://bob:***@db/x" in scrubbed
    assert "host=db password=*** user=bob" in scrubbed


def test_scrub_exception_removes_bare_password_of_the_url() -> None:
    error = RuntimeError("authentication failed, tried s3cr%40t and s3cr@t")
    scrubbed = config.scrub_exception(error, "postgresql://bob:s3cr%40t@db/x")
    assert "s3cr" not in scrubbed


def test_real_connection_error_is_scrubbed() -> None:
    url = "postgresql+psycopg://nobody:topsecret@127.0.0.1:1/x"
    engine = sa.create_engine(url)
    with pytest.raises(sa.exc.OperationalError) as info:
        engine.connect()
    engine.dispose()
    assert isinstance(info.value.orig, psycopg.OperationalError)
    assert "topsecret" not in config.scrub_exception(info.value, url)


def test_schema_name(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.schema_name() == "dedup"
    monkeypatch.setenv(config.ENV_SCHEMA, "cms_dedup")
    assert config.schema_name() == "cms_dedup"
    assert config.schema_name("explicit") == "explicit"
    with pytest.raises(InvalidNameError, match="invalid schema name"):
        config.schema_name('bad"name')


def test_config_and_the_embedded_server_import_each_other_one_way() -> None:
    # location.resolve_url starts the embedded server; the server's module needs nothing of config
    tree = ast.parse(Path(embedded.__file__).read_text())
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "dedup_store.config" not in modules


def test_replica_urls_come_from_the_option_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        config.ENV_REPLICA_URLS, "postgresql://r1/db, postgresql://r2/db\tpostgresql://r3/db"
    )
    assert config.replica_urls() == [
        "postgresql://r1/db",
        "postgresql://r2/db",
        "postgresql://r3/db",
    ]
    assert config.replica_urls(["postgresql://given/db"]) == ["postgresql://given/db"]
    monkeypatch.delenv(config.ENV_REPLICA_URLS)
    assert config.replica_urls() == []
