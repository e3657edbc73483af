"""Metadata sets (``meta_fields``) in the match decision, with mu = 0.85: the same body under
other tags is no match, an edited body under the same tags is, through ``add``, ``check`` and
``ingest`` alike."""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, Document, InvalidDocumentError, Status
from dedup_store.core import FingerprintParams
from tests.conftest import drop_schema

PARAMS = FingerprintParams(threshold=0.9, meta_fields=("tags", "keywords"), meta_weight=0.15)
TAGS = {"tags": ["Flood", "valley"], "keywords": "dam"}


def _body(seed: int, words: int = 120) -> str:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(rng.choice(letters) for _ in range(7)) for _ in range(words))


def _edited(body: str) -> str:
    words = body.split()
    words[60] = "replacedword"
    return " ".join(words)


BODY = _body(1)
DOCUMENTS = [
    Document("original", BODY, TAGS),
    Document("retagged", BODY, {"tags": ["recipes", "baking"]}),  # same body, other tags
    Document("edited", _edited(BODY), {"tags": ["flood", " VALLEY "], "keywords": ["dam"]}),
    Document("copy", BODY, {"keywords": ["dam"], "tags": ["valley", "flood"]}),  # same set
    Document("untagged", BODY),  # no metadata: content alone
    Document("unrelated", _body(2), TAGS),
]


@pytest.fixture
def schemas(engine: Engine) -> Iterator[list[str]]:
    names = [f"t_{uuid.uuid4().hex[:12]}" for _ in range(4)]
    yield names
    for name in names:
        drop_schema(engine, name)


def _edges(engine: Engine, schema: str) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT a, b, method, round(jaccard::numeric, 12), "
                "round(meta_score::numeric, 12), round(score::numeric, 12) "
                f'FROM "{schema}".duplicate_pairs ORDER BY a, b'
            )
        )
        return [tuple(row) for row in rows]


def _clusters(store: DedupStore) -> set[frozenset[str]]:
    return {frozenset(c.members) for c in store.clusters(min_size=1)}


def test_metadata_decides_through_add(engine: Engine, schema: str) -> None:
    with DedupStore(engine, PARAMS, schema=schema) as store:
        results = {d.id: store.add(d.id, d.text, d.meta) for d in DOCUMENTS}
        assert results["retagged"].status is Status.NEW
        assert results["retagged"].matches == []
        edited = results["edited"]
        assert edited.status is Status.NEAR_DUPLICATE
        assert [m.external_id for m in edited.matches] == ["original"]
        match = edited.matches[0]
        assert match.meta_score == 1.0
        assert match.score == pytest.approx(0.85 * match.jaccard + 0.15)
        assert 0.9 <= match.score < 1.0 and match.jaccard < 0.95
        assert results["copy"].status is Status.EXACT_DUPLICATE
        assert [m.external_id for m in results["untagged"].matches][:2] == ["original", "retagged"]
        assert all(m.meta_score is None for m in results["untagged"].matches)
        assert results["unrelated"].status is Status.NEW
        assert {"original", "retagged"} not in [set(m) for m in _clusters(store)]


def test_check_answers_as_add(engine: Engine, schema: str) -> None:
    with DedupStore(engine, PARAMS, schema=schema) as store:
        store.add("original", BODY, TAGS)
        assert store.check(BODY, {"tags": ["recipes", "baking"]}).status is Status.NEW
        found = store.check(_edited(BODY), TAGS)
        assert found.status is Status.NEAR_DUPLICATE
        assert found.matches[0].score >= 0.9
        assert store.check(BODY, TAGS).status is Status.EXACT_DUPLICATE
        content_only = store.check(BODY)
        assert content_only.status is Status.NEAR_DUPLICATE
        assert content_only.matches[0].score == 1.0


def test_batch_and_single_paths_store_the_same_scores(engine: Engine, schemas: list[str]) -> None:
    single, batch, bulk, one_by_one = schemas
    with DedupStore(engine, PARAMS, schema=single) as store:
        for d in DOCUMENTS:
            store.add(d.id, d.text, d.meta)
    with DedupStore(engine, PARAMS, schema=batch) as store:
        store.ingest(DOCUMENTS, bulk=False)
    with DedupStore(engine, PARAMS, schema=bulk) as store:
        store.ingest(DOCUMENTS, bulk=True)
    with DedupStore(engine, PARAMS, schema=one_by_one) as store:
        for d in DOCUMENTS:
            store.ingest([d], bulk=False)
    expected = _edges(engine, single)
    assert ("original", "retagged") not in [row[:2] for row in expected]
    assert ("original", "edited") in [row[:2] for row in expected]
    for other in (batch, bulk, one_by_one):
        assert _edges(engine, other) == expected


