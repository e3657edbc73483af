"""Structured logs: every line on standard error is one JSON object.

Access logs (logger ``dedup_store.access``) have one line per request: ``ts``, ``level``,
``logger``, ``message`` (``request``), ``method``, ``path``, ``route`` (the path template),
``status``, ``ms``, ``bytes_in``, ``bytes_out``, ``client`` and ``request_id``. The server's
own messages (uvicorn's start and stop, errors with their traceback) come as the same JSON.

Access lines are written in batches (:class:`BatchedStderrHandler`), as web servers buffer their
access logs: the event loop that answers the requests makes no system call for a line.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
import threading
from typing import Any

import orjson

ACCESS = "dedup_store.access"
SERVER = "dedup_store.server"


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON; the ``fields`` given in ``extra`` are merged in."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as JSON."""
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(line, default=str).decode("utf-8")
        except TypeError:  # an integer beyond 64 bits, a lone surrogate
            return json.dumps(line, ensure_ascii=False, default=str)


class BatchedStderrHandler(logging.Handler):
    """Writes access lines to standard error in batches: ``interval`` seconds after the first
    line of a batch, or at once when ``max_bytes`` are waiting. Any other record (the server's
    start and stop among them) is written at once, after the batch before it.

    Args:
        interval: longest an access line waits, in seconds.
        max_bytes: characters waiting that are written at once.
    """

    def __init__(self, interval: float = 0.2, max_bytes: int = 64 * 1024) -> None:
        super().__init__()
        self.interval = interval
        self.max_bytes = max_bytes
        self._lines: list[str] = []
        self._size = 0
        self._waiting = threading.Event()
        self._stopping = threading.Event()
        threading.Thread(target=self._write_batches, name="log-writer", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's line (the handler's lock is held); write the lines now if they are
        many or this one is not an access line."""
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self._lines.append(line)
        self._size += len(line) + 1
        batched = record.name == ACCESS and record.levelno < logging.WARNING
        if not batched or self._size >= self.max_bytes:
            self._write()
        elif len(self._lines) == 1:
            self._waiting.set()

    def flush(self) -> None:
        """Write the lines kept."""
        self.acquire()
        try:
            self._write()
        finally:
            self.release()

    def close(self) -> None:
        """Write the lines kept; stop the writer thread."""
        self._stopping.set()
        self._waiting.set()
        self.flush()
        super().close()

    def _write(self) -> None:
        if not self._lines:
            return
        text = "\n".join(self._lines) + "\n"
        self._lines, self._size = [], 0
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError):  # standard error is closed: there is nowhere to write
            pass

    def _write_batches(self) -> None:
        """The writer thread: ``interval`` seconds after a batch's first line, write it."""
        while not self._stopping.is_set():
            self._waiting.wait()
            self._stopping.wait(self.interval)
            self._waiting.clear()
            self.flush()


def log_config(level: str = "info") -> dict[str, Any]:
    """The ``logging.config`` dictionary of the server (uvicorn's ``log_config``)."""
    handler = {"()": f"{__name__}.BatchedStderrHandler", "formatter": "json"}
    named = {"handlers": ["stderr"], "level": level.upper(), "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": f"{__name__}.JsonFormatter"}},
        "handlers": {"stderr": handler},
        "loggers": {
            "uvicorn": named,
            "uvicorn.error": named,
            "uvicorn.access": {**named, "level": "WARNING"},
            ACCESS: named,
            SERVER: named,
        },
    }
