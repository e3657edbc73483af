"""Plumbing shared by the package's rooms: public names loaded on first use (PEP 562), and
objects that ``with`` closes."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self


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


def lazy_names(
    namespace: dict[str, Any], homes: Mapping[str, Iterable[str]], public: Iterable[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module ``__getattr__`` and ``__dir__`` (PEP 562) that load its ``public``
    names from their modules on first use (``homes``: ``{module: its names}``)."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def get(name: str) -> Any:
        """Load a public name from its module on first use (then it is a plain attribute)."""
        return load_public_name(namespace, home_of, name)

    def listed() -> list[str]:
        return sorted({*namespace, *public})

    return get, listed


class Closing:
    """An object holding something to release (an engine, processes, a thread): :meth:`close`
    releases it, and ``with`` calls it at the end of the block."""

    def close(self) -> None:
        """Release what the object holds (nothing here)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
