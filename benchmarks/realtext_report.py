"""Markdown tables of the real-text benchmark's figures (the dict of ``realtext.report``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_PEER = "datasketch (estimate >= t)"
_PEERS = (("datasketch", _PEER), ("rensa", "rensa (estimate >= t)"))
#: The run of the command line, process start included.
CLI_RUN = "store CLI (defaults)"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4f}".rstrip("0").rstrip(".") if value < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def markdown(result: dict[str, Any]) -> str:
    """Every table of one corpus."""
    parts = [
        _title(result),
        table(
            ["run", "seconds", "docs/s", "MB/s", "edges", "clusters"],
            [
                [r["run"], r["seconds"], r["docs_per_s"], r["mb_per_s"], r["edges"], r["clusters"]]
                for r in result["throughput"]
            ],
        ),
        _ratios(result["throughput"]),
        _quality("recall and precision (pairs reported with Jaccard >= t)", result["quality"]),
    ]
    if "quality_ru_zh" in result:
        parts.append(
            _quality("the same, pairs of two Russian or Chinese documents", result["quality_ru_zh"])
        )
    if "edit_profile" in result:
        parts.append(_profile(result["edit_profile"]))
    if "store_misses_by_edit" in result:
        parts.append(
            "store (defaults), missed pairs by the edit between them: "
            + "; ".join(f"t {t}: {_counts(m)}" for t, m in result["store_misses_by_edit"].items())
        )
    parts += [
        _not_near(result["not_near"]),
        _clusters(result["largest_clusters"]),
        _worst(result["worst_pairs"]),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def _title(r: dict[str, Any]) -> str:
    truth = ", ".join(f"J >= {t}: {n:,}" for t, n in r["true_pairs"].items())
    return (
        f"## {r['corpus']}: {r['documents']:,} documents, {r['megabytes']:.1f} MB "
        f"({r['dropped_empty']} empty left out), {r['seconds']:.0f} s in all\n\n"
        f"Ground truth in {r['truth_seconds']:.1f} s: {r['pairs_sharing_a_shingle']:,} pairs "
        f"share a shingle; true pairs {truth}; containment >= 0.8: "
        f"{r['true_excerpt_pairs']:,}."
    )


def _ratios(rows: Sequence[dict[str, Any]]) -> str:
    lines = []
    for name, run in _PEERS:
        peer = next((r for r in rows if r["run"] == run), None)
        if peer is None:
            continue
        stores = [r for r in rows if r["run"].startswith("store")]
        ratios = [f"{r['run']}: {r['docs_per_s'] / peer['docs_per_s']:.2f}x" for r in stores]
        lines.append(f"docs/s, store / {name}: " + ", ".join(ratios))
    return "\n\n".join(lines)


def _quality(title: str, rows: Sequence[dict[str, Any]]) -> str:
    return f"{title}\n\n" + table(
        ["run", "t", "recall", "precision", "found", "truth", "missed"],
        [
            [r["run"], r["t"], r["recall"], r["precision"], r["found"], r["truth"], r["missed"]]
            for r in rows
        ],
    )


def _profile(rows: Sequence[dict[str, Any]]) -> str:
    return "seeded edits: an edited copy against its source, over the store's shingles\n\n" + (
        table(
            ["edit", "language", "copies", "median J", "share J >= 0.8", "median C"],
            [
                [
                    r["edit"],
                    r["language"],
                    r["copies"],
                    r["median_jaccard"],
                    r["jaccard_0_8"],
                    r["median_containment"],
                ]
                for r in rows
            ],
        )
    )


def _not_near(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    return "reported pairs that are not near-duplicates (J < 0.3 and containment < 0.8)\n\n" + (
        table(
            [
                "run",
                "method",
                "pairs",
                "not near",
                "J < 0.3",
                "lowest J",
                "mean J",
                "J differs from truth",
            ],
            [
                [
                    r["run"],
                    r["method"],
                    r["pairs"],
                    r["not_near"],
                    r["below_0_3"],
                    r["min_jaccard"],
                    r["mean_jaccard"],
                    r["jaccard_differs"],
                ]
                for r in rows
            ],
        )
    )


def _clusters(rows: Sequence[dict[str, Any]]) -> str:
    return "largest cluster\n\n" + table(
        [
            "run",
            "size",
            "true components (J >= 0.5) in it",
            "largest of them",
            "edges in it",
            "most linked (not exact)",
            "first members",
        ],
        [
            [
                r["run"],
                r["size"],
                r["true_components"],
                r["largest_true_part"],
                _counts(r["edges_by_method"]),
                _counts(r["hubs"]),
                ", ".join(r["first_members"]),
            ]
            for r in rows
        ],
    )


def _worst(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    return "lowest-Jaccard reported pairs per method, with the longest shared run of words\n\n" + (
        table(
            ["run", "method", "a", "b", "J", "C", "hamming", "shingles", "shared run"],
            [
                [
                    r["run"],
                    r["method"],
                    r["a"],
                    r["b"],
                    r["jaccard"],
                    r["containment"],
                    r["hamming"],
                    "/".join(map(str, r["shingles"])),
                    f"{r['shared_run_words']} words: {r['shared_run']}",
                ]
                for r in rows
            ],
        )
    )


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def headline(results: Sequence[dict[str, Any]]) -> str:
    """One row per corpus: the store's defaults against datasketch (the README's table)."""
    rows = []
    for r in results:
        speed = {t["run"]: t for t in r["throughput"]}
        quality = {(q["run"], q["t"]): q for q in r["quality"]}
        clusters = {c["run"]: c["size"] for c in r["largest_clusters"]}
        store, peer = speed.get("store (defaults)"), speed[_PEER]
        if store is None:
            continue
        off = speed.get("store (containment 0)", store)
        rows.append(
            [
                f"{r['corpus']} ({r['documents']:,}, {r['megabytes']} MB)",
                f"{store['docs_per_s']:,.0f} / {peer['docs_per_s']:,.0f} "
                f"({store['docs_per_s'] / peer['docs_per_s']:.2f}x)",
                _cli(speed),
                f"{off['seconds'] / store['seconds']:.2f}",
                _recall(quality, "store (defaults)", 0.8, _PEER),
                _recall(quality, "store (threshold 0.5)", 0.5, _PEER),
                sum(n["not_near"] for n in r["not_near"] if n["run"] == "store (defaults)"),
                f"{clusters.get('store (defaults)', 0)} / "
                f"{clusters.get('truth: component of J >= 0.5', 0)} "
                f"({clusters.get(_PEER, 0)})",
            ]
        )
    return table(
        [
            "corpus (documents, size)",
            "docs/s: store / datasketch",
            "CLI docs/s: x datasketch, x rensa",
            "excerpt index: speed on / off",
            "t 0.8: recall, precision (datasketch)",
            "t 0.5, store at 0.5 (datasketch)",
            "pairs not near-duplicates",
            "largest cluster / true component (datasketch)",
        ],
        rows,
    )


def _cli(speed: dict[str, dict[str, Any]]) -> str:
    cli = speed.get(CLI_RUN)
    if cli is None:
        return "-"
    ratios = [
        f"{cli['docs_per_s'] / speed[run]['docs_per_s']:.2f}x" for _, run in _PEERS if run in speed
    ]
    return f"{cli['docs_per_s']:,.0f}: " + ", ".join(ratios)


def _recall(quality: dict[tuple[str, float], Any], run: str, tau: float, peer: str) -> str:
    ours, theirs = quality.get((run, tau)), quality.get((peer, tau))
    if ours is None or theirs is None:
        return "-"
    return (
        f"{ours['recall']:.3f}, {ours['precision']:.3f} "
        f"({theirs['recall']:.3f}, {theirs['precision']:.3f})"
    )
