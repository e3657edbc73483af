"""Template filters: ``{% load dedup_store %}``, then ``{% for match in page|duplicates %}``
lists the stored documents that match a model instance fingerprinted by
:func:`~dedup_store.django.fingerprint_on_save` (best first, ``match.external_id``,
``match.method``, ``match.score``)."""

from __future__ import annotations

from django import template
from django.db.models import Model

from dedup_store.django.store import duplicates_of
from dedup_store.results import Match

register = template.Library()


def duplicates(instance: Model) -> list[Match]:
    """The matches of ``instance``'s document (none when it is not fingerprinted)."""
    return duplicates_of(instance)


register.filter("duplicates", duplicates)
