"""Output of the command line interface: tables for people, JSON, JSON Lines and CSV for scripts.

Tables are drawn with rich when standard output is a terminal and written as tab-separated text
otherwise, which suits ``grep``, ``cut`` and ``sort`` (rich is loaded only for a terminal). JSON,
JSON Lines and CSV stream row by row, so exporting a large store does not hold it in memory.

Ids and file names come from users: in tables and messages, characters that a terminal would act
on (escape sequences, carriage returns, tabs, newlines, bidirectional overrides) are shown
escaped, as ``\x1b`` or ``\u202e``. JSON escapes them by itself; CSV keeps values as they are.
"""

from __future__ import annotations

import csv
import datetime as dt
import enum
import functools
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from dedup_store.results import AddResult, IngestSummary, RecordError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn
    from rich.text import Text


class OutputFormat(enum.StrEnum):
    """How a command prints its result."""

    table = "table"
    json = "json"
    jsonl = "jsonl"
    csv = "csv"


FormatOption = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="Output format: a table for people, or json/jsonl/csv."),
]


def to_json(value: Any, indent: int | None = None) -> str:
    """Serialize ``value``; datetimes become ISO 8601 strings and enums their values."""
    return json.dumps(value, indent=indent, ensure_ascii=False, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def cell(value: Any, sep: str = ", ") -> str:
    """One value as table text: floats to 3 decimals, lists joined by ``sep``, None empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, list | tuple):
        return sep.join(cell(v) for v in value)
    if isinstance(value, dict):
        return to_json(value)
    return escape(str(value))


def escape(text: str, keep: str = "") -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\n``, ``\\u202e``).

    Args:
        text: any text, e.g. an id or a file name.
        keep: characters left as they are (``"\\n"`` for messages of several lines).
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else repr(ch)[1:-1] for ch in text)


def _csv_value(value: Any) -> Any:
    if isinstance(value, dict | list | tuple):
        return to_json(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    return value


def flatten(obj: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys: ``{"params": {"k": 3}}`` -> ``{"params.k": 3}``."""
    flat: dict[str, Any] = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


class Output:
    """Writes results to one text stream in one format."""

    def __init__(self, fmt: OutputFormat = OutputFormat.table, out: TextIO | None = None) -> None:
        self.fmt = fmt
        self.out = out if out is not None else sys.stdout

    @functools.cached_property
    def console(self) -> Console:
        """The rich console of the output."""
        from rich.console import Console

        return Console(file=self.out, highlight=False, soft_wrap=False)

    @property
    def rich(self) -> bool:
        """Whether tables are drawn with rich (the output is a terminal)."""
        return may_be_terminal(self.out) and self.console.is_terminal

    def line(self, text: str = "") -> None:
        """Write one line of plain text."""
        self.out.write(text + "\n")

    def rows(
        self, rows: Iterable[Mapping[str, Any]], columns: Sequence[str], title: str = ""
    ) -> int:
        """Write rows; ``columns`` are the ones a table shows (the other formats show all keys).

        Returns:
            The number of rows written.
        """
        if self.fmt is OutputFormat.json:
            return self._json_rows(rows)
        if self.fmt is OutputFormat.jsonl:
            return self._jsonl_rows(rows)
        if self.fmt is OutputFormat.csv:
            return self._csv_rows(rows)
        if self.rich:
            return self._rich_rows(rows, columns, title)
        return self._tsv_rows(rows, columns)

    def record(self, obj: Mapping[str, Any], title: str = "") -> None:
        """Write one object: key/value lines as a table, one JSON object, or a one-row CSV."""
        if self.fmt is OutputFormat.json:
            self.line(to_json(dict(obj), indent=2))
        elif self.fmt is OutputFormat.jsonl:
            self.line(to_json(dict(obj)))
        elif self.fmt is OutputFormat.csv:
            self._csv_rows([flatten(obj)])
        else:
            self._key_values(flatten(obj), title)

    def _key_values(self, flat: Mapping[str, Any], title: str) -> None:
        if self.rich:
            from rich.table import Table
            from rich.text import Text

            table = Table(title=_title(title), show_header=False, box=None, pad_edge=False)
            table.add_column(style="bold")
            table.add_column()
            for key, value in flat.items():
                table.add_row(Text(key), Text(cell(value)))
            self.console.print(table)
            return
        width = max((len(k) for k in flat), default=0)
        for key, value in flat.items():
            self.line(f"{key:<{width}}  {cell(value)}")

    def _jsonl_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        count = 0
        for row in rows:
            self.line(to_json(dict(row)))
            count += 1
        return count

    def _json_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        count = 0
        self.out.write("[")
        for row in rows:
            self.out.write(("," if count else "") + "\n  " + to_json(dict(row)))
            count += 1
        self.out.write("\n]\n" if count else "]\n")
        return count

    def _csv_rows(self, rows: Iterable[Mapping[str, Any]]) -> int:
        iterator: Iterator[Mapping[str, Any]] = iter(rows)
        first = next(iterator, None)
        if first is None:
            return 0
        writer = csv.DictWriter(self.out, fieldnames=list(first), extrasaction="ignore")
        writer.writeheader()
        count = 0
        for row in chain([first], iterator):
            writer.writerow({k: _csv_value(v) for k, v in row.items()})
            count += 1
        return count

    def _tsv_rows(self, rows: Iterable[Mapping[str, Any]], columns: Sequence[str]) -> int:
        count = 0
        for row in rows:
            if not count:
                self.line("\t".join(columns))
            self.line("\t".join(cell(row.get(c)) for c in columns))
            count += 1
        return count

    def _rich_rows(
        self, rows: Iterable[Mapping[str, Any]], columns: Sequence[str], title: str
    ) -> int:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=_title(title))
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(Text(cell(row.get(c), "\n")) for c in columns))
        if table.row_count:
            self.console.print(table)
        return table.row_count


