"""Schema migrations, with the Alembic configuration built in code.

The migration scripts ship inside the package (``dedup_store.migrations``), so an installed wheel
can create and upgrade stores. Migrations run on the store's connection, which may be a host
application's connection inside its own transaction (as mlflow runs its migrations).

Opening a store at this code's revision needs no Alembic: the head is the number of the newest
migration script, and the store's revision is read from its version table; Alembic is imported
to migrate, and to name a revision that is not this code's head.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, text

from dedup_store.db.schema.ddl import DEFAULT_SCHEMA, VERSION_TABLE
from dedup_store.db.schema.names import qualified
from dedup_store.errors import ForeignSchemaError, SchemaOutdatedError, StoreNotInitializedError

if TYPE_CHECKING:
    from alembic.config import Config

UPGRADE_HINT = "dedup-store db upgrade"
#: How the revisions of dedup_store are named: ``0001``, ``0002``...
_OUR_REVISION = re.compile(r"\d{4}")
#: How their scripts are named: the revision, then words (``0013_expanded_pairs.py``).
_SCRIPT = re.compile(r"(\d{4})_\w+\.py")


def alembic_config(connection: Connection | None = None, schema: str = DEFAULT_SCHEMA) -> Config:
    """An Alembic configuration pointing at the packaged migrations."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_directory()))
    config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    return config


def migrations_directory() -> Path:
    """The migration scripts: packaged in a wheel as ``dedup_store.migrations``, or the
    ``migrations`` folder beside the package when it runs from a source tree."""
    source_tree = Path(__file__).resolve().parents[3] / "migrations"
    try:
        return Path(str(resources.files("dedup_store.migrations")))
    except ModuleNotFoundError:
        if (source_tree / "env.py").is_file():
            return source_tree
        raise


@functools.cache
def head() -> str:
    """The newest revision this version of the code knows: the number of its newest migration
    script (each revises the one numbered before it, as a test holds Alembic to)."""
    names = (path.name for path in (migrations_directory() / "versions").iterdir())
    return max(match.group(1) for match in map(_SCRIPT.fullmatch, names) if match)


@functools.cache
def revisions() -> frozenset[str]:
    """Every revision this version of the code knows."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return frozenset(revision.revision for revision in script.walk_revisions())


def current_revision(connection: Connection, schema: str) -> str | None:
    """The revision of the store in ``schema``, or ``None`` when there is no store there.

    Raises:
        ForeignSchemaError: the schema's version table holds another application's revision.
        SchemaOutdatedError: it holds a revision of a newer dedup_store.
    """
    table = qualified(schema, VERSION_TABLE)
    if not connection.execute(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": table}).scalar():
        return None
    heads: list[str] = sorted(
        connection.execute(text(f"SELECT version_num FROM {table}")).scalars()
    )
    if not heads:
        return None
    if heads == [head()]:
        return heads[0]
    if len(heads) == 1 and heads[0] in revisions():
        return heads[0]
    if len(heads) == 1 and _OUR_REVISION.fullmatch(heads[0]) and heads[0] > head():
        raise SchemaOutdatedError(
            f"the dedup_store schema {schema!r} is at revision {heads[0]}, newer than this "
            f"code ({head()}): use the newer version of dedup_store that made it"
        )
    raise ForeignSchemaError(
        f"schema {schema!r} holds another application's migrations (its {VERSION_TABLE} is "
        f"at {', '.join(heads)}, no revision of dedup_store): choose another --schema for the "
        "store"
    )


def upgrade_connection(connection: Connection, schema: str, revision: str = "head") -> None:
    """Upgrade the store in ``schema`` on ``connection`` (inside its transaction).

    Raises:
        ForeignSchemaError: the schema holds another application's migrations.
    """
    from alembic import command

    current_revision(connection, schema)
    command.upgrade(alembic_config(connection, schema), revision)


def verify_schema(connection: Connection, schema: str) -> None:
    """Raise unless the store in ``schema`` exists and is at this code's head revision."""
    revision = current_revision(connection, schema)
    if revision is None:
        raise StoreNotInitializedError(
            f"no dedup_store schema {schema!r} in this database; run `dedup-store init`"
        )
    if revision != head():
        raise SchemaOutdatedError(
            f"the dedup_store schema {schema!r} is at revision {revision}, this code needs "
            f"{head()}; run `{UPGRADE_HINT}` (with the same --db-url and --schema)"
        )
