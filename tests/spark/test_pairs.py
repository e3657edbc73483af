"""The executors' grouping functions against their definitions, without a Spark job."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from sqlalchemy import Engine, text

from dedup_store.spark.pairs import KEY_COLUMNS, group_rows, pairs_of_sorted
from dedup_store.spark.secondary import hashint8, window_pairs


def test_hashint8_is_postgresqls(engine: Engine) -> None:
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [rng.integers(-(2**63), 2**63 - 1, 500), np.array([0, 1, -1, 2**31, -(2**31)])]
    )
    with engine.connect() as conn:
        expected = conn.execute(
            text(
                "SELECT hashint8(v)::bigint & 2147483647 FROM unnest(CAST(:v AS bigint[])) "
                "WITH ORDINALITY AS u(v, n) ORDER BY n"
            ),
            {"v": values.tolist()},
        ).scalars()
        assert hashint8(values).tolist() == list(expected)


def test_sorted_groups_across_batches_give_each_groups_rows() -> None:
    rng = np.random.default_rng(5)
    rows = sorted(
        (int(kind), int(kind), int(key), doc, int(doc // 7) if doc >= 20 else -1)
        for doc in range(60)
        for kind, key in zip(rng.integers(0, 2, 6), rng.integers(0, 12, 6), strict=True)
    )
    table = pa.table(
        {name: pa.array([r[i] for r in rows], pa.int64()) for i, name in enumerate(KEY_COLUMNS)}
    )
    batches = table.to_batches(max_chunksize=17)
    found = pa.Table.from_batches(
        list(pairs_of_sorted(iter(batches), hot_limit=3, rekeyed=frozenset({0, 1})))
    ).to_pylist()
    names = ("a", "b", "kind", "slot", "key", "hot")
    expected: dict[str, list[int | None]] = {c: [] for c in names}
    groups: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
    for kind, slot, key, doc, batch in rows:
        groups.setdefault((kind, slot, key), []).append((doc, batch))
    for group, members in groups.items():
        if len(members) > 1 and max(b for _, b in members) >= 0:
            docs, numbers = zip(*members, strict=True)
            group_rows(expected, group, list(docs), list(numbers), False, 3, frozenset({0, 1}))
    rows_expected = zip(*expected.values(), strict=True)
    assert found == [dict(zip(names, r, strict=True)) for r in rows_expected]
    assert any(row["hot"] is not None for row in found)


def test_a_secondary_window_wraps_around_from_its_pivot() -> None:
    owners = [(doc, -1, -1, -1) for doc in range(1, 11)] + [(20, 2, -1, 15), (21, 2, -1, 15)]
    older, newer = window_pairs(7, owners, hot_limit=3)
    pivot = int(hashint8(np.array([7]))[0]) % 16
    stored = list(range(1, 11))
    window = ([d for d in stored if d >= pivot] + [d for d in stored if d < pivot])[:3]
    assert list(zip(older, newer, strict=True)) == [
        *((d, 20) for d in window),
        *((d, 21) for d in window),
        (20, 21),
    ]
