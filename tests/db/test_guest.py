"""The store as a guest in a host's database: safe names, the host's transaction untouched,
least privilege, and readers that never wait on writers."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url

from dedup_store import DatabaseError, DedupStore, DedupStoreError, InvalidNameError
from dedup_store.db import migrate
from dedup_store.db.write import locks
from tests.conftest import SqlRecorder, refuse_ids_starting_with_bad

TEXT = "The quarterly report shows revenue rising in every region the company serves today."
EDIT = "The quarterly report shows revenue rising in every region the company serves now."

INJECTIONS = [
    "dedup\".params;COPY(SELECT)TO PROGRAM'id>rp.txt';--",
    'x"; DROP TABLE pg_class; --',
    "x'; SELECT pg_sleep(10); --",
    "x.y",
    "x y",
    "",
    "1abc",
    "a" * 64,
    "naïve",
    "x\x00y",
    "$x",
]


def _schemas(engine: Engine) -> set[str]:
    with engine.connect() as conn:
        return set(conn.execute(text("SELECT nspname FROM pg_namespace")).scalars())


@pytest.mark.parametrize("name", INJECTIONS)
def test_hostile_schema_names_are_refused_before_any_sql(
    engine: Engine,
    database_url: str,
    sql_recorder: SqlRecorder,
    name: str,
) -> None:
    before = _schemas(engine)
    sql_recorder.statements.clear()
    for bind in (engine, database_url):
        with pytest.raises(InvalidNameError, match="invalid schema name"):
            DedupStore(bind, schema=name)
    for call in (migrate.upgrade, migrate.downgrade, migrate.current):
        with pytest.raises(InvalidNameError):
            call(engine, name)
    assert sql_recorder.statements == []  # refused before a statement was built
    assert _schemas(engine) == before


def test_hostile_ids_and_metadata_are_plain_values(store: DedupStore) -> None:
    hostile = "x'); DROP TABLE documents; --"
    store.add(hostile, TEXT, {hostile: hostile, "tags": ['"; SELECT 1; --']})
    assert store.add("other", EDIT).matches[0].external_id == hostile
    assert [m.external_id for m in store.similar("other")] == [hostile]
    assert store.cluster(hostile).members == [hostile, "other"]
    exported = {row["id"]: row["meta"] for row in store.export()}
    assert exported[hostile] == {hostile: hostile, "tags": ['"; SELECT 1; --']}
    assert store.delete([hostile]) == 1
    assert store.stats().documents == 1


def test_reads_inside_a_host_transaction_then_rollback_leaves_nothing(
    engine: Engine, schema: str
) -> None:
    with engine.connect() as conn:
        transaction = conn.begin()
        options = dict(conn.get_execution_options())
        store = DedupStore(conn, schema=schema)
        store.add("a", TEXT)
        store.add("b", EDIT)
        assert store.cluster("b").members == ["a", "b"]
        assert [c.members for c in store.clusters()] == [["a", "b"]]
        assert [(p.a, p.b) for p in store.pairs()] == [("a", "b")]
        assert [row["id"] for row in store.export()] == ["a", "b"]
        # a stream abandoned half way leaves the host's connection usable
        next(iter(store.export()))
        assert conn.execute(text("SELECT 1")).scalar_one() == 1
        assert dict(conn.get_execution_options()) == options
        assert conn.in_transaction() and transaction.is_active
        transaction.rollback()
    assert schema not in _schemas(engine)


def test_a_failed_call_inside_a_host_transaction_is_ours_and_chained(
    engine: Engine, schema: str
) -> None:
    with engine.connect() as conn, conn.begin():
        store = DedupStore(conn, schema=schema)
        store.add("a", TEXT)
        conn.execute(text(f'ALTER TABLE "{schema}".documents RENAME TO gone'))
        with pytest.raises(DatabaseError) as caught:
            store.stats()
        assert caught.value.__cause__ is not None
        assert caught.value.sqlstate == "42P01"  # undefined_table
        # the savepoint was rolled back: the host's transaction goes on
        assert conn.execute(text("SELECT 1")).scalar_one() == 1


def test_failed_adds_and_checks_inside_a_host_transaction_leave_it_going(
    engine: Engine, schema: str
) -> None:
    # a single add or check in the host's transaction runs on its psycopg connection, in a
    # pipelined savepoint: a failure rolls back to it, and the calls after it (more than
    # psycopg's prepare threshold) still run
    with DedupStore(engine, schema=schema) as store:
        store.add("a", TEXT)
    refuse_ids_starting_with_bad(engine, schema)
    s = f'"{schema}"'
    with engine.connect() as conn:
        with conn.begin():
            store = DedupStore(conn, schema=schema, create=False)
            conn.execute(text("CREATE TEMP TABLE host_rows (n integer)"))
            for n in range(12):
                conn.execute(text("INSERT INTO host_rows VALUES (:n)"), {"n": n})
                body = f"Document {n} of the host tells about rivers, lakes and {n * 7} boats."
                if n % 3 == 0:
                    with pytest.raises(DatabaseError, match=f"refused bad{n}"):
                        store.add(f"bad{n}", body)
                else:
                    assert store.add(f"ok{n}", body).status.value == "new"
                assert store.check(body).status.value == (
                    "new" if n % 3 == 0 else "exact_duplicate"
                )
            assert conn.execute(text("SELECT count(*) FROM host_rows")).scalar_one() == 12
            conn.execute(text(f"ALTER TABLE {s}.documents RENAME TO gone"))
            with pytest.raises(DatabaseError) as caught:
                store.check(TEXT)
            assert caught.value.sqlstate == "42P01"  # undefined_table
            conn.execute(text(f"ALTER TABLE {s}.gone RENAME TO documents"))
            assert conn.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
            assert store.add("last", EDIT).status.value == "near_duplicate"
        with DedupStore(engine, schema=schema, create=False) as store:
            stored = [row["id"] for row in store.export()]
    assert stored == ["a", *(f"ok{n}" for n in range(12) if n % 3), "last"]


def test_calls_in_a_host_transaction_plan_generically_and_leave_its_setting(
    engine: Engine, schema: str
) -> None:
    # a server that planned the check statement for each call would spend more on planning it
    # than on running it: the store asks for generic plans within its savepoint only
    with DedupStore(engine, schema=schema) as store:
        store.add("a", TEXT)
    with engine.connect() as conn:
        with conn.begin():
            store = DedupStore(conn, schema=schema, create=False)
        with conn.begin():
            conn.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))
            for n in range(8):
                store.check(f"{TEXT} Call {n}.")
            store.add("b", EDIT)
            assert conn.execute(text("SHOW plan_cache_mode")).scalar_one() == "force_custom_plan"
            plans = conn.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE '%WITH found AS MATERIALIZED%'"
                )
            ).all()
        assert conn.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
    assert plans and all(generic > 0 and custom == 0 for generic, custom in plans)


def test_every_database_error_is_a_dedup_store_error(engine: Engine, schema: str) -> None:
    with DedupStore(engine, schema=schema) as store:
        store.add("a", TEXT)
        with engine.begin() as conn:
            conn.execute(text(f'DROP TABLE "{schema}".edges CASCADE'))
        for call in (store.stats, lambda: list(store.pairs()), lambda: store.add("b", EDIT)):
            with pytest.raises(DedupStoreError):
                call()


def test_add_does_the_work_of_one_document(store: DedupStore, sql_recorder: SqlRecorder) -> None:
    store.add("a", TEXT)
    threads = threading.active_count()
    sql_recorder.statements.clear()
    store.add("b", EDIT)
    assert threading.active_count() == threads
    whole_store = [s for s in sql_recorder.queries() if "GROUP BY cluster_id) c" in s]
    assert whole_store == []


@pytest.fixture
def role(engine: Engine) -> Iterator[str]:
    """A login role with no privilege of its own; dropped with what it owns."""
    name = f"r_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.execute(text(f'CREATE ROLE "{name}" LOGIN'))
    yield name
    with engine.begin() as conn:
        conn.execute(text(f'DROP OWNED BY "{name}" CASCADE'))
        conn.execute(text(f'DROP ROLE "{name}"'))


def _url_for(database_url: str, role: str) -> str:
    url = make_url(database_url).set(username=role, password=None)
    return url.render_as_string(hide_password=False)


def test_a_role_that_only_owns_its_schema_runs_the_store(
    engine: Engine, database_url: str, schema: str, role: str
) -> None:
    with engine.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"'))
        can_create = conn.execute(
            text("SELECT has_database_privilege(:r, current_database(), 'CREATE')"), {"r": role}
        ).scalar_one()
    assert not can_create
    with DedupStore(_url_for(database_url, role), schema=schema) as store:
        store.add("a", TEXT)
        assert store.add("b", EDIT).matches[0].external_id == "a"
        assert store.check(TEXT).matches
        assert [c.members for c in store.clusters()] == [["a", "b"]]
        assert store.delete("b") == 1


def test_a_reporting_role_reads_the_views_and_nothing_else(
    engine: Engine, database_url: str, store: DedupStore, role: str
) -> None:
    store.add("a", TEXT)
    store.add("b", EDIT)
    store.add("c", TEXT)
    schema = store.schema
    views = ("duplicate_pairs", "duplicate_pairs_expanded", "cluster_members", "cluster_sizes")
    with engine.begin() as conn:  # the grants the README documents for a reporting role
        conn.execute(text(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"'))
        for view in (*views, "duplicates_per_day"):
            conn.execute(text(f'GRANT SELECT ON "{schema}".{view} TO "{role}"'))
    reporting = create_engine(_url_for(database_url, role))
    try:
        with reporting.connect() as conn:
            pairs = conn.execute(text(f'SELECT a, b FROM "{schema}".duplicate_pairs')).all()
            assert [tuple(p) for p in pairs] == [("a", "b"), ("a", "c")]
            every = text(f'SELECT a, b FROM "{schema}".duplicate_pairs_expanded ORDER BY a, b')
            assert [tuple(p) for p in conn.execute(every)] == [("a", "b"), ("a", "c"), ("b", "c")]
            sizes = conn.execute(text(f'SELECT size FROM "{schema}".cluster_sizes')).scalars()
            assert list(sizes) == [3]
        with reporting.connect() as conn, pytest.raises(Exception, match="permission denied"):
            conn.execute(text(f'SELECT * FROM "{schema}".documents'))
    finally:
        reporting.dispose()


def test_a_read_only_role_runs_the_read_calls(
    engine: Engine, database_url: str, store: DedupStore, role: str
) -> None:
    store.add("a", TEXT)
    store.add("b", EDIT)
    with engine.begin() as conn:  # the grants the README documents for a read-only role
        conn.execute(text(f'GRANT USAGE ON SCHEMA "{store.schema}" TO "{role}"'))
        conn.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{store.schema}" TO "{role}"'))
    with DedupStore(_url_for(database_url, role), schema=store.schema, create=False) as reader:
        assert reader.check(EDIT).status.value == "exact_duplicate"
        assert [m.external_id for m in reader.similar("b")] == ["a"]
        assert reader.stats().documents == 2
        assert [c.members for c in reader.clusters()] == [["a", "b"]]
        with pytest.raises(DatabaseError, match="permission denied"):
            reader.add("c", TEXT)


def test_readers_never_wait_on_a_writer(engine: Engine, database_url: str, schema: str) -> None:
    with DedupStore(database_url, schema=schema) as store:
        store.add("a", TEXT)
    writer = engine.connect()
    writer.begin()
    # the store's lock, exclusive, as a delete or a bulk load holds it until it commits
    locks.lock_store(writer, schema)
    answers: list[object] = []

    def read() -> None:
        with DedupStore(database_url, schema=schema, create=False) as reader:
            answers.extend([reader.stats().documents, reader.check(EDIT).status.value])
            answers.append([c.members for c in reader.clusters(min_size=1)])

    thread = threading.Thread(target=read, daemon=True)
    try:
        thread.start()
        thread.join(timeout=30)
        assert not thread.is_alive(), "a reader waited on the writers' lock"
    finally:
        writer.rollback()
        writer.close()
    thread.join()
    assert answers == [1, "near_duplicate", [["a"]]]


def test_batches_are_never_jit_compiled_and_the_hosts_setting_stays(
    engine: Engine, database_url: str, schema: str
) -> None:
    # a batch's lookup statement is costed high enough to be compiled, which takes longer than
    # running it: the store turns JIT off inside its own transactions only
    with engine.connect() as conn:
        host_setting = conn.execute(text("SHOW jit")).scalar_one()
    seen: list[str] = []
    store = DedupStore(engine, schema=schema)
    with store:
        original = locks.lock_store

        def lock_and_look(conn: Connection, name: str, keys: Any = None) -> bool:
            seen.append(conn.execute(text("SHOW jit")).scalar_one())
            return original(conn, name, keys)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(locks, "lock_store", lock_and_look)
            store.ingest([("a", "one document of several words"), ("b", "and another one")])
    assert seen == ["off"]
    with engine.connect() as conn:
        assert conn.execute(text("SHOW jit")).scalar_one() == host_setting
    own = DedupStore(database_url, schema=schema)
    with own, own._db.engine.connect() as conn:  # type: ignore[union-attr]
        assert conn.execute(text("SHOW jit")).scalar_one() == "off"
