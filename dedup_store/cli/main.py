"""The ``dedup-store`` command line interface.

Each command parses its options, makes one call to :class:`~dedup_store.service.DedupStore` (or
the migration helpers), and renders the result. Errors of ours, and database errors, become one
line on standard error and the exit code of the error class (see :mod:`dedup_store.errors`);
``--debug`` shows the traceback instead. This module holds the app, its global options and the
commands ``init`` and ``check``; the others live beside it: :mod:`~dedup_store.cli.ingest`,
:mod:`~dedup_store.cli.reads` (what the store holds), :mod:`~dedup_store.cli.review` (a
reviewer's), :mod:`~dedup_store.cli.report`, :mod:`~dedup_store.cli.db`.

The store, the database driver and numpy are imported inside the commands, so that ``--help``
and ``--version`` answer at once.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import os
import typing
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperCommand

from dedup_store import config
from dedup_store.cli import ingest as cli_ingest
from dedup_store.cli import reads as cli_reports
from dedup_store.cli import review as cli_review
from dedup_store.cli import serve as cli_serve
from dedup_store.cli.context import (
    ExitOnErrorGroup,
    MaxBytes,
    Settings,
    field_names,
    meta_object,
    print_version,
    settings_of,
    store_limits,
)
from dedup_store.cli.db import db_app
from dedup_store.cli.render import (
    FormatOption,
    Output,
    OutputFormat,
)
from dedup_store.cli.report import report
from dedup_store.errors import InputFormatError, InvalidParamsError
from dedup_store.ingest.inputs import (
    open_regular,
    read_text,
)

if TYPE_CHECKING:
    pass


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
    replica_url: Annotated[
        list[str] | None,
        typer.Option(
            "--replica-url",
            metavar="URL",
            help="A streaming replica to send reads to (repeatable; also "
            f"{config.ENV_REPLICA_URLS}, separated by commas).",
            show_default=False,
        ),
    ] = None,
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
    for name, hint, value in (("db_url", "--db-url", db_url), ("schema", "--schema", schema)):
        given = getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
        if given and not (value or "").strip():
            # an empty value must not fall back to the embedded server or the default schema
            raise typer.BadParameter("must not be empty", param_hint=hint)
    ctx.obj = Settings(
        db_url=db_url or None,
        schema=config.schema_name(schema),
        debug=debug,
        url_from_environment=from_environment,
        replicas=config.replica_urls(replica_url or ()),
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
                if isinstance(value, tuple):  # a list of names: as the option takes it
                    shown = ",".join(value) or "none"
                param.help = f"{text.rstrip('.')} (default {shown})."  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)


#: The help of each fingerprint parameter ``init`` takes, in the order ``--help`` lists them;
#: each option's name, type and switch form come from the field of
#: :class:`~dedup_store.core.params.FingerprintParams` of that name (:func:`_init_options`).
INIT_HELP = {
    "shingle_size": "Words per shingle",
    "cjk_shingle_size": "Characters per shingle in Chinese/Japanese text",
    "num_perm": "Min-hashes per MinHash signature",
    "scheme": "MinHash band scheme",
    "threshold": "Target Jaccard similarity of near-duplicates",
    "simhash_k": "Largest Hamming distance of matching SimHashes",
    "simhash_blocks": "SimHash blocks, more than --simhash-k",
    "simhash_key_max_shingles": "Most shingles of a document with SimHash block keys, 0: no limit",
    "containment": "Containment threshold for excerpts, 0 turns it off",
    "containment_merges": "Let excerpt matches merge clusters",
    "simhash_min_jaccard": "Jaccard a SimHash match must also reach",
    "simhash_weights": (
        "SimHash feature weights: counts, tf-idf, or tf-idf times a term-length curve"
    ),
    "hot_key_limit": "Most documents one key leads to (0: no limit)",
    "verify": "Score candidates by exact Jaccard or by the MinHash estimate",
    "stopwords": "Drop stop words",
    "stem": "Snowball stemming",
    "html": "Whether input is HTML (auto detects markup)",
    "meta_fields": "Comma-separated fields of a document's meta that hold sets (tags, keywords...)",
    "meta_weight": "Weight of the metadata score in the combined score (1 - mu)",
}


def _init_options() -> list[inspect.Parameter]:
    """``init``'s options, one per parameter of :data:`INIT_HELP`: named as its field, of its
    field's type (``--name/--no-name`` for a flag; ``meta_fields`` as one comma-separated
    string), ``None`` when not given (:class:`_InitCommand` shows the default)."""
    from dedup_store.core.params import FingerprintParams

    types = typing.get_type_hints(FingerprintParams)
    options = []
    for name, text in INIT_HELP.items():
        kind = str if name == "meta_fields" else types[name]
        dashed = name.replace("_", "-")
        flags = (f"--{dashed}/--no-{dashed}",) if kind is bool else ()
        annotation = Annotated[kind | None, _param(text, *flags)]  # type: ignore[valid-type]
        options.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
            )
        )
    return options


@app.command(cls=_InitCommand)
def init(
    ctx: typer.Context,
    *,
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
    **parameters: Any,
) -> None:
    """Create the store, or upgrade its schema.

    The options are the fingerprint parameters of a new store. An existing store keeps its
    parameters: giving different ones is an error that names them. On an existing store,
    --canonical changes its rule, and --keep-text is an error unless it keeps texts already.
    """
    from dedup_store.core.params import FingerprintParams
    from dedup_store.db import migrate

    # the options named as the parameters' fields: ctx.params has each one given
    chosen = {
        field.name: ctx.params[field.name]
        for field in dataclasses.fields(FingerprintParams)
        if ctx.params.get(field.name) is not None
    }
    if parameters.get("meta_fields") is not None:
        chosen["meta_fields"] = field_names(parameters["meta_fields"])
    FingerprintParams.from_dict(chosen)  # out-of-range values fail before anything is made
    settings = settings_of(ctx)
    migrate.upgrade(settings.resolve(), settings.schema)
    options = {"keep_text": keep_text or None, "canonical_rule": canonical}
    with settings.store(create=True, params=chosen or None, **options) as store:
        stored, kept = store.params, store.settings
        if keep_text and not kept.keep_text:  # an existing store made without it
            raise InvalidParamsError(
                f"store {settings.schema!r} exists and does not keep texts: --keep-text makes a "
                "new store keep them (its documents so far have none)"
            )
        if canonical is not None and canonical != kept.canonical_rule:  # an existing store
            store.set_canonical_rule(canonical)
            kept = store.settings
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


_declared = list(inspect.signature(init, eval_str=True).parameters.values())
init.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [_declared[0], *_init_options(), *(p for p in _declared[1:] if p.kind != p.VAR_KEYWORD)]
)


app.command()(cli_ingest.ingest)


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
    with settings_of(ctx).store(**store_limits(max_bytes)) as store:
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
    """Run the command line interface (the ``dedup-store`` console script).

    When the command is done, every object left is moved out of the garbage collector's reach
    (:func:`gc.freeze`): the interpreter's exit would otherwise walk all of them, the imported
    modules' included, in full collections that cost a one-document command about 0.2 s and an
    ingest up to 0.4 s. The store has been closed by then, and what is left goes with the
    process.
    """
    try:
        app(prog_name="dedup-store")
    finally:
        gc.freeze()
