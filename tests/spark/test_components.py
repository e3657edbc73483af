"""Connected components by large-star/small-star rounds equal the store's union-find."""

from __future__ import annotations

import random
from typing import Any

from dedup_store.core.clustering import components
from dedup_store.spark.components import connected_components


def test_random_graph_and_a_long_path(spark: Any) -> None:
    rng = random.Random(7)
    edges = [(rng.randrange(3000), rng.randrange(3000)) for _ in range(2500)]
    edges += [(10_000 + i, 10_001 + i) for i in range(60)]  # a path: many rounds
    edges += [(20_000, 20_000), (20_001, 20_002), (20_002, 20_001)]  # a loop, a repeat
    frame = spark.createDataFrame(edges, "a bigint, b bigint")
    found = {row["node"]: row["component"] for row in connected_components(frame).collect()}
    nodes = [node for edge in edges for node in edge if edge[0] != edge[1]]
    pairs = [edge for edge in edges if edge[0] != edge[1]]
    expected = {node: group[0] for group in components(nodes, pairs) for node in group}
    assert found == expected
