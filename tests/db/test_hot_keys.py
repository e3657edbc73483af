"""Hot band and block buckets split by secondary keys: recall, ``check`` vs ``add``, deletes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, Document, FingerprintParams
from dedup_store.core import rekey
from dedup_store.core.fingerprint import fingerprint
from dedup_store.db import migrate
from dedup_store.db.candidates import hot
from dedup_store.db.matches import scoring
from dedup_store.db.repository import StoreTables
from tests.conftest import drop_schema
from tests.db.corpus import PlantedCorpus

LIMIT = 5
Pairs = dict[tuple[str, str], tuple[float, int]]


def _edits(seed: int, count: int, substitutions: int = 3) -> list[str]:
    """``count`` copies of one text, each with ``substitutions`` words replaced."""
    corpus = PlantedCorpus(seed)
    base, filler = corpus.original().split(), corpus.original().split()
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(count):
        words = list(base)
        for position in rng.choice(len(words), size=substitutions, replace=False):
            words[position] = filler[int(rng.integers(len(filler)))]
        texts.append(" ".join(words))
    return texts


def _documents() -> list[Document]:
    """40 near-duplicate edits of one text and 20 unrelated documents, shuffled."""
    docs = [Document(f"e{i}", t) for i, t in enumerate(_edits(5, 40))]
    corpus = PlantedCorpus(6)
    docs += [Document(f"d{i}", corpus.original()) for i in range(20)]
    return corpus.shuffled(docs)


@pytest.fixture
def schemas(engine: Engine) -> Iterator[list[str]]:
    names = [f"t_{uuid.uuid4().hex[:12]}" for _ in range(3)]
    yield names
    for name in names:
        drop_schema(engine, name)


def _pairs(engine: Engine, schema: str) -> Pairs:
    with engine.connect() as conn:
        rows = conn.execute(
            text(f'SELECT a, b, jaccard, hamming FROM "{schema}".duplicate_pairs')
        ).all()
    return {(a, b): (jaccard, hamming) for a, b, jaccard, hamming in rows}


def _ingest(engine: Engine, schema: str, limit: int, batch_size: int) -> Pairs:
    with DedupStore(engine, FingerprintParams(hot_key_limit=limit), schema=schema) as store:
        store.add_many(_documents(), batch_size=batch_size)
    return _pairs(engine, schema)


def _recall(found: Pairs, wanted: set[tuple[str, str]]) -> float:
    return len(wanted & set(found)) / len(wanted)


@pytest.mark.parametrize("batch_size", [1000, 1])
def test_rekeying_keeps_the_pairs_of_an_uncapped_store(
    engine: Engine, schemas: list[str], batch_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    uncapped = _ingest(engine, schemas[0], 0, batch_size)
    rekeyed = _ingest(engine, schemas[1], LIMIT, batch_size)
    monkeypatch.setattr(rekey, "rekeyed", lambda params, kind: False)
    capped = _ingest(engine, schemas[2], LIMIT, batch_size)
    k = FingerprintParams().simhash_k
    similar = {pair for pair, (jaccard, _) in uncapped.items() if jaccard >= 0.8}
    close = {pair for pair, (_, hamming) in uncapped.items() if hamming <= k}
    assert len(similar) > 300 and len(close) > 100
    # measured: 0.994-0.997 of either kind of pair (secondary buckets of 40 near-identical
    # texts are hot too, so a lookup still meets a window of 5 of each, not all)
    assert _recall(rekeyed, close) >= 0.99
    assert _recall(rekeyed, similar) >= 0.99
    # the 5 oldest documents of each key alone: about 0.64
    assert _recall(capped, close) < 0.75
    assert _recall(capped, similar) < 0.75
    assert set(rekeyed) <= set(uncapped)


def _hot_tables(engine: Engine, schema: str) -> list[list[tuple[object, ...]]]:
    with engine.connect() as conn:
        return [
            [
                tuple(row)
                for row in conn.execute(text(f'SELECT * FROM "{schema}".{table} ORDER BY 1, 2, 3'))
            ]
            for table in ("hot_keys", "secondary_keys")
        ]


def test_check_and_single_add_agree_with_the_batch_path(engine: Engine, schemas: list[str]) -> None:
    params = FingerprintParams(hot_key_limit=LIMIT)
    docs = _documents()
    with (
        DedupStore(engine, params, schema=schemas[0]) as single,
        DedupStore(engine, params, schema=schemas[1]) as batched,
    ):
        checked, added = [], []
        for d in docs:  # what check answers before each add
            checked.append(single.check(d.text).matches)
            added.append(single.add(d.id, d.text))
        in_batches = batched.add_many(docs, batch_size=1)
        assert _hot_tables(engine, schemas[0]) == _hot_tables(engine, schemas[1])
        probes = _edits(5, 45)[40:]
        later = [(single.check(t).matches, single.add(f"p{i}", t)) for i, t in enumerate(probes)]
    shown = [(r.status, r.cluster_id, r.matches) for r in added]
    assert shown == [(r.status, r.cluster_id, r.matches) for r in in_batches]
    assert checked == [r.matches for r in added]
    hot_keys, secondary = _hot_tables(engine, schemas[0])
    assert hot_keys and secondary
    for found, result in later:
        assert found == result.matches
        assert len(result.matches) >= 35  # of 40 edits


def _secondary_rows(engine: Engine, schema: str, doc_id: str) -> list[tuple[int, int, int]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                f'SELECT k.kind, k.slot, k.key FROM "{schema}".secondary_keys k '
                f'JOIN "{schema}".documents d ON d.id = k.doc_id WHERE d.external_id = :id '
                "ORDER BY 1, 2, 3"
            ),
            {"id": doc_id},
        ).all()
    return [tuple(row) for row in rows]


def test_deletes_remove_secondary_keys_and_heirs_take_them_over(
    engine: Engine, schema: str
) -> None:
    texts = _edits(8, 20)
    with DedupStore(engine, FingerprintParams(hot_key_limit=LIMIT), schema=schema) as store:
        store.add_many([Document(f"e{i}", t) for i, t in enumerate(texts)])
        store.add_many([Document("copy1", texts[3]), Document("copy2", texts[3])])
        before = _secondary_rows(engine, schema, "e3")
        assert before
        assert _secondary_rows(engine, schema, "copy1") == []  # exact copies write no keys
        store.delete("e3")
        assert _secondary_rows(engine, schema, "e3") == []
        assert _secondary_rows(engine, schema, "copy1") == before
        doomed = _secondary_rows(engine, schema, "e7")
        assert doomed
        store.delete("e7")
        with engine.connect() as conn:
            total = conn.execute(
                text(
                    f'SELECT count(*) FROM "{schema}".secondary_keys k WHERE NOT EXISTS '
                    f'(SELECT 1 FROM "{schema}".documents d WHERE d.id = k.doc_id)'
                )
            ).scalar_one()
        assert total == 0
        # the heir is found by a new edit through the secondary keys it took over
        probe = store.add("probe", _edits(8, 21)[20])
        assert "copy1" in {m.external_id for m in probe.matches}


def test_migration_0004_up_and_down(engine: Engine, schema: str) -> None:
    migrate.upgrade(engine, schema, "0003")
    migrate.upgrade(engine, schema)
    with engine.connect() as conn:
        tables = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}
        ).scalars()
        assert {"hot_keys", "secondary_keys"} <= set(tables)
    migrate.downgrade(engine, schema, "0003")
    assert migrate.current(engine, schema) == "0003"
    with engine.connect() as conn:
        tables = conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = :s"), {"s": schema}
        ).scalars()
        assert not {"hot_keys", "secondary_keys"} & set(tables)
    migrate.upgrade(engine, schema)
    assert migrate.current(engine, schema) == migrate.head()


def test_a_query_owning_a_hot_key_runs_again_with_its_secondary_keys(
    engine: Engine, schemas: list[str]
) -> None:
    # check and add send the secondary keys of the slots whose keys they know to be hot
    # (computing and sending every slot's costs more than the rest of a check of a store
    # without hot keys); a query owning a hot key of another slot is told which, and runs again
    params = FingerprintParams(hot_key_limit=LIMIT)
    with DedupStore(engine, params, schema=schemas[0]) as store:
        store.add_many(_documents(), batch_size=1)
        probe, cold = _edits(5, 41)[40], PlantedCorpus(9).original()

        def touched(text_: str, slots: list[tuple[int, int]] | None) -> list[tuple[int, int]]:
            fp = fingerprint(text_, store.params)
            statement, parameters = scoring.check_statement(schemas[0], fp, slots)
            with engine.connect() as conn:
                return scoring.touched_slots(conn.execute(text(statement), parameters).mappings())

        hot_slots = touched(probe, [])
        assert hot_slots and len(set(hot_slots)) == len(hot_slots)
        with engine.connect() as conn:
            hot_keys = set(conn.execute(text(f'SELECT kind, slot FROM "{schemas[0]}".hot_keys')))
        assert set(hot_slots) <= hot_keys
        assert touched(probe, None) == []
        assert touched(probe, hot_slots) == []
        assert touched(probe, hot_slots[1:]) == hot_slots[:1]
        assert touched(cold, []) == []
        assert len(store.check(probe).matches) >= 35
        assert len(store.add("probe", probe).matches) >= 35


def test_the_hot_keys_a_store_has_met_do_not_change_its_answers(
    engine: Engine, schemas: list[str]
) -> None:
    # a store object lists the hot keys its queries met, to send their secondary keys at once;
    # a listed key that is not hot, or a hot key not listed, changes what it sends, not what
    # check and add answer
    params = FingerprintParams(hot_key_limit=LIMIT)
    probes = _edits(5, 44)[40:]
    with DedupStore(engine, params, schema=schemas[0]) as store:
        store.add_many(_documents(), batch_size=1)
    with DedupStore(engine, params, schema=schemas[0]) as store:
        store._tables.hot_keys.seed([])  # a list that starts empty
        fresh = [store.check(t) for t in probes]
        again = [store.check(t) for t in probes]  # the hot keys met by the first round listed
        assert store._tables.hot_keys.slots(fingerprint(probes[0], store.params))
        assert again == fresh
    with DedupStore(engine, params, schema=schemas[0]) as store:  # the store's hot keys listed
        assert [store.check(t) for t in probes] == fresh
    with DedupStore(engine, params, schema=schemas[0]) as store:
        for probe in probes:  # every key of the probes listed, hot or not
            fp = fingerprint(probe, store.params)
            store._tables.hot_keys.learn(fp, [(0, s) for s in range(1, len(fp.band_keys) + 1)])
            store._tables.hot_keys.learn(fp, [(1, s) for s in range(1, len(fp.block_keys) + 1)])
        assert [store.check(t) for t in probes] == fresh
        added = [store.add(f"p{i}", t) for i, t in enumerate(probes)]
    with DedupStore(engine, params, schema=schemas[1]) as store:
        store.add_many(_documents(), batch_size=1)
        assert [store.add(f"p{i}", t) for i, t in enumerate(probes)] == added


def test_a_store_object_starts_with_the_stores_hot_keys(
    engine: Engine, schemas: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a query owning a hot key runs its statement once, even on a new store object
    params = FingerprintParams(hot_key_limit=LIMIT)
    probe = _edits(5, 41)[40]
    with DedupStore(engine, params, schema=schemas[0]) as store:
        store.add_many(_documents(), batch_size=1)
    statements = []
    original = StoreTables._statement_rows

    def counted(
        self: StoreTables, statement: str, parameters: dict[str, Any], **options: Any
    ) -> list[Any]:
        statements.append(statement)
        return original(self, statement, parameters, **options)

    monkeypatch.setattr(StoreTables, "_statement_rows", counted)
    with DedupStore(engine, params, schema=schemas[0]) as store:
        store._tables.hot_keys.seed([])  # as before the store's hot keys were read: twice
        cold = store.check(probe)
    assert len(statements) == 2
    with engine.connect() as conn:
        listed = hot.stored_hot_keys(conn, schemas[0], limit=3)
        assert len(listed) == 3 and set(listed) < set(hot.stored_hot_keys(conn, schemas[0]))
    with DedupStore(engine, params, schema=schemas[0]) as store:
        assert store.check(probe) == cold
    assert len(statements) == 3
