"""The ``dedup-store`` command line interface.

Each command parses its options, makes one call to :class:`~dedup_store.service.DedupStore` (or
the migration helpers), and renders the result. Errors of ours, and database errors, become one
line on standard error and the exit code of the error class (see :mod:`dedup_store.errors`);
``--debug`` shows the traceback instead. This module holds the app, its global options and the
commands that write (``init``, ``ingest``) or check; the others live beside it:
:mod:`~dedup_store.cli_reports` (what the store holds), :mod:`~dedup_store.cli_review` (a
reviewer's), :mod:`~dedup_store.cli_report`, :mod:`~dedup_store.cli_db`.

The store, the database driver and numpy are imported inside the commands, so that ``--help``
and ``--version`` answer at once.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from typer.core import TyperCommand

from dedup_store import cli_reports, cli_review, cli_serve, config
from dedup_store.cli_app import (
    EXIT_INTERRUPTED,
    ExitOnErrorGroup,
    Settings,
    field_names,
    meta_object,
    print_version,
    settings_of,
)
from dedup_store.cli_db import db_app
from dedup_store.cli_render import (
    FormatOption,
    IngestProgress,
    Output,
    OutputFormat,
    print_ingest_summary,
    warn_about_skips,
)
from dedup_store.cli_report import report
from dedup_store.core.params import HtmlMode, Scheme, SimhashWeights, VerifyMode
from dedup_store.errors import InputFormatError, SparkError
from dedup_store.inputs import (
    DEFAULT_GLOB,
    STDIN,
    STDIN_TEXT_ID,
    InputFormat,
    RepeatedIds,
    apply_error_policy,
    open_regular,
    read_inputs,
    read_text,
)

if TYPE_CHECKING:
    from dedup_store.spark import SparkIngest


class OnError(enum.StrEnum):
    """What ``ingest`` does with a bad record."""

    stop = "stop"
    skip = "skip"


class Engine(enum.StrEnum):
    """Where ``ingest`` fingerprints and matches documents."""

    local = "local"
    spark = "spark"


class StdinFormat(enum.StrEnum):
    """How ``ingest -`` reads standard input."""

    jsonl = "jsonl"
    csv = "csv"
    text = "text"


app = typer.Typer(
    cls=ExitOnErrorGroup,
    name="dedup-store",
    help="Find near-duplicate documents and remember them in PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
app.add_typer(db_app, name="db")

DocId = Annotated[str, typer.Argument(metavar="ID", help="A stored document id.")]
MaxBytes = Annotated[
    int | None,
    typer.Option(
        "--max-bytes",
        min=1,
        help="Largest document in UTF-8 bytes (default 16777216, 16 MiB).",
        show_default=False,
    ),
]


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
            callback=print_version,
            is_eager=True,
            help="Show the version and whether the compiled fingerprint kernels are in use.",
        ),
    ] = False,
) -> None:
    """Find near-duplicate documents and remember them in PostgreSQL."""
    source = ctx.get_parameter_source("db_url")  # an enum of the click that typer uses
    from_environment = getattr(source, "name", None) == "ENVIRONMENT"
    ctx.obj = Settings(
        db_url=db_url or None,
        schema=config.schema_name(schema),
        debug=debug,
        url_from_environment=from_environment,
    )


# -- init ------------------------------------------------------------------------------------


def _param(text: str, *flags: str) -> Any:
    """A ``typer.Option`` for a fingerprint parameter (:class:`_InitCommand` adds the default)."""
    return typer.Option(*flags, help=f"{text}.", show_default=False)


#: The fingerprint parameters ``init`` has no option for: a new store takes their defaults
#: (``canonical_version``: the newest canonicalization). Every other one is an option of the
#: same name, which :func:`init` reads by the parameters' field names.
NO_INIT_OPTION = (
    "false_negative_weight", "max_excerpt_keys", "winnow_window", "seed", "canonical_version"
)  # fmt: skip


class _InitCommand(TyperCommand):
    """``init``, whose help quotes the default fingerprint parameters.

    The defaults are read when the help is shown, so that other commands need not load the
    fingerprinting core.
    """

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """Write the help, each parameter's default quoted in its text."""
        from dedup_store.core.params import FingerprintParams

        defaults = FingerprintParams()
        for param in self.params:
            text = getattr(param, "help", None)
            if param.name and hasattr(defaults, param.name) and text and "(default" not in text:
                value = getattr(defaults, param.name)
                shown = ("on" if value else "off") if isinstance(value, bool) else value
                param.help = f"{text.rstrip('.')} (default {shown})."  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)


