"""The ``dedup-store`` command line, one module a group of commands, each a thin layer over one
library call.

- :mod:`~dedup_store.cli.main`: the app, its global options, ``init`` and ``check``.
- :mod:`~dedup_store.cli.context`: the options every command shares (database, schema), the
  store they open, exit codes, and errors turned into one line.
- :mod:`~dedup_store.cli.render`: tables, JSON and CSV on standard output; the ingest progress.
- :mod:`~dedup_store.cli.ingest`: ``ingest`` (files, standard input, Spark).
- :mod:`~dedup_store.cli.reads`: what the store holds (``similar``, ``cluster``, ``clusters``,
  ``pairs``, ``stats``, ``export``) and ``delete``.
- :mod:`~dedup_store.cli.review`: a reviewer's (``explain``, ``review``, ``verdicts``,
  ``canonical``).
- :mod:`~dedup_store.cli.report`: ``report``, the HTML review report.
- :mod:`~dedup_store.cli.db`: ``db`` (status, upgrade, settle, tune, dump, restore, psql...).
- :mod:`~dedup_store.cli.serve`: ``serve``, the HTTP service.
"""

from dedup_store.cli.main import app, main

__all__ = ["app", "main"]
