"""Prometheus metrics, at ``/metrics``.

- ``dedup_store_http_requests_total{method,route,status}``: requests answered;
- ``dedup_store_http_request_duration_seconds{method,route}``: their latency (a histogram);
- ``dedup_store_http_requests_in_flight``: requests being answered;
- ``dedup_store_documents_added_total{status}``: documents answered by ``add`` and batches, by
  status (``new``, ``exact_duplicate``, ..., ``rejected``, ``error``);
- ``dedup_store_documents``, ``dedup_store_clusters``, ``dedup_store_edges{method}``: the
  store's counts, read when the metrics are scraped.

With several worker processes (``--workers``), each writes its metrics to files in the
directory that ``PROMETHEUS_MULTIPROC_DIR`` names (set by ``dedup-store serve``), and a scrape
adds up those of every process.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from dedup_store.results import Stats

#: The environment variable of prometheus_client's multiprocess mode.
ENV_MULTIPROC = "PROMETHEUS_MULTIPROC_DIR"
#: Latency buckets in seconds: from the millisecond of a ``check`` to a whole-store report.
BUCKETS = (0.001, 0.002, 0.003, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The server's metrics (one set per process: :func:`metrics`)."""

    def __init__(self) -> None:
        self.requests = Counter(
            "dedup_store_http_requests",
            "HTTP requests answered",
            ["method", "route", "status"],
        )
        self.latency = Histogram(
            "dedup_store_http_request_duration_seconds",
            "Time to answer an HTTP request",
            ["method", "route"],
            buckets=BUCKETS,
        )
        self.in_flight = Gauge(
            "dedup_store_http_requests_in_flight",
            "HTTP requests being answered",
            multiprocess_mode="livesum",
        )
        self.documents = Counter(
            "dedup_store_documents_added",
            "Documents answered by add and batch requests, by status",
            ["status"],
        )
        # the children of each set of labels, looked up once (``labels`` takes a lock)
        self._answered: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}
        self._added: dict[str, Counter] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        key = (method, route, status)
        children = self._answered.get(key)
        if children is None:
            count = self.requests.labels(method, route, str(status))
            children = self._answered[key] = count, self.latency.labels(method, route)
        children[0].inc()
        children[1].observe(seconds)

    def added(self, status: str) -> None:
        """Count one document answered by ``add`` or a batch (``status``: the document's, or
        ``rejected`` or ``error``)."""
        child = self._added.get(status)
        if child is None:
            child = self._added[status] = self.documents.labels(status)
        child.inc()


@functools.cache
def metrics() -> Metrics:
    """This process's metrics."""
    return Metrics()


class StoreCounts(Collector):
    """The store's documents, clusters, edges and bytes, as read for one scrape."""

    def __init__(self, stats: Stats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        """The gauges."""
        stats = self._stats
        yield GaugeMetricFamily("dedup_store_documents", "Documents stored", stats.documents)
        yield GaugeMetricFamily("dedup_store_clusters", "Clusters in the store", stats.clusters)
        edges = GaugeMetricFamily("dedup_store_edges", "Match edges stored", labels=["method"])
        for method, count in sorted(stats.edges_by_method.items()):
            edges.add_metric([method], count)
        yield edges
        storage = GaugeMetricFamily(
            "dedup_store_bytes", "Bytes of the store's tables and indexes", labels=["kind"]
        )
        for kind in ("tables", "indexes"):
            storage.add_metric([kind], stats.storage.get(kind, 0))
        yield storage
        yield GaugeMetricFamily(
            "dedup_store_server_shared_buffers_bytes",
            "The server's shared_buffers, which the indexes' pages are read through",
            stats.storage.get("shared_buffers", 0),
        )


def exposition(stats: Stats) -> bytes:
    """The text of a scrape: this process's metrics (every process's, in multiprocess mode)
    and the store's counts."""
    store = CollectorRegistry()
    store.register(StoreCounts(stats))
    if os.environ.get(ENV_MULTIPROC):
        from prometheus_client import multiprocess

        processes = CollectorRegistry()
        multiprocess.MultiProcessCollector(processes)  # type: ignore[no-untyped-call]
        return generate_latest(processes) + generate_latest(store)
    return generate_latest(REGISTRY) + generate_latest(store)


def process_ended() -> None:
    """Drop this process's live gauges (multiprocess mode), as it stops."""
    if os.environ.get(ENV_MULTIPROC):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
