"""Parameters sent as one array literal come back from PostgreSQL as the values they encode."""

from __future__ import annotations

from sqlalchemy import Engine, text

from dedup_store.db.encoding import array_literal, bytea_array_literal


def test_byte_strings_survive_the_bytea_array_literal(engine: Engine) -> None:
    values = [b"", b"\x00", b'\\"{},', bytes(range(256)), b"\xff" * 16]
    with engine.connect() as conn:
        back = conn.execute(
            text("SELECT CAST(:v AS bytea[])"), {"v": bytea_array_literal(values)}
        ).scalar_one()
        empty = conn.execute(text("SELECT CAST(:v AS bytea[])"), {"v": bytea_array_literal([])})
        assert empty.scalar_one() == []
    assert [bytes(v) for v in back] == values


def test_integers_survive_the_array_literal(engine: Engine) -> None:
    values = [0, -1, 2**63 - 1, -(2**63)]
    with engine.connect() as conn:
        back = conn.execute(
            text("SELECT CAST(:v AS bigint[])"), {"v": array_literal(values)}
        ).scalar_one()
    assert back == values
