"""The methods of a match are one vocabulary: the enum, the scoring statement and the table."""

from __future__ import annotations

import re

from sqlalchemy import Engine, text

from dedup_store import DedupStore, FingerprintParams, Method
from dedup_store.core.matchrule import RULE
from dedup_store.db.matches.scoring import merging_methods, scored_pairs_sql
from dedup_store.results import MatchRow, sorted_matches


def test_the_scoring_statement_prefers_methods_in_the_enums_order() -> None:
    # a pair that several methods accept gets the first THEN of the CASE: its order is the rank
    decided = re.findall(r"THEN '(\w+)'", scored_pairs_sql("pairs"))
    assert decided == [m.value for m in Method]
    assert [m.rank for m in Method] == list(range(len(Method)))


def test_the_edges_table_accepts_exactly_the_enums_methods(engine: Engine, schema: str) -> None:
    with DedupStore(engine, FingerprintParams(), schema=schema):
        pass
    with engine.connect() as conn:
        definition = conn.execute(
            text(
                "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c "
                "JOIN pg_namespace n ON n.oid = c.connamespace "
                "WHERE n.nspname = :schema AND c.conname = 'edges_method'"
            ),
            {"schema": schema},
        ).scalar_one()
    assert re.findall(r"'(\w+)'", definition) == [m.value for m in Method]


def test_merging_methods_are_methods() -> None:
    assert merging_methods(FingerprintParams()) == {Method.EXACT, Method.MINHASH, Method.SIMHASH}
    assert merging_methods(FingerprintParams(containment_merges=True)) == set(Method)


def test_the_rule_names_every_method_in_the_enums_order() -> None:
    assert list(RULE) == list(Method)


def test_matches_are_listed_by_method_then_by_decreasing_jaccard() -> None:
    rows = [
        MatchRow(4, "d", 1, "containment", 0.2, 0.9, 30, None, 0.2),
        MatchRow(3, "c", 1, "simhash", 0.5, 0.6, 2, None, 0.5),
        MatchRow(2, "b", 1, "minhash", 0.81, 0.9, 5, None, 0.81),
        MatchRow(5, "e", 1, "minhash", 0.95, 0.97, 1, None, 0.95),
        MatchRow(1, "a", 1, "exact", 1.0, 1.0, 0, None, 1.0),
    ]
    assert [m.external_id for m in sorted_matches(rows)] == ["a", "e", "b", "c", "d"]
