"""Public names of a package loaded from their modules on first use (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def load_public_name(namespace: dict[str, Any], home_of: Mapping[str, str], name: str) -> Any:
    """``name`` from its module in ``home_of``, kept in ``namespace`` (the package's globals),
    so that its next use is a plain attribute.

    Raises:
        AttributeError: ``name`` is not one of the package's public names.
    """
    module = home_of.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
