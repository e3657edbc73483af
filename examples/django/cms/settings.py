"""A minimal Django project whose pages are fingerprinted as they are saved.

The database is PostgreSQL, named by ``CMS_DATABASE_URL`` (default
``postgresql://postgres@127.0.0.1:5432/cms``).
"""

import os
from urllib.parse import urlsplit

_url = urlsplit(os.environ.get("CMS_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/cms"))

SECRET_KEY = "an example, not a secret"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "dedup_store.django", "pages"]
ROOT_URLCONF = "cms.urls"
ALLOWED_HOSTS = ["*"]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _url.path.lstrip("/"),
        "USER": _url.username or "postgres",
        "PASSWORD": _url.password or "",
        "HOST": _url.hostname or "127.0.0.1",
        "PORT": _url.port or 5432,
        "ATOMIC_REQUESTS": True,  # a request's writes, the fingerprints included, commit together
    }
}
# the store's settings (these are the defaults but for keep_text)
DEDUP_STORE = {"schema": "dedup", "keep_text": True}
