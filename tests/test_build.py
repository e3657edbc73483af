"""Building the package: the optional kernels are always compiled afresh, and a build that cannot
compile them says so and ships no kernels of an earlier build."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from tests.test_source_tree import checkout

KERNELS = "dedup_store/core/_kernels" + sysconfig.get_config_var("EXT_SUFFIX")


def plant_stale_kernels(tree: Path) -> Path:
    """A leftover of an earlier build in ``build/``, newer than the C source."""
    build_lib = f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}"
    stale = tree / "build" / build_lib / KERNELS
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"kernels of an earlier build")
    future = time.time() + 3600
    os.utime(stale, (future, future))
    return stale


def build(tree: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "setup.py", "build"],
        cwd=tree,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_build_without_a_c_compiler_warns_and_ships_no_stale_kernels(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "checkout")
    stale = plant_stale_kernels(tree)
    built = build(tree, CC="false")
    assert built.returncode == 0, built.stderr
    assert "WARNING: the compiled fingerprint kernels were not built" in built.stderr
    assert "reference kernels" in built.stderr
    assert not stale.exists()
    assert (stale.parent / "kernels.py").is_file()  # the rest of the package is built


def test_a_build_compiles_the_kernels_again_over_an_earlier_build(tmp_path: Path) -> None:
    tree = checkout(tmp_path / "checkout")
    stale = plant_stale_kernels(tree)
    built = build(tree)
    assert built.returncode == 0, built.stderr
    assert stale.read_bytes()[:4] == b"\x7fELF"
    assert "WARNING" not in built.stderr


def test_a_build_ships_every_module_of_the_package(tmp_path: Path) -> None:
    """A subpackage left out of pyproject.toml's list would be missing from an installed
    package, and only there: a checkout imports it from its own tree."""
    tree = checkout(tmp_path / "checkout")
    built = build(tree, CC="false")
    assert built.returncode == 0, built.stderr
    (build_lib,) = (tree / "build").glob("lib.*")
    source = {p.relative_to(tree).as_posix() for p in (tree / "dedup_store").rglob("*.py")}
    shipped = {p.relative_to(build_lib).as_posix() for p in build_lib.rglob("*.py")}
    assert source - shipped == set()
