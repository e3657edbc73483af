"""The Django integration under pytest-django, in the project of ``tests/django_project`` on a
test database that pytest-django creates on the test server: a save's fingerprint commits or
rolls back with it, a request that fails after its add leaves neither, async views reach the
store, ``migrate`` creates the store's schema, ``manage.py dedup`` and the template filter work.

Most tests really commit (``transaction=True``); Django then empties its own tables after each,
and the ``forget_documents`` fixture the store's."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test import AsyncClient, Client

from dedup_store import DedupStore, InvalidParamsError, Method, Status
from dedup_store.db.schema.migrate import head
from dedup_store.django import duplicates_of, store
from dedup_store.django.management.commands.dedup import _url
from dedup_store.django.store import default_id
from tests.django_project.articles.models import Article

pytestmark = [pytest.mark.db, pytest.mark.django_db(transaction=True)]

TEXT = (
    "The city council approved the new budget on Tuesday after a long debate about road "
    "repairs, school funding and the renovation of the central library building. The mayor "
    "said the vote showed that the council could still agree on the things that matter most "
    "to the people who live in the town, and promised a first report on the works in spring."
)
EDITED = TEXT.replace("Tuesday", "Wednesday").replace("in spring", "by the spring")
OTHER = (
    "Heavy snow closed the mountain pass for a third day; the ferry to the islands runs on its "
    "winter timetable until the end of the month, the harbour master said."
)


def documents() -> list[str]:
    """The ids of the documents the store holds, read on Django's connection."""
    with transaction.atomic():
        return sorted(d["id"] for d in store().export())


def committed() -> list[str]:
    """The same, read on a connection of the store's own: what was committed."""
    with DedupStore(_url(connection.settings_dict), create=False) as own:
        return sorted(d["id"] for d in own.export())


@pytest.fixture(autouse=True)
def forget_documents() -> Iterator[None]:
    """Django flushes its own tables after a ``transaction=True`` test, not the store's."""
    yield
    with transaction.atomic():
        left = [d["id"] for d in store().export()]
        if left:
            store().delete(left)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Django's async views run on asyncio


@pytest.fixture
async def async_client(anyio_backend: str) -> AsyncIterator[AsyncClient]:
    """pytest-django's ``async_client``; then Django's connection of the thread that ran the
    requests' sync code (``sync_to_async``) is closed, or it would stay open after the test and
    keep pytest-django from dropping the test database."""
    yield AsyncClient()
    await sync_to_async(connections.close_all)()


def test_a_rolled_back_save_takes_its_fingerprint_along() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        article = Article.objects.create(slug="budget", body=TEXT)
        assert documents() == [default_id(article)]  # in the transaction, the store knows it
        raise RuntimeError("the editor cancels")
    assert not Article.objects.exists()
    assert documents() == [] and committed() == []
    with transaction.atomic():
        assert store().check(TEXT).status is Status.NEW


def test_a_committed_save_keeps_both_and_its_near_duplicate_is_found() -> None:
    with transaction.atomic():
        first = Article.objects.create(slug="budget", body=TEXT)
    second = Article.objects.create(slug="repost", body=EDITED)  # autocommit: its own transaction
    ids = sorted([default_id(first), default_id(second)])
    assert committed() == ids
    [match] = duplicates_of(second)
    assert match.external_id == default_id(first) and match.method is not Method.EXACT
    with transaction.atomic():
        assert store().check(TEXT.replace("Tuesday", "Monday")).status is Status.NEAR_DUPLICATE
        assert store().cluster(default_id(first)).members == ids

    second.body = OTHER  # a save updates the document
    second.save()
    assert duplicates_of(second) == [] and duplicates_of(first) == []
    second.delete()  # a delete removes it
    assert committed() == [default_id(first)]
    assert duplicates_of(second) == []  # no document: no duplicates, no error

    with pytest.raises(InvalidParamsError, match=r"inside transaction\.atomic"):
        store()  # outside an atomic block Django's connection autocommits


def test_a_request_that_fails_after_the_add_leaves_neither(client: Client) -> None:
    published = client.post("/publish", {"slug": "budget", "body": TEXT})
    assert published.status_code == 200 and published.json()["duplicates"] == []
    client.raise_request_exception = False  # answered as a server would: 500
    failed = client.post("/publish", {"slug": "repost", "body": EDITED, "fail": "1"})
    assert failed.status_code == 500
    assert list(Article.objects.values_list("slug", flat=True)) == ["budget"]
    [article] = Article.objects.all()
    assert committed() == [default_id(article)]
    assert duplicates_of(article) == []


@pytest.mark.anyio
async def test_async_views_reach_the_store(async_client: AsyncClient) -> None:
    first = await async_client.post("/publish-async", {"slug": "budget", "body": TEXT})
    assert first.status_code == 200 and first.json()["duplicates"] == []
    second = await async_client.post("/publish-async", {"slug": "repost", "body": EDITED})
    budget = await Article.objects.aget(slug="budget")
    assert second.json()["duplicates"] == [default_id(budget)]
    listed = await async_client.get("/articles/budget/duplicates")
    repost = await Article.objects.aget(slug="repost")
    assert listed.json()["duplicates"] == [default_id(repost)]

    async_client.raise_request_exception = False
    failed = await async_client.post(
        "/publish-async", {"slug": "failed", "body": OTHER, "fail": "1"}
    )
    assert failed.status_code == 500
    assert not await Article.objects.filter(slug="failed").aexists()
    assert await sync_to_async(committed)() == sorted([default_id(budget), default_id(repost)])


def test_migrate_creates_the_stores_schema_and_again_changes_nothing() -> None:
    def schema() -> tuple[Any, ...]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT version_num FROM dedup.alembic_version")
            version = cursor.fetchone()
            cursor.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'dedup' "
                "ORDER BY 1"
            )
            return version, cursor.fetchall()

    with connection.cursor() as cursor:
        cursor.execute("DROP SCHEMA dedup CASCADE")
    call_command("migrate", verbosity=0)
    created = schema()
    assert created[0] == (head(),) and ("documents",) in created[1]

    article = Article.objects.create(slug="budget", body=TEXT)
    call_command("migrate", verbosity=0)  # again: nothing to do
    assert schema() == created and committed() == [default_id(article)]

    out = io.StringIO()
    call_command("dedup", "stats", "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["documents"] == 1


def test_templates_list_an_objects_duplicates(client: Client) -> None:
    with transaction.atomic():
        Article.objects.create(slug="budget", body=TEXT)
        repost = Article.objects.create(slug="repost", body=EDITED)
        Article.objects.create(slug="snow", body=OTHER)
    page = client.get("/articles/budget").content.decode()
    assert page.count('class="duplicate"') == 1 and default_id(repost) in page
    assert 'class="duplicate"' not in client.get("/articles/snow").content.decode()


@pytest.mark.django_db  # the test runs in a transaction that is rolled back after it
def test_in_a_test_transaction_the_store_works_and_forgets(client: Client) -> None:
    Article.objects.create(slug="budget", body=TEXT)
    published = client.post("/publish", {"slug": "repost", "body": EDITED})
    [match] = published.json()["duplicates"]
    assert match == default_id(Article.objects.get(slug="budget"))
    assert committed() == []  # nothing committed: another connection sees nothing
