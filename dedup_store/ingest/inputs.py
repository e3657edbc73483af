"""Read input records from files, directories and streams, one at a time.

Every reader is a generator: input is never loaded whole (a text file is one document, so it is
read whole, but one file at a time). Readers yield :class:`~dedup_store.results.Document` values
and, for records that cannot be read, :class:`~dedup_store.errors.InputFormatError` values rather
than raising them, so a caller can skip a bad record and go on with the next one
(:func:`apply_error_policy` turns the mixed stream into documents with a skip or stop policy).

Files are decoded as strict UTF-8; bad bytes, NUL characters, malformed JSON, a missing id or
text field and a CSV row with the wrong number of fields are reported with the file and line.
"""

from __future__ import annotations

import csv
import fnmatch
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Literal

from dedup_store.errors import InputFormatError, quote_id
from dedup_store.results import Document

InputFormat = Literal["jsonl", "csv", "text"]
Record = Document | InputFormatError
"""What a reader yields: a document, or the error of a record it could not read."""

DEFAULT_GLOB = "*.txt,*.text,*.html,*.htm,*.jsonl,*.ndjson,*.csv"
JSONL_SUFFIXES = (".jsonl", ".ndjson")
CSV_SUFFIXES = (".csv",)
STDIN = "-"
STDIN_NAME = "<stdin>"
STDIN_TEXT_ID = "stdin"
_CSV_FIELD_LIMIT = 2**31 - 1
_BOM = b"\xef\xbb\xbf"


def format_for(path: str | os.PathLike[str]) -> InputFormat:
    """The input format of a file, from its suffix (JSONL, CSV, else plain text or HTML)."""
    suffix = Path(path).suffix.lower()
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    if suffix in CSV_SUFFIXES:
        return "csv"
    return "text"


def parse_globs(patterns: str | Sequence[str]) -> list[str]:
    """Split comma-separated glob patterns (``"*.txt,*.md"``) into a list."""
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    return [p.strip() for item in items for p in item.split(",") if p.strip()]


def read_inputs(
    paths: Sequence[str],
    *,
    glob: str | Sequence[str] = DEFAULT_GLOB,
    id_field: str = "id",
    text_field: str = "text",
    stdin_format: InputFormat = "jsonl",
    stdin: IO[bytes] | None = None,
    stdin_id: str = STDIN_TEXT_ID,
) -> Iterator[Record]:
    """Yield the records of every path in order.

    Args:
        paths: files, directories (searched recursively for files matching ``glob``) or ``-``
            for ``stdin``.
        glob: comma-separated file name patterns used inside directories.
        id_field: JSONL key or CSV column holding the document id.
        text_field: JSONL key or CSV column holding the document text.
        stdin_format: how ``-`` is read: ``jsonl``, ``csv`` or ``text`` (the whole stream is one
            document with the id ``stdin_id``).
        stdin: the binary stream read for ``-``.
        stdin_id: the id of the document read from ``-`` in the ``text`` format.

    Yields:
        A :class:`Document` per record, or an :class:`InputFormatError` per unreadable record.
        A path that does not exist, or is neither a directory nor a regular file (a FIFO, a
        device), is an error record too.
    """
    patterns = parse_globs(glob)
    for path in paths:
        if path == STDIN:
            if stdin is None:
                yield InputFormatError("no standard input to read", STDIN_NAME)
                continue
            yield from read_stream(
                stdin, stdin_format, STDIN_NAME, id_field, text_field, doc_id=stdin_id
            )
        elif os.path.isdir(path):
            yield from read_directory(path, patterns, id_field=id_field, text_field=text_field)
        else:
            yield from read_file(path, id_field=id_field, text_field=text_field)


