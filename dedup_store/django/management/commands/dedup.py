"""``manage.py dedup <command>``: the ``dedup-store`` command line on the project's database
and the schema of ``DEDUP_STORE`` (``manage.py dedup clusters``, ``manage.py dedup report
--out r.html``, ``manage.py dedup review A B --not-duplicate``...)."""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

from django.core.management.base import BaseCommand
from django.db import connections

from dedup_store.django.store import options


class Command(BaseCommand):  # type: ignore[misc]  # Django has no type hints
    help = "Run a dedup-store command on the project's database (dedup-store --help lists them)."

    def add_arguments(self, parser: Any) -> None:
        # the command's own options too: call_command("dedup", "stats", "--format", "json")
        parser.add_argument(
            "args", nargs=argparse.REMAINDER, help="the dedup-store command and its options"
        )

    def run_from_argv(self, argv: list[str]) -> None:
        # every argument after "dedup" is the command line's, options included
        self.execute(*argv[2:])

    def execute(self, *args: Any, **given: Any) -> None:
        from dedup_store.cli import app

        chosen = options()
        settings = connections[chosen["database"]].settings_dict
        url = _url(settings)
        command = ["--db-url", url, "--schema", chosen["schema"], *[str(a) for a in args]]
        with contextlib.ExitStack() as outputs:
            # call_command(..., stdout=..., stderr=...) gets what the command line prints
            if given.get("stdout") is not None:
                outputs.enter_context(contextlib.redirect_stdout(given["stdout"]))
            if given.get("stderr") is not None:
                outputs.enter_context(contextlib.redirect_stderr(given["stderr"]))
            try:
                app(command, prog_name="manage.py dedup", standalone_mode=True)
            except SystemExit as done:
                if done.code not in (0, None):  # it said why on standard error: its exit code
                    raise


def _url(settings: dict[str, Any]) -> str:
    """A PostgreSQL URL of Django's connection settings."""
    from urllib.parse import quote

    user = quote(settings.get("USER") or "", safe="")
    password = quote(settings.get("PASSWORD") or "", safe="")
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings.get("HOST") or "localhost"
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    return f"postgresql://{auth}{host}{port}/{settings['NAME']}"
