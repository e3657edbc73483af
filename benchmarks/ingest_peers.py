"""The peer of :mod:`benchmarks.ingest`: datasketch ``MinHashLSH(threshold=0.8, num_perm=84)``
in memory and on Redis, end to end on the same documents.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.ingest_corpus import read_documents
from dedup_store.core import FingerprintParams

PEER_CHUNK = 5000


@dataclasses.dataclass
class PeerRun:
    """Seconds spent by datasketch on ``documents`` inserts and ``queries`` queries."""

    documents: int
    prep_seconds: float = 0.0
    minhash_seconds: float = 0.0
    insert_seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    queries: int = 0
    query_latencies: dict[str, list[float]] = dataclasses.field(default_factory=dict)

    def insert_rate(self, backend: str) -> float:
        """Documents per second end to end: shingling, MinHash computation and inserts."""
        seconds = self.prep_seconds + self.minhash_seconds + self.insert_seconds[backend]
        return self.documents / seconds

    def query_rate(self, backend: str) -> float:
        """Queries per second: shingling, MinHash computation and the LSH query."""
        return 1000 * self.queries / sum(self.query_latencies[backend])


def _shingles(texts: Sequence[str], size: int) -> list[list[bytes]]:
    """What a datasketch user feeds it: ``size``-word shingles of the lower-cased words."""
    shingles = []
    for text in texts:
        words = text.lower().split()
        count = max(1, len(words) - size + 1)
        shingles.append([" ".join(words[i : i + size]).encode("utf-8") for i in range(count)])
    return shingles


class _Clock(dict[str, float]):
    """Seconds accumulated per name."""

    def __missing__(self, key: str) -> float:
        return 0.0

    def add(self, key: str, started: float) -> float:
        """Add the time since ``started`` to ``key``; returns the current time."""
        now = time.perf_counter()
        self[key] += now - started
        return now


def _peer_indexes(redis_basename: bytes | None) -> dict[str, Any]:
    from datasketch import MinHashLSH

    indexes = {"memory": MinHashLSH(threshold=0.8, num_perm=84)}
    if redis_basename is not None:
        indexes["redis"] = MinHashLSH(
            threshold=0.8,
            num_perm=84,
            storage_config={
                "type": "redis",
                "basename": redis_basename,
                "redis": {"host": "127.0.0.1", "port": 6379},
            },
        )
    return indexes


def run_peers(
    path: Path,
    count: int,
    queries: Sequence[str],
    params: FingerprintParams,
    redis_basename: bytes | None,
) -> PeerRun:
    """Insert the first ``count`` documents into each datasketch index, then query them."""
    from datasketch import MinHash

    indexes = _peer_indexes(redis_basename)
    clock = _Clock()
    with ExitStack() as stack:
        sessions = {
            name: stack.enter_context(lsh.insertion_session()) for name, lsh in indexes.items()
        }
        for chunk in _chunks(read_documents(path, count), PEER_CHUNK):
            now = time.perf_counter()
            shingles = _shingles([text for _, text in chunk], params.shingle_size)
            now = clock.add("prep", now)
            minhashes = MinHash.bulk(shingles, num_perm=84)
            now = clock.add("minhash", now)
            for name, session in sessions.items():
                for (key, _), minhash in zip(chunk, minhashes, strict=True):
                    session.insert(key, minhash)
                now = clock.add(name, now)
        closing = time.perf_counter()
    if "redis" in indexes:
        clock.add("redis", closing)
    run = PeerRun(
        count,
        clock["prep"],
        clock["minhash"],
        {name: clock[name] for name in indexes},
        len(queries),
    )
    for name, lsh in indexes.items():
        run.query_latencies[name] = [_query_ms(lsh, q, params.shingle_size) for q in queries]
    return run


def _query_ms(lsh: Any, text: str, size: int) -> float:
    from datasketch import MinHash

    started = time.perf_counter()
    minhash = MinHash(num_perm=84)
    minhash.update_batch(_shingles([text], size)[0])
    lsh.query(minhash)
    return (time.perf_counter() - started) * 1000


def _chunks(items: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    chunk: list[tuple[str, str]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def clean_redis(basename: bytes) -> int:
    """Delete every Redis key of the benchmark's index; returns how many."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379)
    keys = list(client.scan_iter(match=basename + b"*", count=10_000))
    for start in range(0, len(keys), 10_000):
        client.delete(*keys[start : start + 10_000])
    return len(keys)
