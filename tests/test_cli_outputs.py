"""Where the command line and the library write: a report only over a regular file (or a
missing one), and a file or standard output that cannot take the output is one line and an
exit code, never a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from dedup_store import DedupStore, OutputError, ParamsMismatchError
from dedup_store.cli import app as cli_app
from dedup_store.config import normalize_url
from dedup_store.review.report import writer
from tests.conftest import drop_schema
from tests.test_cli import CliHelper
from tests.test_cli import cli as cli
from tests.test_cli import corpus as corpus

REPORT_JS = Path(writer.__file__).parent / "static" / "report.js"


def _run(helper: CliHelper, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` (``dedup-store`` arguments and a shell redirection) in a shell."""
    env = {**os.environ, "DEDUP_STORE_URL": helper.url, "DEDUP_STORE_SCHEMA": helper.schema}
    return subprocess.run(
        f"{sys.executable} -m dedup_store {command}",
        shell=True,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line(result: subprocess.CompletedProcess[str], code: int, says: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.fixture
def ingested(cli: CliHelper, corpus: Path) -> CliHelper:
    cli.ok("ingest", "-q", str(corpus))
    return cli


def test_a_report_into_a_missing_folder_is_one_line(ingested: CliHelper, tmp_path: Path) -> None:
    result = ingested("report", "--out", str(tmp_path / "missing" / "r.html"))
    assert result.exit_code == 1, result.output
    assert "cannot write the report" in result.stderr and "no folder" in result.stderr


def test_a_report_replaces_only_a_regular_file(ingested: CliHelper, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    refused = ingested("report", "--out", str(fifo))
    assert refused.exit_code == 1 and "not a regular file" in refused.stderr
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    device = ingested("report", "--out", "/dev/full")
    assert device.exit_code == 1 and "not a regular file" in device.stderr
    assert stat.S_ISCHR(Path("/dev/full").lstat().st_mode)
    target = tmp_path / "target.html"
    target.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    ingested.ok("report", "--out", str(link))
    assert link.is_symlink() and "<html" in target.read_text()[:200].lower()


def test_output_that_standard_output_refuses_is_one_line(ingested: CliHelper) -> None:
    for command in ("clusters > /dev/full", "export -f csv > /dev/full"):
        _one_line(_run(ingested, command), 1, "cannot write the output")


def test_the_library_raises_its_own_error_for_a_report_it_cannot_write(
    ingested: CliHelper, tmp_path: Path
) -> None:
    with (
        DedupStore(ingested.url, schema=ingested.schema, create=False) as store,
        pytest.raises(OutputError, match="no folder"),
    ):
        store.report(tmp_path / "missing" / "r.html")


def test_empty_database_options_are_refused_not_taken_for_the_defaults(cli: CliHelper) -> None:
    for option in ("--db-url", "--schema"):
        argv = ["--db-url", cli.url, "--schema", cli.schema, "stats"]
        argv[argv.index(option) + 1] = ""
        result = cli.runner.invoke(cli_app, argv, env={"DEDUP_STORE_URL": None})
        assert result.exit_code == 2, (option, result.output)
        assert option in result.stderr and "must not be empty" in result.stderr


def test_a_verdict_on_one_document_is_a_usage_error(ingested: CliHelper) -> None:
    result = ingested("review", "a.txt", "a.txt", "--duplicate")
    assert result.exit_code == 2, result.output
    assert "needs two documents" in result.stderr


def test_the_library_names_no_command_line_option_when_parameters_differ(
    ingested: CliHelper,
) -> None:
    with pytest.raises(ParamsMismatchError) as refused:
        DedupStore(ingested.url, {"threshold": 0.5}, schema=ingested.schema)
    assert "--" not in str(refused.value) and "another schema" in str(refused.value)


def test_the_review_command_the_report_suggests_takes_an_id_that_starts_with_a_dash(
    cli: CliHelper,
) -> None:
    text = "the mill by the river ground flour for the whole valley every autumn and spring"
    with DedupStore(cli.url, schema=cli.schema) as store:
        store.add_many([("-5", text), ("h1", text + " again")])
    suggested = Path(REPORT_JS).read_text(encoding="utf-8")
    assert '"dedup-store review --duplicate " + dash' in suggested
    done = cli("review", "--duplicate", "--", "-5", "h1")
    assert done.exit_code == 0, done.output
    assert [(v.a, v.b, v.verdict.value) for v in _verdicts(cli)] == [("-5", "h1", "duplicate")]


def _verdicts(cli: CliHelper) -> list[Any]:
    with DedupStore(cli.url, schema=cli.schema, create=False) as store:
        return store.verdicts()


def test_init_help_shows_each_default_as_the_option_takes_it(cli: CliHelper) -> None:
    shown = cli.runner.invoke(cli_app, ["init", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "(default ())" not in shown.stdout
    assert "(default none)" in " ".join(shown.stdout.split())


def test_init_on_an_existing_store_applies_or_refuses_what_it_is_given(cli: CliHelper) -> None:
    cli.ok("init")
    refused = cli("init", "--keep-text")
    assert refused.exit_code == 2 and "does not keep texts" in refused.stderr
    changed = cli.json("init", "--canonical", "longest")
    assert changed["canonical_rule"] == "longest"
    assert cli.json("init")["canonical_rule"] == "longest"
    kept = CliHelper(cli.schema + "_k", cli.url)
    try:
        kept.ok("init", "--keep-text")
        assert kept.json("init", "--keep-text")["keep_text"] is True  # nothing to refuse
    finally:
        drop_schema(create_engine(normalize_url(cli.url)), kept.schema)


def test_explain_refuses_a_text_that_is_not_the_documents(
    ingested: CliHelper, corpus: Path
) -> None:
    own = ingested("explain", "a.txt", "sub/b.txt", "--text-a", str(corpus / "a.txt"))
    assert own.exit_code == 0, own.output
    other = ingested("explain", "a.txt", "sub/b.txt", "--text-a", str(corpus / "other.txt"))
    assert other.exit_code == 4, other.output
    assert "is not that document's" in other.stderr and "a.txt" in other.stderr
