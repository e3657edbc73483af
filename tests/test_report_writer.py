"""The review report's writer, on values made by hand (no database): its data blocks, its byte
budget, texts not kept, and a file that loads nothing from elsewhere."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from dedup_store.review.report import (
    Member,
    Overview,
    ReportCluster,
    ReportItem,
    ReportOptions,
    ReportPair,
    Verdict,
    write_report,
)
from dedup_store.review.report.svg import similarity_chart, size_buckets, size_chart
from tests.report_html import read_report

BASH = Path("/usr/share/doc/bash/copyright").read_text(encoding="utf-8")
WHEN = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)


def edited(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


def pair(a: str, b: str, text_a: str | None, text_b: str | None, **scores: object) -> ReportPair:
    values: dict[str, object] = {
        "method": "minhash",
        "jaccard": 0.9,
        "containment": 0.95,
        "hamming": 2,
        "meta_score": None,
        "score": 0.9,
        **scores,
    }
    return ReportPair(a, b, text_a=text_a, text_b=text_b, cluster_a=1, cluster_b=1, **values)  # type: ignore[arg-type]


def cluster(cluster_id: int, *pairs: ReportPair) -> ReportCluster:
    names = sorted({p.a for p in pairs} | {p.b for p in pairs})
    members = tuple(Member(n, WHEN, 100, 20, canonical=i == 0) for i, n in enumerate(names))
    return ReportCluster(cluster_id, members, pairs, names[0], "oldest")


def overview(items: list[ReportItem], *, keep_text: bool = True) -> Overview:
    pairs = sum(len(i.pairs) if isinstance(i, ReportCluster) else 1 for i in items)
    members = sum(i.size for i in items if isinstance(i, ReportCluster))
    return Overview(
        schema="dedup",
        documents=members,
        clusters=sum(isinstance(i, ReportCluster) for i in items),
        documents_in_clusters=members,
        pairs=pairs,
        edges_by_method={"minhash": pairs},
        cluster_sizes={2: 1},
        similarity={"minhash": [0] * 18 + [pairs, 0]},
        buckets=20,
        keep_text=keep_text,
    )


def write(tmp_path: Path, items: list[ReportItem], **options: int) -> Path:
    out = tmp_path / "report.html"
    write_report(out, overview(items), items, ReportOptions(**options))
    return out


def test_items_are_json_pages_in_order_with_an_index(tmp_path: Path) -> None:
    copy = edited(BASH, "Free Software Foundation", "Free Software Guild")
    across = ReportPair(
        "gpl", "excerpt", "containment", 0.3, 0.9, 20, None, 0.3,
        Verdict("not_duplicate", "only the licence", "ann", WHEN), BASH, BASH[:900], 5, 9,
    )  # fmt: skip
    items: list[ReportItem] = [
        cluster(7, pair("bash", "bash-copy", BASH, copy), pair("bash", "bash-2", BASH, BASH)),
        cluster(3, pair("x", "y", "one two three", "one two four", method="simhash", jaccard=0.4)),
        cluster(9, pair("p", "q", "alpha beta", "alpha beta", method="exact", jaccard=1.0)),
        across,
    ]
    data = read_report(write(tmp_path, items, page_items=2))
    assert [len(page) for page in data.pages] == [2, 2]
    assert [i["k"] for i in data.items] == ["c", "c", "c", "p"]
    assert [i["id"] for i in data.clusters] == [7, 3, 9]
    assert data.index["methods"][:4] == ["exact", "minhash", "simhash", "containment"]
    assert data.index["items"] == [
        [0, 7, 0, 3, [1, 900, 1, 900]],
        [0, 3, 0, 2, [2, 400]],
        [0, 9, 1, 2, [0, 1000]],
        [1, None, 1, 2, [3, 300]],
    ]
    assert data.ids == [["bash", "bash-2", "bash-copy"], ["x", "y"], ["p", "q"], ["gpl", "excerpt"]]
    first = data.clusters[0]
    assert first["canonical"] == "bash" and first["chosen"] == "oldest"
    assert first["members"][0] == ["bash", "2024-05-01 12:30 UTC", 100, 20, 1]
    shown = data.items[3]
    assert (shown["ca"], shown["cb"], shown["m"], shown["t"]) == (5, 9, "containment", "text")
    assert shown["v"] == ["not_duplicate", "only the licence", "ann", "2024-05-01 12:30 UTC"]
    assert data.pair("x", "y")["v"] is None


def test_a_pair_shows_both_texts_with_the_changed_words_marked(tmp_path: Path) -> None:
    copy = edited(BASH, "the Bourne Again SHell", "the Bourne Again Shell of Dreams")
    data = read_report(write(tmp_path, [cluster(1, pair("bash", "dream", BASH, copy))]))
    shown = data.pair("bash", "dream")
    assert shown["t"] == "text" and not shown["tr"]
    segments = shown["d"]
    side_a = "".join(s[1] for s in segments if s[0] in (0, 1, 2))
    side_b = "".join(s[-1] if s[0] in (0, 1) else s[1] for s in segments if s[0] != 2)
    assert (side_a, side_b) == (BASH, copy)
    changed_b = " ".join(s[-1] for s in segments if s[0] in (1, 3))
    assert "Dreams" in changed_b
    assert "Bourne" not in changed_b
    assert shown["wb"] == shown["wa"] + 2 == shown["sh"] + 2


def test_long_texts_are_aligned_up_to_max_words(tmp_path: Path) -> None:
    copy = BASH.replace("prepackaged", "repackaged")
    data = read_report(write(tmp_path, [cluster(1, pair("a", "b", BASH, copy))], max_words=50))
    shown = data.pair("a", "b")
    assert shown["tr"] and data.index["max_words"] == 50
    covered = "".join(s[1] for s in shown["d"] if s[0] in (0, 1, 2))
    assert len(re.findall(r"[^\W_]+", covered)) == 50 < len(re.findall(r"[^\W_]+", BASH))
    assert [s[1:] for s in shown["d"] if s[0] != 0] == [["prepackaged", "repackaged"]]


def test_texts_stop_at_the_byte_budget_and_scores_stay(tmp_path: Path) -> None:
    texts = [edited(BASH, "Bash", f"Bash{i}") for i in range(40)]
    pairs = [pair(f"a{i:02d}", f"b{i:02d}", BASH, texts[i]) for i in range(40)]
    items: list[ReportItem] = [cluster(i, p) for i, p in enumerate(pairs)]
    out = tmp_path / "report.html"
    summary = write_report(out, overview(items), items, ReportOptions(max_bytes=300_000))
    data = read_report(out)
    states = [p["t"] for p in data.pairs]
    assert summary.bytes == out.stat().st_size <= 300_000
    assert 0 < summary.pairs_with_texts == states.count("text") < 40
    assert summary.pairs_over_budget == states.count("budget") == 40 - summary.pairs_with_texts
    assert states == sorted(states, key=lambda s: s != "text")  # the first pairs keep texts
    assert all(p["j"] == 0.9 and p["m"] == "minhash" for p in data.pairs)
    assert data.index["over_budget"] == summary.pairs_over_budget
    assert data.index["max_bytes"] == 300_000


def test_a_report_smaller_than_its_budget_keeps_every_text(tmp_path: Path) -> None:
    items: list[ReportItem] = [cluster(1, pair("a", "b", BASH, BASH + " more"))]
    out = tmp_path / "report.html"
    summary = write_report(out, overview(items), items)
    assert (summary.pairs, summary.pairs_with_texts, summary.pairs_over_budget) == (1, 1, 0)
    assert (summary.clusters, summary.pages) == (1, 1)
    assert summary.to_dict()["path"] == str(out)


def test_a_store_without_texts_says_how_to_keep_them(tmp_path: Path) -> None:
    items: list[ReportItem] = [cluster(1, pair("a", "b", None, None))]
    out = tmp_path / "report.html"
    write_report(out, overview(items, keep_text=False), items)
    assert read_report(out).pair("a", "b")["t"] == "none"
    assert "dedup-store init --keep-text" in out.read_text("utf-8")


def test_a_pair_missing_a_text_says_so(tmp_path: Path) -> None:
    data = read_report(write(tmp_path, [cluster(1, pair("a", "b", BASH, None))]))
    assert data.pair("a", "b")["t"] == "missing"


def test_texts_cannot_close_the_data_blocks(tmp_path: Path) -> None:
    hostile = 'x </script><script>alert("x")</script> <!-- y'
    items: list[ReportItem] = [cluster(1, pair("</script>", "b", hostile, hostile + " z"))]
    out = tmp_path / "report.html"
    write_report(out, overview(items), items, ReportOptions(html="never"))  # kept as text
    html = out.read_text("utf-8")
    data = read_report(out)
    assert html.count("<script") == len(data.pages) + 3  # the pages, index, ids, the script
    shown = data.pair("</script>", "b")
    assert "".join(s[1] for s in shown["d"] if s[0] in (0, 1, 2)) == hostile


def test_nothing_is_loaded_from_elsewhere(tmp_path: Path) -> None:
    text = "See https://www.gnu.org/licenses/ and http://example.com/x.js for the terms."
    html = write(tmp_path, [cluster(1, pair("a", "b", text, text + " z"))]).read_text("utf-8")
    assert "https://www.gnu.org" in html  # in the data, shown as text
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:[a-z]+:)?//""", html, re.I)
    assert not re.search(r"""@import|url\(|<link\b|<iframe\b|\bfetch\(|XMLHttpRequest""", html)
    assert re.findall(r"<script\b[^>]*\bsrc=", html) == []


