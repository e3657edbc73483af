"""The core loads its public names when first used, so its parameters come without numpy."""

from __future__ import annotations

import subprocess
import sys


def _run(probe: str) -> str:
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_params_module_leaves_numpy_unloaded() -> None:
    probe = (
        "import sys\n"
        "from dedup_store.core.params import FingerprintParams, HtmlMode\n"
        "print(FingerprintParams().bands, 'numpy' in sys.modules)\n"
    )
    assert _run(probe) == "(12, 7) False"


def test_public_names_load_on_first_use() -> None:
    probe = (
        "import sys, dedup_store.core as core\n"
        "before = 'numpy' in sys.modules\n"
        "print(before, core.fingerprint_batch.__module__, 'numpy' in sys.modules)\n"
    )
    assert _run(probe) == "False dedup_store.core.fingerprint True"


def test_fingerprint_stays_the_function_after_its_module_is_imported() -> None:
    probe = (
        "import dedup_store.core.fingerprint\n"
        "import dedup_store, dedup_store.core as core\n"
        "from dedup_store.core import fingerprint\n"
        "print(callable(fingerprint), type(core.fingerprint).__name__,\n"
        "      dedup_store.fingerprint is fingerprint)\n"
    )
    assert _run(probe) == "True function True"
