"""The FastAPI example (examples/fastapi/app.py): an article and its fingerprint commit
together; a duplicate is refused and rolls both back."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

pytestmark = pytest.mark.db

APP = Path(__file__).resolve().parents[1] / "examples" / "fastapi" / "app.py"
TEXT = (
    "The city council approved the new budget on Tuesday after a long debate about road "
    "repairs, school funding and the renovation of the central library building."
)


@pytest.fixture
def example(
    monkeypatch: pytest.MonkeyPatch, database_url: str, schema: str, engine: Engine
) -> Iterator[ModuleType]:
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.setenv("DEDUP_SCHEMA", schema)
    spec = importlib.util.spec_from_file_location("fastapi_example", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fastapi_example"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["fastapi_example"]
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE IF EXISTS articles"))


def test_an_article_and_its_fingerprint_commit_or_roll_back_together(
    example: ModuleType, engine: Engine, schema: str
) -> None:
    with TestClient(example.app) as client:
        first = client.post("/articles", json={"slug": "budget", "body": TEXT})
        assert first.status_code == 201 and first.json()["status"] == "new"
        again = client.post("/articles", json={"slug": "budget-copy", "body": TEXT})
        assert again.status_code == 409 and "budget" in again.json()["detail"]
        checked = client.post("/check", json={"slug": "-", "body": TEXT})
        assert checked.json() == {"status": "exact_duplicate", "matches": ["budget"]}
    with engine.connect() as conn:
        slugs = conn.execute(text("SELECT slug FROM articles")).scalars().all()
        ids = conn.execute(text(f'SELECT external_id FROM "{schema}".documents')).scalars().all()
    assert slugs == ["budget"] and ids == ["budget"]  # the refused copy left nothing