def test_an_interrupted_write_leaves_no_file(tmp_path: Path) -> None:
    def failing() -> Iterator[ReportItem]:
        yield cluster(1, pair("a", "b", BASH, BASH))
        raise RuntimeError("the store went away")

    out = tmp_path / "report.html"
    with pytest.raises(RuntimeError):
        write_report(out, overview([]), failing())
    assert list(tmp_path.iterdir()) == []


def test_options_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        ReportOptions(max_bytes=0)
    assert ReportOptions.of(max_bytes=None, max_words=7) == ReportOptions(max_words=7)


def test_cluster_sizes_are_bucketed_by_doubling_ranges() -> None:
    sizes = {2: 50, 3: 7, 5: 2, 8: 1, 9: 4, 40: 1}
    assert size_buckets(sizes) == [
        ("2", 50), ("3", 7), ("4", 0), ("5–8", 3), ("9–16", 4), ("17–32", 0), ("33–64", 1),
    ]  # fmt: skip
    assert size_buckets({}) == []
    assert "<svg" in size_chart(sizes)
    chart = similarity_chart({"minhash": [0] * 19 + [3], "simhash": [1] + [0] * 19}, 20)
    assert chart.count("<rect") == 2 + 2  # two bars and two legend swatches


def test_html_documents_show_the_text_a_reader_sees(tmp_path: Path) -> None:
    page = "<html><head><title>T</title><style>p {{}}</style></head><body><p>{}</p></body></html>"
    text_a = page.format("Free software is a matter of liberty, not price.")
    text_b = page.format("Free software is a matter of freedom, not price.")
    data = read_report(write(tmp_path, [cluster(1, pair("a", "b", text_a, text_b))]))
    segments = data.pair("a", "b")["d"]
    assert "<p>" not in "".join(str(s) for s in segments)
    assert [s[1:] for s in segments if s[0] != 0] == [["liberty", "freedom"]]


