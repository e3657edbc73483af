"""Real documents for the Spark tests: Debian copyright files, the common licences and
docstrings of the standard library (a few thousand documents with many near-duplicates)."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Engine, text

from benchmarks.realtext_corpus import copyright_docs, docstring_docs, license_docs
from dedup_store.results import Document


@cache
def real_documents(docstrings: int = 2500) -> list[tuple[str, str]]:
    """``(id, text)`` of every copyright file and licence and ``docstrings`` docstrings."""
    docs = copyright_docs() + license_docs() + docstring_docs(docstrings)
    return [(d.id, d.text) for d in docs]


def hot_documents() -> list[Document]:
    """Edits of one text that make band and block keys hot at a ``hot_key_limit`` of 5, among
    other documents and families (the bulk load tests' corpus)."""
    from tests.db.test_bulk import _hot_documents

    return _hot_documents()


def hot_tables(engine: Engine, schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """The ``hot_keys`` and ``secondary_keys`` rows of a store, sorted."""
    s = f'"{schema}"'
    with engine.connect() as conn:
        hot = conn.execute(text(f"SELECT * FROM {s}.hot_keys ORDER BY 1, 2, 3")).all()
        secondary = conn.execute(
            text(f"SELECT * FROM {s}.secondary_keys ORDER BY 1, 2, 3, 4")
        ).all()
    return {"hot": [tuple(r) for r in hot], "secondary": [tuple(r) for r in secondary]}
