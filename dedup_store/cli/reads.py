"""The commands that read the store: ``similar``, ``cluster``, ``clusters``, ``pairs``,
``stats``, ``export``, and ``delete``, which splits the clusters a document held together.

Each makes one library call (:class:`~dedup_store.service.DedupStore`) and renders its result.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dedup_store.cli.context import settings_of
from dedup_store.cli.render import FormatOption, Output, OutputFormat

DocId = Annotated[str, typer.Argument(metavar="ID", help="A stored document id.")]

MATCH_COLUMNS = [
    "external_id", "method", "jaccard", "meta_score", "score", "containment", "hamming",
]  # fmt: skip


def similar(
    ctx: typer.Context,
    doc_id: DocId,
    limit: Annotated[int | None, typer.Option(min=0, help="Show at most this many.")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many best ones first.")] = 0,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """List the documents that match a stored document, best first (exact copies answer as
    their whole group)."""
    with settings_of(ctx).store() as store:
        matches = store.similar(doc_id, limit=limit, offset=offset)
    Output(fmt).rows((m.to_dict() for m in matches), MATCH_COLUMNS, title=f"similar to {doc_id}")


def cluster(
    ctx: typer.Context,
    doc_id: DocId,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Show the cluster of a stored document: representative and members."""
    with settings_of(ctx).store() as store:
        found = store.cluster(doc_id)
    Output(fmt).record(found.to_dict(), title=f"cluster {found.cluster_id}")


_CLUSTER_COLUMNS = ["cluster_id", "size", "canonical", "members"]

MinSimilarity = Annotated[
    float | None,
    typer.Option(
        min=0.0,
        max=1.0,
        help="Only matches of at least this score (a stricter level than the store's).",
    ),
]


def clusters(
    ctx: typer.Context,
    min_size: Annotated[int, typer.Option(min=1, help="Only clusters this large.")] = 2,
    min_similarity: MinSimilarity = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """List the clusters of duplicates, oldest first, with each one's canonical document.

    With --min-similarity, the clusters the stored matches of at least that score make.
    """
    with settings_of(ctx).store() as store:
        found = store.clusters(min_size, min_similarity=min_similarity)
        count = Output(fmt).rows((c.to_dict() for c in found), _CLUSTER_COLUMNS, title="clusters")
    _note_empty(fmt, count, f"no clusters with at least {min_size} documents")


_PAIR_COLUMNS = [
    "a", "b", "method", "jaccard", "meta_score", "score", "containment", "hamming", "verdict",
]  # fmt: skip


def pairs(
    ctx: typer.Context,
    min_similarity: MinSimilarity = None,
    pending: Annotated[
        bool,
        typer.Option(
            "--pending",
            help="Only pairs without a verdict (exact copies aside), the most doubtful first.",
        ),
    ] = False,
    expand: Annotated[
        bool, typer.Option("--expand", help="Also every pair implied by exact copies.")
    ] = False,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """List every duplicate pair with its method, scores and verdict.

    In each pair, a is the older document.
    """
    if pending and expand:
        raise typer.BadParameter("lists stored pairs: drop --expand", param_hint="--pending")
    columns = [*_PAIR_COLUMNS, "via_exact_of"] if expand else _PAIR_COLUMNS
    with settings_of(ctx).store() as store:
        found = (
            p.to_dict()
            for p in store.pairs(min_similarity=min_similarity, expand=expand, pending=pending)
        )
        if not expand:  # every stored pair is its own
            found = ({k: v for k, v in p.items() if k != "via_exact_of"} for p in found)
        count = Output(fmt).rows(found, columns, title="duplicate pairs")
    _note_empty(fmt, count, "no duplicate pairs")


def stats(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Show counts over the whole store and its parameters."""
    from dedup_store.db.server.tuning import memory_note

    with settings_of(ctx).store() as store:
        found = store.stats()
    Output(fmt).record(found.to_dict(), title="store statistics")
    note = memory_note(found.storage)
    if note:
        typer.echo(note, err=True)


def delete(
    ctx: typer.Context,
    doc_ids: Annotated[list[str], typer.Argument(metavar="ID", help="Stored document ids.")],
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Delete documents and split the clusters they held together.

    All or nothing: an unknown id is an error and deletes nothing.
    """
    with settings_of(ctx).store() as store:
        deleted = store.delete(doc_ids)
    Output(fmt).record({"deleted": deleted})


_EXPORT_COLUMNS = [
    "id", "cluster_id", "representative", "created_at", "match", "method", "jaccard",
    "meta_score", "score",
]  # fmt: skip


def export(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """Write every document with its cluster and metadata.

    Use --format jsonl (or csv) to write a file.
    """
    with settings_of(ctx).store() as store:
        Output(fmt).rows(store.export(), _EXPORT_COLUMNS, title="documents")


def _note_empty(fmt: OutputFormat, count: int, message: str) -> None:
    if count == 0 and fmt is OutputFormat.table:
        typer.echo(message, err=True)


def register(app: typer.Typer) -> None:
    """Add the commands that read the store to ``app``."""
    for command in (similar, cluster, clusters, pairs, stats, delete, export):
        app.command()(command)
