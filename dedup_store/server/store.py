"""Endpoints on the whole store: clusters and pairs (paged), stats, the reviewer's calls
(explain, verdicts, canonical documents), the report, metrics and the probes."""

from __future__ import annotations

import asyncio
import itertools
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from dedup_store.errors import DedupStoreError, InvalidParamsError
from dedup_store.server import models
from dedup_store.server.bodies import json_object, string_field
from dedup_store.server.documents import Limit, Offset, page
from dedup_store.server.errors import RequestError, bad_field
from dedup_store.server.metrics import CONTENT_TYPE, exposition
from dedup_store.server.served import Served, json_response, served

router = APIRouter()
T = TypeVar("T")

MinSimilarity = Annotated[
    float | None,
    Query(ge=0.0, le=1.0, description="Only matches of at least this score."),
]


def _slice(items: Callable[[], Iterator[T]], offset: int, limit: int) -> list[T]:
    """Items ``offset`` to ``offset + limit`` (one more, to tell whether more follow) of a
    stream the store reads in one transaction, which ends here."""
    stream = items()
    try:
        return list(itertools.islice(stream, offset, offset + limit + 1))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()


@router.get(
    "/clusters",
    summary="The clusters, a page at a time",
    responses={200: {"model": models.Page}, **models.ERRORS},
)
async def clusters(
    request: Request,
    min_size: Annotated[int, Query(ge=1, description="Only clusters this large.")] = 2,
    min_similarity: MinSimilarity = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    """The clusters of at least ``min_size`` documents, oldest first, each with its canonical
    document; with ``min_similarity``, those the stored matches of at least that score make."""
    state = served(request)

    def read() -> list[dict[str, Any]]:
        found = _slice(
            lambda: state.store.clusters(min_size, min_similarity=min_similarity), offset, limit
        )
        return [c.to_dict() for c in found]

    return json_response(page(await state.calls.run(read), offset, limit))


@router.get(
    "/pairs",
    summary="The duplicate pairs, a page at a time",
    responses={200: {"model": models.Page}, **models.ERRORS},
)
async def pairs(
    request: Request,
    min_similarity: MinSimilarity = None,
    pending: Annotated[
        bool, Query(description="Only pairs without a verdict, the most doubtful first.")
    ] = False,
    expand: Annotated[bool, Query(description="Also every pair implied by exact copies.")] = False,
    limit: Limit = 100,
    offset: Offset = 0,
) -> Response:
    """Every stored duplicate pair with its method, scores and verdict (``a`` is the older
    document); ``pending``: the reviewer's queue; ``expand``: the pairs exact copies imply."""
    if pending and expand:
        raise InvalidParamsError("pending lists stored pairs: it does not go with expand")
    state = served(request)

    def read() -> list[dict[str, Any]]:
        found = _slice(
            lambda: state.store.pairs(
                min_similarity=min_similarity, pending=pending, expand=expand
            ),
            offset,
            limit,
        )
        rows = [p.to_dict() for p in found]
        if not expand:  # every stored pair is its own
            for row in rows:
                del row["via_exact_of"]
        return rows

    return json_response(page(await state.calls.run(read), offset, limit))


@router.get("/stats", summary="Counts over the whole store", responses=models.ERRORS)
async def stats(request: Request) -> Response:
    """Documents, clusters, edges by method, the hottest keys, the recent tier, the store's
    parameters and settings, and its bytes beside the server's ``shared_buffers``."""
    state = served(request)
    return json_response((await state.calls.run(state.store.stats)).to_dict())


@router.post(
    "/explain",
    summary="Why two documents match",
    responses=models.ERRORS,
    openapi_extra=models.body_of(models.Pair),
)
async def explain(request: Request) -> Response:
    """Scores, the keys that find one from the other, their edge and verdict, and the word
    alignment of their texts (the stored ones, or ``text_a`` and ``text_b``)."""
    state = served(request)
    obj = json_object(await state.body(request), "body")
    a, b = string_field(obj, "a", "body"), string_field(obj, "b", "body")
    texts = [string_field(obj, name, "body", required=False) for name in ("text_a", "text_b")]
    limit = state.settings.max_bytes
    for name, text in zip(("text_a", "text_b"), texts, strict=True):
        if text is not None and len(text.encode("utf-8", "surrogatepass")) > limit:
            message = f"body: field {name!r} is larger than the limit of {limit} bytes"
            raise RequestError(413, "InvalidDocumentError", message, exit_code=4, field=name)
    found = await state.calls.run(state.store.explain, a, b, text_a=texts[0], text_b=texts[1])
    return json_response(found.to_dict())


@router.post(
    "/verdicts",
    summary="Record a reviewer's verdict",
    responses=models.ERRORS,
    openapi_extra=models.body_of(models.VerdictIn),
)
async def review(request: Request) -> Response:
    """``not_duplicate`` parts the two at once (when matches still join them, exact copies
    included, the weakest set of them that does is cut: ``cut`` lists it), ``duplicate`` joins
    their clusters; the answer has both clusters afterwards. A verdict that contradicts others
    (a pair judged not duplicates that duplicate verdicts join) is refused with 400."""
    state = served(request)
    obj = json_object(await state.body(request), "body")
    a, b = string_field(obj, "a", "body"), string_field(obj, "b", "body")
    verdict = string_field(obj, "verdict", "body")
    if verdict not in ("duplicate", "not_duplicate"):
        raise bad_field("verdict", "body: field 'verdict' must be duplicate or not_duplicate")
    note = string_field(obj, "note", "body", required=False)
    by = string_field(obj, "by", "body", required=False)
    assert a is not None and b is not None

    def work() -> dict[str, Any]:
        result = state.store.review(a, b, verdict, note=note, by=by).to_dict()
        return {**result, **_clusters(state, a, b)}

    return json_response(await state.calls.run(work))


@router.delete("/verdicts", summary="Take back a verdict", responses=models.ERRORS)
async def clear_review(
    request: Request,
    a: Annotated[str, Query(description="A stored document id.")],
    b: Annotated[str, Query(description="Another stored document id.")],
) -> Response:
    """Take back the verdict on ``a`` and ``b``: ``cleared`` says whether there was one."""
    state = served(request)

    def work() -> dict[str, Any]:
        cleared = state.store.clear_review(a, b)
        return {"a": a, "b": b, "cleared": cleared, **_clusters(state, a, b)}

    return json_response(await state.calls.run(work))


def _clusters(state: Served, a: str, b: str) -> dict[str, int]:
    return {
        "cluster_a": state.store.cluster(a).cluster_id,
        "cluster_b": state.store.cluster(b).cluster_id,
    }


@router.get(
    "/verdicts",
    summary="The verdicts, newest first",
    responses={200: {"model": models.Page}, **models.ERRORS},
)
async def verdicts(request: Request, limit: Limit = 100, offset: Offset = 0) -> Response:
    """The reviewers' verdicts, newest first: ``a``, ``b``, ``verdict``, ``reviewer``,
    ``decided_at``, ``note``."""
    state = served(request)
    found = await state.calls.run(state.store.verdicts)
    items = [v.to_dict() for v in found[offset : offset + limit + 1]]
    return json_response(page(items, offset, limit))


@router.put(
    "/documents/{id:path}/canonical",
    summary="Declare a document canonical in its cluster",
    responses=models.ERRORS,
    openapi_extra={
        "requestBody": {
            "required": False,
            "content": {"application/json": {"schema": models.Who.model_json_schema()}},
        }
    },
)
async def canonical(request: Request, id: str) -> Response:
    """Make document ``id`` its cluster's canonical document (over the store's rule)."""
    state = served(request)
    raw = await state.body(request)
    by = string_field(json_object(raw, "body"), "by", "body", required=False) if raw else None

    def work() -> dict[str, Any]:
        state.store.set_canonical(id, by=by)
        found = state.store.cluster(id)
        return {"cluster_id": found.cluster_id, "canonical": found.canonical}

    return json_response(await state.calls.run(work))


@router.get(
    "/canonical-rule", summary="The rule that picks canonical documents", responses=models.ERRORS
)
async def canonical_rule(request: Request) -> Response:
    """The store's rule: ``oldest``, ``longest``, ``meta:FIELD`` or ``meta:FIELD:min``."""
    state = served(request)
    settings = await state.calls.run(lambda: state.store.settings)
    return json_response({"canonical_rule": settings.canonical_rule})


@router.put(
    "/canonical-rule",
    summary="Change the rule that picks canonical documents",
    responses=models.ERRORS,
    openapi_extra=models.body_of(models.Rule),
)
async def set_canonical_rule(request: Request) -> Response:
    """Change the store's rule (an unknown rule is answered 400)."""
    state = served(request)
    rule = string_field(json_object(await state.body(request), "body"), "rule", "body")
    assert rule is not None
    await state.calls.run(state.store.set_canonical_rule, rule)
    return json_response({"canonical_rule": rule})


@router.get(
    "/report",
    summary="The review report, one HTML file",
    response_class=FileResponse,
    responses={200: {"content": {"text/html": {}}}, **models.ERRORS},
)
async def report(
    request: Request,
    cluster: Annotated[
        str | None, Query(description="Only the cluster of this stored document.")
    ] = None,
    max_bytes: Annotated[
        int | None,
        Query(ge=1, description="Size budget of the file (at most the server's, the default)."),
    ] = None,
) -> Response:
    """The report of the whole store, or of one document's cluster, written on demand (one at a
    time): past its size budget pairs keep their scores but not their texts. The headers
    ``X-Report-Clusters``, ``X-Report-Pairs`` and ``X-Report-Pairs-Over-Budget`` count them."""
    state = served(request)
    cap = state.settings.report_max_bytes
    if max_bytes is not None and max_bytes > cap:
        raise InvalidParamsError(f"max_bytes {max_bytes} is over the server's limit of {cap}")
    handle, path = tempfile.mkstemp(prefix="dedup-report-", suffix=".html")
    os.close(handle)
    try:
        async with asyncio.timeout(state.settings.timeout):
            await state.reports.acquire()
        try:
            summary = await state.calls.run(
                state.store.report, path, cluster=cluster, max_bytes=max_bytes or cap
            )
        finally:
            state.reports.release()
    except TimeoutError:
        os.unlink(path)
        raise RequestError(503, "Busy", "another report is being written; try again") from None
    except BaseException:
        os.unlink(path)
        raise
    headers = {
        "X-Report-Clusters": str(summary.clusters),
        "X-Report-Pairs": str(summary.pairs),
        "X-Report-Pairs-Over-Budget": str(summary.pairs_over_budget),
    }
    return FileResponse(
        path,
        media_type="text/html; charset=utf-8",
        headers=headers,
        background=BackgroundTask(os.unlink, path),
    )


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def prometheus(request: Request) -> Response:
    """Requests and their latency, documents added, and the store's counts."""
    state = served(request)
    counts = await state.calls.run(state.store.stats)
    return Response(exposition(counts), media_type=CONTENT_TYPE)


@router.get("/healthz", summary="Whether the process answers")
async def healthz() -> Response:
    """Always 200 while the process runs."""
    return json_response({"status": "ok"})


@router.get("/readyz", summary="Whether the server can answer requests")
async def readyz(request: Request) -> Response:
    """200 when the store answers a read; 503 when it does not, or the server is stopping."""
    state = served(request)
    if state.stopping:
        return json_response({"status": "stopping"}, 503)
    try:
        await state.calls.run(lambda: state.store.settings)
    except (DedupStoreError, RequestError) as e:
        error = e if isinstance(e, RequestError) else RequestError.of(e)
        return json_response({"status": "unavailable", **error.body()}, 503)
    return json_response({"status": "ready"})
