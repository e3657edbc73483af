"""The Django example (examples/django), as its README runs it, against a database made for the
test: ``manage.py migrate``, its requests (publish, a publish that fails after the save, check
from a sync and an async view, a page listing its duplicates), and ``manage.py dedup`` with the
command line's options and exit codes. The integration itself is tested in-process, under
pytest-django, by tests/test_django.py."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.db

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "django"

SHELL = """
from django.test import Client
from pages.models import Page

text = "The city council approved the new budget on Tuesday after a long debate about road " \\
       "repairs, school funding and the renovation of the central library building."
client = Client(raise_request_exception=False)
print("publish:", client.post("/publish", {"slug": "budget", "body": text}).status_code)
failed = client.post("/publish", {"slug": "failed", "body": text + " Failed.", "fail": "1"})
print("failed request:", failed.status_code, Page.objects.filter(slug="failed").exists())
body = text + " A reposted copy, lightly edited for the web."
print("publish:", client.post("/publish", {"slug": "web", "body": body}).status_code)
print("check:", client.post("/check", {"body": body}).json()["status"])
print("check async:", client.post("/check-async", {"body": body}).json()["status"])
print("page:", client.get("/pages/budget").content.decode().count('class="duplicate"'))
"""


@pytest.fixture
def database(database_url: str) -> Iterator[str]:
    admin = database_url.replace("postgresql+psycopg://", "postgresql://", 1)
    name = f"cms_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def manage(database: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python manage.py ARGS`` in the example, on ``database``, with the example's settings
    (not the tests' that pytest-django puts in the environment)."""
    env = {**os.environ, "CMS_DATABASE_URL": database, "DJANGO_SETTINGS_MODULE": "cms.settings"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=EXAMPLE, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def test_the_examples_pages_requests_and_commands(database: str) -> None:
    migrated = manage(database, "migrate", "--verbosity", "0")
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(database) as conn:
        schemas = {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace")}
    assert "dedup" in schemas
    shell = manage(database, "shell", "--verbosity", "0", "-c", SHELL)
    assert shell.returncode == 0, shell.stderr
    assert shell.stdout.splitlines() == [
        "publish: 200",
        "failed request: 500 False",  # the page and its fingerprint rolled back
        "publish: 200",
        "check: exact_duplicate",
        "check async: exact_duplicate",
        "page: 1",  # the template lists the page's duplicate
    ]
    pairs = manage(database, "dedup", "pairs", "--format", "json")
    assert pairs.returncode == 0, pairs.stderr
    assert '"budget"' in pairs.stdout and '"web"' in pairs.stdout
    assert '"failed"' not in pairs.stdout
    failing = manage(database, "dedup", "cluster", "nobody")
    assert failing.returncode == 5 and failing.stderr == "error: unknown document id: 'nobody'\n"
