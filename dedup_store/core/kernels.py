"""The compiled kernels of the core, when the package was built with them.

:data:`compiled` is the extension module :mod:`dedup_store.core._kernels`, or ``None`` when it
was not built (no C compiler at install time). Callers then run their numpy implementation of the
same computation, which gives the same results, more slowly.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def _load() -> ModuleType | None:
    try:
        return importlib.import_module("dedup_store.core._kernels")
    except ImportError:
        return None


#: The extension module, or ``None``.
compiled: ModuleType | None = _load()
