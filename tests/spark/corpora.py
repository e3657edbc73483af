"""Real documents for the Spark tests: Debian copyright files, the common licences and
docstrings of the standard library (a few thousand documents with many near-duplicates)."""

from __future__ import annotations

from functools import cache

from benchmarks.realtext_corpus import copyright_docs, docstring_docs, license_docs


@cache
def real_documents(docstrings: int = 2500) -> list[tuple[str, str]]:
    """``(id, text)`` of every copyright file and licence and ``docstrings`` docstrings."""
    docs = copyright_docs() + license_docs() + docstring_docs(docstrings)
    return [(d.id, d.text) for d in docs]
