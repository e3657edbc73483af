"""No models: the store's tables are its own (created by ``manage.py migrate`` through
:mod:`dedup_store.django.apps`); Django signals ``post_migrate`` only to apps with this module."""
