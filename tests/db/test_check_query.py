"""``check`` finds candidates and verifies them with one SQL statement."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, Document, FingerprintParams, Status
from dedup_store.core.fingerprint import fingerprint
from dedup_store.db.matches import scoring
from tests.conftest import SqlRecorder
from tests.db.corpus import PlantedCorpus

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


def test_check_probes_the_key_index_once_and_gets_no_parallel_plan(
    engine: Engine, schema: str
) -> None:
    """Every band and block key of a check, whatever its slot, is a rescan of one index scan per
    tier, ``slot_keys`` and ``recent_slot_keys``: the plan has one of each (it had 44, one per
    slot and tier), and it stays serial on a store that took thousands of single adds since its
    bulk load."""
    corpus = PlantedCorpus(5, words=(30, 50))
    docs = [Document(f"d{i}", corpus.original()) for i in range(6_000)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs[:2_000], bulk=True)
        store.ingest(docs[2_000:], bulk=False)
        statement, parameters = scoring.check_statement(
            schema, fingerprint(docs[5].text, store.params)
        )
        assert store.check(docs[5].text).status is Status.EXACT_DUPLICATE
    with engine.connect() as conn:
        conn.execute(text("SET plan_cache_mode = force_generic_plan"))  # as the store plans
        plan = [row[0] for row in conn.execute(text(f"EXPLAIN {statement}"), parameters)]
    scans = [line.split(" using ")[1].split()[0] for line in plan if " using " in line]
    assert sorted(s for s in scans if "slot_keys" in s) == [
        "recent_slot_keys_lookup",
        "slot_keys_lookup",
    ], "\n".join(plan)
    assert not [line for line in plan if "Gather" in line or "Parallel" in line]


def test_a_check_with_no_hot_slot_to_send_looks_up_no_secondary_keys() -> None:
    """A query that sends no secondary keys (it knows no hot slot of its own) leaves their
    lookup out of its statement; told of hot slots, or asked for every slot's, it has it."""
    fp = fingerprint(ARTICLE, FingerprintParams())
    statements = {
        name: scoring.check_statement("store", fp, slots)[0]
        for name, slots in (("none", []), ("some", [(0, 3)]), ("every", None))
    }
    assert "secondary_keys" not in statements["none"]
    assert "secondary_keys" in statements["some"]
    assert statements["some"] == statements["every"]
    assert "hot_keys" in statements["none"]  # it still reports the hot slots it meets


def test_a_complete_store_opens_and_checks_on_one_connection(
    database_url: str, store: DedupStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a store that is ready only reads it, on the connection the check then uses."""
    store.add("orig", ARTICLE)
    connected: list[str] = []
    connect = psycopg.connect

    def counted(*args: Any, **kwargs: Any) -> Any:
        connected.append("connect")
        return connect(*args, **kwargs)

    monkeypatch.setattr(psycopg, "connect", counted)
    with DedupStore(database_url, schema=store.schema, create=False) as again:
        result = again.check(ARTICLE)
    assert result.status is Status.EXACT_DUPLICATE
    assert connected == ["connect"]
