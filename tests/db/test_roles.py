"""Least privilege, as docs/embedding.md grants it, with real roles: an owner, a writer, a reader
and a reporting role that runs every example of docs/sql.md."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError
from typer.testing import CliRunner

from dedup_store import DatabaseError, DedupStore, OwnerRequiredError
from dedup_store.cli import app
from dedup_store.ingest.inputs import read_inputs
from dedup_store.results import Document

ROOT = Path(__file__).resolve().parents[2]
EMBEDDING = (ROOT / "docs" / "embedding.md").read_text(encoding="utf-8")
SQL_EXAMPLES = re.findall(r"```sql\n(.*?)```", (ROOT / "docs" / "sql.md").read_text(), re.S)
ROLES = ("cms_owner", "cms_writer", "cms_reader", "reports")
TEXT = "The harbour lanterns were lit at dusk while the fishing fleet came back to the quay."


def documented_grants(role: str) -> str:
    """The SQL block docs/embedding.md gives for ``role`` (owner, writer, reader, reports)."""
    found = re.search(rf"<!-- roles: {role} -->\n```sql\n(.*?)```", EMBEDDING, re.S)
    assert found is not None, f"docs/embedding.md gives no grants for the {role}"
    return found.group(1)


class Roles:
    """The documented roles, under names of this test's own, in the test's schema."""

    def __init__(self, engine: Engine, schema: str) -> None:
        self.engine = engine
        self.schema = schema
        suffix = uuid.uuid4().hex[:8]
        self.names = {role: f"{role}_{suffix}" for role in ROLES}

    def mine(self, sql: str) -> str:
        """``sql`` for this test's schema and role names."""
        sql = re.sub(r"\bdedup\b", self.schema, sql)
        return re.sub(r"\b(cms_owner|cms_writer|cms_reader|reports)\b", self._name, sql)

    def _name(self, match: re.Match[str]) -> str:
        return self.names[match.group(1)]

    def grant(self, role: str) -> None:
        """Run the documented grants of ``role`` as the DBA."""
        with self.engine.begin() as conn:
            conn.execute(text(self.mine(documented_grants(role))))

    def url(self, role: str) -> str:
        return make_url(self.engine.url).set(username=self.names[role]).render_as_string(False)

    def drop(self) -> None:
        with self.engine.begin() as conn:
            for name in self.names.values():
                found = text("SELECT 1 FROM pg_roles WHERE rolname = :n")
                if conn.execute(found, {"n": name}).first() is not None:
                    conn.execute(text(f'DROP OWNED BY "{name}" CASCADE'))
                    conn.execute(text(f'DROP ROLE "{name}"'))


@pytest.fixture
def roles(engine: Engine, schema: str) -> Iterator[Roles]:
    made = Roles(engine, schema)
    try:
        yield made
    finally:
        made.drop()


def examples() -> list[Document]:
    return list(read_inputs([str(ROOT / "examples")]))  # type: ignore[arg-type]


def test_the_documented_roles_do_their_work(roles: Roles) -> None:
    roles.grant("owner")
    DedupStore(roles.url("cms_owner"), schema=roles.schema).close()  # the owner makes the store
    for role in ("writer", "reader", "reports"):
        roles.grant(role)
    docs = examples()

    with DedupStore(roles.url("cms_writer"), schema=roles.schema) as writer:
        # into an empty store the owner would load in bulk; the writer loads incrementally
        summary = writer.ingest(iter(docs))
        assert (summary.bulk, summary.documents, summary.errors) == (False, len(docs), 0)
        owner = roles.names["cms_owner"]
        with pytest.raises(OwnerRequiredError, match=f"role '{owner}'") as refused:
            writer.ingest(iter(docs[:3]), bulk=True)
        assert refused.value.exit_code == 7
        with pytest.raises(OwnerRequiredError, match="settling the key tiers drops and builds"):
            writer.settle()
        assert writer.add("late-1", TEXT).status.value == "new"

    with DedupStore(roles.url("cms_owner"), schema=roles.schema) as owner_store:
        assert owner_store.settle()["moved"] == len(docs) + 1

    with DedupStore(roles.url("cms_writer"), schema=roles.schema) as writer:
        assert writer.add("late-2", TEXT + " Again.").matches[0].external_id == "late-1"
        assert writer.delete(["late-2"]) == 1
    writing = create_engine(roles.url("cms_writer"))
    try:  # the store's structure, parameters and settings are not the writer's to change
        for table in ("alembic_version", "params", "settings"):
            with writing.connect() as conn:
                assert conn.execute(text(f'SELECT count(*) FROM "{roles.schema}".{table}')).one()
                with pytest.raises(ProgrammingError, match="permission denied"):
                    conn.execute(text(f'DELETE FROM "{roles.schema}".{table}'))
    finally:
        writing.dispose()

    with DedupStore(roles.url("cms_reader"), schema=roles.schema, create=False) as reader:
        assert reader.check(TEXT).status.value == "exact_duplicate"
        assert reader.stats().documents == len(docs) + 1
        assert reader.similar("late-1") == []
        assert len(list(reader.export())) == len(docs) + 1
        assert [c.size for c in reader.clusters(4)] == [4]
        with pytest.raises(DatabaseError, match="permission denied"):
            reader.add("refused", "a reader writes nothing at all here")

    reports = create_engine(roles.url("reports"))
    try:
        with reports.connect() as conn:
            for example in SQL_EXAMPLES:
                conn.execute(text(roles.mine(example))).all()
            for table in ("settings", "canonical_choices"):  # docs/sql.md names both
                conn.execute(text(f'SELECT * FROM "{roles.schema}".{table}')).all()
    finally:
        reports.dispose()


def test_the_cli_names_the_owner_a_writer_needs(roles: Roles) -> None:
    roles.grant("owner")
    DedupStore(roles.url("cms_owner"), schema=roles.schema).close()
    roles.grant("writer")
    env = {"DEDUP_STORE_URL": None, "DEDUP_STORE_SCHEMA": None}
    options = ["--db-url", roles.url("cms_writer"), "--schema", roles.schema]
    for command in (["db", "settle"], ["ingest", "--bulk", str(ROOT / "examples")]):
        result = CliRunner().invoke(app, [*options, *command], env=env)
        assert result.exit_code == 7, result.output
        owner = roles.names["cms_owner"]
        assert result.stderr.startswith("error: ")
        assert f"only the owner of its tables (role '{owner}', or a member of it)" in result.stderr
        assert len(result.stderr.splitlines()) == 1
    from dedup_store.spark import ingest_records  # refused before Spark starts

    with pytest.raises(OwnerRequiredError, match="a Spark load drops and builds"):
        ingest_records(examples()[:2], roles.url("cms_writer"), roles.schema)
