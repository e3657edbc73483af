"""The documented path of :func:`upgrade` (``docs/embedding.md``); the migrations live in
:mod:`dedup_store.db.schema.migrate`."""

from dedup_store.db.schema.migrate import upgrade

__all__ = ["upgrade"]
