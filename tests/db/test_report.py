"""``DedupStore.report`` and ``dedup-store report`` on a store of real text: every cluster and
pair of the store, in the report's order, with canonical documents, verdicts, texts or not, and
one cluster alone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from dedup_store import DedupStore, UnknownDocumentError
from dedup_store.cli import app
from tests.report_html import read_report

pytestmark = pytest.mark.db

LICENSES = Path("/usr/share/common-licenses")
BASH = Path("/usr/share/doc/bash/copyright").read_text(encoding="utf-8")
GPL = (LICENSES / "GPL-3").read_text(encoding="utf-8")
APACHE = (LICENSES / "Apache-2.0").read_text(encoding="utf-8")
MPL = (LICENSES / "MPL-2.0").read_text(encoding="utf-8")
EDIT = ("the Bourne Again SHell", "the Bourne Again Shell, edited by hand")


def documents() -> list[tuple[str, str]]:
    """bash's copyright file with an edited and an exact copy (one cluster of three); the GPL
    and an excerpt of it (a pair across clusters); the Apache and Mozilla licences alone."""
    assert EDIT[0] in BASH
    section = GPL[GPL.index("  0. Definitions.") : GPL.index("  2. Basic Permissions.")]
    return [
        ("bash", BASH),
        ("bash-edited", BASH.replace(*EDIT)),
        ("bash-copy", BASH),
        ("gpl-3", GPL),
        ("gpl-3-definitions", section),
        ("apache-2", APACHE),
        ("mpl-2", MPL),
    ]


@pytest.fixture
def store(engine: Engine, schema: str) -> Iterator[DedupStore]:
    with DedupStore(engine, schema=schema, keep_text=True) as s:
        assert s.ingest(documents()).errors == 0
        yield s


def test_the_report_holds_every_cluster_and_pair_of_the_store(
    store: DedupStore, tmp_path: Path
) -> None:
    summary = store.report(tmp_path / "report.html")
    data = read_report(summary.path)
    clusters = list(store.clusters())
    assert [{m[0] for m in c["members"]} for c in data.clusters] == [
        set(c.members) for c in sorted(clusters, key=lambda c: -c.size)
    ]
    stored = {(p.a, p.b): p for p in store.pairs()}
    shown = {(p["a"], p["b"]): p for p in data.pairs}
    assert shown.keys() == stored.keys()
    for key, pair in stored.items():
        assert shown[key]["m"] == pair.method.value
        assert shown[key]["j"] == pytest.approx(pair.jaccard)
        assert shown[key]["c"] == pytest.approx(pair.containment)
        assert shown[key]["h"] == pair.hamming
    assert (summary.clusters, summary.pairs) == (len(clusters), len(stored))
    assert summary.pairs_with_texts == len(stored) and summary.pairs_over_budget == 0
    assert summary.bytes == summary.path.stat().st_size


def test_a_cluster_shows_its_members_canonical_document_and_pairs(
    store: DedupStore, tmp_path: Path
) -> None:
    data = read_report(store.report(tmp_path / "report.html").path)
    bash = data.clusters[0]
    assert [m[0] for m in bash["members"]] == ["bash", "bash-edited", "bash-copy"]
    assert (bash["canonical"], bash["chosen"]) == ("bash", "oldest")
    assert [m[4] for m in bash["members"]] == [1, 0, 0]
    length, words = bash["members"][0][2:4]
    assert 500 < words < length < len(BASH)  # of the canonical text: stop words dropped
    edited = data.pair("bash", "bash-edited")
    assert edited["m"] == "minhash" and edited["t"] == "text"
    inserted = " ".join(s[-1] for s in edited["d"] if s[0] in (1, 3))
    assert "edited by hand" in inserted
    assert {p["m"] for p in bash["pairs"]} == {"exact", "minhash"}


def test_an_excerpt_is_a_pair_across_clusters(store: DedupStore, tmp_path: Path) -> None:
    data = read_report(store.report(tmp_path / "report.html").path)
    across = [item for item in data.items if item["k"] == "p"]
    assert [(p["a"], p["b"], p["m"]) for p in across] == [
        ("gpl-3", "gpl-3-definitions", "containment")
    ]
    gpl = store.cluster("gpl-3").cluster_id
    excerpt = store.cluster("gpl-3-definitions").cluster_id
    assert (across[0]["ca"], across[0]["cb"]) == (gpl, excerpt)
    assert data.items[-1] == across[0]  # after the clusters


def test_verdicts_are_shown_and_split_or_join_clusters(store: DedupStore, tmp_path: Path) -> None:
    store.review("bash", "bash-edited", "not_duplicate", note="a fork", by="ann")
    store.review("apache-2", "mpl-2", "duplicate", note="same policy", by="bob")
    summary = store.report(tmp_path / "report.html")
    data = read_report(summary.path)
    vetoed = data.pair("bash", "bash-edited")
    assert vetoed["v"][:3] == ["not_duplicate", "a fork", "ann"]
    assert data.pair("bash", "bash-copy")["v"] is None
    across = {(p["a"], p["b"]) for p in data.items if p["k"] == "p"}
    assert across == {("bash", "bash-edited"), ("gpl-3", "gpl-3-definitions")}  # split
    joined = next(c for c in data.clusters if c["members"][0][0] == "apache-2")
    assert [m[0] for m in joined["members"]] == ["apache-2", "mpl-2"]
    (confirmed,) = joined["pairs"]
    assert (confirmed["m"], confirmed["j"]) == ("confirmed", None)
    assert confirmed["v"][:3] == ["duplicate", "same policy", "bob"]
    assert summary.pairs == len(list(store.pairs())) + 1
    html = summary.path.read_text("utf-8")
    assert '<div class="figure"><b>1</b><span>confirmed by a person</span>' in html
    assert '<div class="figure"><b>1</b><span>declared not duplicates</span>' in html


def test_a_verdict_on_an_exact_copy_holds_for_its_texts_edges(
    store: DedupStore, tmp_path: Path
) -> None:
    store.review("bash-copy", "bash-edited", "not_duplicate", note="a fork of the copy")
    data = read_report(store.report(tmp_path / "report.html").path)
    edge = data.pair("bash", "bash-edited")  # the stored edge: from the first copy
    assert edge["v"][:2] == ["not_duplicate", "a fork of the copy"]
    assert edge["ca"] != edge["cb"]  # a pair across clusters: the cluster split
    assert edge["x"] == ["bash-copy", "bash-edited"]  # cut by that verdict, the weaker link
    assert data.pair("bash", "bash-copy")["v"] is None


def test_a_verdict_that_cut_edges_names_them(store: DedupStore, tmp_path: Path) -> None:
    """Exact copies judged apart: the verdict cuts their link, and the pair's view says so."""
    store.review("bash", "bash-copy", "not_duplicate", note="two packages")
    data = read_report(store.report(tmp_path / "report.html").path)
    judged = data.pair("bash", "bash-copy")
    assert judged["v"][0] == "not_duplicate"
    assert judged["v"][4] == [["bash", "bash-copy"]]
    assert judged["x"] == ["bash", "bash-copy"]
    assert judged["ca"] != judged["cb"]
    assert "x" not in data.pair("bash", "bash-edited")


