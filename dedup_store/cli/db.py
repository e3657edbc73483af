"""``dedup-store db``: the database the store lives in (the embedded server, migrations, the
server settings the work wants, dumps and restores, and psql on it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dedup_store import config
from dedup_store.cli.context import Settings, announce, settings_of
from dedup_store.cli.render import FormatOption, Output, OutputFormat

if TYPE_CHECKING:
    from dedup_store.db.server.backup import Target

db_app = typer.Typer(
    help="Manage the database: the embedded server and schema migrations.",
    no_args_is_help=True,
)


@db_app.command("status")
def db_status(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Show the database in use and the embedded server's state."""
    from dedup_store.db.server import location

    settings = settings_of(ctx)
    source = location.describe_source(None if settings.url_from_environment else settings.db_url)
    info: dict[str, Any] = {"source": source, "schema": settings.schema}
    if source == "embedded":
        from dedup_store.db.server import embedded

        state = embedded.status()
        info.update(
            running=state.running,
            pid=state.pid,
            data_dir=str(state.data_dir),
            initialized=state.initialized,
            lost=state.lost,
            url=config.libpq_url(state.url) if state.url else None,
        )
    else:
        info["url"] = config.libpq_url(config.redact(location.resolve_url(settings.db_url)))
    Output(fmt).record(info, title="database")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded server (the next command starts it again)."""
    from dedup_store.db.server import embedded

    stopped = embedded.stop()
    typer.echo("embedded server stopped" if stopped else "embedded server was not running")


@db_app.command("tune")
def db_tune(
    memory: Annotated[
        str | None,
        typer.Option(
            help="The server machine's memory with its unit, e.g. 16GB or 512MB (at least "
            "512MB). Default: this machine's."
        ),
    ] = None,
    cores: Annotated[
        int | None,
        typer.Option(min=1, help="The server machine's cores. Default: this machine's."),
    ] = None,
) -> None:
    """Print postgresql.conf settings for a server of your own, sized for its machine."""
    from dedup_store.db.server import tuning

    here_memory, here_cores = tuning.machine()
    count = cores or here_cores
    try:
        size = here_memory if memory is None else tuning.parse_size(memory)
        settings = tuning.server_settings(size, count)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--memory") from None
    described = memory or "this machine's"
    heading = (
        f"dedup_store: settings for a server with {described} memory and {count} cores.\n"
        "Add them to postgresql.conf, or run ALTER SYSTEM SET name = 'value' for each;"
        " then restart the server.\nOn a server without replicas or a WAL archive, "
        "wal_level = 'minimal' with max_wal_senders = '0' also lets a bulk load into a new"
        " store skip the WAL."
    )
    typer.echo(tuning.conf_text(settings, heading), nl=False)


@db_app.command("settle")
def db_settle(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Settle the documents added since the last bulk load: rebuild the key indexes.

    Incremental writes insert into small recent key indexes; this builds the settled ones over
    every document again, so later writes start small again (`stats` shows recent_documents).
    Readers wait while it runs: about 10 s per million documents on two cores.
    """
    with settings_of(ctx).store() as store:
        settled = store.settle()
    Output(fmt).record(
        {
            "settled_through": int(settled["settled_through"]),
            "moved": int(settled["moved"]),
            "seconds": round(settled["seconds"], 2),
        },
        title="settled",
    )


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Create the schema, or upgrade it to the newest revision."""
    from dedup_store.db import migrate

    settings = settings_of(ctx)
    migrate.upgrade(settings.resolve(), settings.schema)
    typer.echo(f"schema {settings.schema} is at revision {migrate.head()}")


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Print the schema's revision and whether it is the newest."""
    from dedup_store.db import migrate

    settings = settings_of(ctx)
    revision = migrate.current(settings.resolve(), settings.schema)
    latest = migrate.head()
    state = "up to date" if revision == latest else f"behind {latest}; run `dedup-store db upgrade`"
    if revision is None:
        state = "no store yet; run `dedup-store init`"
    typer.echo(f"{revision or 'none'} ({state})")


DumpFile = Annotated[
    Path, typer.Argument(metavar="FILE", help="The dump file (pg_dump's custom format).")
]


@db_app.command("dump")
def db_dump(ctx: typer.Context, file: DumpFile) -> None:
    """Dump the store's schema to FILE with the pg_dump that matches the server.

    The embedded server's own pg_dump dumps it; a server of your own needs a pg_dump on PATH
    of its major version or newer.
    """
    from dedup_store.db.server import backup

    settings = settings_of(ctx)
    backup.dump(_target(settings), settings.schema, file)
    typer.echo(f"schema {settings.schema} dumped to {file}")


@db_app.command("restore")
def db_restore(ctx: typer.Context, file: DumpFile) -> None:
    """Make the store of a dump again, in a database that does not hold its schema yet.

    With the embedded server, this also makes a new server where the old one's data directory
    was lost.
    """
    from dedup_store.db.server import backup

    settings = settings_of(ctx)
    backup.restore(_target(settings, replace_lost=True), settings.schema, file)
    typer.echo(f"schema {settings.schema} restored from {file}")


@db_app.command("psql", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def db_psql(
    ctx: typer.Context,
    args: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[PSQL_ARGS]...",
            help="Passed to psql, e.g. -c 'SELECT count(*) FROM documents'.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run psql on the store, its schema first on the search path.

    The embedded server's own psql runs when it is there; otherwise the psql on PATH.
    """
    from dedup_store.db.server import backup

    settings = settings_of(ctx)
    command, env = backup.psql_command(_target(settings), settings.schema, list(args or []))
    os.execvpe(command[0], command, env)


def _target(settings: Settings, *, replace_lost: bool = False) -> Target:
    """The database of the store as the client tools reach it: the embedded server with its own
    tools, or the URL given with those on PATH."""
    from dedup_store.db.server import backup, embedded

    if settings.db_url is not None:
        return backup.target(settings.resolve())
    url = embedded.start(announce=announce, replace_lost=replace_lost)
    return backup.target(url, embedded.bin_dir())
