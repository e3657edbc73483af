"""The ``dedup-store`` command line interface.

Each command parses its options, makes one call to :class:`~dedup_store.service.DedupStore` (or
the migration helpers), and renders the result. Errors of ours, and database errors, become one
line on standard error and the exit code of the error class (see :mod:`dedup_store.errors`);
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.metadata
import time
from typing import Annotated, Any, Literal, NoReturn

import psycopg
import typer
from sqlalchemy import exc as sa_exc
from typer.core import TyperGroup

from dedup_store import config
from dedup_store.cli_render import IngestProgress, Output, OutputFormat
from dedup_store.core import kernels
from dedup_store.core.params import FingerprintParams
from dedup_store.db import embedded, migrate
from dedup_store.errors import DatabaseError, DedupStoreError, InputFormatError
from dedup_store.inputs import DEFAULT_GLOB, InputFormat, apply_error_policy, read_inputs, read_text
from dedup_store.results import IngestSummary
from dedup_store.service import DedupStore

EXIT_INTERRUPTED = 130
_D = FingerprintParams()
"""The default fingerprint parameters, quoted in the help of ``init``."""


class OnError(enum.StrEnum):
    """What ``ingest`` does with a bad record."""

    stop = "stop"
    skip = "skip"


class StdinFormat(enum.StrEnum):
    """How ``ingest -`` reads standard input."""

    jsonl = "jsonl"
    csv = "csv"
    text = "text"


class SchemeChoice(enum.StrEnum):
    """MinHash band schemes."""

    threshold = "threshold"
    broder = "broder"


class VerifyChoice(enum.StrEnum):
    """How candidates are scored."""

    exact = "exact"
    estimate = "estimate"


class HtmlChoice(enum.StrEnum):
    """Whether input is HTML."""

    auto = "auto"
    always = "always"
    never = "never"


@dataclasses.dataclass
class Settings:
    """The global options, and the database URL once it has been resolved."""

    db_url: str | None
    schema: str
    debug: bool
    url: str | None = None

    def resolve(self) -> str:
        """The database URL: ``--db-url``, ``DEDUP_STORE_URL``, else the embedded server."""
        if self.url is None:
            self.url = config.resolve_url(self.db_url)
        return self.url

    def store(self, *, create: bool = False, params: FingerprintParams | None = None) -> DedupStore:
        """Open the store (``create``: make or upgrade the schema when missing)."""
        return DedupStore(self.resolve(), params, self.schema, create=create)


class _Group(TyperGroup):
    """The root command group: turns our exceptions into a message and an exit code."""

    def invoke(self, ctx: Any) -> Any:  # a click Context (typer may vendor its own click)
        try:
            return super().invoke(ctx)
        except DedupStoreError as e:
            _fail(ctx, e, str(e), e.exit_code)
        except (sa_exc.SQLAlchemyError, psycopg.Error) as e:
            _fail(ctx, e, f"database error: {_driver_message(e)}", DatabaseError.exit_code)
        except KeyboardInterrupt as e:
            _fail(ctx, e, "interrupted", EXIT_INTERRUPTED)


def _fail(ctx: Any, error: BaseException, message: str, code: int) -> NoReturn:
    settings = ctx.obj if isinstance(ctx.obj, Settings) else None
    if settings is not None and settings.debug:
        raise error
    urls = [settings.url, settings.db_url] if settings else []
    message = config.scrub(message, [p for u in urls if u for p in config.passwords_of(u)])
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _driver_message(error: BaseException) -> str:
    orig = getattr(error, "orig", None) or error
    text = " ".join(part.strip() for part in str(orig).splitlines() if part.strip())
    return text or type(orig).__name__


app = typer.Typer(
    cls=_Group,
    name="dedup-store",
    help="Find near-duplicate documents and remember them in PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
db_app = typer.Typer(
    help="Manage the database: the embedded server and schema migrations.",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")

FormatOption = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="Output format: a table for people, or json/jsonl/csv."),
]


def _print_version(value: bool) -> None:
    if not value:
        return
    implementation = (
        "compiled" if kernels.compiled is not None else "numpy (built without a C compiler)"
    )
    typer.echo(f"dedup-store {importlib.metadata.version('dedup-store')}")
    typer.echo(f"fingerprint kernels: {implementation}")
    raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    db_url: Annotated[
        str | None,
        typer.Option(
            "--db-url",
            envvar=config.ENV_URL,
            help="PostgreSQL URL (postgresql://user:password@host:port/db). "
            "Default: the embedded server.",
            show_default=False,
        ),
    ] = None,
    schema: Annotated[
        str,
        typer.Option(envvar=config.ENV_SCHEMA, help="PostgreSQL schema holding the store."),
    ] = config.DEFAULT_SCHEMA,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks on errors.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Show the version and whether the compiled fingerprint kernels are in use.",
        ),
    ] = False,
) -> None:
    """Find near-duplicate documents and remember them in PostgreSQL."""
    ctx.obj = Settings(db_url=db_url or None, schema=config.schema_name(schema), debug=debug)


def _settings(ctx: typer.Context) -> Settings:
    settings = ctx.find_root().obj
    assert isinstance(settings, Settings)
    return settings


# -- init ------------------------------------------------------------------------------------


def _param(name: str, text: str, *flags: str) -> Any:
    """A ``typer.Option`` for the fingerprint parameter ``name``, its default quoted in the help."""
    default = getattr(_D, name)
    shown = ("on" if default else "off") if isinstance(default, bool) else default
    return typer.Option(*flags, help=f"{text} (default {shown}).", show_default=False)


@app.command()
def init(
    ctx: typer.Context,
    shingle_size: Annotated[int | None, _param("shingle_size", "Words per shingle")] = None,
    cjk_shingle_size: Annotated[
        int | None, _param("cjk_shingle_size", "Characters per shingle in Chinese/Japanese text")
    ] = None,
    num_perm: Annotated[int | None, _param("num_perm", "Min-hashes per MinHash signature")] = None,
    scheme: Annotated[SchemeChoice | None, _param("scheme", "MinHash band scheme")] = None,
    threshold: Annotated[
        float | None, _param("threshold", "Target Jaccard similarity of near-duplicates")
    ] = None,
    simhash_k: Annotated[
        int | None, _param("simhash_k", "Largest Hamming distance of matching SimHashes")
    ] = None,
    simhash_blocks: Annotated[
        int | None, _param("simhash_blocks", "SimHash blocks, more than --simhash-k")
    ] = None,
    containment: Annotated[
        float | None, _param("containment", "Containment threshold for excerpts, 0 turns it off")
    ] = None,
    verify: Annotated[
        VerifyChoice | None,
        _param("verify", "Score candidates by exact Jaccard or by the MinHash estimate"),
    ] = None,
    stopwords: Annotated[
        bool | None, _param("stopwords", "Drop stop words", "--stopwords/--no-stopwords")
    ] = None,
    stem: Annotated[bool | None, _param("stem", "Snowball stemming", "--stem/--no-stem")] = None,
    html: Annotated[
        HtmlChoice | None, _param("html", "Whether input is HTML (auto detects markup)")
    ] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Create the store, or upgrade its schema.

    The options are the fingerprint parameters of a new store. An existing store keeps its
    parameters: giving different ones is an error that names them.
    """
    given = {
        "shingle_size": shingle_size,
        "cjk_shingle_size": cjk_shingle_size,
        "num_perm": num_perm,
        "scheme": scheme,
        "threshold": threshold,
        "simhash_k": simhash_k,
        "simhash_blocks": simhash_blocks,
        "containment": containment,
        "verify": verify,
        "stopwords": stopwords,
        "stem": stem,
        "html": html,
    }
    chosen = {
        k: v.value if isinstance(v, enum.Enum) else v for k, v in given.items() if v is not None
    }
    params = FingerprintParams.from_dict(chosen) if chosen else None
    settings = _settings(ctx)
    migrate.upgrade(settings.resolve(), settings.schema)
    with settings.store(create=True, params=params) as store:
        stored = store.params
    info = {
        "schema": settings.schema,
        "database": config.redact(settings.resolve()),
        "revision": migrate.head(),
        "params": stored.to_dict(),
    }
    Output(fmt).record(info, title="store ready")


