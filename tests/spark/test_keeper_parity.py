"""Merged clusters keep the same label whether the union-find of a batch, the single add's
statement or a Spark load picks it: all three apply ``KEEPER_ORDER``.

Groups of clusters are drawn with many ties in size (the rule's second field decides those),
and the keeper of each group is chosen by :func:`merge_labels`, by an ``ORDER BY`` from
:func:`keeper_order` on the PostgreSQL server, and by the struct of :func:`keeper_rank` in a
Spark job.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

from sqlalchemy import Engine, text

from dedup_store.core.clustering import merge_labels
from dedup_store.db.write.single import keeper_order
from dedup_store.spark.components import keeper_rank

#: ``group -> [(label, size)]``: 200 groups of 2 to 6 clusters, sizes from a small range.
GROUPS = {
    group: [(label, random.Random(group * 7 + label).randint(1, 3)) for label in labels]
    for group, labels in enumerate(
        sorted(random.Random(group).sample(range(1, 10_000), random.Random(group).randint(2, 6)))
        for group in range(200)
    )
}


def python_keepers() -> dict[int, int]:
    """The keeper of every group by :func:`merge_labels` (edges chaining the group's labels)."""
    keepers = {}
    for group, clusters in GROUPS.items():
        labels = [label for label, _ in clusters]
        mapping = merge_labels(
            itertools.pairwise(labels),
            {label: label for label in labels},
            dict(clusters),
        )
        kept = {label for label in labels if label not in mapping}
        assert len(kept) == 1 and set(mapping.values()) == kept
        keepers[group] = kept.pop()
    return keepers


def sql_keepers(engine: Engine) -> dict[int, int]:
    """The keeper of every group by the single add's ``ORDER BY``."""
    rows = [(g, label, size) for g, clusters in GROUPS.items() for label, size in clusters]
    statement = text(
        "SELECT DISTINCT ON (g) g, cluster_id FROM unnest("
        "CAST(:groups AS bigint[]), CAST(:labels AS bigint[]), CAST(:sizes AS bigint[])"
        ") AS sizes(g, cluster_id, size) "
        f"ORDER BY g, {keeper_order('size', 'cluster_id')}"
    )
    with engine.connect() as conn:
        found = conn.execute(
            statement,
            {
                "groups": [g for g, _, _ in rows],
                "labels": [label for _, label, _ in rows],
                "sizes": [size for _, _, size in rows],
            },
        )
        return {int(g): int(label) for g, label in found}


def spark_keepers(spark: Any) -> dict[int, int]:
    """The keeper of every group by a Spark load's struct."""
    from pyspark.sql import functions as F

    frame = spark.createDataFrame(
        [(g, label, size) for g, clusters in GROUPS.items() for label, size in clusters],
        "component bigint, node bigint, size bigint",
    )
    keepers = frame.groupBy("component").agg(F.min(keeper_rank("size", "node")).alias("keeper"))
    rows = keepers.select("component", F.col("keeper.label")).collect()
    return {int(g): int(label) for g, label in rows}


def test_groups_have_ties() -> None:
    tied = sum(
        1
        for clusters in GROUPS.values()
        if [size for _, size in clusters].count(max(size for _, size in clusters)) > 1
    )
    assert tied > 50


def test_the_keeper_is_the_same_in_python_sql_and_spark(engine: Engine, spark: Any) -> None:
    expected = python_keepers()
    assert expected == {
        g: min(clusters, key=lambda c: (-c[1], c[0]))[0] for g, clusters in GROUPS.items()
    }
    assert sql_keepers(engine) == expected
    assert spark_keepers(spark) == expected
