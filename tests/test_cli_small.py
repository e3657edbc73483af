"""Small things a person trips on at the command line."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from dedup_store import DedupStore, Document, InvalidDocumentError
from dedup_store.cli.render import IngestProgress
from dedup_store.ingest.pipeline import INDEX_PHASE
from tests.test_cli import CliHelper, near_copy, words
from tests.test_cli import cli as cli

pytestmark = pytest.mark.db

ROOT = Path(__file__).resolve().parents[1]
TEXT = " ".join(words(11))


def test_check_of_a_file_name_points_to_file(cli: CliHelper, tmp_path: Path) -> None:
    page = tmp_path / "page.txt"
    page.write_text(TEXT)
    refused = cli("check", str(page))
    assert refused.exit_code == 2
    assert f"names a file: check its text with --file {page}" in " ".join(refused.stderr.split())
    cli.ok("ingest", "--quiet", str(page))
    assert cli.json("check", "--file", str(page))["status"] == "exact_duplicate"
    assert cli.json("check", "page.txt is not here")["status"] == "new"


@pytest.fixture
def thousands(cli: CliHelper, tmp_path: Path) -> CliHelper:
    """A store of 1,500 documents: each listing is larger than a pipe holds."""
    lines = [json.dumps({"id": f"doc-{i}", "text": " ".join(words(i, 30))}) for i in range(1500)]
    (tmp_path / "many.jsonl").write_text("\n".join(lines) + "\n")
    cli.ok("ingest", "--quiet", str(tmp_path / "many.jsonl"))
    return cli


@pytest.mark.parametrize(
    "command",
    [
        ["export", "-f", "jsonl"],
        ["export", "-f", "csv"],
        ["export"],
        ["clusters", "--min-size", "1", "-f", "json"],
    ],
)
def test_a_closed_pipe_ends_quietly(thousands: CliHelper, command: list[str]) -> None:
    options = ["--db-url", thousands.url, "--schema", thousands.schema]
    listing = subprocess.Popen(
        [sys.executable, "-m", "dedup_store", *options, *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert listing.stdout is not None and listing.stderr is not None
    assert listing.stdout.readline()  # `| head -1`
    listing.stdout.close()
    errors = listing.stderr.read()
    assert (listing.wait(timeout=60), errors) == (0, b"")


def test_export_as_a_table_shows_the_method(cli: CliHelper, tmp_path: Path) -> None:
    base = words(5)
    (tmp_path / "a.txt").write_text(" ".join(base))
    (tmp_path / "b.txt").write_text(" ".join(near_copy(base)))
    cli.ok("ingest", "--quiet", str(tmp_path))
    header, *rows = [line.split("\t") for line in cli.ok("export").stdout.splitlines()]
    assert header[:6] == ["id", "cluster_id", "representative", "created_at", "match", "method"]
    shown = {row[0]: row[4:6] for row in rows}
    assert shown == {"a.txt": ["", ""], "b.txt": ["a.txt", "minhash"]}


def test_a_bulk_load_says_when_it_builds_the_indexes(store: DedupStore) -> None:
    docs = [Document(f"doc-{i}", " ".join(words(i, 40))) for i in range(50)]
    phases: list[str] = []
    assert store.ingest(docs[:25], bulk=True, on_phase=phases.append).bulk
    assert phases == [INDEX_PHASE] == ["building the indexes"]
    phases.clear()
    assert not store.ingest(docs[25:], bulk=False, on_phase=phases.append).bulk
    assert phases == []


def test_the_progress_line_shows_the_phase() -> None:
    shown = io.StringIO()
    console = Console(file=shown, force_terminal=True, width=120)
    with IngestProgress(True, console=console) as progress:
        progress.on_progress(50, 50)
        progress.on_phase(INDEX_PHASE)
    assert "ingesting" in shown.getvalue()
    assert "building the indexes" in shown.getvalue()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://app:p@ss@127.0.0.1:5432/test",
        "postgresql://app:p@ss:w@127.0.0.1:5432/test",
        "postgresql://app:s3cret@127.0.0.1:x/test",
    ],
)
def test_an_invalid_url_says_how_to_encode_a_password(cli: CliHelper, url: str) -> None:
    for command in (["stats"], ["db", "status"]):
        failed = cli(*command, url=url)
        assert failed.exit_code == 7
        assert failed.stderr.startswith("error: invalid database URL")
        assert "percent-encoded (@ is %40" in failed.stderr
        assert not {"p@", "@ss", "ss@", "s3cret"} & {w for w in failed.stderr.split(":")}
        assert "s3cret" not in failed.stderr and "ss@" not in failed.stderr


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_check_refuses_non_numbers_in_meta_as_ingest_does(
    cli: CliHelper, tmp_path: Path, constant: str
) -> None:
    record = tmp_path / "posts.jsonl"
    record.write_text(f'{{"id": "a", "text": "{TEXT}", "score": {constant}}}\n')
    ingested = cli("ingest", "--quiet", str(record))
    assert ingested.exit_code == 4
    refusal = f"JSON holds {constant}, which is not a valid JSON number"
    assert refusal in ingested.stderr
    checked = cli("check", TEXT, "--meta", f'{{"score": {constant}}}')
    assert checked.exit_code == 2
    assert refusal in " ".join(checked.stderr.split())


def test_the_library_check_refuses_metadata_add_refuses(store: DedupStore) -> None:
    with pytest.raises(InvalidDocumentError, match="metadata holds NaN or Infinity"):
        store.add("a", TEXT, {"score": float("nan")})
    with pytest.raises(InvalidDocumentError, match="metadata holds NaN or Infinity"):
        store.check(TEXT, {"score": float("nan")})


@pytest.fixture(scope="module")
def large_document(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every Debian copyright file in one text of more than 16 MiB, the default limit."""
    path = tmp_path_factory.mktemp("large") / "copyrights.txt"
    with path.open("w", encoding="utf-8") as out:
        for copyright in sorted(Path("/usr/share/doc").glob("*/copyright")):
            out.write(copyright.read_text(encoding="utf-8", errors="replace").replace("\0", ""))
    assert path.stat().st_size > 2**24
    return path


