"""What :mod:`benchmarks.load` reports: the figures by name (``--json``), and the table with the
targets beside them.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.load_clients import Latencies, LoadRun

SHOWN_ERRORS = 5


@dataclasses.dataclass
class Replay:
    """The serial replay of the committed adds and the comparison of the clusters."""

    adds: int
    statuses: dict[str, str]
    clusters: int
    replayed_clusters: int
    differing: int


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100), or ``None`` without values."""
    return float(np.percentile(np.asarray(values), q)) if values else None


def figures(single: Latencies, run: LoadRun, check: Replay | None) -> dict[str, Any]:
    """Every measure of the run, by name (milliseconds unless the name says otherwise)."""
    done = len(run.latencies("check")) + len(run.latencies("add"))
    out: dict[str, Any] = {
        "single_check_ms": {f"p{q}": percentile(single.check, q) for q in (50, 90, 99)},
        "single_add_ms": {f"p{q}": percentile(single.add, q) for q in (50, 90, 99)},
        "load_operations": done,
        "load_seconds": run.seconds,
        "load_operations_per_second": done / run.seconds if run.seconds else 0.0,
        "load_check_ms": {f"p{q}": percentile(run.latencies("check"), q) for q in (50, 99)},
        "load_add_ms": {f"p{q}": percentile(run.latencies("add"), q) for q in (50, 99)},
        "load_checks": len(run.latencies("check")),
        "load_adds": len(run.latencies("add")),
        "load_errors": len(run.errors()),
        "load_connection_states": run.states,
    }
    check_p50, add_p50 = out["single_check_ms"]["p50"], out["single_add_ms"]["p50"]
    out["single_add_over_check_p50"] = add_p50 / check_p50 if check_p50 and add_p50 else None
    if check is not None:
        out["replay"] = {k: v for k, v in dataclasses.asdict(check).items() if k != "statuses"}
        out["clusters_equal"] = check.differing == 0
    return out


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def table(f: dict[str, Any], clients: int) -> list[tuple[str, str, str, str]]:
    """``(measure, value, target, verdict)`` rows."""

    def verdict(ok: bool | None) -> str:
        return "-" if ok is None else ("ok" if ok else "MISSED")

    single_c, single_a = f["single_check_ms"], f["single_add_ms"]
    load_c, load_a = f["load_check_ms"], f["load_add_ms"]
    ratio = f["single_add_over_check_p50"]
    done = f["load_operations"] + f["load_errors"]
    rows = [
        (
            "single client: check p50 / p90 / p99 ms",
            " / ".join(_ms(single_c[k]) for k in ("p50", "p90", "p99")),
            "",
            "",
        ),
        (
            "single client: add p50 / p90 / p99 ms",
            " / ".join(_ms(single_a[k]) for k in ("p50", "p90", "p99")),
            "",
            "",
        ),
        (
            "single client: add p50 / check p50",
            "-" if ratio is None else f"{ratio:.1f}x",
            "<= 2x",
            verdict(None if ratio is None else ratio <= 2),
        ),
        (
            f"{clients} clients: operations/s",
            f"{f['load_operations_per_second']:,.0f}",
            ">= 1,000",
            verdict(f["load_operations_per_second"] >= 1000 if done else None),
        ),
        (
            f"{clients} clients: check p50 / p99 ms",
            f"{_ms(load_c['p50'])} / {_ms(load_c['p99'])}",
            "",
            "",
        ),
        (
            f"{clients} clients: add p50 / p99 ms",
            f"{_ms(load_a['p50'])} / {_ms(load_a['p99'])}",
            "p99 <= 50",
            verdict(None if load_a["p99"] is None else load_a["p99"] <= 50),
        ),
        (
            f"{clients} clients: errors",
            f"{f['load_errors']:,}",
            "0",
            verdict(f["load_errors"] == 0 if done else None),
        ),
    ]
    if "replay" in f:
        r = f["replay"]
        rows.append(
            (
                "clusters equal to a serial replay",
                f"{'equal' if f['clusters_equal'] else 'NOT equal'} ({r['differing']:,} of "
                f"{r['clusters']:,} / {r['replayed_clusters']:,} differ)",
                "equal",
                verdict(f["clusters_equal"]),
            )
        )
    return rows


def print_report(
    f: dict[str, Any], args: argparse.Namespace, phases: dict[str, float], run: LoadRun
) -> None:
    """The figures as a table, the phases' durations and the first errors."""
    rows = table(f, args.clients)
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    print(f"\n{'measure':<{widths[0]}}  {'value':>{widths[1]}}  {'target':<{widths[2]}}  ")
    for measure, value, target, verdict in rows:
        print(f"{measure:<{widths[0]}}  {value:>{widths[1]}}  {target:<{widths[2]}}  {verdict}")
    print(
        f"\nload: {f['load_checks']:,} checks and {f['load_adds']:,} adds in "
        f"{f['load_seconds']:.1f} s (--ops {args.ops:,} per client, --seconds {args.seconds:g})"
    )
    if "replay" in f:
        print(
            f"replay: {f['replay']['adds']:,} adds; statuses differing from the load run: "
            f"{f['statuses_differing']:,}"
        )
    states = ", ".join(f"{name} {mean:.2f}" for name, mean in f["load_connection_states"].items())
    if states:
        print(f"client connections in each state during the load (mean of samples): {states}")
    m = f["machine"]
    print(
        f"machine: {m['cores']} cores, load average (1 min) {m['load_before']:.2f} before the "
        f"load run, {m['load_after']:.2f} after"
    )
    print("phases: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items()))
    errors = run.errors()
    for line in errors[:SHOWN_ERRORS]:
        print(f"error: {line[:300]}")
    if len(errors) > SHOWN_ERRORS:
        print(f"... and {len(errors) - SHOWN_ERRORS:,} more errors")
