"""The example's views: publish a page (fingerprinted in the request's transaction), check a
text before publishing, show a page with its duplicates, and the same check as an async view."""

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render

from dedup_store.django import store
from pages.models import Page


def publish(request: HttpRequest) -> JsonResponse:
    """Create a page; with ``fail``, fail after it (ATOMIC_REQUESTS rolls both back)."""
    page = Page.objects.create(slug=request.POST["slug"], body=request.POST["body"])
    if request.POST.get("fail"):
        raise RuntimeError("the request fails after the page was added")
    return JsonResponse({"slug": page.slug})


def _check(body: str) -> dict[str, object]:
    with transaction.atomic():
        found = store().check(body)
    return {"status": found.status.value, "matches": [m.external_id for m in found.matches]}


def check(request: HttpRequest) -> JsonResponse:
    """Would this text be a duplicate of a page?"""
    return JsonResponse(_check(request.POST["body"]))


@transaction.non_atomic_requests  # Django runs no async view in ATOMIC_REQUESTS' transaction
async def check_async(request: HttpRequest) -> JsonResponse:
    """The same, from an async view: the store runs on Django's connection in its thread
    (``sync_to_async``), in a transaction of its own."""
    return JsonResponse(await sync_to_async(_check)(request.POST["body"]))


def page(request: HttpRequest, slug: str) -> HttpResponse:
    """A page, with the pages it duplicates."""
    return render(request, "pages/page.django", {"page": get_object_or_404(Page, slug=slug)})
