"""What a view does before publishing: is this text a duplicate of a page we have?"""

from django.db import transaction
from django.http import HttpRequest, JsonResponse

from dedup_store.django import store


def check(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        found = store().check(request.POST["body"])
    return JsonResponse(
        {"status": found.status.value, "matches": [m.external_id for m in found.matches]}
    )