def test_worker_processes_write_the_same_report(tmp_path: Path) -> None:
    texts = [BASH.replace("Bash", f"Bash {i}", 1) for i in range(300)]
    items: list[ReportItem] = [
        cluster(i, pair(f"a{i:03d}", f"b{i:03d}", BASH, texts[i]), pair(f"a{i:03d}", "x", "", None))
        for i in range(300)
    ]
    # a budget that ends the texts part way, so processes and budget meet
    options = {"max_bytes": 2_000_000, "page_items": 40}
    alone = write_report(tmp_path / "a.html", overview(items), items, ReportOptions(**options))
    spread = write_report(
        tmp_path / "b.html", overview(items), items, ReportOptions(workers=2, **options)
    )
    assert 0 < alone.pairs_with_texts < 300 and alone.pairs_over_budget > 0
    assert (spread.pairs_with_texts, spread.pairs_over_budget) == (
        alone.pairs_with_texts, alone.pairs_over_budget,
    )  # fmt: skip
    assert read_report(spread.path).pages == read_report(alone.path).pages


@pytest.mark.parametrize("top", [1, 2, 5, 7, 100])
def test_each_grid_line_is_drawn_at_the_value_it_is_labelled(top: int) -> None:
    """The middle line was drawn at half the maximum but labelled ``round(max / 2)`` (a line at
    2.5 labelled 2, at 0.5 labelled 0)."""
    import re

    chart = size_chart({2: top})  # one bar of ``top`` clusters: the axis goes up to it
    lines = re.findall(r'<line x1="[\d.]+" y1="([\d.]+)"[^>]*stroke-dasharray', chart)
    labels = re.findall(r'text-anchor="end"[^>]*>([\d,]+)</text>', chart)
    baseline = float(re.findall(r'<line x1="[\d.]+" y1="([\d.]+)"', chart)[0])
    tallest = baseline - min(float(y) for y in lines)
    assert len(lines) == len(labels) >= 1
    for y, label in zip(lines, labels, strict=True):
        value = int(label.replace(",", ""))
        assert value > 0
        assert abs((baseline - float(y)) - tallest * value / top) < 0.2, (top, value)
