"""The command line reference documents every command and option, every option has help, and
the README's blocks exist."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from dedup_store import FingerprintParams, Status, errors
from dedup_store.cli import app

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_REFERENCE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def walk(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group below ``command``, with its path of names."""
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield (*path, name), sub
        yield from walk(sub, (*path, name))


COMMANDS = list(walk(typer.main.get_command(app)))
COMMAND_IDS = [" ".join(path) for path, _ in COMMANDS]


def cli_reference() -> str:
    return CLI_REFERENCE


def test_every_command_is_found() -> None:
    assert {
        "init",
        "ingest",
        "check",
        "similar",
        "cluster",
        "clusters",
        "pairs",
        "stats",
        "delete",
        "export",
        "explain",
        "review",
        "verdicts",
        "canonical",
        "report",
        "serve",
        "db",
        "db status",
        "db stop",
        "db tune",
        "db settle",
        "db upgrade",
        "db current",
        "db dump",
        "db restore",
        "db psql",
    } == set(COMMAND_IDS)


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=COMMAND_IDS)
def test_command_has_help(path: tuple[str, ...], command: Any) -> None:
    assert (command.help or "").strip(), f"dedup-store {' '.join(path)} has no help text"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=COMMAND_IDS)
def test_options_have_help(path: tuple[str, ...], command: Any) -> None:
    for param in command.params:
        if param.name != "help":
            assert (getattr(param, "help", None) or "").strip(), (
                f"dedup-store {' '.join(path)}: {param.name} has no help text"
            )


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=COMMAND_IDS)
def test_command_is_in_readme_reference(path: tuple[str, ...]) -> None:
    heading = re.compile(rf"^### `dedup-store {re.escape(' '.join(path))}\b", re.M)
    name = " ".join(path)
    assert heading.search(cli_reference()), f"the reference lacks '### `dedup-store {name}`'"


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=COMMAND_IDS)
def test_readme_names_every_option(path: tuple[str, ...], command: Any) -> None:
    reference = cli_reference()
    for param in command.params:
        for flag in getattr(param, "opts", []) + getattr(param, "secondary_opts", []):
            if flag.startswith("--") and flag != "--help":
                assert flag in reference, f"the reference lacks {flag} of {' '.join(path)}"


def test_global_options_in_readme() -> None:
    root = typer.main.get_command(app)
    for param in root.params:
        for flag in param.opts:
            if flag.startswith("--") and flag != "--help":
                assert flag in cli_reference()


def error_classes() -> list[type[errors.DedupStoreError]]:
    found = [errors.DedupStoreError]
    for cls in found:
        found.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", error_classes(), ids=lambda c: c.__name__)
def test_exit_codes_documented(cls: type[errors.DedupStoreError]) -> None:
    row = re.compile(rf"^\|\s*{cls.exit_code}\s*\|.*`{cls.__name__}`", re.M)
    assert row.search(CLI_REFERENCE), f"the exit code table lacks {cls.__name__} ({cls.exit_code})"


@pytest.mark.parametrize("name", ["main-command", "test-command"])
def test_readme_command_blocks(name: str) -> None:
    block = re.search(rf"<!-- {name} -->\n```bash\n(.+?)\n```\n<!-- /{name} -->", README, re.S)
    assert block is not None, f"README lacks the {name} block"
    assert block.group(1).strip()


@pytest.mark.parametrize(
    "view",
    [
        "duplicate_pairs",
        "duplicate_pairs_expanded",
        "cluster_members",
        "cluster_sizes",
        "duplicates_per_day",
        "cluster_canonical",
    ],
)
def test_views_documented(view: str) -> None:
    assert f"dedup.{view}" in README
    assert f"dedup.{view}" in (ROOT / "docs" / "sql.md").read_text(encoding="utf-8")


def test_readme_stays_short_and_its_links_resolve() -> None:
    assert len(README.encode()) <= 12 * 1024
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README):
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def init_table_defaults() -> dict[str, str]:
    """``{option: default}`` from the rows of the README's ``init`` option table."""
    section = cli_reference().split("### `dedup-store init`", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `--([a-z-]+)[^|]*\| ([^|]+) \|", section, re.M)
    return {name: default.strip() for name, default in rows}


def test_readme_init_defaults_match_the_code() -> None:
    documented = init_table_defaults()
    defaults = FingerprintParams().to_dict()
    for name, value in documented.items():
        field = name.replace("-", "_")
        if field not in defaults:  # --format
            continue
        expected = defaults[field]
        shown = ("on" if expected else "off") if isinstance(expected, bool) else str(expected)
        if isinstance(expected, list):  # meta_fields
            shown = ",".join(expected) or "none"
        assert value == shown, f"the reference says --{name} defaults to {value}, the code {shown}"
    assert {"shingle-size", "threshold", "simhash-blocks", "stopwords", "stem"} <= set(documented)


def test_check_documents_every_answer() -> None:
    """Every status ``check`` can answer (all but those of a stored id) is in its section."""
    section = cli_reference().split("### `dedup-store check`", 1)[1].split("\n### ", 1)[0]
    answers = set(Status) - {Status.SKIPPED, Status.UPDATED}
    assert {status for status in answers if f"`{status.value}`" not in section} == set()
