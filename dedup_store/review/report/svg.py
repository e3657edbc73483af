"""The report's two charts, drawn as inline SVG: cluster sizes, and the similarity of pairs by
method."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

#: A colour per method, told apart with colour blindness (Okabe and Ito's palette).
METHOD_COLOURS = {
    "exact": "#0072b2",
    "minhash": "#009e73",
    "simhash": "#e69f00",
    "containment": "#cc79a7",
    "confirmed": "#56b4e9",
}
_WIDTH, _HEIGHT = 560, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 12, 22, 40
_INK, _GRID, _BAR = "#1f2328", "#d8dee4", "#4c6ef5"


def size_buckets(sizes: Mapping[int, int]) -> list[tuple[str, int]]:
    """Clusters per size range: 2, 3 and 4 alone, then ranges doubling in width (5-8, 9-16,
    ...) up to the largest size present."""
    if not sizes:
        return []
    largest = max(sizes)
    bounds = [(2, 2), (3, 3), (4, 4)]
    low = 5
    while low <= largest:
        bounds.append((low, 2 * low - 2))
        low = 2 * low - 1
    buckets = []
    for lo, hi in bounds:
        if lo > largest:
            break
        count = sum(n for size, n in sizes.items() if lo <= size <= hi)
        buckets.append((str(lo) if lo == hi else f"{lo}–{hi}", count))
    return buckets


def size_chart(sizes: Mapping[int, int]) -> str:
    """A bar chart of clusters per size range (:func:`size_buckets`)."""
    buckets = size_buckets(sizes)
    if not buckets:
        return _empty("No clusters of two or more documents.")
    top = max(count for _, count in buckets)
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    step = plot_w / len(buckets)
    parts = [_axis(top, plot_h)]
    for i, (label, count) in enumerate(buckets):
        x = _LEFT + i * step + step * 0.15
        h = _bar_height(count, top, plot_h)
        y = _TOP + plot_h - h
        title = f"{count:,} clusters of {label} documents"
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{step * 0.7:.1f}" height="{h:.1f}" '
            f'fill="{_BAR}"><title>{escape(title)}</title></rect>'
        )
        centre = x + step * 0.35
        parts.append(_text(centre, y - 4, f"{count:,}", size=11))
        parts.append(_text(centre, _TOP + plot_h + 16, label, size=11))
    parts.append(_text(_LEFT + plot_w / 2, _HEIGHT - 4, "documents per cluster", size=12))
    return _svg("Clusters by size", "".join(parts))


def similarity_chart(similarity: Mapping[str, Sequence[int]], buckets: int) -> str:
    """Pairs per Jaccard similarity bucket, stacked by method, with a legend."""
    methods = [m for m in METHOD_COLOURS if sum(similarity.get(m, ())) > 0]
    if not methods:
        return _empty("No pairs.")
    totals = [sum(similarity.get(m, [0] * buckets)[i] for m in methods) for i in range(buckets)]
    top = max(totals)
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    step = plot_w / buckets
    parts = [_axis(top, plot_h)]
    for i in range(buckets):
        base = float(_TOP + plot_h)
        low, high = i / buckets, (i + 1) / buckets
        for method in methods:
            count = similarity[method][i]
            if not count:
                continue
            h = _bar_height(count, top, plot_h)
            base -= h
            title = f"{count:,} {method} pairs with Jaccard {low:.2f}–{high:.2f}"
            parts.append(
                f'<rect x="{_LEFT + i * step + 1:.1f}" y="{base:.1f}" width="{step - 2:.1f}" '
                f'height="{h:.1f}" fill="{METHOD_COLOURS[method]}">'
                f"<title>{escape(title)}</title></rect>"
            )
    for tick in range(5):
        x = _LEFT + plot_w * tick / 4
        parts.append(_text(x, _TOP + plot_h + 16, f"{tick / 4:.2f}", size=11))
    parts.append(_text(_LEFT + plot_w / 2, _HEIGHT - 4, "Jaccard similarity", size=12))
    parts.append(_legend(methods))
    return _svg("Pairs by similarity", "".join(parts))


def _bar_height(count: int, top: int, plot_h: float) -> float:
    """A bar's height; a non-zero count stays visible."""
    return 0.0 if count == 0 else max(2.0, plot_h * count / top)


def _axis(top: int, plot_h: float) -> str:
    """The baseline, and grid lines at ``top`` and at the whole number nearest below its half
    (none when that is 0), each drawn at the value it is labelled with."""
    y0 = _TOP + plot_h
    lines = [f'<line x1="{_LEFT}" y1="{y0}" x2="{_WIDTH - _RIGHT}" y2="{y0}" stroke="{_INK}"/>']
    for value in dict.fromkeys(v for v in (top // 2, top) if v > 0):
        y = y0 - plot_h * value / top
        lines.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_WIDTH - _RIGHT}" y2="{y:.1f}" '
            f'stroke="{_GRID}" stroke-dasharray="3 3"/>'
        )
        lines.append(_text(_LEFT - 6, y + 4, f"{value:,}", size=11, anchor="end"))
    return "".join(lines)


def _legend(methods: Sequence[str]) -> str:
    parts = []
    x = _LEFT
    for method in methods:
        parts.append(
            f'<rect x="{x}" y="4" width="10" height="10" fill="{METHOD_COLOURS[method]}"/>'
        )
        parts.append(_text(x + 14, 13, method, size=11, anchor="start"))
        x += 22 + 7 * len(method)
    return "".join(parts)


def _text(x: float, y: float, value: str, *, size: int, anchor: str = "middle") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
        f'fill="{_INK}">{escape(value)}</text>'
    )


def _svg(title: str, body: str) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>{body}</svg>'
    )


def _empty(message: str) -> str:
    return f'<p class="empty">{escape(message)}</p>'
