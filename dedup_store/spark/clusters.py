"""The clusters of a Spark load: the connected components of its merging edges, joined to the
store's clusters by the store's keeper rule, and the counts of its summary."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlalchemy import Connection, text

from dedup_store.core.clustering import components
from dedup_store.db.schema.names import qualified
from dedup_store.results import IngestSummary
from dedup_store.spark.components import connected_components, keeper_rank
from dedup_store.spark.stored import StoredRows


def load_clusters(
    conn: Connection,
    schema: str,
    edges: DataFrame,
    stored: StoredRows,
    merging: Sequence[str],
    first: int,
    driver_components: int,
) -> tuple[DataFrame, dict[int, int], DataFrame]:
    """The new documents' cluster ids, the relabelling of the stored clusters they merge, and
    the cached components (released after the load).

    A stored document enters the graph as its cluster's label; the label kept by a merged
    component is the store's (:data:`~dedup_store.core.clustering.KEEPER_ORDER`): the largest
    cluster's (ties: the smallest label), so a load on an empty store labels each cluster by its
    oldest member.
    """
    spark = edges.sparkSession
    merging_edges = edges.where(F.col("method").isin(list(merging))).select("a", "b")
    labels = stored.features().select(F.col("id").alias("a"), F.col("cluster_id").alias("label"))
    graph = merging_edges.join(labels, "a", "left").select(F.coalesce("label", "a").alias("a"), "b")
    small = (
        driver_components > 0 and graph.limit(driver_components + 1).count() <= driver_components
    )
    if small:
        pairs = [(int(a), int(b)) for a, b in graph.collect()]
        nodes = [node for pair in pairs for node in pair]
        labelled_nodes = [(n, group[0]) for group in components(nodes, pairs) for n in group]
        components_frame = spark.createDataFrame(labelled_nodes, "node bigint, component bigint")
    else:
        components_frame = connected_components(graph)
    components_ = components_frame.persist()
    stored_labels = [
        row[0] for row in components_.where(F.col("node") < first).select("node").collect()
    ]
    sizes: dict[int, int] = {}
    if stored_labels:
        found = conn.execute(
            text(
                f"SELECT cluster_id, count(*) FROM {qualified(schema)}.documents "
                "WHERE cluster_id = ANY(:labels) GROUP BY cluster_id"
            ),
            {"labels": stored_labels},
        )
        sizes = {int(label): int(size) for label, size in found}
    size_frame = spark.createDataFrame(list(sizes.items()), "node bigint, size bigint")
    ranked = components_.join(size_frame, "node", "left").withColumn(
        "size", F.coalesce("size", F.lit(1).cast("bigint"))
    )
    keepers = ranked.groupBy("component").agg(F.min(keeper_rank("size", "node")).alias("keeper"))
    labelled = ranked.join(keepers, "component").select(
        "node", F.col("keeper.label").alias("label")
    )
    mapping = {
        int(node): int(label)
        for node, label in labelled.where(
            (F.col("node") < first) & (F.col("node") != F.col("label"))
        ).collect()
    }
    clusters = labelled.where(F.col("node") >= first).select(
        F.col("node").alias("id"), F.col("label").alias("cluster_id")
    )
    return clusters, mapping, components_


def load_summary(
    edges: DataFrame, merging: Sequence[str], first: int, count: int, skipped: int, errors: int
) -> IngestSummary:
    """The local ingest's counts, from the edges of the new documents."""
    statuses = (
        edges.where(F.col("b") >= first)
        .groupBy("b")
        .agg(
            F.max((F.col("method") == "exact").cast("int")).alias("exact"),
            F.max(F.col("method").isin(list(merging)).cast("int")).alias("near"),
        )
        .agg(
            F.sum("exact").alias("exact"),
            F.sum(((F.col("exact") == 0) & (F.col("near") == 1)).cast("int")).alias("near"),
            F.sum(((F.col("exact") == 0) & (F.col("near") == 0)).cast("int")).alias("excerpts"),
        )
        .collect()[0]
    )
    exact, near, excerpts = (int(statuses[k] or 0) for k in ("exact", "near", "excerpts"))
    return IngestSummary(
        documents=count + skipped,
        new=count - exact - near - excerpts,
        exact_duplicates=exact,
        near_duplicates=near,
        skipped=skipped,
        excerpts=excerpts,
        errors=errors,
    )
