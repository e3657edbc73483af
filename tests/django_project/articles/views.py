"""Publish an article (fingerprinted on save) from a sync view, in the request's transaction
(``ATOMIC_REQUESTS``), and from an async view, in a transaction of its own; with ``fail``, both
fail after the article and its fingerprint were added. An article's page lists its duplicates
(the template filter), and an async view gives them as JSON."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from dedup_store.django import duplicates_of
from tests.django_project.articles.models import Article


class Failed(RuntimeError):
    """A request that fails after its article was added."""


def _publish(slug: str, body: str, fail: bool) -> dict[str, object]:
    created = Article.objects.create(slug=slug, body=body)
    duplicates = [m.external_id for m in duplicates_of(created)]
    if fail:
        raise Failed(slug)
    return {"slug": slug, "duplicates": duplicates}


def _publish_atomically(slug: str, body: str, fail: bool) -> dict[str, object]:
    with transaction.atomic():
        return _publish(slug, body, fail)


def publish(request: HttpRequest) -> JsonResponse:
    """Rolled back by ``ATOMIC_REQUESTS`` when it fails."""
    post = request.POST
    return JsonResponse(_publish(post["slug"], post["body"], "fail" in post))


# Django runs no async view in ATOMIC_REQUESTS' transaction
@transaction.non_atomic_requests  # type: ignore[untyped-decorator]  # Django has no type hints
async def publish_async(request: HttpRequest) -> JsonResponse:
    """The same in a transaction of its own, on Django's connection in its thread
    (``sync_to_async``)."""
    post = request.POST
    done = await sync_to_async(_publish_atomically)(post["slug"], post["body"], "fail" in post)
    return JsonResponse(done)


@transaction.non_atomic_requests  # type: ignore[untyped-decorator]
async def duplicates_async(request: HttpRequest, slug: str) -> JsonResponse:
    found = await Article.objects.aget(slug=slug)
    matches = await sync_to_async(duplicates_of)(found)
    return JsonResponse({"duplicates": [m.external_id for m in matches]})


def article(request: HttpRequest, slug: str) -> HttpResponse:
    """An article with the articles it duplicates."""
    found = get_object_or_404(Article, slug=slug)
    return render(request, "articles/article.django", {"article": found})