def print_ingest_summary(
    summary: IngestSummary, as_json: bool, *, repeated_ids: int, interrupted: bool
) -> None:
    """Print the counts of an ingest run on standard output, as a table or as JSON."""
    data = {**summary.to_dict(), "repeated_ids": repeated_ids}
    if interrupted:
        data["interrupted"] = True
    if as_json:
        Output(OutputFormat.json).record(data)
        return
    data["seconds"] = round(summary.seconds, 2)
    data["index_seconds"] = round(summary.index_seconds, 2)
    data["documents_per_second"] = round(summary.documents_per_second)
    Output(OutputFormat.table).record(data, title="ingest summary")


def warn_about_skips(
    summary: IngestSummary, repeated_ids: int, *, stdin_text: bool, update: bool = False
) -> None:
    """Say on standard error what the summary's counts mean when something was not stored."""
    if summary.documents + summary.errors == 0:
        _stderr("warning: no records found in the input; nothing was stored")
    known = summary.skipped - repeated_ids
    if known > 0 and update:
        _stderr(
            f"{known} documents unchanged (same text and metadata as stored): left as they were"
        )
    elif known > 0:
        hint = "; --id names the text read from standard input" if stdin_text else ""
        _stderr(
            f"warning: {known} documents skipped because their ids were already stored "
            f"(--update replaces them{hint})"
        )


def _stderr(message: str) -> None:
    typer.echo(escape(message, keep="\n"), err=True)


def may_be_terminal(stream: TextIO) -> bool:
    """Whether rich may take ``stream`` for a terminal: it is one, or the environment tells rich
    what to take it for (``TTY_COMPATIBLE``, ``FORCE_COLOR``). Otherwise rich, which takes a
    while to load, need not be asked."""
    if "TTY_COMPATIBLE" in os.environ or "FORCE_COLOR" in os.environ:
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return isatty is not None and bool(isatty())
    except ValueError:  # closed
        return False


def _rate_column() -> ProgressColumn:
    """A progress column of the documents per second since the start."""
    from rich.progress import ProgressColumn, Task
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Task) -> Text:
            elapsed = task.elapsed or 0.0
            rate = task.completed / elapsed if elapsed > 0 else 0.0
            return Text(f"{rate:,.0f} docs/s", style="progress.data.speed")

    return RateColumn()


class IngestProgress:
    """A progress line on standard error while documents are ingested (off when not a terminal).

    Use it as a context manager; pass :meth:`on_progress`, :meth:`on_batch` and
    :meth:`on_phase` to :meth:`DedupStore.ingest`. It shows the documents fingerprinted and
    stored so far and the phase (a bulk load ends building its indexes), prints
    every skipped record above the line, and keeps the counts of the stored batches in
    :attr:`stored`, so that an interrupted run can say what it stored.
    """

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self.stored = IngestSummary()
        self.reader_errors = 0
        self.console = console
        self._progress: Progress | None = None
        if console is None and not may_be_terminal(sys.stderr):
            self.enabled = False  # no progress line, and warnings written as they are
            return
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        if self.console is None:
            self.console = Console(stderr=True, highlight=False)
        self.enabled = enabled and self.console.is_terminal
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.fields[phase]}"),
            TextColumn("{task.fields[fingerprinted]:,} fingerprinted, {task.completed:,} stored"),
            _rate_column(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
            disable=not self.enabled,
        )
        self._task = self._progress.add_task(
            "ingest", total=None, fingerprinted=0, phase="ingesting"
        )

    def __enter__(self) -> IngestProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def on_progress(self, fingerprinted: int, stored: int) -> None:
        """Show the numbers of documents fingerprinted and stored so far."""
        if self._progress is not None:
            self._progress.update(self._task, completed=stored, fingerprinted=fingerprinted)

    def on_phase(self, phase: str) -> None:
        """Show what the ingest does now (a bulk load's index build) in place of ``ingesting``."""
        if self._progress is not None:
            self._progress.update(self._task, phase=phase, refresh=True)

    def on_batch(self, results: Sequence[AddResult], errors: Sequence[RecordError]) -> None:
        """Count a stored batch (its results and its skipped records); report the skipped."""
        from dedup_store.ingest.records import describe  # loaded with the store by then

        self.stored.count_all(results)  # without making each result
        self.stored.errors += len(errors)
        for error in errors:
            self.warn(f"skipped: {describe(error)}")

    def skip_record(self, error: Exception) -> None:
        """Count and report a record the reader could not read."""
        self.reader_errors += 1
        self.warn(f"skipped: {error}")

    def warn(self, message: str) -> None:
        """Print a line on standard error above the progress line (non-printables escaped)."""
        if self.console is None:
            _stderr(message)
            return
        from rich.text import Text

        self.console.print(Text(escape(message, keep="\n"), style="yellow"), soft_wrap=True)


def _title(title: str) -> Text | None:
    """A table title as plain text (an id in it is neither markup nor a terminal command)."""
    from rich.text import Text

    return Text(escape(title)) if title else None
