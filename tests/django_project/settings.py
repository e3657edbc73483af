"""Settings of the Django tests (pyproject.toml names them to pytest-django).

The database is on the server of ``DEDUP_STORE_TEST_URL``: pytest-django creates
``test_<its database>`` there for the session and drops it after, so runs of the suite against
different databases of one server do not meet.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

from tests.conftest import DEFAULT_TEST_URL

_url = urlsplit(os.environ.get("DEDUP_STORE_TEST_URL", DEFAULT_TEST_URL))
_name = unquote(_url.path.lstrip("/")) or "postgres"

SECRET_KEY = "tests only"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["dedup_store.django", "tests.django_project.articles"]
ROOT_URLCONF = "tests.django_project.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _name,
        "USER": unquote(_url.username or "postgres"),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "127.0.0.1",
        "PORT": _url.port or 5432,
        "ATOMIC_REQUESTS": True,  # a request's writes, the fingerprints included, commit together
        "TEST": {"NAME": f"test_{_name}"},
    }
}
DEDUP_STORE = {"schema": "dedup"}
