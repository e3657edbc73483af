"""The reviewer's commands against the real PostgreSQL test database: explain, review, verdicts,
canonical, and the stricter and pending views of clusters and pairs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import CliHelper

pytestmark = pytest.mark.db

LICENCE = Path("/usr/share/common-licenses/GPL-3")


@pytest.fixture
def cli(schema: str, database_url: str) -> CliHelper:
    return CliHelper(schema, database_url)


def licence_copies(tmp_path: Path) -> Path:
    """The GPL 3 as shipped, an edited copy (a few words changed), and an unrelated text."""
    original = LICENCE.read_text(encoding="utf-8")
    edited = original.replace("freedom to share and change", "liberty to share and alter", 1)
    assert edited != original
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "gpl.txt").write_text(original, encoding="utf-8")
    (folder / "gpl-edited.txt").write_text(edited, encoding="utf-8")
    (folder / "other.txt").write_text(
        Path("/usr/share/common-licenses/Apache-2.0").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    return folder


def test_explain_shows_the_changed_words_of_a_store_that_keeps_texts(
    cli: CliHelper, tmp_path: Path
) -> None:
    folder = licence_copies(tmp_path)
    made = json.loads(cli.ok("init", "--keep-text", "--format", "json").stdout)
    assert made["keep_text"] is True
    cli.ok("ingest", str(folder))
    assert cli.json("stats")["settings"]["keep_text"] is True
    found = cli.json("explain", "gpl.txt", "gpl-edited.txt")
    assert found["method"] == "minhash" and found["found_by"]
    assert 0.95 < found["jaccard"] < 1 and found["same_cluster"]
    changed = [r for r in found["alignment"]["runs"] if r["kind"] != "equal"]
    assert changed
    removed = " ".join(r["a_text"] for r in changed)
    assert "freedom" in removed and "change" in removed
    plain = cli.ok("explain", "gpl.txt", "gpl-edited.txt").stdout
    assert "[-" in plain and "{+" in plain and "liberty" in plain


def test_explain_takes_the_texts_from_files_when_the_store_keeps_none(
    cli: CliHelper, tmp_path: Path
) -> None:
    folder = licence_copies(tmp_path)
    cli.ok("ingest", str(folder))
    found = cli.json("explain", "gpl.txt", "other.txt")
    assert found["alignment"] is None and found["method"] is None
    assert "not kept" in cli.ok("explain", "gpl.txt", "other.txt").stdout
    given = cli.json(
        "explain", "gpl.txt", "gpl-edited.txt",
        "--text-a", str(folder / "gpl.txt"), "--text-b", str(folder / "gpl-edited.txt"),
    )  # fmt: skip
    assert given["alignment"]["words_a"] > 5000
    missing = cli("explain", "gpl.txt", "nobody")
    assert missing.exit_code == 5 and "nobody" in missing.stderr


def test_review_splits_and_joins_and_verdicts_lists_them(cli: CliHelper, tmp_path: Path) -> None:
    folder = licence_copies(tmp_path)
    cli.ok("ingest", str(folder))
    (pair,) = cli.json("pairs")
    assert {pair["a"], pair["b"]} == {"gpl.txt", "gpl-edited.txt"} and pair["verdict"] is None
    assert [p["a"] for p in cli.json("pairs", "--pending")] == [pair["a"]]
    said = cli.json(
        "review",
        "gpl.txt",
        "gpl-edited.txt",
        "--not-duplicate",
        "--note",
        "versions",
        "--by",
        "ana",
    )
    assert said["verdict"] == "not_duplicate" and said["cluster_a"] != said["cluster_b"]
    assert cli.json("clusters") == []
    assert cli.json("pairs")[0]["verdict"] == "not_duplicate"
    assert cli.json("pairs", "--pending") == []
    joined = cli.json("review", "gpl.txt", "other.txt", "--duplicate")
    assert joined["cluster_a"] == joined["cluster_b"]
    listed = cli.json("verdicts")
    assert [({v["a"], v["b"]}, v["verdict"]) for v in listed] == [
        ({"gpl.txt", "other.txt"}, "duplicate"),
        ({"gpl.txt", "gpl-edited.txt"}, "not_duplicate"),
    ]
    assert listed[1]["note"] == "versions" and listed[1]["reviewer"] == "ana"
    assert cli.json("review", "gpl.txt", "gpl-edited.txt", "--clear")["cleared"] is True
    assert len(cli.json("cluster", "gpl.txt")["members"]) == 3
    both = cli("review", "gpl.txt", "other.txt", "--duplicate", "--clear")
    assert both.exit_code == 2 and "one of" in both.stderr


def test_canonical_rule_and_choice(cli: CliHelper, tmp_path: Path) -> None:
    folder = licence_copies(tmp_path)
    cli.ok("init", "--canonical", "longest")
    cli.ok("ingest", str(folder))
    (found,) = cli.json("clusters")
    assert found["canonical"] == "gpl.txt"  # the edit is shorter by a few letters
    assert cli.json("canonical")["canonical_rule"] == "longest"
    chosen = cli.json("canonical", "gpl-edited.txt", "--by", "editor")
    assert chosen["canonical"] == "gpl-edited.txt"
    assert cli.json("canonical", "--rule", "oldest")["canonical_rule"] == "oldest"
    assert cli.json("cluster", "gpl.txt")["canonical"] == "gpl-edited.txt"
    bad = cli("canonical", "--rule", "newest")
    assert bad.exit_code == 2 and "unknown canonical rule" in bad.stderr


def test_stricter_clusters_and_pairs(cli: CliHelper, tmp_path: Path) -> None:
    folder = licence_copies(tmp_path)
    cli.ok("ingest", str(folder))
    (pair,) = cli.json("pairs")
    above, below = (round(pair["score"] - 0.001, 4), min(1.0, round(pair["score"] + 0.001, 4)))
    assert len(cli.json("clusters", "--min-similarity", str(above))) == 1
    assert cli.json("clusters", "--min-similarity", str(below)) == []
    assert len(cli.json("pairs", "--min-similarity", str(above))) == 1
    assert cli.json("pairs", "--min-similarity", str(below)) == []


def test_not_duplicate_parts_exact_copies_and_names_the_cut(cli: CliHelper) -> None:
    """The sample corpus: vetoing every merging match of post-901 left it in a cluster of two
    with its exact copy, and a veto on two documents joined through others changed nothing."""
    from tests.test_cli import EXAMPLES_DIR

    cli.ok("ingest", EXAMPLES_DIR)
    members = cli.json("cluster", "post-901")["members"]
    assert len(members) == 4
    page = "pages/assignment-part-3.html"
    answer = cli.json("review", "post-901", page, "--not-duplicate")
    assert answer["cluster_a"] != answer["cluster_b"]
    assert {(c["a"], c["b"]) for c in answer["cut"]} >= {("post-901", page)}
    assert all(c["method"] in ("minhash", "simhash", "exact") for c in answer["cut"])
    for other in members:
        if other != "post-901":
            cli.ok("review", "post-901", other, "--not-duplicate")
    assert cli.json("cluster", "post-901")["members"] == ["post-901"]
    table = cli.ok("review", "post-901", page, "--not-duplicate").stdout
    assert " ~ " in table and "minhash" in table


def test_ingest_update_of_unchanged_files_keeps_the_cluster_ids(
    cli: CliHelper, tmp_path: Path
) -> None:
    """``ingest --update`` of the same files moved post-901's cluster from 37 to 138."""
    from tests.test_cli import EXAMPLES_DIR

    cli.ok("ingest", EXAMPLES_DIR)
    before = {c["representative"]: c for c in cli.json("clusters")}
    ids = {r["id"]: r["created_at"] for r in cli.json("export")}
    result = cli.ok("ingest", "--update", EXAMPLES_DIR)
    assert "unchanged (same text and metadata as stored): left as they were" in result.stderr
    assert {c["representative"]: c for c in cli.json("clusters")} == before
    after = {r["id"]: r["created_at"] for r in cli.json("export")}
    assert after == ids
    changed = tmp_path / "post.txt"  # a changed text is replaced
    changed.write_text("a text of its own, unlike anything in the sample corpus at all")
    cli.ok("ingest", str(changed))
    changed.write_text("another text of its own, still unlike anything in the sample corpus")
    summary = json.loads(cli.ok("ingest", "--update", "--json", str(changed)).stdout)
    assert summary["updated"] == 1


def test_the_oldest_of_one_batch_is_the_original_not_its_repost(cli: CliHelper) -> None:
    """Files are read originals first (``customization.txt`` before
    ``customization-repost.txt``), so the rule ``oldest`` names the originals."""
    from tests.test_cli import EXAMPLES_DIR

    cli.ok("ingest", EXAMPLES_DIR)
    for original in ("articles/customization.txt", "articles/man-ru.txt"):
        assert cli.json("cluster", original)["canonical"] == original
