"""A Django project for the integration's tests (``tests/test_django.py``, run by pytest-django):
an app whose articles are fingerprinted on save, and sync and async views that add one and can
fail after the add."""
