"""Connected components of an edge list in Spark: alternating large-star and small-star
operations (Kiveris et al., "Connected Components in MapReduce and Beyond", 2014), with
DataFrames only.

Every round keeps the components and lowers each node's smallest known neighbour; at the end
every node points at its component's smallest node.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dedup_store.core.clustering import KEEPER_ORDER


def connected_components(edges: DataFrame, max_rounds: int = 100) -> DataFrame:
    """``(node, component)`` of every node of ``edges`` (columns ``a``, ``b``); a component is
    named by its smallest node.

    Raises:
        RuntimeError: no convergence after ``max_rounds`` rounds (never seen: the number of
            rounds grows with the logarithm of the largest component's size).
    """
    current = _normalized(edges.select(F.col("a").alias("u"), F.col("b").alias("v")))
    for _ in range(max_rounds):
        following = _small_star(_large_star(current)).localCheckpoint()
        changed = (
            following.exceptAll(current).limit(1).count()
            + current.exceptAll(following).limit(1).count()
        )
        current = following
        if not changed:
            break
    else:
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    # now every edge is (node, smallest node of its component)
    pointers = current.select(F.col("v").alias("node"), F.col("u").alias("component"))
    roots = current.select(F.col("u").alias("node"), F.col("u").alias("component"))
    return pointers.unionByName(roots).groupBy("node").agg(F.min("component").alias("component"))


def _digest(edges: DataFrame) -> tuple[int, int, int]:
    """The number of edges and two sums of their hashes: equal for equal edge sets (a set is
    deduplicated, and a round that changes an edge changes the sums but for a 2^-128 chance)."""
    row = edges.agg(
        F.count(F.lit(1)),
        F.sum(F.xxhash64("u", "v").cast("decimal(38,0)")),
        F.sum(F.hash("v", "u").cast("decimal(38,0)")),
    ).collect()[0]
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def _normalized(pairs: DataFrame) -> DataFrame:
    """Edges as ``(u, v)`` with ``u < v``, without loops or repeats."""
    u, v = F.col("u"), F.col("v")
    return (
        pairs.where(u != v).select(F.least(u, v).alias("u"), F.greatest(u, v).alias("v")).distinct()
    )


def _both_ways(edges: DataFrame) -> DataFrame:
    return edges.select(F.col("u").alias("x"), F.col("v").alias("y")).unionByName(
        edges.select(F.col("v").alias("x"), F.col("u").alias("y"))
    )


def _large_star(edges: DataFrame) -> DataFrame:
    """Each node's larger neighbours are attached to its smallest neighbour (or itself)."""
    both = _both_ways(edges)
    smallest = both.groupBy("x").agg(F.min("y").alias("m"))
    return _normalized(
        both.where(F.col("y") > F.col("x"))
        .join(smallest, "x")
        .select(F.col("y").alias("u"), _least("x", "m").alias("v"))
    )


def _small_star(edges: DataFrame) -> DataFrame:
    """Each node and its smaller neighbours are attached to the smallest of them."""
    smallest = edges.groupBy("v").agg(F.min("u").alias("m"))
    neighbours = edges.join(smallest, "v").select(F.col("u").alias("u"), F.col("m").alias("v"))
    node = smallest.select(F.col("v").alias("u"), F.col("m").alias("v"))
    return _normalized(neighbours.unionByName(node))


def _least(a: str, b: str) -> Column:
    return F.least(F.col(a), F.col(b))


def keeper_rank(size: str, label: str) -> Column:
    """A struct that ranks clusters (columns ``size`` and ``label``) by
    :data:`~dedup_store.core.clustering.KEEPER_ORDER`: the keeper of a group has the least; its
    field ``label`` is the keeper's label."""
    columns = {"size": size, "label": label}
    return F.struct(
        *[
            (-F.col(columns[name]) if descending else F.col(columns[name])).alias(name)
            for name, descending in KEEPER_ORDER
        ]
    )
