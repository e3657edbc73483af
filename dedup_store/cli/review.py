"""The reviewer's commands: ``explain``, ``review``, ``verdicts`` and ``canonical``.

Each makes one library call (:class:`~dedup_store.review.reviewing.Reviewing`) and renders its
result.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dedup_store.cli.context import settings_of
from dedup_store.cli.render import FormatOption, Output, OutputFormat
from dedup_store.errors import InvalidParamsError
from dedup_store.ingest.inputs import text_of

DocA = Annotated[str, typer.Argument(metavar="A", help="A stored document id.")]
DocB = Annotated[str, typer.Argument(metavar="B", help="Another stored document id.")]


def explain(
    ctx: typer.Context,
    a: DocA,
    b: DocB,
    text_a: Annotated[
        str | None,
        typer.Option(
            "--text-a", metavar="FILE", help="A's text, when the store keeps none ('-': stdin)."
        ),
    ] = None,
    text_b: Annotated[
        str | None,
        typer.Option("--text-b", metavar="FILE", help="B's text, when the store keeps none."),
    ] = None,
    context: Annotated[
        int, typer.Option(min=0, help="Words shown around each difference in a terminal.")
    ] = 12,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Explain why two stored documents match: scores, the keys that find them, their edge and
    verdict, and the words they share and where they differ.

    The texts are the stored ones (init --keep-text) unless --text-a/--text-b give them.
    """
    texts = [None if path is None else text_of(path) for path in (text_a, text_b)]
    with settings_of(ctx).store() as store:
        found = store.explain(a, b, text_a=texts[0], text_b=texts[1])
    out = Output(fmt)
    if fmt is not OutputFormat.table:
        out.record(found.to_dict())
        return
    out.record(
        {**found.scores(), "verdict": None if found.verdict is None else found.verdict.verdict},
        title=f"{a} and {b}",
    )
    if found.alignment is None:
        out.line("\ntexts: not kept by the store (init --keep-text), none given (--text-a/-b)")
        return
    from dedup_store.cli.alignment import alignment_text

    out.line()
    out.console.print(alignment_text(found.alignment, context_words=context))


def review(
    ctx: typer.Context,
    a: DocA,
    b: DocB,
    duplicate: Annotated[
        bool, typer.Option("--duplicate", help="They are duplicates: join their clusters.")
    ] = False,
    not_duplicate: Annotated[
        bool,
        typer.Option("--not-duplicate", help="They are not: keep their match out of clusters."),
    ] = False,
    clear: Annotated[bool, typer.Option("--clear", help="Take back the verdict.")] = False,
    note: Annotated[str | None, typer.Option(help="Why, for the next reviewer.")] = None,
    by: Annotated[str | None, typer.Option(help="Who decided.")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Record a verdict on two documents: --duplicate, --not-duplicate, or --clear.

    The clusters change at once and the verdict stays in force when either document is
    ingested again or updated. --not-duplicate always parts the two: when matches still join
    them (exact copies included), the weakest set of them that does is cut, and 'cut' lists it.
    """
    chosen = [name for name, on in (("duplicate", duplicate), ("not_duplicate", not_duplicate),
                                    ("clear", clear)) if on]  # fmt: skip
    if len(chosen) != 1:
        raise InvalidParamsError("give one of --duplicate, --not-duplicate and --clear")
    with settings_of(ctx).store() as store:
        result: dict[str, Any]
        if chosen[0] == "clear":
            result = {"a": a, "b": b, "cleared": store.clear_review(a, b)}
        else:
            result = store.review(a, b, chosen[0], note=note, by=by).to_dict()
        result["cluster_a"] = store.cluster(a).cluster_id
        result["cluster_b"] = store.cluster(b).cluster_id
    if fmt is OutputFormat.table and result.get("cut") is not None:
        cut = result["cut"]
        result["cut"] = [f"{c['a']} ~ {c['b']} ({c['method']} {c['score']:.3f})" for c in cut]
    Output(fmt).record(result, title="verdict")


_VERDICT_COLUMNS = ["a", "b", "verdict", "reviewer", "decided_at", "note"]


def verdicts(ctx: typer.Context, fmt: FormatOption = OutputFormat.table) -> None:
    """List the reviewers' verdicts, newest first."""
    with settings_of(ctx).store() as store:
        found = store.verdicts()
    count = Output(fmt).rows((v.to_dict() for v in found), _VERDICT_COLUMNS, title="verdicts")
    if count == 0 and fmt is OutputFormat.table:
        typer.echo("no verdicts", err=True)


def canonical(
    ctx: typer.Context,
    doc_id: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="The document to make its cluster's canonical one."),
    ] = None,
    rule: Annotated[
        str | None,
        typer.Option(
            help="Pick each cluster's canonical document by: oldest, longest, meta:FIELD "
            "(largest value) or meta:FIELD:min (smallest)."
        ),
    ] = None,
    by: Annotated[str | None, typer.Option(help="Who decided.")] = None,
    fmt: FormatOption = OutputFormat.table,
) -> None:
    """Choose canonical documents: declare ID canonical in its cluster, or change the rule.

    Without arguments, show the rule.
    """
    with settings_of(ctx).store() as store:
        if rule is not None:
            store.set_canonical_rule(rule)
        result: dict[str, object] = {"canonical_rule": store.settings.canonical_rule}
        if doc_id is not None:
            store.set_canonical(doc_id, by=by)
            found = store.cluster(doc_id)
            result.update(cluster_id=found.cluster_id, canonical=found.canonical)
    Output(fmt).record(result, title="canonical")


def register(app: typer.Typer) -> None:
    """Add the reviewer's commands to ``app``."""
    for command in (explain, review, verdicts, canonical):
        app.command()(command)
