"""The filter of the settled tier's keys: built by bulk loads and settles, dropped whenever
keys enter the tier otherwise, and used by ingests to skip the index probes of keys the tier
does not hold, with the same store as a result."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, event, text

from dedup_store import AddResult, DedupStore, Document
from dedup_store.core.fingerprint import fingerprint_batch
from dedup_store.core.keyfilter import KeyFilter
from dedup_store.db.candidates import settled_filter
from dedup_store.db.candidates.lookup import key_groups
from dedup_store.db.schema import ddl
from dedup_store.db.schema.encoding import SAMPLE
from dedup_store.db.schema.names import qualified
from tests.conftest import drop_schema
from tests.db.corpus import PlantedCorpus
from tests.snapshots import snapshot

pytestmark = pytest.mark.db


def _stored(engine: Engine, schema: str) -> tuple[settled_filter.Stored | None, KeyFilter | None]:
    with engine.connect() as conn:
        held = settled_filter.stored(conn, schema)
        return held, None if held is None else settled_filter.load(conn, schema, held)


def _assert_holds_every_settled_key(engine: Engine, schema: str) -> settled_filter.Stored:
    """Every key of ``settled_keys`` passes the stored filter, which was built for the store's
    ``settled_through``; returns what describes it."""
    held, found = _stored(engine, schema)
    assert held is not None and found is not None
    with engine.connect() as conn:
        params = ddl.load_params(conn, schema)
        assert params is not None
        assert held.settled_through == ddl.settled_through(conn, schema)
        table = qualified(schema, ddl.TIER_TABLES[ddl.SETTLED])
        for kind, column, slot in ddl.key_slots(params):
            name = ddl.key_column(column, slot)
            keys = np.array(
                conn.execute(text(f'SELECT "{name}" FROM {table}')).scalars().all(), np.int64
            )
            assert len(keys) and found.has(kind, slot, keys).all(), name
    return held


def test_a_bulk_load_and_a_settle_leave_a_filter_of_every_settled_key(
    engine: Engine, schema: str
) -> None:
    """A bulk load makes the filter with room for a quarter more keys; a settle adds the
    recent tier's keys to it while they fit, else reads the whole table into a new one."""
    corpus = PlantedCorpus(41, words=(40, 80))
    with DedupStore(engine, schema=schema) as store:
        slots = len(ddl.key_slots(store.params))  # 22 by default
        store.ingest([Document(f"a{i}", corpus.original()) for i in range(60)], bulk=True)
        loaded = _assert_holds_every_settled_key(engine, schema)
        assert (loaded.settled_through, loaded.keys) == (60, 60 * slots)
        # ten bits a key, in 32-byte blocks
        assert loaded.size == -(-60 * slots * 5 // 4 * 10 // 256) * 32
        # writes to the recent tier leave the settled tier's filter as it was
        store.add_many([Document(f"b{i}", corpus.original()) for i in range(10)])
        assert _stored(engine, schema)[0] == loaded
        store.settle()  # 10 more documents fit
        grown = _assert_holds_every_settled_key(engine, schema)
        assert (grown.size, grown.keys) == (loaded.size, 70 * slots)
        assert grown.build != loaded.build
        store.add_many([Document(f"c{i}", corpus.original()) for i in range(100)])
        store.settle()  # 100 more do not
        built = _assert_holds_every_settled_key(engine, schema)
        assert built.keys == 170 * slots and built.size > loaded.size


def test_keys_entering_the_settled_tier_otherwise_drop_the_filter(
    engine: Engine, schema: str
) -> None:
    """A settled exact copy takes its deleted first document's place in ``settled_keys``: the
    filter, which lacks nothing but does not know the copy's id, is dropped, and an ingest
    finds the copy through the settled tier's indexes."""
    corpus = PlantedCorpus(42, words=(40, 80))
    text_a = corpus.original()
    docs = [Document("a", text_a), Document("a-copy", text_a)]
    docs += [Document(f"o{i}", corpus.original()) for i in range(30)]
    with DedupStore(engine, schema=schema) as store:
        store.ingest(docs, bulk=True)
        assert _stored(engine, schema)[0] is not None
        store.delete(["a"])
        assert _stored(engine, schema) == (None, None)
        results: list[AddResult] = []
        edit = Document("edit", corpus.edit(text_a, 1))
        store.ingest([edit], bulk=False, on_batch=lambda batch, _errors: results.extend(batch))
        assert [m.external_id for m in results[0].matches] == ["a-copy"]
        store.settle()
        _assert_holds_every_settled_key(engine, schema)


def _settled_keys_asked(engine: Engine) -> Iterator[list[int]]:
    """Yields a list that collects, per statement reading ``settled_keys``, how many band and
    block keys it asks for."""
    asked: list[int] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if "settled_keys" not in statement or not isinstance(parameters, dict):
            return
        groups = [v for k, v in parameters.items() if re.fullmatch(r"g\d+", k)]
        arrays = [g for g in groups if isinstance(g, str) and g.startswith("{")]
        asked.append(sum(len(a.strip("{}").split(",")) if a != "{}" else 0 for a in arrays))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield asked
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_an_ingest_asks_the_settled_tier_only_for_keys_the_filter_may_hold(
    engine: Engine, schema: str
) -> None:
    """The same ingest into two copies of a settled store, one without its filter, stores the
    same rows; with the filter the settled tier's indexes are asked for a fraction of the keys
    (this small filter is paid for by the first batch's keys: it is read at once)."""
    corpus = PlantedCorpus(43, words=(40, 80))
    settled = [Document(f"s{i}", corpus.original()) for i in range(150)]
    later = [Document(f"e{i}", corpus.edit(settled[i].text, 1)) for i in range(0, 150, 5)]
    later += [Document(f"n{i}", corpus.original()) for i in range(170)]
    later = [later[i] for i in np.random.default_rng(7).permutation(len(later))]
    other = f"{schema}_nofilter"
    asked: dict[str, int] = {}
    try:
        for name in (schema, other):
            with DedupStore(engine, schema=name) as store:
                store.ingest(settled, bulk=True)
                if name == other:
                    with engine.begin() as conn:
                        conn.execute(text(f"DELETE FROM {qualified(name, 'settled_filter')}"))
                recorder = _settled_keys_asked(engine)
                counts = next(recorder)
                summary = store.ingest(later, batch_size=20, bulk=False)
                recorder.close()
                asked[name] = sum(counts)
                assert summary.new <= 175  # the edits of settled documents met them
        expected, actual = snapshot(engine, other), snapshot(engine, schema)
        for part in ("documents", "edges", "clusters"):
            assert actual[part] == expected[part], part
        assert asked[other] >= 200 * 20  # every key of every document
        assert asked[schema] < asked[other] / 4
    finally:
        drop_schema(engine, other)


def test_the_filter_is_read_once_the_keys_asked_would_pay_for_it(
    engine: Engine, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the filter costs what probing about ``BYTES_PER_KEY`` bytes of it per key
    costs: an ingest asks the settled tier for every key of its lookups until those keys, the
    lookup's own with them, would have paid for reading it, then narrows every lookup."""
    corpus = PlantedCorpus(47, words=(40, 80))
    with DedupStore(engine, schema=schema) as store:
        store.ingest([Document(f"s{i}", corpus.original()) for i in range(150)], bulk=True)
    batch = fingerprint_batch([corpus.original() for _ in range(20)])
    rows = np.arange(20, dtype=np.int64)
    groups = key_groups(batch, rows, rows + 1000)
    keys = sum(len(g.uniques) for g in groups if g.kind != SAMPLE)
    held, _ = _stored(engine, schema)
    assert held is not None
    # three lookups of these keys pay for the filter, two do not
    monkeypatch.setattr(settled_filter.SettledFilter, "BYTES_PER_KEY", held.size // (3 * keys) + 1)
    used = settled_filter.SettledFilter()
    with engine.connect() as conn:
        asked = [
            sum(len(g.uniques) for g in used.narrowed(conn, schema, held.settled_through, groups))
            for _ in range(4)
        ]
    whole = keys + len(groups[-1].uniques)
    assert asked[:2] == [whole, whole]
    assert asked[2] == asked[3] < whole - keys / 2  # read with the third lookup
