"""``dedup-store report``: the review report, one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dedup_store.cli.context import settings_of
from dedup_store.cli.render import FormatOption, Output, OutputFormat


def size_option(value: str | None, flag: str = "--max-bytes") -> int | None:
    """A size option in bytes (``64MB``, ``1.5GB``)."""
    if value is None:
        return None
    from dedup_store.db.server.tuning import parse_size

    try:
        size = parse_size(value)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint=flag) from None
    if size < 1:
        raise typer.BadParameter("must be at least 1 byte", param_hint=flag)
    return size


def report(
    ctx: typer.Context,
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="The HTML file to write.", dir_okay=False),
    ],
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster", metavar="ID", help="Report only the cluster of this stored document."
        ),
    ] = None,
    max_bytes: Annotated[
        str | None,
        typer.Option(
            "--max-bytes",
            metavar="SIZE",
            help="Size budget of the file (e.g. 64MB, the default): beyond it, pairs keep "
            "their scores but not their texts.",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Write the review report: one HTML file to open in a browser.

    It shows an overview, the clusters largest first with their members and canonical
    document, and each pair's two texts side by side with the changed words highlighted (in a
    store made with init --keep-text), with filters, a search by id and a link to each
    cluster and pair. It needs no server and loads nothing from the network.
    """
    budget = size_option(max_bytes)
    with settings_of(ctx).store() as store:
        summary = store.report(out, cluster=cluster, max_bytes=budget, workers="auto")
    Output(fmt).record(summary.to_dict(), title="report")
