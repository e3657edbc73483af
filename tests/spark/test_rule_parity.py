"""The match rule gives the same verdicts in SQL, in numpy and in a Spark job, on real pairs.

The pairs are every pair of a few dozen Debian copyright files and licences (with an exact copy,
an excerpt and an edit of some of them), scored by the scoring statement over the stored rows,
by the Spark load's scoring over the same rows in a Spark job, and decided again in numpy from
the statement's own scores.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Engine, text

from dedup_store import DedupStore, FingerprintParams, Method
from dedup_store.core.matchrule import METHODS, NO_MATCH, could_match, decide
from dedup_store.db.matches.scoring import score_parameters, scored_pairs_sql
from dedup_store.db.schema.names import qualified
from dedup_store.results import Document
from dedup_store.spark.pairs import EDGE_SCHEMA, score_batch
from tests.spark.corpora import real_documents

#: The rule's parameters: a low SimHash floor and a wide Hamming distance, so that every method
#: decides some pairs.
PARAMS = FingerprintParams(simhash_k=4, simhash_blocks=6, simhash_min_jaccard=0.25)
TAGS = ("gpl", "bsd", "mit", "apache", "lgpl")


def documents(meta: bool = False) -> list[Document]:
    """Some real texts with an exact copy, an excerpt and an edit of a few of them."""
    texts = [t for _, t in real_documents(0) if 2_000 < len(t) < 20_000][:40]
    docs = [(f"d{i}", t) for i, t in enumerate(texts)]
    for i, t in enumerate(texts[:6]):
        words = t.split()
        docs.append((f"copy{i}", t))
        docs.append((f"excerpt{i}", " ".join(words[: len(words) // 5])))
        docs.append((f"edit{i}", " ".join(w for j, w in enumerate(words) if j % 10)))
    return [
        Document(d, t, {"tags": [TAGS[i % 5], TAGS[i % 3]]} if meta else None)
        for i, (d, t) in enumerate(docs)
    ]


def stored_pairs(engine: Engine, schema: str) -> tuple[list[int], list[int]]:
    """Every pair of stored documents, the older first."""
    with engine.connect() as conn:
        ids = conn.execute(text(f"SELECT id FROM {qualified(schema)}.documents ORDER BY id"))
        pairs = list(itertools.combinations(ids.scalars(), 2))
    return [a for a, _ in pairs], [b for _, b in pairs]


def flags(a: list[int], b: list[int]) -> tuple[list[bool], list[bool]]:
    """How each pair was found, varied: through block keys only, through an excerpt key."""
    pairs = list(zip(a, b, strict=True))
    return [(p + 3 * q) % 4 == 0 for p, q in pairs], [(31 * p + q) % 5 < 3 for p, q in pairs]


def sql_scores(
    engine: Engine, schema: str, params: FingerprintParams, a: list[int], b: list[int]
) -> list[tuple[Any, ...]]:
    """``(a, b, hamming, jaccard, containment, meta_score, score, method, same, sampled)`` of
    every pair, by the scoring statement."""
    s = qualified(schema)
    block_only, sampled = flags(a, b)
    cand = """(SELECT * FROM unnest(CAST(:a AS bigint[]), CAST(:b AS bigint[]),
                                    CAST(:block_only AS boolean[]), CAST(:sampled AS boolean[]))
                      AS p(a, b, block_only, sampled)) cand"""
    scored = scored_pairs_sql(
        f"{cand} JOIN {s}.documents x ON x.id = cand.a JOIN {s}.documents y ON y.id = cand.b"
    )
    statement = f"""
        SELECT j.*, x.exact_hash = y.exact_hash, p.sampled
        FROM ({scored}) j JOIN {s}.documents x ON x.id = j.a JOIN {s}.documents y ON y.id = j.b
        JOIN unnest(CAST(:a AS bigint[]), CAST(:b AS bigint[]), CAST(:sampled AS boolean[]))
             AS p(a, b, sampled) ON (p.a, p.b) = (j.a, j.b)
        ORDER BY j.a, j.b
    """
    bind = {"a": a, "b": b, "block_only": block_only, "sampled": sampled}
    with engine.connect() as conn:
        rows = conn.execute(text(statement), {**bind, **score_parameters(params)})
        return [tuple(row) for row in rows]


def numpy_methods(params: FingerprintParams, rows: list[tuple[Any, ...]]) -> list[str | None]:
    """The methods :func:`decide` gives the statement's scores."""
    columns = list(zip(*rows, strict=True))
    pair = {
        "hamming": np.array(columns[2], dtype=np.int64),
        "jaccard": np.array(columns[3], dtype=np.float64),
        "containment": np.array(columns[4], dtype=np.float64),
        "meta_score": np.array(columns[5], dtype=np.float64),
        "same": np.array(columns[8], dtype=bool),
        "sampled": np.array(columns[9], dtype=bool),
    }
    codes = decide(params, pair).tolist()
    return [None if c == NO_MATCH else METHODS[c].value for c in codes]