def read_directory(
    root: str | os.PathLike[str],
    patterns: Sequence[str],
    *,
    id_field: str = "id",
    text_field: str = "text",
) -> Iterator[Record]:
    """Yield the records of every file under ``root`` whose name matches one of ``patterns``.

    Files are visited in the order of :func:`name_order` and read by their suffix (JSONL, CSV,
    else text); a text file's id is its path relative to ``root`` (with ``/`` separators), so
    the same tree gives the same ids wherever it is.
    """
    for found in iter_files(root, patterns):
        if isinstance(found, InputFormatError):
            yield found
            continue
        rel = found.relative_to(root).as_posix()
        yield from read_file(found, doc_id=rel, id_field=id_field, text_field=text_field)


def iter_files(
    root: str | os.PathLike[str], patterns: Sequence[str]
) -> Iterator[Path | InputFormatError]:
    """Files under ``root`` matching any of ``patterns``, recursively, in the order of
    :func:`name_order`.

    Patterns ignore case (``*.html`` matches ``INDEX.HTML``); hidden directories are skipped.
    A directory that cannot be listed is yielded as an :class:`InputFormatError` (and its
    files are not read); entries that are not regular files are left to :func:`read_file`,
    which reports them without opening them for long.
    """
    lowered = [p.lower() for p in patterns]
    unreadable: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable.append):
        yield from _walk_errors(unreadable)
        dirnames[:] = sorted((d for d in dirnames if not d.startswith(".")), key=name_order)
        for name in sorted(filenames, key=name_order):
            if any(fnmatch.fnmatchcase(name.lower(), p) for p in lowered):
                yield Path(dirpath, name)
    yield from _walk_errors(unreadable)


def name_order(name: str) -> tuple[list[str | int], str, str]:
    """The order files are read in: by name without its suffix, numbers by value, then by
    suffix, so an original comes before the copies named after it (``post.txt``,
    ``post-repost.txt``, ``post-2.txt``, ``post-10.txt``), as ``ls -v`` lists them."""
    stem, suffix = os.path.splitext(name)
    parts: list[str | int] = [int(p) if p.isdigit() else p for p in _DIGITS.split(stem)]
    return parts, suffix, name


_DIGITS = re.compile(r"(\d+)")


def _walk_errors(errors: list[OSError]) -> Iterator[InputFormatError]:
    """The directories ``os.walk`` could not list, as error records (``errors`` is emptied)."""
    for error in errors:
        where = os.fsdecode(error.filename) if error.filename is not None else "?"
        yield InputFormatError(f"cannot read the directory: {_reason(error)}", where)
    errors.clear()


def read_file(
    path: str | os.PathLike[str],
    *,
    doc_id: str | None = None,
    id_field: str = "id",
    text_field: str = "text",
) -> Iterator[Record]:
    """Yield the records of one file, reading it by its suffix (JSONL, CSV or text).

    Args:
        path: the file.
        doc_id: id of the document when the file is plain text (default: the path as given).
        id_field: JSONL key or CSV column holding the document id.
        text_field: JSONL key or CSV column holding the document text.
    """
    name = os.fspath(path)
    fmt = format_for(name)
    try:
        f = open_regular(name)
    except InputFormatError as e:
        yield e
        return
    with f:
        try:
            if fmt == "text":
                yield read_text(f, name, doc_id if doc_id is not None else name)
            else:
                yield from read_stream(f, fmt, name, id_field, text_field)
        except OSError as e:
            yield InputFormatError(e.strerror or str(e), name)


def open_regular(name: str) -> IO[bytes]:
    """Open a regular file for reading; anything else (FIFO, device, socket) is refused.

    The file is opened without blocking (a FIFO with no writer would wait forever) and
    checked by its open descriptor, so it cannot be swapped between the check and the read.

    Raises:
        InputFormatError: the file is missing, unreadable or not a regular file.
    """
    try:
        kind = _kind(os.stat(name).st_mode)
        if kind is None:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            kind = _kind(os.fstat(fd).st_mode)
            if kind is None:
                return os.fdopen(fd, "rb")
            os.close(fd)
    except OSError as e:
        raise InputFormatError(_reason(e), name) from None
    hint = "; pipe it to standard input (-) instead" if kind == "a FIFO" else ""
    raise InputFormatError(f"not a regular file ({kind}){hint}", name)


