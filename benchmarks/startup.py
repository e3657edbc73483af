"""One-document commands, process start included: what a caller that runs the command line per
document pays.

``python -m benchmarks.startup`` creates a store (``dedup-store init``) and times, each in a new
process, ``dedup-store check TEXT`` of a few words and ``dedup-store ingest FILE`` of a JSON
Lines file of one new record (a new id and text each run, so each is stored). It prints the
median wall and CPU seconds (user and system, of the process) of ``--runs`` runs of each, and of
``python -c pass`` beside them: the interpreter's own start on this machine. The least CPU of
the runs is printed too: on a machine that other work keeps busy, it varies less than the
median.

``--tree DIR`` (repeated) times the package of each source tree in turn, run after run, so that
two revisions are compared under the same load of the machine, e.g. ``--tree . --tree
../main``. The commands run with their bytecode cached (in a scratch ``PYTHONPYCACHEPREFIX``,
after one run of each that is not counted), as an installed package runs, even where
``PYTHONDONTWRITEBYTECODE`` is set.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import add_store_options, add_url, scratch_schema, sqlalchemy_url

HERE = Path(__file__).resolve().parent.parent
TEXT = "some text of a few words"


def run(command: Sequence[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``command`` in a new process (which must succeed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def environment(tree: Path, cache: str) -> dict[str, str]:
    """The environment of a command of ``tree``: its package first, bytecode cached."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONPYCACHEPREFIX"] = cache
    return env


def record_file(directory: str, run_number: int, tree_number: int) -> str:
    """A JSON Lines file of one record, with an id and text no other run has."""
    path = os.path.join(directory, f"one-{tree_number}-{run_number}.jsonl")
    words = " ".join(f"w{tree_number}x{run_number}y{i}" for i in range(8))
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"id": f"t{tree_number}-r{run_number}", "text": words}) + "\n")
    return path


def measure(
    trees: Sequence[Path], url: str, schema: str, runs: int
) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """The (wall, CPU) of each run of each command of each tree, by (command, tree)."""
    cli = [sys.executable, "-m", "dedup_store", "--db-url", url, "--schema", schema]
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as files:
        envs = [environment(tree, cache) for tree in trees]
        run([*cli, "init"], envs[0])
        for number in range(runs + 1):  # run 0 caches the bytecode and is not counted
            for index, (tree, env) in enumerate(zip(trees, envs, strict=True)):
                commands = {
                    "python -c pass": [sys.executable, "-c", "pass"],
                    "check": [*cli, "check", TEXT],
                    "ingest": [*cli, "ingest", record_file(files, number, index)],
                }
                for name, command in commands.items():
                    figures = run(command, env)
                    if number:
                        times.setdefault((name, str(tree)), []).append(figures)
    return times


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_url(parser)
    add_store_options(
        parser, keep="keep the store afterwards", schema=("startup_bench", "the store's schema")
    )
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (%(default)s)")
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="a source tree whose package runs (repeatable; default: this one)",
    )
    args = parser.parse_args(argv)
    trees = [tree.resolve() for tree in args.tree or [HERE]]
    url = sqlalchemy_url(args.url)
    with scratch_schema(url, args.schema, args.keep):
        times = measure(trees, url, args.schema, args.runs)
    print(f"median of {args.runs} runs, seconds; load average {os.getloadavg()[0]:.2f}")
    print(f"{'command':16} {'wall':>6} {'CPU':>6} {'CPU min':>7}  tree")
    for (name, tree), figures in times.items():
        wall = statistics.median(w for w, _ in figures)
        cpu = statistics.median(c for _, c in figures)
        least = min(c for _, c in figures)
        print(f"{name:16} {wall:6.3f} {cpu:6.3f} {least:7.3f}  {tree}")


if __name__ == "__main__":
    main()
