"""Structured logs: every line on standard error is one JSON object.

Access logs (logger ``dedup_store.access``) have one line per request: ``ts``, ``level``,
``logger``, ``message`` (``request``), ``method``, ``path``, ``route`` (the path template),
``status``, ``ms``, ``bytes_in``, ``bytes_out``, ``client`` and ``request_id``. The server's
own messages (uvicorn's start and stop, errors with their traceback) come as the same JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
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


def log_config(level: str = "info") -> dict[str, Any]:
    """The ``logging.config`` dictionary of the server (uvicorn's ``log_config``)."""
    handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
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