def test_max_bytes_raises_the_limit_of_a_document(cli: CliHelper, large_document: Path) -> None:
    refused = cli("ingest", "--quiet", str(large_document))
    assert refused.exit_code == 4
    limit = "larger than the limit of 16777216 bytes (max_bytes; --max-bytes raises it)"
    assert limit in refused.stderr
    assert cli("check", "--file", str(large_document)).exit_code == 4
    raised = ["--max-bytes", str(2**25)]
    summary = json.loads(cli.ok("ingest", "--json", *raised, str(large_document)).stdout)
    assert (summary["documents"], summary["new"]) == (1, 1)
    checked = cli.json("check", *raised, "--file", str(large_document))
    assert checked["status"] == "exact_duplicate"
    lowered = cli("check", "--max-bytes", "1000", TEXT * 2)
    assert lowered.exit_code == 4


def test_a_parameter_mismatch_names_the_way_out(cli: CliHelper) -> None:
    cli.ok("init", "--num-perm", "96")
    refused = cli("init", "--num-perm", "128", "--threshold", "0.7")
    assert refused.exit_code == 3
    assert refused.stderr == (
        f"error: store {cli.schema!r} was created with other parameters: fingerprint parameters "
        "differ (num_perm: 96 != 128, threshold: 0.8 != 0.7); open it with the stored "
        "parameters (omit them), or use another schema\n"
    )


def test_every_fingerprint_parameter_is_an_init_option_or_left_out_by_name() -> None:
    from typer.main import get_command

    from dedup_store import FingerprintParams
    from dedup_store.cli.main import NO_INIT_OPTION, app

    init = get_command(app).commands["init"]  # type: ignore[attr-defined]
    options = {param.name for param in init.params}
    fields = {field.name for field in dataclasses.fields(FingerprintParams)}
    assert fields - options == set(NO_INIT_OPTION)
    assert options - fields == {"keep_text", "canonical", "fmt"}


def test_init_options_take_their_fields_types() -> None:
    """The options are made from the parameters' fields: a flag is a --x/--no-x switch, a
    choice takes only its field's values, a number is parsed as its field's type."""
    from typer.main import get_command
    from typer.testing import CliRunner

    from dedup_store.cli import app

    init = get_command(app).commands["init"]  # type: ignore[attr-defined]
    stem = next(param for param in init.params if param.name == "stem")
    assert stem.opts == ["--stem"] and stem.secondary_opts == ["--no-stem"]
    runner = CliRunner()
    for args, named in (
        (["--scheme", "nope"], "'threshold', 'broder'"),
        (["--num-perm", "1.5"], "valid integer"),
        (["--threshold", "high"], "valid number"),
    ):
        result = runner.invoke(app, ["init", *args])
        assert result.exit_code == 2, args
        assert named in result.output, result.output
