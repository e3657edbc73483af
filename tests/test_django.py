"""The Django example (examples/django) against a database made for the test: ``manage.py
migrate`` creates the store's schema; saving a page fingerprints it in the save's transaction;
a rolled-back transaction takes the fingerprint with the page; deleting a page removes it."""

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
from django.db import transaction
from dedup_store.django import store
from pages.models import Page

text = "The city council approved the new budget on Tuesday after a long debate about road " \\
       "repairs, school funding and the renovation of the central library building."
Page.objects.create(slug="budget", body=text)
with transaction.atomic():
    Page.objects.create(slug="budget-repost", body=text)
    print("in the transaction:", store().check(text).status.value)
try:
    with transaction.atomic():
        Page.objects.create(slug="rolled-back", body=text + " Updated.")
        raise RuntimeError("the editor cancels")
except RuntimeError:
    pass
with transaction.atomic():
    s = store()
    print("cluster:", s.cluster("budget").members)
    print("rolled back:", [m.external_id for m in s.similar("budget")])
Page.objects.get(slug="budget-repost").delete()
with transaction.atomic():
    print("after delete:", store().cluster("budget").members)
try:
    store()
except Exception as error:
    print("outside atomic:", type(error).__name__)

from django.test import Client

client = Client(raise_request_exception=False)
body = text + " A reposted copy, lightly edited for the web."
print("publish:", client.post("/publish", {"slug": "web", "body": body}).status_code)
failed = client.post("/publish", {"slug": "failed", "body": body + " Failed.", "fail": "1"})
print("failed request:", failed.status_code, Page.objects.filter(slug="failed").exists())
answer = client.post("/check", {"body": body})
print("check:", answer.json()["status"] if answer.status_code == 200 else answer.content[:3000])
print("check async:", client.post("/check-async", {"body": body}).json()["status"])
print("page:", client.get("/pages/budget").content.decode().count('class="duplicate"'))
with transaction.atomic():
    print("failed fingerprint:", [m.external_id for m in store().similar("budget")])
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


def manage(database: str, *args: str) -> str:
    env = {**os.environ, "CMS_DATABASE_URL": database, "DJANGO_SETTINGS_MODULE": "cms.settings"}
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=EXAMPLE, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pages_are_fingerprinted_in_their_transaction(database: str) -> None:
    manage(database, "migrate", "--verbosity", "0")
    with psycopg.connect(database) as conn:
        schemas = {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace")}
    assert "dedup" in schemas
    manage(database, "migrate", "--verbosity", "0")  # again: nothing to do, no error
    out = manage(database, "shell", "-c", SHELL)
    assert "in the transaction: exact_duplicate" in out
    assert "cluster: ['budget', 'budget-repost']" in out
    assert "rolled back: ['budget-repost']" in out  # no 'rolled-back' page
    assert "after delete: ['budget']" in out
    assert "outside atomic: InvalidParamsError" in out
    assert "publish: 200" in out
    assert "failed request: 500 False" in out  # the page and its fingerprint rolled back
    assert "failed fingerprint: ['web']" in out
    assert "check: exact_duplicate" in out and "check async: exact_duplicate" in out
    assert "page: 1" in out  # the template's duplicates of the page
    clusters = manage(database, "dedup", "pairs", "--format", "json")
    assert '"budget"' in clusters and '"web"' in clusters
    failing = subprocess.run(
        [sys.executable, "manage.py", "dedup", "cluster", "nobody"], cwd=EXAMPLE,
        env={**os.environ, "CMS_DATABASE_URL": database}, capture_output=True, text=True,
    )  # fmt: skip
    assert failing.returncode == 5 and failing.stderr == "error: unknown document id: 'nobody'\n"
