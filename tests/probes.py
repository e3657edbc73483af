"""What a fresh interpreter loads: the tests that keep a light command light."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence


def modules_loaded(statement: str, modules: Sequence[str]) -> list[str]:
    """Which of ``modules`` a new Python process has imported after running ``statement``."""
    probe = (
        f"import json, sys\n{statement}\n"
        f"print(json.dumps([m for m in {list(modules)!r} if m in sys.modules]))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(done.stdout)
    return loaded