# -- ingest ----------------------------------------------------------------------------------


@app.command()
def ingest(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="PATH", help="Files, directories or - for standard input.", show_default=False
        ),
    ],
    glob: Annotated[
        str, typer.Option(help="Comma-separated file name patterns searched in directories.")
    ] = DEFAULT_GLOB,
    id_field: Annotated[str, typer.Option(help="JSONL key / CSV column of the id.")] = "id",
    text_field: Annotated[str, typer.Option(help="JSONL key / CSV column of the text.")] = "text",
    stdin_format: Annotated[
        StdinFormat,
        typer.Option(
            "--format",
            help="Format of standard input (text: the whole stream is "
            "one document with the id 'stdin').",
        ),
    ] = StdinFormat.jsonl,
    on_error: Annotated[
        OnError, typer.Option(help="On a bad record: stop, or skip it and report it.")
    ] = OnError.stop,
    batch_size: Annotated[int, typer.Option(min=1, help="Documents per transaction.")] = 2000,
    update: Annotated[
        bool,
        typer.Option(
            "--update",
            help="Replace documents whose id is already stored "
            "(default: skip them, so re-running is idempotent).",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Add documents from files, directories, JSONL, CSV or standard input.

    Directories are searched recursively for files matching --glob. A text or HTML file is one
    document whose id is its path (relative to the directory given).
    JSONL and CSV records give the id and text in --id-field and --text-field; their other fields
    are kept as metadata. The store is created with default parameters if it does not exist.
    """
    settings = _settings(ctx)
    policy: Literal["stop", "skip"] = "skip" if on_error is OnError.skip else "stop"
    fmt: InputFormat = stdin_format.value
    started = time.perf_counter()
    with settings.store(create=True) as store, IngestProgress(not quiet) as progress:
        reader_errors: list[InputFormatError] = []

        def report(error: InputFormatError) -> None:
            reader_errors.append(error)
            progress.warn(f"skipped: {error}")

        records = read_inputs(
            paths,
            glob=glob,
            id_field=id_field,
            text_field=text_field,
            stdin_format=fmt,
            stdin=typer.get_binary_stream("stdin"),
        )
        summary = store.ingest(
            apply_error_policy(records, policy, report),
            batch_size=batch_size,
            update=update,
            on_error=policy,
            on_batch=progress.on_batch,
            count_clusters=True,
        )
    summary.errors += len(reader_errors)
    summary.seconds = max(summary.seconds, time.perf_counter() - started)
    _print_summary(summary, as_json)


def _print_summary(summary: IngestSummary, as_json: bool) -> None:
    data = summary.to_dict()
    if as_json:
        Output(OutputFormat.json).record(data)
        return
    rate = summary.documents / summary.seconds if summary.seconds > 0 else 0.0
    data["seconds"] = round(summary.seconds, 2)
    data["documents_per_second"] = round(rate)
    Output(OutputFormat.table).record(data, title="ingest summary")


# -- queries ---------------------------------------------------------------------------------


@app.command()
def check(
    ctx: typer.Context,
    text: Annotated[
        str | None,
        typer.Argument(
            metavar="TEXT",
            help="The text to check; - or nothing reads standard input.",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file", metavar="PATH", help="Read the text from this file.", show_default=False
        ),
    ] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Show what adding a text would find, without storing it.

    The answer is the one `ingest` would give: new, exact or near duplicate, the matching
    documents with their scores, and the cluster it would join.
    """
    body = _text_to_check(text, file)
    with _settings(ctx).store() as store:
        result = store.check(body)
    out = Output(fmt)
    matches = [m.to_dict() for m in result.matches]
    if fmt in (OutputFormat.json, OutputFormat.jsonl):
        data = result.to_dict()
        del data["id"]
        out.record(data)
    elif fmt is OutputFormat.csv:
        out.rows(matches, [])
    else:
        out.record(
            {
                "status": result.status.value,
                "cluster_id": result.cluster_id,
                "matches": len(matches),
            }
        )
        out.rows(matches, _MATCH_COLUMNS, title="matches")


def _text_to_check(text: str | None, file: str | None) -> str:
    if text is not None and text != "-":
        if file is not None:
            raise typer.BadParameter("give a text or --file, not both", param_hint="--file")
        return text
    if file is not None:
        try:
            with open(file, "rb") as f:
                record = read_text(f, file, file)
        except OSError as e:
            raise InputFormatError(e.strerror or str(e), file) from None
    else:
        record = read_text(typer.get_binary_stream("stdin"), "<stdin>", "stdin")
    if isinstance(record, InputFormatError):
        raise record
    return record.text


_MATCH_COLUMNS = ["external_id", "method", "jaccard", "containment", "hamming"]


@app.command()
def similar(
    ctx: typer.Context,
    doc_id: Annotated[str, typer.Argument(metavar="ID", help="A stored document id.")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """List the documents that match a stored document, best first."""
    with _settings(ctx).store() as store:
        matches = store.similar(doc_id)
    Output(fmt).rows((m.to_dict() for m in matches), _MATCH_COLUMNS, title=f"similar to {doc_id}")


@app.command()
def cluster(
    ctx: typer.Context,
    doc_id: Annotated[str, typer.Argument(metavar="ID", help="A stored document id.")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Show the cluster of a stored document: representative and members."""
    with _settings(ctx).store() as store:
        found = store.cluster(doc_id)
    Output(fmt).record(found.to_dict(), title=f"cluster {found.cluster_id}")


_CLUSTER_COLUMNS = ["cluster_id", "size", "representative", "members"]


@app.command()
def clusters(
    ctx: typer.Context,
    min_size: Annotated[int, typer.Option(min=1, help="Only clusters this large.")] = 2,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """List the clusters of duplicates, oldest first."""
    with _settings(ctx).store() as store:
        count = Output(fmt).rows(
            (c.to_dict() for c in store.clusters(min_size)), _CLUSTER_COLUMNS, title="clusters"
        )
    _note_empty(fmt, count, f"no clusters with at least {min_size} documents")


_PAIR_COLUMNS = ["a", "b", "method", "jaccard", "containment", "hamming"]


@app.command()
def pairs(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """List every duplicate pair with its method and scores.

    In each pair, a is the older document.
    """
    with _settings(ctx).store() as store:
        count = Output(fmt).rows(
            (p.to_dict() for p in store.pairs()), _PAIR_COLUMNS, title="duplicate pairs"
        )
    _note_empty(fmt, count, "no duplicate pairs")


@app.command()
def stats(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Show counts over the whole store and its parameters."""
    with _settings(ctx).store() as store:
        found = store.stats()
    Output(fmt).record(found.to_dict(), title="store statistics")


@app.command()
def delete(
    ctx: typer.Context,
    doc_ids: Annotated[list[str], typer.Argument(metavar="ID", help="Stored document ids.")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Delete documents and split the clusters they held together.

    All or nothing: an unknown id is an error and deletes nothing.
    """
    with _settings(ctx).store() as store:
        deleted = store.delete(doc_ids)
    Output(fmt).record({"deleted": deleted})


_EXPORT_COLUMNS = ["id", "cluster_id", "representative", "created_at"]


@app.command()
def export(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Write every document with its cluster and metadata.

    Use --format jsonl (or csv) to write a file.
    """
    with _settings(ctx).store() as store:
        Output(fmt).rows(store.export(), _EXPORT_COLUMNS, title="documents")


def _note_empty(fmt: OutputFormat, count: int, message: str) -> None:
    if count == 0 and fmt is OutputFormat.table:
        typer.echo(message, err=True)


# -- db --------------------------------------------------------------------------------------


@db_app.command("status")
def db_status(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Show the database in use and the embedded server's state."""
    settings = _settings(ctx)
    source = config.describe_source(settings.db_url)
    info: dict[str, Any] = {"source": source, "schema": settings.schema}
    if source == "embedded":
        state = embedded.status()
        info.update(
            running=state.running,
            pid=state.pid,
            data_dir=str(state.data_dir),
            initialized=state.initialized,
            url=state.url,
        )
    else:
        info["url"] = config.redact(config.resolve_url(settings.db_url))
    Output(fmt).record(info, title="database")


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded server (the next command starts it again)."""
    stopped = embedded.stop()
    typer.echo("embedded server stopped" if stopped else "embedded server was not running")


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context) -> None:
    """Create the schema, or upgrade it to the newest revision."""
    settings = _settings(ctx)
    migrate.upgrade(settings.resolve(), settings.schema)
    typer.echo(f"schema {settings.schema} is at revision {migrate.head()}")


@db_app.command("current")
def db_current(ctx: typer.Context) -> None:
    """Print the schema's revision and whether it is the newest."""
    settings = _settings(ctx)
    revision = migrate.current(settings.resolve(), settings.schema)
    latest = migrate.head()
    state = "up to date" if revision == latest else f"behind {latest}; run `dedup-store db upgrade`"
    if revision is None:
        state = "no store yet; run `dedup-store init`"
    typer.echo(f"{revision or 'none'} ({state})")


def main() -> None:
    """Run the command line interface (the ``dedup-store`` console script)."""
    app(prog_name="dedup-store")