@app.command(cls=_InitCommand)
def init(
    ctx: typer.Context,
    shingle_size: Annotated[int | None, _param("Words per shingle")] = None,
    cjk_shingle_size: Annotated[
        int | None, _param("Characters per shingle in Chinese/Japanese text")
    ] = None,
    num_perm: Annotated[int | None, _param("Min-hashes per MinHash signature")] = None,
    scheme: Annotated[Scheme | None, _param("MinHash band scheme")] = None,
    threshold: Annotated[
        float | None, _param("Target Jaccard similarity of near-duplicates")
    ] = None,
    simhash_k: Annotated[
        int | None, _param("Largest Hamming distance of matching SimHashes")
    ] = None,
    simhash_blocks: Annotated[int | None, _param("SimHash blocks, more than --simhash-k")] = None,
    simhash_key_max_shingles: Annotated[
        int | None, _param("Most shingles of a document with SimHash block keys, 0: no limit")
    ] = None,
    containment: Annotated[
        float | None, _param("Containment threshold for excerpts, 0 turns it off")
    ] = None,
    containment_merges: Annotated[
        bool | None,
        _param(
            "Let excerpt matches merge clusters", "--containment-merges/--no-containment-merges"
        ),
    ] = None,
    simhash_min_jaccard: Annotated[
        float | None, _param("Jaccard a SimHash match must also reach")
    ] = None,
    simhash_weights: Annotated[
        SimhashWeights | None,
        _param("SimHash feature weights: counts, tf-idf, or tf-idf times a term-length curve"),
    ] = None,
    hot_key_limit: Annotated[
        int | None, _param("Most documents one key leads to (0: no limit)")
    ] = None,
    verify: Annotated[
        VerifyMode | None,
        _param("Score candidates by exact Jaccard or by the MinHash estimate"),
    ] = None,
    stopwords: Annotated[
        bool | None, _param("Drop stop words", "--stopwords/--no-stopwords")
    ] = None,
    stem: Annotated[bool | None, _param("Snowball stemming", "--stem/--no-stem")] = None,
    html: Annotated[HtmlMode | None, _param("Whether input is HTML (auto detects markup)")] = None,
    meta_fields: Annotated[
        str | None,
        _param("Comma-separated fields of a document's meta that hold sets (tags, keywords...)"),
    ] = None,
    meta_weight: Annotated[
        float | None, _param("Weight of the metadata score in the combined score (1 - mu)")
    ] = None,
    keep_text: Annotated[
        bool,
        typer.Option(
            "--keep-text",
            help="Keep each document's original text, for explain and report (a new store).",
        ),
    ] = False,
    canonical: Annotated[
        str | None,
        typer.Option(
            metavar="RULE",
            help="A new store's rule for each cluster's canonical document: oldest, longest, "
            "meta:FIELD (largest value) or meta:FIELD:min (default oldest; "
            "`dedup-store canonical --rule` changes it).",
        ),
    ] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Create the store, or upgrade its schema.

    The options are the fingerprint parameters of a new store. An existing store keeps its
    parameters: giving different ones is an error that names them.
    """
    from dedup_store.core.params import FingerprintParams
    from dedup_store.db.schema import migrate

    # the options named as the parameters' fields: ctx.params has each one given
    chosen = {
        field.name: ctx.params[field.name]
        for field in dataclasses.fields(FingerprintParams)
        if ctx.params.get(field.name) is not None
    }
    if meta_fields is not None:
        chosen["meta_fields"] = field_names(meta_fields)
    FingerprintParams.from_dict(chosen)  # out-of-range values fail before anything is made
    settings = settings_of(ctx)
    migrate.upgrade(settings.resolve(), settings.schema)
    options = {"keep_text": keep_text or None, "canonical_rule": canonical}
    with settings.store(create=True, params=chosen or None, **options) as store:
        stored, kept = store.params, store.settings
    info = {
        "schema": settings.schema,
        "database": config.redact(settings.resolve()),
        "revision": migrate.head(),
        "keep_text": kept.keep_text,
        "canonical_rule": kept.canonical_rule,
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
            help="Format of standard input (text: the whole stream is one document, "
            "with the id given by --id).",
        ),
    ] = StdinFormat.jsonl,
    stdin_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help=f"Id of the document read from standard input with --format text "
            f"(default {STDIN_TEXT_ID!r}).",
            show_default=False,
        ),
    ] = None,
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
    engine: Annotated[
        Engine, typer.Option(help="local: this process; spark: Apache Spark (the spark extra).")
    ] = Engine.local,
    spark_master: Annotated[
        str, typer.Option(help="Spark master URL for --engine spark.")
    ] = "local[*]",
    bulk: Annotated[
        bool | None,
        typer.Option(
            "--bulk/--no-bulk",
            help="Load in one transaction without maintaining the lookup indexes, building "
            "them at the end (default: when the store is empty). Other readers and writers "
            "wait until it commits.",
            show_default=False,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Processes that fingerprint the next batches while this one writes (0: "
            "fingerprint in this process; default: 1 for a bulk load on a machine with 2 cores "
            "or more).",
            show_default=False,
        ),
    ] = None,
    max_bytes: MaxBytes = None,
) -> None:
    """Add documents from files, directories, JSONL, CSV or standard input.

    Directories are searched recursively for files matching --glob. A text or HTML file is one
    document whose id is its path (relative to the directory given).
    JSONL and CSV records give the id and text in --id-field and --text-field; their other fields
    are kept as metadata. The store is created with default parameters if it does not exist.
    Bad records, ids repeated in the input and ids already stored are reported on standard
    error and counted in the summary. Ctrl-C stops the run and prints what was stored.
    """
    if stdin_id is not None and (STDIN not in paths or stdin_format is not StdinFormat.text):
        raise typer.BadParameter(
            "names the document of '-' read with --format text", param_hint="--id"
        )
    if update and engine is Engine.spark:
        raise typer.BadParameter("is not supported with --engine spark", param_hint="--update")
    if update and bulk:
        raise typer.BadParameter("a bulk load adds documents: drop --update", param_hint="--bulk")
    settings = settings_of(ctx)
    spark_ingest = _spark_ingest(spark_master) if engine is Engine.spark else None
    policy: Literal["stop", "skip"] = "skip" if on_error is OnError.skip else "stop"
    fmt: InputFormat = stdin_format.value
    started = time.perf_counter()
    with (
        settings.store(create=True, **_limit(max_bytes)) as store,
        IngestProgress(not quiet) as progress,
    ):
        if engine is Engine.spark:
            from dedup_store.spark.ingest import require_spark_params

            require_spark_params(store.params)  # before the input is read
        repeats = RepeatedIds(progress.warn, update=update)
        records = read_inputs(
            paths,
            glob=glob,
            id_field=id_field,
            text_field=text_field,
            stdin_format=fmt,
            stdin=typer.get_binary_stream("stdin"),
            stdin_id=stdin_id or STDIN_TEXT_ID,
        )
        documents = repeats.watch(apply_error_policy(records, policy, progress.skip_record))
        try:
            if spark_ingest is not None:
                summary = spark_ingest(
                    documents,
                    settings.resolve(),
                    settings.schema,
                    master=spark_master,
                    batch_size=batch_size,
                    on_error=policy,
                    on_errors=lambda errors: progress.on_batch([], errors),
                    max_bytes=store.max_bytes,
                ).summary
            else:
                summary = store.ingest(
                    documents,
                    batch_size=batch_size,
                    update=update,
                    on_error=policy,
                    on_batch=progress.on_batch,
                    on_progress=progress.on_progress,
                    on_phase=progress.on_phase,
                    count_clusters=True,
                    bulk=bulk,
                    workers="auto" if workers is None else workers,
                )
        except KeyboardInterrupt:
            summary = progress.stored
            interrupted = True
        else:
            interrupted = False
    summary.errors += progress.reader_errors
    summary.seconds = max(summary.seconds, time.perf_counter() - started)
    print_ingest_summary(summary, as_json, repeated_ids=repeats.count, interrupted=interrupted)
    if interrupted:
        typer.echo(
            f"error: interrupted after storing {summary.documents} documents; the same command "
            "goes on where it stopped (stored ids are skipped)",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED)
    warn_about_skips(summary, repeats.count, stdin_text=STDIN in paths and fmt == "text")


def _limit(max_bytes: int | None) -> dict[str, Any]:
    """The store's ``max_bytes`` option when ``--max-bytes`` is given (else its default)."""
    return {} if max_bytes is None else {"max_bytes": max_bytes}


def _spark_ingest(master: str) -> Callable[..., SparkIngest]:
    """``dedup_store.spark.ingest_records``, once the spark extra is there and ``master`` is a
    master URL that answers (before the store is opened and the input read)."""
    try:
        from dedup_store.spark import check_master, ingest_records
    except ImportError as error:
        raise SparkError(str(error)) from None
    check_master(master)
    return ingest_records


# -- queries ---------------------------------------------------------------------------------


@app.command()
def check(
    ctx: typer.Context,
    text: Annotated[
        str | None,
        typer.Argument(
            metavar="TEXT",
            help="The text to check; - or nothing reads standard input (a file's name is "
            "refused: use --file).",
            show_default=False,
        ),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option(
            "--file", metavar="PATH", help="Read the text from this file.", show_default=False
        ),
    ] = None,
    meta: Annotated[
        str | None,
        typer.Option(
            "--meta",
            metavar="JSON",
            help="The text's metadata, a JSON object (its meta_fields enter the scores).",
            show_default=False,
        ),
    ] = None,
    max_bytes: MaxBytes = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Show what adding a text would find, without storing it.

    The answer is the one `ingest` would give: new, exact or near duplicate, the matching
    documents with their scores, and the cluster it would join.
    """
    body = _text_to_check(text, file)
    with settings_of(ctx).store(**_limit(max_bytes)) as store:
        result = store.check(body, meta_object(meta))
    out = Output(fmt)
    matches = [m.to_dict() for m in result.matches]
    if fmt in (OutputFormat.json, OutputFormat.jsonl):
        out.record(result.to_dict())
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
        out.rows(matches, cli_reports.MATCH_COLUMNS, title="matches")


def _text_to_check(text: str | None, file: str | None) -> str:
    if text is not None and text != "-":
        if file is not None:
            raise typer.BadParameter("give a text or --file, not both", param_hint="--file")
        if os.path.isfile(text):
            raise typer.BadParameter(
                f"names a file: check its text with --file {text} (a text that is a file's "
                "name is checked from standard input)",
                param_hint="TEXT",
            )
        return text
    if file is not None:
        try:
            with open_regular(file) as f:
                record = read_text(f, file, file)
        except OSError as e:
            raise InputFormatError(e.strerror or str(e), file) from None
    else:
        record = read_text(typer.get_binary_stream("stdin"), "<stdin>", "stdin")
    if isinstance(record, InputFormatError):
        raise record
    return record.text


cli_reports.register(app)
cli_review.register(app)
app.command()(report)
app.command()(cli_serve.serve)


def main() -> None:
    """Run the command line interface (the ``dedup-store`` console script)."""
    app(prog_name="dedup-store")
