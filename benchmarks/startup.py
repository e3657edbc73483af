"""One-document commands, process start included: what a caller that runs the command line per
document pays.

``python -m benchmarks.startup`` creates a store (``dedup-store init``) and times, each in a new
process, ``dedup-store check TEXT`` of a few words, ``dedup-store ingest FILE`` of a JSON Lines
file of one new record (a new id and text each run, so each is stored) and ``dedup-store similar
ID`` of a stored one. It prints the median wall and CPU seconds (user and system, of the process)
of ``--runs`` runs of each, and beside them two floors: ``python -c pass``, the interpreter's own
start on this machine, and ``imports``, a process that only imports the other packages a
``check`` imports (SQLAlchemy, psycopg, numpy, typer...): what the command would cost if the
package's own modules and its work were free. The least CPU of the runs is printed too: on a
machine that other work keeps busy, it varies less than the median.

Then the import time of ``check`` by package: ``python -X importtime``'s own time of each module
summed by top-level package (by subpackage for this one), the median of ``--runs`` runs, largest
first. ``-X importtime`` adds its own cost to every module, so the shares count, not the sums.

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
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from benchmarks.common import add_store_options, add_url, scratch_schema, sqlalchemy_url

HERE = Path(__file__).resolve().parent.parent
TEXT = "some text of a few words"
#: A line of ``python -X importtime``: the module's own and cumulative microseconds, its name.
IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)")


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


def package_of(module: str) -> str:
    """What the import time of ``module`` counts to: its top-level package, or for this package
    its subpackage (``dedup_store.db``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "dedup_store" else parts[0]


def imported(command: Sequence[str], env: dict[str, str]) -> list[tuple[str, int]]:
    """The modules ``command`` (a Python one) imports and their own microseconds under ``python
    -X importtime``, in the order their imports ended."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    return [(match[2], int(match[1])) for match in IMPORT_LINE.finditer(done.stderr)]


def third_party(modules: Iterable[str]) -> list[str]:
    """Those of ``modules`` (in their order) neither of the standard library nor of this package
    nor of the interpreter's start (``site`` hooks)."""
    return [
        module
        for module in modules
        if (top := module.split(".")[0]) not in sys.stdlib_module_names
        and top != "dedup_store"
        and not top.startswith("_")
        and top not in ("sitecustomize", "usercustomize")
    ]


def import_times(command: Sequence[str], env: dict[str, str]) -> Counter[str]:
    """The microseconds of ``command``'s imports by package (:func:`package_of`), from one run
    under ``python -X importtime``."""
    by_package: Counter[str] = Counter()
    for module, micros in imported(command, env):
        by_package[package_of(module)] += micros
    return by_package


def median_profile(samples: Sequence[Counter[str]]) -> Counter[str]:
    """The median microseconds of each package over ``samples`` (0 where a sample lacks it)."""
    packages = set().union(*samples)
    return Counter({p: int(statistics.median(s[p] for s in samples)) for p in packages})


def imports_floor(command: Sequence[str], env: dict[str, str]) -> list[str]:
    """A command that imports, in the same order, every module of another package than this one
    and the standard library that ``command`` imports."""
    modules = third_party(module for module, _ in imported(command, env))
    script = (
        "import importlib, sys\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        pass\n"
    )
    return [sys.executable, "-c", script, *modules]


def measure(
    trees: Sequence[Path], url: str, schema: str, runs: int
) -> tuple[dict[tuple[str, str], list[tuple[float, float]]], dict[str, Counter[str]]]:
    """The (wall, CPU) of each run of each command of each tree, by (command, tree); and the
    import time of ``check`` by package, by tree."""
    cli = [sys.executable, "-m", "dedup_store", "--db-url", url, "--schema", schema]
    check = [*cli, "check", TEXT]
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    samples: dict[str, list[Counter[str]]] = {}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as files:
        envs = [environment(tree, cache) for tree in trees]
        run([*cli, "init"], envs[0])
        floors = [imports_floor(check, env) for env in envs]
        for number in range(runs + 1):  # run 0 caches the bytecode and is not counted
            for index, (tree, env) in enumerate(zip(trees, envs, strict=True)):
                commands = {
                    "python -c pass": [sys.executable, "-c", "pass"],
                    "imports": floors[index],
                    "check": check,
                    "ingest": [*cli, "ingest", record_file(files, number, index)],
                    "similar": [*cli, "similar", f"t{index}-r0"],
                }
                for name, command in commands.items():
                    figures = run(command, env)
                    if number:
                        times.setdefault((name, str(tree)), []).append(figures)
                if number:
                    samples.setdefault(str(tree), []).append(import_times(check, env))
    return times, {tree: median_profile(runs) for tree, runs in samples.items()}


def print_profile(tree: str, profile: Counter[str], shown: int = 14) -> None:
    """The packages of ``profile`` taking most of the import time of ``check``, the rest, and
    this package's own modules together."""
    total = sum(profile.values())
    own = sum(micros for package, micros in profile.items() if package.startswith("dedup_store"))
    print(
        f"\n`check` imports by package, median ms under -X importtime (total {total / 1000:.0f}),"
        f" {tree}"
    )
    top = profile.most_common(shown)
    rest = total - sum(micros for _, micros in top)
    for package, micros in [*top, (f"{len(profile) - len(top)} others", rest)]:
        print(f"  {package:28} {micros / 1000:7.1f}  {micros / total:6.1%}")
    print(f"  {'dedup_store, all of it':28} {own / 1000:7.1f}  {own / total:6.1%}")


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
        times, profiles = measure(trees, url, args.schema, args.runs)
    print(f"median of {args.runs} runs, seconds; load average {os.getloadavg()[0]:.2f}")
    print(f"{'command':16} {'wall':>6} {'CPU':>6} {'CPU min':>7}  tree")
    for (name, tree), figures in times.items():
        wall = statistics.median(w for w, _ in figures)
        cpu = statistics.median(c for _, c in figures)
        least = min(c for _, c in figures)
        print(f"{name:16} {wall:6.3f} {cpu:6.3f} {least:7.3f}  {tree}")
    for tree, profile in profiles.items():
        print_profile(tree, profile)


if __name__ == "__main__":
    main()
