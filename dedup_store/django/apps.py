"""The Django app: after every ``manage.py migrate``, the store's schema is created or
upgraded on the migrated database."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class DedupStoreConfig(AppConfig):  # type: ignore[misc]  # Django has no type hints
    """``dedup_store.django`` in ``INSTALLED_APPS``."""

    name = "dedup_store.django"
    label = "dedup_store"
    verbose_name = "dedup_store"

    def ready(self) -> None:
        post_migrate.connect(_migrate_store, sender=self)


def _migrate_store(sender: AppConfig, using: str = "default", **_: Any) -> None:
    from dedup_store.django.store import migrate_store

    migrate_store(using)
