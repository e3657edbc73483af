"""``check`` finds candidates and verifies them with one SQL statement."""

from __future__ import annotations

from dedup_store import DedupStore, Status
from tests.conftest import SqlRecorder

ARTICLE = (
    "Researchers at the university published a study showing that urban gardens reduce "
    "summer temperatures in dense neighbourhoods, improve air quality and give residents "
    "a place to meet, grow vegetables and teach children about food and the seasons."
)


def test_check_sends_one_query(store: DedupStore, sql_recorder: SqlRecorder) -> None:
    store.add("orig", ARTICLE)
    sql_recorder.statements.clear()
    result = store.check(ARTICLE + " The study ran for two years.")
    assert len(sql_recorder.queries()) == 1, sql_recorder.queries()
    assert result.status is Status.NEAR_DUPLICATE
    assert [m.external_id for m in result.matches] == ["orig"]


def test_check_writes_nothing(store: DedupStore) -> None:
    store.add("orig", ARTICLE)
    assert store.check(ARTICLE).status is Status.EXACT_DUPLICATE
    assert (
        store.check("an unrelated sentence about sailing boats in the harbour").status is Status.NEW
    )
    assert store.stats().documents == 1
