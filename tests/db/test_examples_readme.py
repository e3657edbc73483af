"""The figures examples/README.md gives of each planted pair are the store's."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from dedup_store import DedupStore
from dedup_store.ingest.inputs import read_inputs

ROOT = Path(__file__).resolve().parents[2]


def _rows() -> list[list[str]]:
    """The cells of the README's table of planted pairs."""
    text = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and line.count("`") >= 4
    ]


def test_each_planted_pair_has_the_figures_the_store_computes(engine: Engine, schema: str) -> None:
    rows = _rows()
    assert len(rows) == 14
    with DedupStore(engine, schema=schema) as store:
        store.ingest(read_inputs([str(ROOT / "examples")]))  # type: ignore[arg-type]
        for cells in rows:
            a, b = cells[1].strip("`"), cells[2].strip("`")
            found = store.explain(a, b)
            containment = max(found.containment_a, found.containment_b)
            computed = [f"{found.jaccard:.2f}", f"{containment:.2f}", str(found.hamming)]
            assert cells[3:6] == computed, (a, b)
            assert cells[6] == ("yes" if found.exact else "no"), (a, b)
