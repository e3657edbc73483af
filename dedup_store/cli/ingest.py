"""The ``ingest`` command: documents from files, directories, JSONL, CSV or standard input, added
in batches by the library (:meth:`~dedup_store.service.DedupStore.ingest`) or by Apache Spark
(the spark extra), with a progress bar and a summary.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from dedup_store.cli.context import EXIT_INTERRUPTED, MaxBytes, Settings, settings_of, store_limits
from dedup_store.cli.render import IngestProgress, print_ingest_summary, warn_about_skips
from dedup_store.errors import SparkError
from dedup_store.ingest.inputs import (
    DEFAULT_GLOB,
    STDIN,
    STDIN_TEXT_ID,
    InputFormat,
    RepeatedIds,
    apply_error_policy,
    read_inputs,
)

if TYPE_CHECKING:
    from dedup_store.ingest.records import Record
    from dedup_store.results import IngestSummary
    from dedup_store.service import DedupStore
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
            "fingerprint in this process; default: 1 for a bulk load on a machine with 3 cores "
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
    _check_options(paths, stdin_id, stdin_format, update, engine, bulk)
    settings = settings_of(ctx)
    load = _Load(
        batch_size=batch_size,
        update=update,
        policy="skip" if on_error is OnError.skip else "stop",
        bulk=bulk,
        workers=workers,
        spark_master=spark_master,
        spark_ingest=_spark_ingest(spark_master) if engine is Engine.spark else None,
    )
    fmt: InputFormat = stdin_format.value
    settings.resolve()  # the embedded server's start (a first run's seconds) is not the ingest's
    started = time.perf_counter()
    with (
        settings.store(create=True, **store_limits(max_bytes)) as store,
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
        documents = repeats.watch(apply_error_policy(records, load.policy, progress.skip_record))
        summary, interrupted = load.run(store, settings, documents, progress)
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
    warn_about_skips(
        summary, repeats.count, stdin_text=STDIN in paths and fmt == "text", update=update
    )


def _check_options(
    paths: list[str],
    stdin_id: str | None,
    stdin_format: StdinFormat,
    update: bool,
    engine: Engine,
    bulk: bool | None,
) -> None:
    """Refuse options that do not go together."""
    if stdin_id is not None and (STDIN not in paths or stdin_format is not StdinFormat.text):
        raise typer.BadParameter(
            "names the document of '-' read with --format text", param_hint="--id"
        )
    if update and engine is Engine.spark:
        raise typer.BadParameter("is not supported with --engine spark", param_hint="--update")
    if update and bulk:
        raise typer.BadParameter("a bulk load adds documents: drop --update", param_hint="--bulk")


@dataclasses.dataclass(frozen=True)
class _Load:
    """How ``ingest`` stores the documents it reads: in this process, or with Spark."""

    batch_size: int
    update: bool
    policy: Literal["stop", "skip"]
    bulk: bool | None
    workers: int | None
    spark_master: str
    spark_ingest: Callable[..., SparkIngest] | None

    def run(
        self,
        store: DedupStore,
        settings: Settings,
        documents: Iterable[Record],
        progress: IngestProgress,
    ) -> tuple[IngestSummary, bool]:
        """The summary of storing ``documents``, and whether Ctrl-C interrupted it (the
        summary then tells what was stored)."""
        try:
            return self._stored(store, settings, documents, progress), False
        except KeyboardInterrupt:
            return progress.stored, True

    def _stored(
        self,
        store: DedupStore,
        settings: Settings,
        documents: Iterable[Record],
        progress: IngestProgress,
    ) -> IngestSummary:
        if self.spark_ingest is not None:
            return self.spark_ingest(
                documents,
                settings.resolve(),
                settings.schema,
                master=self.spark_master,
                batch_size=self.batch_size,
                on_error=self.policy,
                on_errors=lambda errors: progress.on_batch([], errors),
                max_bytes=store.max_bytes,
            ).summary
        return store.ingest(
            documents,
            batch_size=self.batch_size,
            update=self.update,
            on_error=self.policy,
            on_batch=progress.on_batch,
            on_progress=progress.on_progress,
            on_phase=progress.on_phase,
            count_clusters=True,
            bulk=self.bulk,
            workers="auto" if self.workers is None else self.workers,
        )


def _spark_ingest(master: str) -> Callable[..., SparkIngest]:
    """``dedup_store.spark.ingest_records``, once the spark extra is there and ``master`` is a
    master URL that answers (before the store is opened and the input read)."""
    try:
        from dedup_store.spark import check_master, ingest_records
    except ImportError as error:
        raise SparkError(str(error)) from None
    check_master(master)
    return ingest_records
