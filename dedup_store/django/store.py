"""The store on Django's connection (see :mod:`dedup_store.django`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connections, transaction
from django.db.models import Model
from django.db.models.signals import post_delete, post_save

from dedup_store.errors import InvalidParamsError, UnknownDocumentError
from dedup_store.results import Match
from dedup_store.service import DedupStore

#: The keys of ``settings.DEDUP_STORE`` and their defaults.
DEFAULTS: dict[str, Any] = {
    "schema": "dedup",
    "params": None,
    "keep_text": False,
    "database": "default",
}


def options() -> dict[str, Any]:
    """``settings.DEDUP_STORE`` over :data:`DEFAULTS`.

    Raises:
        InvalidParamsError: a key that is not one of :data:`DEFAULTS`.
    """
    given = dict(getattr(settings, "DEDUP_STORE", {}) or {})
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        raise InvalidParamsError(
            f"unknown DEDUP_STORE settings {unknown}; known: {sorted(DEFAULTS)}"
        )
    return {**DEFAULTS, **given}


def store(using: str | None = None, **extra: Any) -> DedupStore:
    """A store on Django's connection ``using`` (default: ``DEDUP_STORE["database"]``), for
    the current ``transaction.atomic()`` block: what it writes commits or rolls back with it.

    Raises:
        InvalidParamsError: called outside an atomic block (Django's connection is then in
            autocommit mode, and the store needs a transaction to work in).
    """
    chosen = options()
    alias = using or chosen["database"]
    connection = connections[alias]
    if not connection.in_atomic_block:
        raise InvalidParamsError(
            "dedup_store.django.store() works inside transaction.atomic(): wrap the call "
            "(its rows then commit or roll back with the block)"
        )
    connection.ensure_connection()
    return DedupStore(
        connection.connection,
        chosen["params"],
        chosen["schema"],
        keep_text=chosen["keep_text"],
        **extra,
    )


def migrate_store(using: str = "default") -> None:
    """Create the store, or upgrade its schema, on database ``using`` (``post_migrate``)."""
    with transaction.atomic(using=using):
        store(using).close()


#: How each fingerprinted model names its instances' documents (:func:`fingerprint_on_save`).
_ID_OF: dict[type[Model], Callable[[Model], str]] = {}


def default_id(instance: Model) -> str:
    """The document id of a model instance: ``app_label.Model:pk``."""
    return f"{instance._meta.label}:{instance.pk}"


def duplicates_of(instance: Model) -> list[Match]:
    """The stored documents that match ``instance``'s (fingerprinted by
    :func:`fingerprint_on_save`), best first; none when it has no document."""
    id_of = _ID_OF.get(type(instance), default_id)
    with transaction.atomic(using=options()["database"]):
        try:
            return store().similar(id_of(instance))
        except UnknownDocumentError:
            return []


def fingerprint_on_save(
    model: type[Model],
    text_field: str,
    *,
    id_of: Callable[[Model], str] = default_id,
) -> None:
    """Keep ``model``'s ``text_field`` fingerprinted: each save adds (or updates) the instance's
    document, each delete removes it, in the transaction of the save or delete. The document's
    id is ``id_of(instance)`` (default: ``app_label.Model:pk``)."""

    def saved(sender: type[Model], instance: Model, **_: Any) -> None:
        with transaction.atomic(using=options()["database"]):
            store().add(id_of(instance), str(getattr(instance, text_field)), update=True)

    def deleted(sender: type[Model], instance: Model, **_: Any) -> None:
        with transaction.atomic(using=options()["database"]):
            store().delete([id_of(instance)])

    _ID_OF[model] = id_of
    uid = f"dedup_store:{model._meta.label}:{text_field}"
    post_save.connect(saved, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(deleted, sender=model, weak=False, dispatch_uid=uid)