def _reason(error: OSError) -> str:
    """``no such file or directory``, ``permission denied``..."""
    text = error.strerror or str(error)
    return text[:1].lower() + text[1:]


def _kind(mode: int) -> str | None:
    """``None`` for a regular file, else what it is."""
    if stat.S_ISREG(mode):
        return None
    kinds = {
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
        stat.S_ISSOCK: "a socket",
        stat.S_ISDIR: "a directory",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a file")


def read_stream(
    stream: IO[bytes],
    fmt: InputFormat,
    source: str,
    id_field: str = "id",
    text_field: str = "text",
    *,
    doc_id: str | None = None,
) -> Iterator[Record]:
    """Yield the records of a binary stream in format ``fmt``; ``source`` names it in errors.

    In the ``text`` format the stream is one document, whose id is ``doc_id`` (default: the
    source's name).
    """
    if fmt == "jsonl":
        return read_jsonl(stream, source, id_field, text_field)
    if fmt == "csv":
        return read_csv(stream, source, id_field, text_field)
    return iter([read_text(stream, source, doc_id if doc_id is not None else source)])


def text_of(name: str) -> str:
    """The whole text of file ``name`` (``-``: standard input), read as :func:`read_text` does.

    Raises:
        InputFormatError: the file is missing or unreadable, or not UTF-8 text.
    """
    if name == "-":
        record = read_text(sys.stdin.buffer, "<stdin>", "stdin")
    else:
        try:
            with open_regular(name) as f:
                record = read_text(f, name, name)
        except OSError as e:
            raise InputFormatError(e.strerror or str(e), name) from None
    if isinstance(record, InputFormatError):
        raise record
    assert isinstance(record, Document)
    return record.text


def read_text(stream: IO[bytes], source: str, doc_id: str) -> Record:
    """Read a whole stream as one document (plain text or HTML)."""
    data = stream.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return _bad_bytes(source, data.count(b"\n", 0, e.start) + 1, data, e.start)
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        return InputFormatError("NUL character", source, line)
    return Document(id=doc_id, text=text, meta=None, source=source, line=None)


def read_jsonl(
    stream: IO[bytes], source: str, id_field: str = "id", text_field: str = "text"
) -> Iterator[Record]:
    """Yield one record per non-blank line of JSON objects; other keys become metadata."""
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            yield _bad_bytes(source, number, raw, e.start)
            continue
        if not line.strip():
            continue
        yield _jsonl_record(line, source, number, id_field, text_field)


def _jsonl_record(line: str, source: str, number: int, id_field: str, text_field: str) -> Record:
    try:
        obj = strict_json(line)
    except json.JSONDecodeError as e:
        return InputFormatError(f"malformed JSON: {e.msg} (column {e.colno})", source, number)
    except _NonFiniteNumberError as e:
        return InputFormatError(non_number_message(e) or str(e), source, number)
    except ValueError:
        # int() refuses numbers of more than sys.get_int_max_str_digits() digits
        return InputFormatError("JSON holds a number too long to read", source, number)
    except RecursionError:
        return InputFormatError("JSON is nested too deeply to read", source, number)
    if not isinstance(obj, dict):
        return InputFormatError(f"expected a JSON object, got {_json_type(obj)}", source, number)
    return _make_document(obj, source, number, id_field, text_field)


def read_csv(
    stream: IO[bytes], source: str, id_field: str = "id", text_field: str = "text"
) -> Iterator[Record]:
    """Yield one record per CSV row after the header row; other columns become metadata.

    A row's line number is the line it starts on (quoted fields may span lines).
    """
    _allow_large_csv_fields()
    lines = (raw.decode("utf-8", "surrogateescape") for raw in stream)
    reader = csv.reader(_strip_bom(lines), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as e:
        yield InputFormatError(f"malformed CSV header: {e}", source, 1)
        return
    if header is None:
        return
    problem = _header_problem(header, id_field, text_field)
    if problem:
        yield InputFormatError(problem, source, 1)
        return
    yield from _csv_rows(reader, header, source, id_field, text_field)


def _csv_rows(
    reader: Any, header: list[str], source: str, id_field: str, text_field: str
) -> Iterator[Record]:
    start = reader.line_num + 1
    while True:
        try:
            row = next(reader, None)
        except csv.Error as e:
            yield InputFormatError(_csv_problem(e, start, reader.line_num), source, start)
            start = reader.line_num + 1
            continue  # the reader goes on with the next line
        if row is None:
            return
        if row:
            yield _csv_record(row, header, source, start, id_field, text_field)
        start = reader.line_num + 1


def _csv_problem(error: csv.Error, start: int, end: int) -> str:
    if "unexpected end of data" in str(error):
        return (
            f"a quoted field is never closed (lines {start}-{end}, to the end of the file, "
            "were read as part of it and not stored)"
        )
    return f"malformed CSV: {error}"


def _csv_record(
    row: list[str], header: list[str], source: str, line: int, id_field: str, text_field: str
) -> Record:
    if len(row) != len(header):
        return InputFormatError(
            f"expected {len(header)} fields as in the header, got {len(row)}", source, line
        )
    for value in row:
        if _has_surrogate(value):
            at = _first_surrogate(value)
            raw = value.encode("utf-8", "surrogateescape")
            offset = len(value[:at].encode("utf-8", "surrogateescape"))
            return _bad_bytes(source, line + value.count("\n", 0, at), raw, offset)
    return _make_document(dict(zip(header, row, strict=True)), source, line, id_field, text_field)


def _header_problem(header: list[str], id_field: str, text_field: str) -> str | None:
    if any(_has_surrogate(h) for h in header):
        return "header is not valid UTF-8"
    missing = [f for f in (id_field, text_field) if f not in header]
    if missing:
        names = ", ".join(map(repr, missing))
        return f"header has no column {names} (columns: {', '.join(header)})"
    if len(set(header)) != len(header):
        return "header repeats a column name"
    return None


def _make_document(
    obj: dict[str, Any], source: str, line: int, id_field: str, text_field: str
) -> Record:
    if id_field not in obj:
        return InputFormatError(f"missing id field {id_field!r}", source, line)
    if text_field not in obj:
        return InputFormatError(f"missing text field {text_field!r}", source, line)
    doc_id, text = obj[id_field], obj[text_field]
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
        return InputFormatError(f"id field {id_field!r} must be a string or integer", source, line)
    if not isinstance(text, str):
        return InputFormatError(
            f"text field {text_field!r} must be a string, got {_json_type(text)}", source, line
        )
    doc_id = str(doc_id)
    if not doc_id.strip():
        return InputFormatError(f"id field {id_field!r} is empty", source, line)
    if "\x00" in text or "\x00" in doc_id:
        return InputFormatError("NUL character", source, line)
    meta = {k: v for k, v in obj.items() if k not in (id_field, text_field)}
    return Document(id=doc_id, text=text, meta=meta or None, source=source, line=line)


def strict_json(text: str) -> Any:
    """``text`` read as JSON the way the readers read it: ``NaN``, ``Infinity`` and
    ``-Infinity``, which Python's reader takes, are refused.

    Raises:
        json.JSONDecodeError: not JSON.
        ValueError: a non-finite number (its message names it), or a number too long to read.
    """
    return json.loads(text, parse_constant=_reject_constant)


def non_number_message(error: ValueError) -> str | None:
    """What the readers say of a non-finite number :func:`strict_json` refused, else None."""
    if isinstance(error, _NonFiniteNumberError):
        return f"JSON holds {error}, which is not a valid JSON number"
    return None


class _NonFiniteNumberError(ValueError):
    """``NaN``, ``Infinity`` or ``-Infinity`` in JSON (Python reads them; JSON has none)."""


def _reject_constant(name: str) -> Any:
    raise _NonFiniteNumberError(name)


def apply_error_policy(
    records: Iterable[Record],
    on_error: Literal["skip", "stop"],
    report: Callable[[InputFormatError], None] | None = None,
) -> Iterator[Document]:
    """Turn a stream of records into documents.

    Args:
        records: output of a reader.
        on_error: ``stop`` raises the first :class:`InputFormatError`; ``skip`` passes it to
            ``report`` and goes on with the next record.
        report: called with every skipped error.

    Raises:
        InputFormatError: the first bad record, when ``on_error`` is ``stop``.
    """
    for record in records:
        if isinstance(record, Document):
            yield record
        elif on_error == "stop":
            raise record
        elif report is not None:
            report(record)


def _bad_bytes(source: str, line: int, data: bytes, offset: int) -> InputFormatError:
    snippet = data[offset : offset + 4].hex(" ")
    return InputFormatError(f"invalid UTF-8 (bytes {snippet})", source, line)


def _has_surrogate(value: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in value)


def _first_surrogate(value: str) -> int:
    return next(i for i, ch in enumerate(value) if "\udc80" <= ch <= "\udcff")


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def _strip_bom(lines: Iterator[str]) -> Iterator[str]:
    first = next(lines, None)
    if first is None:
        return
    yield first.removeprefix("\ufeff")
    yield from lines


def _allow_large_csv_fields() -> None:
    # The csv module refuses fields over 128 KiB by default; documents are often larger.
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        csv.field_size_limit(_CSV_FIELD_LIMIT)


class RepeatedIds:
    """Notices ids that come back within one input (``1`` and ``"1"`` in JSON are the same id).

    The store writes one copy of such an id (the first, or the last with ``update``) and skips
    the others; this tells the caller where each repeat is, so that none goes unnoticed. An id
    is remembered by a 64-bit hash and the place it first appeared (about 100 bytes per id),
    not by its text.

    Args:
        report: called for every repeat with a message naming both places.
        update: whether later copies replace earlier ones (it changes the message only).
    """

    def __init__(self, report: Callable[[str], None], *, update: bool = False) -> None:
        self.report = report
        self.update = update
        self.count = 0
        self._first: dict[int, int] = {}  # id hash -> source number << 40 | line
        self._sources: dict[str | None, int] = {}
        self._names: list[str | None] = []

    def watch(self, documents: Iterable[Document]) -> Iterator[Document]:
        """Pass ``documents`` through, reporting each repeated id."""
        for document in documents:
            self._check(document)
            yield document

    def _check(self, document: Document) -> None:
        if not isinstance(document.id, str):
            return
        digest = hashlib.blake2b(document.id.encode("utf-8", "surrogatepass"), digest_size=8)
        key = int.from_bytes(digest.digest(), "little")
        first = self._first.get(key)
        if first is None:
            source = self._sources.setdefault(document.source, len(self._names))
            if source == len(self._names):
                self._names.append(document.source)
            self._first[key] = source << 40 | (document.line or 0)
            return
        self.count += 1
        self.report(self._message(document, first))

    def _message(self, document: Document, first: int) -> str:
        outcome = "this copy replaces it" if self.update else "this copy is skipped"
        earlier = _place(self._names[first >> 40], first & (2**40 - 1) or None)
        return (
            f"{_place(document.source, document.line)}: id {quote_id(document.id)} repeats the id"
            f" of {earlier}; {outcome}"
        )


def _place(source: str | None, line: int | None) -> str:
    if source and line:
        return f"{source}:{line}"
    return source or "an earlier record"