def spark_edges(
    spark: Any, engine: Engine, schema: str, params: FingerprintParams, a: list[int], b: list[int]
) -> list[tuple[Any, ...]]:
    """The edges the Spark load's scoring gives the pairs, in a Spark job."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT id, exact_hash, simhash, shingle_count, shingles "
                f"FROM {qualified(schema)}.documents"
            )
        )
        features = {row[0]: (bytes(row[1]), *row[2:]) for row in rows}
    block_only, sampled = flags(a, b)
    rows = [
        (p, q, o, s, *features[p], *features[q])
        for p, q, o, s in zip(a, b, block_only, sampled, strict=True)
    ]
    sides = ", ".join(
        f"{side}_hash binary, {side}_simhash bigint, {side}_count int, {side}_shingles array<int>"
        for side in "xy"
    )
    frame = spark.createDataFrame(
        rows, f"a bigint, b bigint, block_only boolean, sampled boolean, {sides}"
    ).repartition(3)
    settings = params.to_dict()

    def score(batches: Any) -> Any:
        for batch in batches:
            yield score_batch(batch, FingerprintParams.from_dict(settings))

    found = frame.mapInArrow(score, EDGE_SCHEMA).collect()
    return sorted(tuple(row) for row in found)


def test_sql_numpy_and_spark_decide_real_pairs_alike(
    spark: Any, engine: Engine, schema: str
) -> None:
    with DedupStore(engine, PARAMS, schema=schema) as store:
        store.add_many(documents())
    a, b = stored_pairs(engine, schema)
    rows = sql_scores(engine, schema, PARAMS, a, b)
    methods = [row[7] for row in rows]
    assert set(methods) == {*(m.value for m in Method), None}

    assert numpy_methods(PARAMS, rows) == methods

    edges = [row for row in rows if row[7] is not None]
    expected = [(r[0], r[1], r[7], r[3], r[4], r[2]) for r in edges]
    found = spark_edges(spark, engine, schema, PARAMS, a, b)
    assert [e[:3] for e in found] == [e[:3] for e in expected]
    assert [e[3:] for e in found] == [pytest.approx(e[3:], rel=1e-12) for e in expected]

    different = [r for r in rows if not r[8] and r[3] is not None]
    possible = could_match(
        PARAMS,
        np.array([r[3] for r in different]),
        np.array([r[4] for r in different]),
        np.array([r[9] for r in different]),
    )
    assert all(possible[i] for i, r in enumerate(different) if r[7] is not None)
    assert not possible.all()


def test_sql_and_numpy_decide_pairs_with_metadata_alike(engine: Engine, schema: str) -> None:
    params = FingerprintParams(meta_fields=("tags",), meta_weight=0.3)
    with DedupStore(engine, params, schema=schema) as store:
        store.add_many(documents(meta=True))
    a, b = stored_pairs(engine, schema)
    rows = sql_scores(engine, schema, params, a, b)
    methods = [row[7] for row in rows]
    vetoed = [r for r in rows if r[7] is None and r[3] is not None and r[3] >= params.threshold]
    assert vetoed and {Method.EXACT.value, Method.MINHASH.value} <= set(methods)
    assert numpy_methods(params, rows) == methods
