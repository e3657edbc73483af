"""What each part of a ``check``'s statement costs: the statement whole and cut down, beside the
22-key probe of ``op_cost``.

``python -m benchmarks.statement_parts --reuse --schema S`` runs on a store kept by ``python -m
benchmarks.op_cost --keep --schema S`` (without ``--reuse`` it loads one the same way first). It
builds the statements of ``check`` for ``--texts`` fresh texts of that benchmark (half new, half
edited copies of stored documents) with the store's own builder, then prepares and times them on
one psycopg connection with generic plans, as the store's connections run them:

* ``whole``: the statement as ``check`` sends it;
* ``no hot-key report``: the same without its report of the hot keys it met (``touched``);
* ``lookups``: only the candidate lookups (band and block keys in both key tiers, excerpt keys,
  the exact hash), the documents they find;
* ``slot keys``: only the 22 per-key probes of the band and block keys, in both tiers;
* ``slot keys, settled tier``: the same probes of the settled tier alone;
* ``22-key probe``: one ``= ANY`` scan of the settled tier's index with the text's 22 keys.

Each kind is timed over ``--rounds`` bursts of ``--per-burst`` calls, the kinds in a new random
order each round. It prints per call (the round trip and psycopg's client included, the same
for every kind) the 10th percentile and the median of the bursts, and the 10th percentile
against ``whole``'s: on a machine that other work keeps busy, it moves least.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from benchmarks.common import (
    add_seed,
    add_store_options,
    add_url,
    conninfo,
    scratch_schema,
    sqlalchemy_url,
)
from benchmarks.load_workload import TextMaker
from benchmarks.op_cost import corpus_sources
from dedup_store import DedupStore
from dedup_store.core.fingerprint import Fingerprint, fingerprint
from dedup_store.db.candidates.lookup import salt_arrays
from dedup_store.db.matches import scoring
from dedup_store.db.schema.encoding import slot_salts
from dedup_store.db.schema.names import qualified
from dedup_store.db.server import array_params
from dedup_store.db.server.raw_statements import positional

#: Where the report of the hot keys met begins in the statement of ``check``.
REPORT = "UNION ALL\n        SELECT 'touched'"

Call = tuple[str, list[Any]]


def statements(schema: str, fp: Fingerprint) -> dict[str, Call]:
    """The statement of ``check`` for ``fp`` and its parts, each with its ``$n`` parameters."""
    statement, parameters = scoring.check_statement(schema, fp)
    shape = scoring.lookup_shape(fp, parameters)
    keys = np.asarray(parameters["slot_keys"], dtype=np.int64)
    salts = slot_salts(shape.band_count, shape.block_count)
    parameters["tagged"] = np.bitwise_xor(keys, salts).tolist()
    s, limit = qualified(schema), f" LIMIT {int(shape.hot_limit)}" if shape.hot_limit else ""
    one = (
        f"SELECT k.doc_id FROM {s}.{{table}} k WHERE k.key = n.key # n.salt "
        f"ORDER BY k.doc_id{limit}"
    )
    both = (
        f"SELECT t.doc_id FROM (({one.format(table='slot_keys')}) UNION ALL "
        f"({one.format(table='recent_slot_keys')})) t{limit}"
    )
    probes = (
        "SELECT f.doc_id FROM unnest("
        f"{salt_arrays(shape.band_count, shape.block_count)}, CAST(:slot_keys AS bigint[])) "
        "AS n(kind, slot, salt, key) CROSS JOIN LATERAL (TIERS) f"
    )
    texts = {
        "whole": statement,
        "no hot-key report": statement[: statement.index(REPORT)],
        "lookups": f"WITH found AS MATERIALIZED ({scoring.found_sql(schema, *shape)}) "
        "SELECT a FROM found",
        "slot keys": probes.replace("TIERS", both),
        "slot keys, settled tier": probes.replace("TIERS", one.format(table="slot_keys")),
        "22-key probe": f"SELECT k.doc_id FROM {s}.slot_keys k "
        "WHERE k.key = ANY(CAST(:tagged AS bigint[]))",
    }
    calls = {}
    for name, text in texts.items():
        query, names = positional(text)
        calls[name] = (query, [parameters[n] for n in names])
    return calls


def burst(conn: psycopg.Connection[Any], calls: Sequence[Call], count: int) -> float:
    """Milliseconds per call of ``count`` calls, taken in turn from ``calls``."""
    started = time.perf_counter()
    for i in range(count):
        query, values = calls[i % len(calls)]
        conn.execute(query, values, prepare=True).fetchall()
    return (time.perf_counter() - started) / count * 1000


def measure(
    url: str, by_kind: dict[str, list[Call]], rounds: int, per_burst: int
) -> dict[str, list[float]]:
    """Milliseconds per call of each burst of each kind, the kinds in a new order each round."""
    connect = psycopg.Connection[Any].connect
    with connect(conninfo(url), autocommit=True, cursor_factory=psycopg.RawCursor) as conn:
        array_params.register(conn)
        conn.prepared_max = sum(len(calls) for calls in by_kind.values()) + 16
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for calls in by_kind.values():
            burst(conn, calls, 2 * len(calls))  # prepared, planned, warm
        times: dict[str, list[float]] = {kind: [] for kind in by_kind}
        rng = random.Random(0)
        for _ in range(rounds):
            for kind in rng.sample(list(by_kind), len(by_kind)):
                times[kind].append(burst(conn, by_kind[kind], per_burst))
    return times


def texts_statements(args: argparse.Namespace) -> dict[str, list[Call]]:
    """The statements of each kind for ``args.texts`` texts (the store loaded first unless
    ``args.reuse``)."""
    corpus, sources = corpus_sources(args, load=not args.reuse)
    maker = TextMaker(corpus, sources, args.seed + 7)
    with DedupStore(args.url, schema=args.schema, create=False) as store:
        params = store.params
    by_kind: dict[str, list[Call]] = {}
    for _ in range(args.texts):
        for kind, call in statements(args.schema, fingerprint(maker.mixed(), params)).items():
            by_kind.setdefault(kind, []).append(call)
    return by_kind


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_url(parser)
    add_seed(parser, 1, "seed of the corpus and of every text (as op_cost's)")
    add_store_options(
        parser,
        schema=("bench_statement_parts", "schema of the store"),
        reuse="use the store kept in --schema (by op_cost --keep)",
        keep="keep the store afterwards",
    )
    add = parser.add_argument
    add("--documents", type=int, default=100_000, help="documents of the store (%(default)s)")
    add("--texts", type=int, default=40, help="texts checked (%(default)s)")
    add("--rounds", type=int, default=60, help="bursts of each kind (%(default)s)")
    add("--per-burst", type=int, default=40, help="calls a burst (%(default)s)")
    args = parser.parse_args(argv)
    args.url = sqlalchemy_url(args.url)
    with contextlib.ExitStack() as stack:
        if not args.reuse:
            stack.enter_context(scratch_schema(args.url, args.schema, args.keep))
        times = measure(args.url, texts_statements(args), args.rounds, args.per_burst)
    whole = np.percentile(times["whole"], 10)
    print(f"ms per call, {args.rounds} bursts of {args.per_burst} calls, {args.texts} texts")
    print(f"{'statement':26} {'p10':>7} {'median':>7} {'p10 / whole':>12}")
    for kind, ms in times.items():
        low = np.percentile(ms, 10)
        print(f"{kind:26} {low:7.3f} {statistics.median(ms):7.3f} {low / whole:12.2f}")


if __name__ == "__main__":
    main()