def test_one_cluster_alone(store: DedupStore, tmp_path: Path) -> None:
    data = read_report(store.report(tmp_path / "bash.html", cluster="bash-copy").path)
    assert [c["id"] for c in data.clusters] == [store.cluster("bash").cluster_id]
    assert len(data.items) == 1 and len(data.pairs) == 2
    excerpt = read_report(store.report(tmp_path / "x.html", cluster="gpl-3-definitions").path)
    assert [len(c["members"]) for c in excerpt.clusters] == [1]  # alone in its cluster
    assert [(p["a"], p["b"]) for p in excerpt.pairs] == [("gpl-3", "gpl-3-definitions")]
    with pytest.raises(UnknownDocumentError):
        store.report(tmp_path / "none.html", cluster="no-such-document")
    assert not (tmp_path / "none.html").exists()


def test_the_overview_counts_what_the_report_lists(store: DedupStore, tmp_path: Path) -> None:
    html = store.report(tmp_path / "report.html").path.read_text("utf-8")
    stats = store.stats()
    assert f'<div class="figure"><b>{stats.documents}</b><span>documents</span>' in html
    for method, count in stats.edges_by_method.items():
        assert f"{method}</td><td>{count:,}</td>" in html
    assert html.count('aria-label="Clusters by size"') == 1
    assert html.count('aria-label="Pairs by similarity"') == 1


def test_a_store_without_texts_reports_scores_only(
    engine: Engine, schema: str, tmp_path: Path
) -> None:
    with DedupStore(engine, schema=schema) as store:
        store.ingest(documents())
        summary = store.report(tmp_path / "report.html")
    data = read_report(summary.path)
    assert {p["t"] for p in data.pairs} == {"none"}
    assert all(p["j"] is not None for p in data.pairs)
    assert summary.pairs_with_texts == 0
    assert "init --keep-text" in summary.path.read_text("utf-8")


def test_the_texts_stop_at_the_byte_budget(store: DedupStore, tmp_path: Path) -> None:
    whole = store.report(tmp_path / "whole.html").bytes
    summary = store.report(tmp_path / "report.html", max_bytes=whole - 5000)
    assert summary.bytes <= whole - 5000
    data = read_report(summary.path)
    assert [p["t"] for p in data.pairs] == ["text", "text", "budget"]  # the GPL's is the largest
    assert data.pair("gpl-3", "gpl-3-definitions")["c"] > 0.8


def cli(schema: str, url: str, *args: str) -> tuple[int, str, str]:
    env = {"DEDUP_STORE_URL": None, "DEDUP_STORE_SCHEMA": None}
    result = CliRunner().invoke(app, ["--db-url", url, "--schema", schema, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_the_report_command(
    store: DedupStore, schema: str, database_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    code, stdout, stderr = cli(schema, database_url, "report", "--out", str(out), "-f", "json")
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["path"] == str(out) and summary["bytes"] == out.stat().st_size
    assert summary["clusters"] == len(read_report(out).clusters)
    one = tmp_path / "one.html"
    code, stdout, _ = cli(
        schema, database_url, "report", "-o", str(one), "--cluster", "bash", "--max-bytes", "1MB"
    )
    assert code == 0 and "clusters" in stdout
    assert len(read_report(one).clusters) == 1
    code, _, stderr = cli(schema, database_url, "report", "-o", str(one), "--cluster", "nope")
    assert code == UnknownDocumentError.exit_code and "nope" in stderr
    code, _, stderr = cli(schema, database_url, "report", "-o", str(one), "--max-bytes", "lots")
    assert code == 2 and "--max-bytes" in stderr
