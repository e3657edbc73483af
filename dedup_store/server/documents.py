"""Endpoints on documents: add (one, or a batch: :mod:`dedup_store.server.batch`), check,
similar, cluster, delete."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from dedup_store.errors import InvalidParamsError, quote_id
from dedup_store.results import AddResult, Status
from dedup_store.server import models
from dedup_store.server.bodies import document_of, json_object, meta_of, text_of
from dedup_store.server.errors import bad_field
from dedup_store.server.metrics import metrics
from dedup_store.server.served import Served, json_response, served

router = APIRouter()

#: Most items of one page.
MAX_PAGE = 10_000
Limit = Annotated[int, Query(ge=0, le=MAX_PAGE, description="Items of the page, at most.")]
#: The largest offset: the offset, the page and the one more item read past it fit PostgreSQL's
#: ``bigint``.
MAX_OFFSET = 2**63 - 2 - MAX_PAGE
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items skipped before the page.")]
RejectDuplicates = Annotated[
    bool,
    Query(
        description="Answer 409 with the matches, storing nothing, for an exact or near duplicate."
    ),
]
Confirm = Annotated[bool, Query(description="Store it even so (with reject_duplicates).")]
Update = Annotated[bool, Query(description="Replace a document whose id is stored.")]
#: Statuses of a stored document (201); ``skipped`` and ``updated`` are answered 200.
CREATED = frozenset({Status.NEW, Status.EXACT_DUPLICATE, Status.NEAR_DUPLICATE, Status.EXCERPT})


_KIND = {Status.EXACT_DUPLICATE: "an exact duplicate", Status.NEAR_DUPLICATE: "a near duplicate"}


def check_options(update: bool, reject_duplicates: bool) -> None:
    """Refuse options that do not go together.

    Raises:
        InvalidParamsError: ``update`` with ``reject_duplicates`` (an update is not judged).
    """
    if update and reject_duplicates:
        raise InvalidParamsError("reject_duplicates does not go with update")


def added(result: AddResult, kept: bool) -> tuple[int, dict[str, Any]]:
    """The status and body of an add's answer (counted in the metrics)."""
    body = result.to_dict()
    if not kept:
        best = result.matches[0]
        body["stored"] = False
        body["message"] = (
            f"document {quote_id(result.external_id)} is {_KIND[result.status]} of "
            f"{quote_id(best.external_id)} ({best.method}, jaccard {best.jaccard:.3f}): "
            "nothing was stored; send it with confirm=true to store it"
        )
        metrics().added("rejected")
        return 409, body
    body["stored"] = result.status is not Status.SKIPPED
    metrics().added(str(result.status))
    return (201 if result.status in CREATED else 200), body


@router.post(
    "/documents",
    status_code=201,
    summary="Add a document",
    responses={
        201: {"model": models.Added},
        200: {"model": models.Added, "description": "Skipped (a known id) or updated"},
        409: {"model": models.Rejected, "description": "A duplicate, refused"},
        **models.ERRORS,
    },
    openapi_extra=models.body_of(models.Record),
)
async def add(
    request: Request,
    reject_duplicates: RejectDuplicates = False,
    confirm: Confirm = False,
    update: Update = False,
) -> Response:
    """Add one document: 201 with its status, matches and cluster. A known id is skipped
    (200) unless ``update``. With ``reject_duplicates`` an exact or near duplicate is answered
    409 with its matches and nothing is stored, unless ``confirm``."""
    state = served(request)
    check_options(update, reject_duplicates)
    raw = await state.body(request)
    status, body = await add_document(state, raw, reject_duplicates, confirm, update)
    return json_response(body, status)


async def add_document(
    state: Served, raw: bytes, reject_duplicates: bool, confirm: bool, update: bool
) -> tuple[int, dict[str, Any]]:
    """The status and body of the answer to ``POST /documents`` with body ``raw`` (the options
    checked by :func:`check_options`)."""
    doc = document_of(json_object(raw, "body"), "body", state.settings.max_bytes)
    if reject_duplicates and not confirm:
        result, kept = await state.calls.run(state.guarded.add, doc.id, doc.text, doc.meta, True)
    else:
        result = await state.calls.run(state.store.add, doc.id, doc.text, doc.meta, update=update)
        kept = True
    return added(result, kept)


@router.post(
    "/check",
    summary="Check a text, storing nothing",
    responses={200: {"model": models.Checked}, **models.ERRORS},
    openapi_extra=models.body_of(models.TextToCheck),
)
async def check(request: Request) -> Response:
    """What adding the text would find: its status, matches and the cluster it would join."""
    state = served(request)
    return json_response(await check_text(state, await state.body(request)))


async def check_text(state: Served, raw: bytes) -> dict[str, Any]:
    """The answer to ``POST /check`` with body ``raw``."""
    obj = json_object(raw, "body")
    text = text_of(obj, "body", state.settings.max_bytes)
    result = await state.calls.run(state.store.check, text, meta_of(obj, "body"))
    return result.to_dict()


def page(items: list[Any], offset: int, limit: int) -> dict[str, Any]:
    """A page of ``items`` (read with one more than ``limit``, to tell whether more follow)."""
    more = len(items) > limit
    return {
        "items": items[:limit],
        "offset": offset,
        "limit": limit,
        "next_offset": offset + limit if more else None,
    }


@router.get(
    "/documents/{id:path}/similar",
    summary="The documents a stored document matches",
    responses={200: {"model": models.Page}, **models.ERRORS},
)
async def similar(request: Request, id: str, limit: Limit = 100, offset: Offset = 0) -> Response:
    """The stored documents that match document ``id``, best first (an exact copy answers as
    its whole exact group), a page at a time."""
    return json_response(await similar_page(served(request), id, limit, offset))


async def similar_page(state: Served, id: str, limit: int, offset: int) -> dict[str, Any]:
    """The answer to ``GET /documents/{id}/similar``."""
    found = await state.calls.run(state.store.similar, id, limit=limit + 1, offset=offset)
    return page([m.to_dict() for m in found], offset, limit)


@router.get(
    "/documents/{id:path}/cluster",
    summary="The cluster of a stored document",
    responses={200: {"model": models.ClusterOut}, **models.ERRORS},
)
async def cluster(request: Request, id: str) -> Response:
    """Its cluster: id, representative, canonical document, members (oldest first)."""
    return json_response(await cluster_of(served(request), id))


async def cluster_of(state: Served, id: str) -> dict[str, Any]:
    """The answer to ``GET /documents/{id}/cluster``."""
    return (await state.calls.run(state.store.cluster, id)).to_dict()


@router.delete(
    "/documents/{id:path}",
    summary="Delete a document",
    responses={200: {"model": models.Deleted}, **models.ERRORS},
)
async def delete_one(request: Request, id: str) -> Response:
    """Delete the document with its keys and edges, splitting the clusters it held together."""
    state = served(request)
    deleted = await state.calls.run(state.store.delete, [id])
    return json_response({"deleted": deleted})


@router.post(
    "/documents/delete",
    summary="Delete documents, all or none",
    responses={200: {"model": models.Deleted}, **models.ERRORS},
    openapi_extra=models.body_of(models.Ids),
)
async def delete_many(request: Request) -> Response:
    """Delete documents, all or nothing: an unknown id is answered 404 and deletes nothing."""
    state = served(request)
    obj = json_object(await state.body(request), "body")
    ids = obj.get("ids")
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise bad_field("ids", "body: field 'ids' must be an array of strings")
    deleted = await state.calls.run(state.store.delete, ids)
    return json_response({"deleted": deleted})
