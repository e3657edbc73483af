"""``ingest`` on bad and surprising input: every record is stored or reported with its place."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from dedup_store import cli as cli_module
from dedup_store.cli import ingest as cli_ingest
from tests.probes import modules_loaded
from tests.test_cli import CliHelper, ingest_json, words

pytestmark = pytest.mark.db


@pytest.fixture
def cli(schema: str, database_url: str) -> CliHelper:
    """Runs commands against a fresh schema (``schema`` from conftest, dropped afterwards)."""
    return CliHelper(schema, database_url)


DEEP = "[" * 100_000 + "]" * 100_000


def text(seed: int) -> str:
    return " ".join(words(seed))


def jsonl_line(doc_id: str, seed: int, **meta: Any) -> str:
    return json.dumps({"id": doc_id, "text": text(seed), **meta}, ensure_ascii=False)


# Each bad line between good ones; the reason is what the report must say about it.
BAD_LINES = [
    ('{"id": "lone\\ud800", "text": "%s"}', "not valid Unicode"),
    ('{"id": "meta", "text": "%s", "k": "\\udc80"}', "lone surrogate"),
    ('{"id": ' + "9" * 5000 + ', "text": "%s"}', "number too long"),
    ('{"id": "deep", "text": "%s", "m": ' + DEEP + "}", "nested too deeply"),
    ('{"id": "nan", "text": "%s", "score": NaN}', "JSON holds NaN"),
    (
        '{"id": "' + "文" * 1000 + '", "text": "%s"}',
        "(3000 bytes) is longer than the limit of 1024",
    ),
]


@pytest.fixture
def hostile_jsonl(tmp_path: Path) -> Path:
    lines = []
    for n, (template, _) in enumerate(BAD_LINES):
        lines.append(jsonl_line(f"good-{n}", 100 + n))
        lines.append(template % text(200 + n))
    lines.append(jsonl_line("good-last", 99))
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def skipped_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("skipped: ")]


def test_each_bad_record_is_skipped_with_its_line(cli: CliHelper, hostile_jsonl: Path) -> None:
    result = cli.ok("ingest", str(hostile_jsonl), "--on-error", "skip", "--json")
    summary = json.loads(result.stdout)
    assert (summary["new"], summary["errors"]) == (len(BAD_LINES) + 1, len(BAD_LINES))
    prefix = f"skipped: {hostile_jsonl}:"
    reports = {int(r[len(prefix) :].split(":")[0]): r for r in skipped_lines(result)}
    assert sorted(reports) == [2 * n + 2 for n in range(len(BAD_LINES))]
    for n, (_, reason) in enumerate(BAD_LINES):
        assert reason in reports[2 * n + 2]
        assert len(reports[2 * n + 2]) < 400  # the 5,000-digit and CJK ids are not echoed
    exported = {d["id"] for d in cli.json("export")}
    assert exported == {f"good-{n}" for n in range(len(BAD_LINES))} | {"good-last"}


@pytest.mark.parametrize("bad", range(len(BAD_LINES)))
def test_stop_names_the_bad_record(cli: CliHelper, tmp_path: Path, bad: int) -> None:
    template, reason = BAD_LINES[bad]
    path = tmp_path / "one.jsonl"
    path.write_text(jsonl_line("good", 1) + "\n" + template % text(2) + "\n")
    result = cli("ingest", str(path))
    assert result.exit_code == 4, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {path}:2: ") and reason in line
    assert len(line) < 400


def test_csv_unterminated_quote_is_not_silent(cli: CliHelper, tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    path.write_text(f'id,text\nc1,"{text(1)}"\nc2,"{text(2)}\nc3,{text(3)}\nc4,{text(4)}\n')
    stopped = cli("ingest", str(path))
    assert stopped.exit_code == 4
    assert f"{path}:3: a quoted field is never closed" in stopped.stderr
    result = cli.ok("ingest", str(path), "--on-error", "skip", "--json")
    assert json.loads(result.stdout)["errors"] == 1
    assert f"skipped: {path}:3: a quoted field is never closed" in result.stderr
    assert {d["id"] for d in cli.json("export")} == {"c1"}


def run_in_thread(cli: CliHelper, *args: str, seconds: float = 60) -> Result:
    box: list[Result] = []
    thread = threading.Thread(target=lambda: box.append(cli(*args)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "ingest hangs"
    return box[0]


def test_fifo_and_unreadable_directory_in_a_tree(cli: CliHelper, tmp_path: Path) -> None:
    from tests.test_inputs_hostile import deep_tree

    root = tmp_path / "tree"
    root.mkdir()
    (root / "a.txt").write_text(text(1))
    os.mkfifo(root / "x.txt")
    deep_tree(root)
    result = run_in_thread(cli, "ingest", str(root), "--on-error", "skip", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["new"], summary["errors"]) == (1, 2)
    assert f"skipped: {root / 'x.txt'}: not a regular file (a FIFO)" in result.stderr
    assert "cannot read the directory: file name too long" in result.stderr


def test_stdin_text_ids(cli: CliHelper) -> None:
    assert ingest_json(cli, "-", "--format", "text", input=text(1))["new"] == 1
    named = ingest_json(cli, "-", "--format", "text", "--id", "note-2", input=text(2))
    assert named["new"] == 1
    again = cli.ok("ingest", "-", "--format", "text", "--json", input=text(3))
    assert json.loads(again.stdout)["skipped"] == 1
    assert "1 documents skipped because their ids were already stored" in again.stderr
    assert "--id names the text read from standard input" in again.stderr
    assert {d["id"] for d in cli.json("export")} == {"stdin", "note-2"}
    refused = cli("ingest", "-", "--id", "x")
    assert refused.exit_code == 2
    assert "--id" in refused.stderr


def test_repeated_ids_are_counted_and_shown(cli: CliHelper, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        json.dumps({"id": 1, "text": text(1), "v": "number"})
        + "\n"
        + jsonl_line("2", 2)
        + "\n"
        + json.dumps({"id": "1", "text": text(3), "v": "string"})
        + "\n"
    )
    result = cli.ok("ingest", str(path), "--json")
    summary = json.loads(result.stdout)
    assert (summary["new"], summary["skipped"], summary["repeated_ids"]) == (2, 1, 1)
    assert f"{path}:3: id '1' repeats the id of {path}:1; this copy is skipped" in result.stderr
    assert "already stored" not in result.stderr
    meta = {d["id"]: d["meta"] for d in cli.json("export")}
    assert meta["1"] == {"v": "number"}
    updated = cli.ok("ingest", str(path), "--json", "--update")
    assert "this copy replaces it" in updated.stderr
    meta = {d["id"]: d["meta"] for d in cli.json("export")}
    assert meta["1"] == {"v": "string"}


def test_empty_input_warns(cli: CliHelper, tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n")
    result = cli.ok("ingest", str(tmp_path / "empty.jsonl"), "--json")
    assert json.loads(result.stdout)["documents"] == 0
    assert "warning: no records found in the input" in result.stderr
    assert "warning" in cli.ok("ingest", str(tmp_path), "--glob", "*.none").stderr


def test_json_summary_has_the_rate(cli: CliHelper, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(jsonl_line(f"d{i}", i) + "\n" for i in range(5)))
    summary = ingest_json(cli, str(path))
    assert summary["documents"] == 5
    assert summary["documents_per_second"] > 0
    assert summary["seconds"] > 0


def test_interrupt_prints_what_was_stored(
    cli: CliHelper, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(jsonl_line(f"d{i}", i) + "\n" for i in range(6)))
    real_reader = cli_ingest.read_inputs

    def interrupted_reader(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for number, record in enumerate(real_reader(*args, **kwargs), start=1):
            if number == 3:
                raise KeyboardInterrupt  # Ctrl-C while the third record is read
            yield record

    monkeypatch.setattr(cli_ingest, "read_inputs", interrupted_reader)
    result = cli("ingest", str(path), "--batch-size", "2", "--json")
    assert result.exit_code == 130, result.output
    summary = json.loads(result.stdout)
    assert (summary["documents"], summary["new"], summary["interrupted"]) == (2, 2, True)
    assert "interrupted after storing 2 documents" in result.stderr
    assert {d["id"] for d in cli.json("export")} == {"d0", "d1"}


def test_escape_characters_in_ids_are_shown_escaped(cli: CliHelper, tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    evil = "evil\x1b[2J\x1b]0;owned\x07\r\u202eid"
    path.write_text(jsonl_line(evil, 1) + "\n" + jsonl_line("[bold]markup", 2) + "\n")
    ingest_json(cli, str(path))
    table = cli.ok("export").stdout
    assert "\x1b" not in table and "\r" not in table and "\u202e" not in table
    assert "evil\\x1b[2J\\x1b]0;owned\\x07\\r\\u202eid" in table
    assert "[bold]markup" in table
    missing = cli("similar", evil + "x" * 10_000)
    assert missing.exit_code == 5
    assert "\x1b" not in missing.stderr and len(missing.stderr) < 300


def test_db_status_says_where_the_url_came_from(cli: CliHelper) -> None:
    env = {"DEDUP_STORE_URL": cli.url, "DEDUP_STORE_SCHEMA": None}
    from_env = cli.runner.invoke(cli_module.app, ["db", "status", "-f", "json"], env=env)
    assert from_env.exit_code == 0, from_env.output
    assert json.loads(from_env.stdout)["source"] == "environment"
    assert cli.json("db", "status")["source"] == "argument"


def test_password_with_an_unencoded_at_sign_is_hidden(cli: CliHelper) -> None:
    url = "postgresql://app:p@ssw0rd@127.0.0.1:1/test"
    status = cli("db", "status", url=url)
    assert status.exit_code == 7  # refused, with the way to encode it
    assert "ssw0rd" not in status.output
    assert "app:***@127.0.0.1:1/test" in status.stderr
    failed = cli("stats", url=url)
    assert failed.exit_code == 7
    assert failed.stderr.startswith("error: ")
    assert "ssw0rd" not in failed.output


def test_cli_import_leaves_the_store_unloaded() -> None:
    heavy = ["numpy", "sqlalchemy", "psycopg", "alembic", "dedup_store.service"]
    assert modules_loaded("import dedup_store.cli", heavy) == []
    version = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "dedup_store", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "fingerprint kernels: compiled" in version.stdout
    imported = {line.split("|")[-1].strip() for line in version.stderr.splitlines()}
    assert not {"numpy", "sqlalchemy", "psycopg"} & imported
