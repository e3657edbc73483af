"""Small things a person trips on at the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import CliHelper, words
from tests.test_cli import cli as cli

pytestmark = pytest.mark.db

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
