"""The shapes of requests and answers, for the OpenAPI description (``/openapi.json``) and the
browsable documentation (``/docs``).

The server reads bodies itself (as the command line reads JSON Lines, with its messages) and
writes answers from the library's ``to_dict()``; these models describe them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    """A document, as a line of ``dedup-store ingest``'s JSON Lines: every other field is kept
    as its metadata."""

    model_config = ConfigDict(extra="allow")
    id: str | int = Field(description="The document's id (unique in the store).")
    text: str = Field(description="Its text, plain or HTML.")


class TextToCheck(BaseModel):
    """A text to check: every field but ``text`` (and ``id``, ignored) is its metadata."""

    model_config = ConfigDict(extra="allow")
    text: str


class MatchOut(BaseModel):
    """A stored document that matches."""

    external_id: str
    method: Literal["exact", "minhash", "simhash", "containment"]
    jaccard: float
    containment: float
    hamming: int
    meta_score: float | None
    score: float


class Added(BaseModel):
    """What adding a document found (201: stored; 200: ``skipped`` or ``updated``)."""

    id: str
    status: Literal["new", "exact_duplicate", "near_duplicate", "excerpt", "skipped", "updated"]
    cluster_id: int | None
    matches: list[MatchOut]
    stored: bool


class Rejected(Added):
    """409: an exact or near duplicate, refused as ``reject_duplicates`` asked; nothing was
    stored (``cluster_id`` is the cluster it would have joined)."""

    message: str


class Checked(BaseModel):
    """What adding the text would find."""

    status: Literal["new", "exact_duplicate", "near_duplicate", "excerpt"]
    cluster_id: int | None
    matches: list[MatchOut]


class ClusterOut(BaseModel):
    """A cluster of duplicates."""

    cluster_id: int
    representative: str
    canonical: str | None
    size: int
    members: list[str]
    first_seen: str
    last_seen: str


class PairOut(BaseModel):
    """A duplicate pair (``a`` is the older document)."""

    a: str
    b: str
    method: str
    jaccard: float
    containment: float
    hamming: int
    meta_score: float | None
    score: float
    found_at: str
    excerpt: str | None
    verdict: str | None
    via_exact_of: bool | None = None


class Page(BaseModel):
    """One page of a list: ``next_offset`` is the offset of the next page, ``null`` after the
    last."""

    items: list[Any]
    offset: int
    limit: int
    next_offset: int | None


class Deleted(BaseModel):
    """How many documents were deleted."""

    deleted: int


class Ids(BaseModel):
    """Documents to delete, all or none."""

    ids: list[str]


class Pair(BaseModel):
    """Two stored documents, and optionally their texts (when the store keeps none)."""

    a: str
    b: str
    text_a: str | None = None
    text_b: str | None = None


class VerdictIn(BaseModel):
    """A reviewer's verdict on two documents."""

    a: str
    b: str
    verdict: Literal["duplicate", "not_duplicate"]
    note: str | None = None
    by: str | None = None


class Who(BaseModel):
    """Who declares a document canonical."""

    by: str | None = None


class Rule(BaseModel):
    """The rule that picks each cluster's canonical document."""

    rule: str = Field(description="oldest, longest, meta:FIELD or meta:FIELD:min")


class ErrorOut(BaseModel):
    """An error: the command line's message, and its exit code for the same error."""

    error: str
    message: str
    exit_code: int | None = None
    field: str | None = None


def body_of(model: type[BaseModel], media_type: str = "application/json") -> dict[str, Any]:
    """The ``openapi_extra`` of an endpoint that reads a body of ``model``'s shape itself."""
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {media_type: {"schema": schema}}}}


#: The errors every endpoint may answer.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut, "description": description}
    for status, description in (
        (400, "Bad JSON, or parameters out of range or inconsistent"),
        (401, "Missing or wrong bearer token"),
        (404, "Unknown document id"),
        (413, "Request or document too large"),
        (422, "A bad record, naming the field"),
        (503, "Database down, store not ready, too busy or stopping"),
    )
}
