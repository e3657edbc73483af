"""Django integration (``pip install 'dedup-store[django]'``): the store in Django's own
database connection and transactions.

Add ``"dedup_store.django"`` to ``INSTALLED_APPS`` and, if the defaults do not do,
``DEDUP_STORE = {"schema": "dedup", "params": {...}, "keep_text": False, "database": "default"}``
to the settings. ``manage.py migrate`` creates the store's schema, and upgrades it when a newer
dedup_store brings migrations.

- :func:`store`: a :class:`~dedup_store.DedupStore` on Django's connection, inside the current
  ``transaction.atomic()`` block: its rows commit or roll back with the model's.
- :func:`fingerprint_on_save`: keeps a model's text field fingerprinted as instances are
  saved and deleted, in the same transaction.
- :func:`duplicates_of` (and the template filter ``{% load dedup_store %}``,
  ``page|duplicates``): the stored documents that match an instance.
- ``manage.py dedup <command>``: the ``dedup-store`` command line on the project's database.
"""

from dedup_store.django.store import duplicates_of, fingerprint_on_save, store

__all__ = ["duplicates_of", "fingerprint_on_save", "store"]