def test_exact_copies_under_other_tags_stay_apart(engine: Engine, schema: str) -> None:
    with DedupStore(engine, PARAMS, schema=schema) as store:
        store.ingest(DOCUMENTS[:2] + DOCUMENTS[3:4], bulk=False)
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    f'SELECT external_id, exact_of IS NOT NULL FROM "{schema}".documents '
                    "ORDER BY id"
                )
            ).all()
        assert [tuple(r) for r in rows] == [
            ("original", False),
            ("retagged", False),
            ("copy", True),
        ]
        assert _clusters(store) == {frozenset({"original", "copy"}), frozenset({"retagged"})}
        # a later document matches the first of the copy's group, and joins the group alone
        result = store.add("edited", _edited(BODY), TAGS)
        assert [m.external_id for m in result.matches] == ["original"]
        assert _clusters(store) == {
            frozenset({"original", "copy", "edited"}),
            frozenset({"retagged"}),
        }


def test_overlapping_tags_can_still_match(engine: Engine, schema: str) -> None:
    with DedupStore(engine, PARAMS, schema=schema) as store:
        store.add("original", BODY, {"tags": ["a", "b", "c", "d", "e", "f"]})
        result = store.add("more", BODY, {"tags": ["a", "b", "c", "d", "e", "f", "g"]})
        assert result.status is Status.NEAR_DUPLICATE
        (match,) = result.matches
        assert match.jaccard == 1.0 and match.meta_score is not None
        assert match.score == pytest.approx(0.85 + 0.15 * match.meta_score)


def test_bad_metadata_is_a_bad_record(engine: Engine, schema: str) -> None:
    with DedupStore(engine, PARAMS, schema=schema) as store:
        with pytest.raises(InvalidDocumentError, match="'tags'"):
            store.add("bad", BODY, {"tags": {"a": 1}})
        with pytest.raises(InvalidDocumentError, match="'keywords'"):
            store.check(BODY, {"keywords": [1, 2]})
        errors: list[str] = []
        store.ingest(
            [Document("bad", BODY, {"tags": 3})],
            on_error="skip",
            on_batch=lambda _done, bad: errors.extend(e.message for e in bad),
        )
        assert len(errors) == 1 and "'tags'" in errors[0]


def test_agreeing_metadata_lifts_an_edit_below_the_threshold(engine: Engine, schema: str) -> None:
    body = _body(5, words=200)
    words = body.split()
    for position in (40, 100, 160):  # three far-apart words: Jaccard 185 / 209
        words[position] = f"edit{position}"
    edited = " ".join(words)
    with DedupStore(engine, PARAMS, schema=schema) as store:
        store.add("original", body, TAGS)
        result = store.add("edited", edited, TAGS)
        (match,) = result.matches
        assert (match.method.value, match.meta_score) == ("minhash", 1.0)
        assert 0.88 < match.jaccard < 0.9 <= match.score
        other = store.check(edited, {"tags": ["unrelated"]})
        assert other.status is Status.NEW


def test_deleting_the_first_of_an_exact_group_keeps_the_metadata_scores(
    engine: Engine, schema: str
) -> None:
    docs = [
        Document("original", BODY, TAGS),
        Document("copy", BODY, TAGS),
        Document("copy-2", BODY, TAGS),
        Document("edited", _edited(BODY), TAGS),
        Document("retagged", BODY, {"tags": ["baking"]}),
    ]
    with DedupStore(engine, PARAMS, schema=schema) as store:
        store.ingest(docs, bulk=False)
        before = {row[1]: row[2:] for row in _edges(engine, schema) if row[0] == "original"}
        store.delete("original")
        after = _edges(engine, schema)
        assert after == [
            ("copy", "copy-2", "exact", 1, 1, 1),
            ("copy", "edited", *before["edited"]),
        ]
        assert _clusters(store) == {
            frozenset({"copy", "copy-2", "edited"}),
            frozenset({"retagged"}),
        }


def test_estimated_scores_decide_alike_on_both_paths(engine: Engine, schemas: list[str]) -> None:
    params = dataclasses.replace(PARAMS, verify="estimate")
    single, batch = schemas[:2]
    with DedupStore(engine, params, schema=single) as store:
        results = {d.id: store.add(d.id, d.text, d.meta) for d in DOCUMENTS}
    assert results["retagged"].status is Status.NEW
    assert [m.external_id for m in results["edited"].matches] == ["original"]
    with DedupStore(engine, params, schema=batch) as store:
        store.ingest(DOCUMENTS, bulk=False)
    assert _edges(engine, batch) == _edges(engine, single)
