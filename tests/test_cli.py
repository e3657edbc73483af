"""The ``dedup-store`` command line against the real PostgreSQL test database.

Each test works in its own schema (the ``schema`` fixture of conftest), dropped afterwards.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from dedup_store.cli import app

pytestmark = pytest.mark.db
EXAMPLES_DIR = str(Path(__file__).resolve().parents[1] / "examples")

VOCABULARY = [f"term{i}" for i in range(5000)]


def words(seed: int, n: int = 120) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(VOCABULARY) for _ in range(n)]


def near_copy(original: list[str], position: int = 60) -> list[str]:
    copy = list(original)
    copy[position] = "replaced"
    return copy


@pytest.fixture
def cli(schema: str, database_url: str) -> CliHelper:
    """Runs commands against a fresh schema (``schema`` from conftest, dropped afterwards)."""
    return CliHelper(schema, database_url)


class CliHelper:
    """Runs commands against one schema of the test database."""

    def __init__(self, schema: str, url: str) -> None:
        self.schema = schema
        self.url = url
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | bytes | None = None, url: str = "") -> Result:
        env = {"DEDUP_STORE_URL": None, "DEDUP_STORE_SCHEMA": None}
        argv = ["--db-url", url or self.url, "--schema", self.schema, *args]
        return self.runner.invoke(app, argv, input=input, env=env)

    def ok(self, *args: str, input: str | bytes | None = None) -> Result:
        result = self(*args, input=input)
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        return result

    def json(self, *args: str, input: str | bytes | None = None) -> Any:
        return json.loads(self.ok(*args, "--format", "json", input=input).stdout)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """Two near-duplicates (one in a subdirectory), an exact copy and an unrelated text."""
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    base = words(1)
    (root / "a.txt").write_text(" ".join(base))
    (root / "sub" / "b.txt").write_text(" ".join(near_copy(base)))
    (root / "copy.txt").write_text(" ".join(base))
    (root / "other.txt").write_text(" ".join(words(2)))
    (root / "ignored.bin").write_text(" ".join(words(3)))
    (root / "README.md").write_text(" ".join(words(4)))
    return root


def ingest_json(cli: CliHelper, *args: str, input: str | bytes | None = None) -> dict[str, object]:
    result = cli.ok("ingest", "--json", *args, input=input)
    summary = json.loads(result.stdout)
    assert isinstance(summary, dict)
    return summary


def test_version_names_the_kernels_in_use() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("dedup-store 0.1.0\n")
    assert "fingerprint kernels: compiled" in result.output


def test_init_stores_params_and_refuses_other_ones(cli: CliHelper) -> None:
    info = cli.json("init", "--threshold", "0.7", "--num-perm", "96", "--no-stopwords")
    assert isinstance(info, dict)
    assert info["params"]["threshold"] == 0.7
    assert info["params"]["stopwords"] is False
    assert cli.json("stats")["params"]["num_perm"] == 96
    again = cli("init", "--threshold", "0.7", "--num-perm", "96", "--no-stopwords")
    assert again.exit_code == 0
    refused = cli("init", "--threshold", "0.7", "--num-perm", "128", "--no-stopwords")
    assert refused.exit_code == 3
    assert refused.stderr.strip() == (
        f"error: store {cli.schema!r} was created with other parameters: "
        "fingerprint parameters differ (num_perm: 96 != 128); open it with the stored "
        "parameters (omit them), or use another schema"
    )
    assert "Traceback" not in refused.output


def test_init_rejects_invalid_params(cli: CliHelper) -> None:
    result = cli("init", "--simhash-k", "4", "--simhash-blocks", "4")
    assert result.exit_code == 2
    assert "simhash_blocks must exceed simhash_k" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_commands_need_an_initialized_store(cli: CliHelper) -> None:
    result = cli("stats")
    assert result.exit_code == 6
    assert "dedup-store init" in result.stderr


def test_ingest_directory_finds_duplicates_and_is_idempotent(cli: CliHelper, corpus: Path) -> None:
    first = ingest_json(cli, str(corpus))
    assert first["documents"] == 4
    assert first["new"] == 2
    assert first["exact_duplicates"] == 1
    assert first["near_duplicates"] == 1
    assert first["errors"] == 0
    assert first["clusters"] == 2  # single documents included
    assert first["duplicate_clusters"] == 1  # what the clusters command lists
    again = ingest_json(cli, str(corpus))
    assert (again["documents"], again["skipped"], again["new"]) == (4, 4, 0)
    exported = cli.json("export")
    assert isinstance(exported, list)
    assert sorted(d["id"] for d in exported) == ["a.txt", "copy.txt", "other.txt", "sub/b.txt"]
    clusters = cli.json("clusters")
    assert isinstance(clusters, list)
    assert [sorted(c["members"]) for c in clusters] == [["a.txt", "copy.txt", "sub/b.txt"]]
    assert clusters[0]["representative"] == "a.txt"
    singletons = cli.json("clusters", "--min-size", "1")
    assert isinstance(singletons, list)
    assert sorted(c["size"] for c in singletons) == [1, 3]


def test_ingest_glob_limits_directory_files(cli: CliHelper, corpus: Path) -> None:
    summary = ingest_json(cli, str(corpus), "--glob", "*.md,*.bin")
    assert summary["documents"] == 2


def test_ingest_update_replaces_known_ids(cli: CliHelper, corpus: Path) -> None:
    ingest_json(cli, str(corpus))
    (corpus / "other.txt").write_text(" ".join(near_copy(words(1), 30)))
    summary = ingest_json(cli, str(corpus), "--update")
    assert (summary["updated"], summary["skipped"]) == (1, 3)  # the others are unchanged
    similar = cli.json("similar", "other.txt")
    assert isinstance(similar, list)
    assert "a.txt" in {m["external_id"] for m in similar}


def test_human_summary_and_tables(cli: CliHelper, corpus: Path) -> None:
    summary = cli.ok("ingest", str(corpus)).stdout
    lines = dict(line.split(None, 1) for line in summary.splitlines())
    assert lines["documents"].strip() == "4"
    assert lines["near_duplicates"].strip() == "1"
    assert "documents_per_second" in lines
    table = cli.ok("clusters").stdout.splitlines()
    assert table[0].split("\t") == ["cluster_id", "size", "canonical", "members"]
    assert table[1].split("\t")[1:3] == ["3", "a.txt"]


def test_check_by_argument_file_and_stdin(cli: CliHelper, corpus: Path, tmp_path: Path) -> None:
    ingest_json(cli, str(corpus))
    probe = " ".join(near_copy(words(1), 90))
    by_arg = cli.json("check", probe)
    assert isinstance(by_arg, dict)
    assert by_arg["status"] == "near_duplicate"
    # copy.txt is an exact copy of a.txt: other texts match the first of that exact group
    assert {m["external_id"] for m in by_arg["matches"]} >= {"a.txt"}
    (tmp_path / "probe.txt").write_text(probe)
    assert cli.json("check", "--file", str(tmp_path / "probe.txt")) == by_arg
    assert cli.json("check", input=probe) == by_arg
    fresh = cli.json("check", " ".join(words(99)))
    assert fresh == {"status": "new", "cluster_id": None, "matches": []}
    human = cli.ok("check", probe).stdout
    assert "near_duplicate" in human
    stats = cli.ok("stats", "--format", "json")
    assert json.loads(stats.stdout)["documents"] == 4
    storage = json.loads(stats.stdout)["storage"]
    assert storage["tables"] > 0 and 0 < storage["indexes"] < storage["shared_buffers"]
    assert "shared_buffers" not in stats.stderr  # a small store: no note


def test_check_rejects_bad_utf8_on_stdin(cli: CliHelper, corpus: Path) -> None:
    ingest_json(cli, str(corpus))
    result = cli("check", input=b"caf\xe9 au lait")
    assert result.exit_code == 4
    assert "<stdin>:1: invalid UTF-8" in result.stderr


def test_similar_and_cluster(cli: CliHelper, corpus: Path) -> None:
    ingest_json(cli, str(corpus))
    similar = cli.json("similar", "sub/b.txt")
    assert isinstance(similar, list)
    assert {m["external_id"] for m in similar} == {"a.txt", "copy.txt"}  # a.txt's copy too
    assert all(m["method"] in {"exact", "minhash", "simhash", "containment"} for m in similar)
    cluster = cli.json("cluster", "other.txt")
    assert isinstance(cluster, dict)
    assert (cluster["members"], cluster["size"]) == (["other.txt"], 1)
    csv_lines = cli.ok("similar", "sub/b.txt", "--format", "csv").stdout.splitlines()
    assert csv_lines[0] == "external_id,method,jaccard,containment,hamming,meta_score,score"
    assert len(csv_lines) == 3
    (best,) = cli.json("similar", "copy.txt", "--limit", "1")
    (second,) = cli.json("similar", "copy.txt", "--limit", "1", "--offset", "1")
    assert (best["external_id"], best["method"]) == ("a.txt", "exact")
    assert second["external_id"] == "sub/b.txt"


def test_unknown_id_exit_code(cli: CliHelper, corpus: Path) -> None:
    ingest_json(cli, str(corpus))
    for command in ("similar", "cluster", "delete"):
        result = cli(command, "no/such/doc")
        assert result.exit_code == 5, command
        assert result.stderr.strip() == "error: unknown document id: 'no/such/doc'"


def test_pairs_jsonl(cli: CliHelper, corpus: Path) -> None:
    ingest_json(cli, str(corpus))
    lines = cli.ok("pairs", "--format", "jsonl").stdout.splitlines()
    pairs = [json.loads(line) for line in lines]
    assert {frozenset((p["a"], p["b"])) for p in pairs} >= {
        frozenset(("a.txt", "copy.txt")),
        frozenset(("a.txt", "sub/b.txt")),
    }
    for pair in pairs:
        assert {"a", "b", "method", "jaccard", "hamming", "containment", "found_at"} <= set(pair)
        assert 0.8 <= pair["jaccard"] <= 1.0
        assert 0 <= pair["hamming"] <= 3
    exact = [p for p in pairs if {p["a"], p["b"]} == {"a.txt", "copy.txt"}]
    assert exact[0]["method"] == "exact"
    assert all("via_exact_of" not in p for p in pairs)
    lines = cli.ok("pairs", "--expand", "--format", "jsonl").stdout.splitlines()
    expanded = {frozenset((p["a"], p["b"])): p for p in map(json.loads, lines)}
    assert len(expanded) == len(pairs) + 1
    implied = expanded[frozenset(("copy.txt", "sub/b.txt"))]
    assert implied["via_exact_of"] and implied["method"] != "exact"
    assert not any(p["via_exact_of"] for p in expanded.values() if p is not implied)


def test_delete_splits_and_all_or_nothing(cli: CliHelper, corpus: Path) -> None:
    ingest_json(cli, str(corpus))
    refused = cli("delete", "a.txt", "missing")
    assert refused.exit_code == 5
    assert cli.json("stats")["documents"] == 4
    assert cli.json("delete", "copy.txt", "a.txt") == {"deleted": 2}
    assert cli.json("stats")["documents"] == 2
    assert cli.json("clusters") == []
    assert "no clusters" in cli.ok("clusters").stderr


def test_jsonl_and_csv_with_metadata(cli: CliHelper, tmp_path: Path) -> None:
    base = words(7)
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text(
        json.dumps({"key": "j1", "body": " ".join(base), "lang": "en"})
        + "\n"
        + json.dumps({"key": "j2", "body": " ".join(words(8))})
        + "\n"
    )
    csv_path = tmp_path / "docs.csv"
    csv_path.write_text(f'key,source,body\nc1,web,"{" ".join(near_copy(base))}"\n')
    summary = ingest_json(
        cli, str(jsonl), str(csv_path), "--id-field", "key", "--text-field", "body"
    )
    assert (summary["documents"], summary["near_duplicates"]) == (3, 1)
    lines = cli.ok("export", "--format", "jsonl").stdout.splitlines()
    meta = {d["id"]: d["meta"] for d in map(json.loads, lines)}
    assert meta["j1"] == {"lang": "en"}
    assert meta["c1"] == {"source": "web"}
    assert meta["j2"] in (None, {})


def test_ingest_stdin(cli: CliHelper) -> None:
    records = [{"id": f"s{i}", "text": " ".join(words(20 + i))} for i in range(3)]
    body = "".join(json.dumps(r) + "\n" for r in records)
    assert ingest_json(cli, "-", input=body)["new"] == 3
    text_summary = ingest_json(cli, "-", "--format", "text", input=" ".join(words(40)))
    assert text_summary["new"] == 1
    assert "stdin" in {d["id"] for d in cli.json("export")}


def bad_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"id": "g1", "text": " ".join(words(11))})
        + "\n"
        + '{"id": "broken", "text": \n'
        + json.dumps({"id": "g2", "text": " ".join(words(12))})
        + "\n"
    )
    return path


def test_bad_jsonl_line_stops_with_file_and_line(cli: CliHelper, tmp_path: Path) -> None:
    path = bad_jsonl(tmp_path)
    result = cli("ingest", str(path))
    assert result.exit_code == 4
    assert result.stderr.strip().startswith(f"error: {path}:2: malformed JSON")
    assert "Traceback" not in result.output


def test_bad_jsonl_line_skipped_and_reported(cli: CliHelper, tmp_path: Path) -> None:
    path = bad_jsonl(tmp_path)
    result = cli.ok("ingest", str(path), "--on-error", "skip", "--json")
    summary = json.loads(result.stdout)
    assert (summary["new"], summary["errors"]) == (2, 1)
    assert f"skipped: {path}:2: malformed JSON" in result.stderr
    assert sorted(d["id"] for d in cli.json("export")) == ["g1", "g2"]


def test_empty_document_skipped_by_the_store(cli: CliHelper, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        json.dumps({"id": "empty", "text": "  "})
        + "\n"
        + json.dumps({"id": "full", "text": " ".join(words(13))})
        + "\n"
    )
    stopped = cli("ingest", str(path))
    assert stopped.exit_code == 4
    skipped = cli.ok("ingest", str(path), "--on-error", "skip", "--json")
    assert json.loads(skipped.stdout)["errors"] == 1
    assert "empty" in skipped.stderr


def test_password_never_printed(cli: CliHelper) -> None:
    url = "postgresql://postgres:Sup3rSecretPw@127.0.0.1:1/test"
    result = cli("stats", url=url)
    assert result.exit_code == 7
    assert "Sup3rSecretPw" not in result.output
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    status = cli("db", "status", url=url)
    assert status.exit_code == 0
    assert "Sup3rSecretPw" not in status.output
    assert "postgres:***@127.0.0.1:1/test" in status.stdout
    other = cli("stats", url="mysql://app:b@db.internal/cms")
    assert other.exit_code == 7
    assert other.stderr.strip() == (
        "error: not a PostgreSQL URL: mysql://app:***@db.internal/cms "
        "(expected postgresql://user@host:port/database)"
    )


def test_debug_shows_the_exception(cli: CliHelper) -> None:
    result = cli.runner.invoke(
        app, ["--db-url", cli.url, "--schema", cli.schema, "--debug", "stats"]
    )
    assert result.exit_code != 0
    assert type(result.exception).__name__ == "StoreNotInitializedError"


def test_db_upgrade_and_current(cli: CliHelper) -> None:
    before = cli.ok("db", "current").stdout
    assert before.startswith("none")
    upgraded = cli.ok("db", "upgrade").stdout
    assert cli.schema in upgraded
    after = cli.ok("db", "current").stdout
    assert "up to date" in after


def test_python_dash_m_entry_point() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dedup_store", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert "ingest" in result.stdout


def test_init_compares_only_the_options_given(cli: CliHelper) -> None:
    made = cli.json("init", "--containment-merges", "--hot-key-limit", "20", "--format", "json")
    assert isinstance(made, dict)
    assert made["params"]["containment_merges"] is True
    assert made["params"]["hot_key_limit"] == 20
    again = cli.json("init", "--hot-key-limit", "20", "--format", "json")
    assert isinstance(again, dict) and again["params"] == made["params"]
    refused = cli("init", "--hot-key-limit", "30")
    assert refused.exit_code == 3
    assert "hot_key_limit: 20 != 30" in refused.stderr


def test_init_with_tfidf_weights_dedups_the_examples_as_counts_do(cli: CliHelper) -> None:
    made = cli.json("init", "--simhash-weights", "tfidf-length", "--format", "json")
    assert isinstance(made, dict) and made["params"]["simhash_weights"] == "tfidf-length"
    summary = json.loads(cli.ok("ingest", "-q", "--json", EXAMPLES_DIR).stdout)
    assert (summary["exact_duplicates"], summary["near_duplicates"]) == (2, 7)
    refused = cli("init", "--simhash-weights", "count")
    assert refused.exit_code == 3
    assert "simhash_weights: 'tfidf-length' != 'count'" in refused.stderr
    spark = cli("ingest", "--engine", "spark", EXAMPLES_DIR)
    assert spark.exit_code == 2 and "simhash_weights tfidf-length" in spark.stderr


def test_ingest_loads_an_empty_store_in_bulk_unless_told_not_to(cli: CliHelper) -> None:
    first = json.loads(cli.ok("ingest", "-q", "--json", EXAMPLES_DIR).stdout)
    assert first["bulk"] is True and first["index_seconds"] > 0 and first["new"] > 0
    again = json.loads(cli.ok("ingest", "-q", "--json", "--bulk", EXAMPLES_DIR).stdout)
    assert again["bulk"] is True and again["skipped"] == first["documents"]
    refused = cli("ingest", "--bulk", "--update", EXAMPLES_DIR)
    assert refused.exit_code == 2 and "--update" in refused.stderr
    stats = cli.json("stats")
    assert stats["documents"] == first["documents"] - first["errors"]


def test_db_settle_moves_the_recent_documents_into_the_settled_tier(
    cli: CliHelper, corpus: Path
) -> None:
    cli.ok("ingest", "-q", "--no-bulk", str(corpus))
    assert cli.json("stats")["recent_documents"] == 4
    settled = cli.json("db", "settle")
    assert settled["moved"] == 4 and settled["settled_through"] == 4
    assert cli.json("stats")["recent_documents"] == 0
    again = cli.json("db", "settle")
    assert again["moved"] == 0 and again["settled_through"] == 4


def test_db_tune_prints_settings_sized_for_the_named_machine(cli: CliHelper) -> None:
    conf = cli.ok("db", "tune", "--memory", "64GB", "--cores", "16").stdout
    settings = dict(
        line.split("#")[0].strip().split(" = ")
        for line in conf.splitlines()
        if not line.startswith("#")
    )
    assert settings["shared_buffers"] == "'8GB'"
    assert settings["maintenance_work_mem"] == "'2GB'"
    assert settings["max_parallel_maintenance_workers"] == "'4'"
    assert "wal_level" not in settings  # only the embedded server, which has no replicas
    refused = cli("db", "tune", "--memory", "lots")
    assert refused.exit_code == 2 and "not a size" in refused.stderr


def test_metadata_sets_show_their_scores(cli: CliHelper, tmp_path: Path) -> None:
    made = cli.json(
        "init", "--meta-fields", "tags, keywords", "--meta-weight", "0.15", "--threshold", "0.9",
        "--format", "json",
    )  # fmt: skip
    assert isinstance(made, dict) and made["params"]["meta_fields"] == ["tags", "keywords"]
    base = words(1)
    lines = [
        {"id": "original", "text": " ".join(base), "tags": ["flood", "dam"]},
        {"id": "retagged", "text": " ".join(base), "tags": ["baking"]},
        {"id": "edited", "text": " ".join(near_copy(base)), "tags": ["Dam", "flood"]},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    summary = ingest_json(cli, "-q", str(path))
    assert (summary["new"], summary["near_duplicates"]) == (2, 1)
    (pair,) = [
        json.loads(line) for line in cli.ok("pairs", "--format", "jsonl").stdout.splitlines()
    ]
    assert (pair["a"], pair["b"], pair["meta_score"]) == ("original", "edited", 1.0)
    assert pair["score"] == pytest.approx(0.85 * pair["jaccard"] + 0.15)
    header = cli.ok("pairs", "--format", "csv").stdout.splitlines()[0]
    columns = "a,b,method,jaccard,containment,hamming,meta_score,score,found_at,excerpt,verdict"
    assert header == columns
    (similar,) = cli.json("similar", "edited")
    assert similar["score"] == pair["score"] and similar["meta_score"] == 1.0
    exported = {d["id"]: d for d in cli.json("export")}
    assert exported["edited"]["match"] == "original"
    assert exported["edited"]["score"] == pair["score"]
    assert exported["retagged"]["match"] is None
    checked = cli.json("check", " ".join(base), "--meta", '{"tags": "baking"}')
    assert checked["status"] == "exact_duplicate"
    assert [m["external_id"] for m in checked["matches"]] == ["retagged"]
    assert cli("check", "x", "--meta", "[1]").exit_code == 2
    spark = cli("ingest", "--engine", "spark", str(path))
    assert spark.exit_code == 2 and "meta_fields tags,keywords" in spark.stderr
