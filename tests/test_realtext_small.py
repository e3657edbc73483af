"""The real-text benchmark's machinery, without a database."""

from __future__ import annotations

import itertools
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest

from benchmarks import realtext, realtext_corpus, realtext_report, realtext_runs
from benchmarks.quality_corpus import CorpusDoc
from benchmarks.shingle_truth import components, document_shingles, shingle_truth
from dedup_store import FingerprintParams

PARAMS = FingerprintParams()
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
]


def _texts() -> list[str]:
    rng = random.Random(5)
    base = [" ".join(rng.choices(WORDS, k=60)) for _ in range(4)]
    return [
        base[0],
        base[0] + " omicron pi rho",
        base[1],
        base[1][: len(base[1]) // 2],
        base[2],
        "<p>" + base[2] + "</p>",
        base[3],
        "the and of",
    ]


def test_truth_equals_pairwise_intersections() -> None:
    shingles, empty = document_shingles(_texts(), PARAMS)
    assert empty == [7]
    kept = shingles[:7]
    truth = shingle_truth(kept)
    for i, j in itertools.combinations(range(7), 2):
        inter = len(np.intersect1d(kept[i], kept[j]))
        union = len(kept[i]) + len(kept[j]) - inter
        expected = (inter / union, inter / min(len(kept[i]), len(kept[j])))
        assert truth.score(i, j) == pytest.approx(expected)
        if expected[0] >= 0.25:
            assert (i, j) in truth.scores
    assert (4, 5) in truth.jaccard_pairs(0.99)
    assert (2, 3) in truth.containment_pairs(0.99)


def test_rensa_end_to_end_finds_the_copies() -> None:
    docs = [CorpusDoc(str(i), t, "base", None, "test") for i, t in enumerate(_texts()[:7])]
    run = realtext_runs.run_rensa(docs, PARAMS)
    # the page and its HTML wrapping have the same shingles; unrelated texts are never paired
    assert (4, 5) in run.found[0.9]
    assert all(b - a == 1 and a % 2 == 0 for a, b in run.found[0.5])
    assert [4, 5] in run.clusters


@pytest.mark.parametrize(("tau", "bands"), [(0.5, 21), (0.8, 7), (0.9, 4)])
def test_rensa_bands_divide_num_perm(tau: float, bands: int) -> None:
    # datasketch's bands where they divide 84 (7 and 4); its 16 at 0.5 does not, 21 errs least
    assert realtext_runs.rensa_bands(tau, 84) == bands


def test_components_largest_first() -> None:
    assert components(6, {(0, 1), (1, 2), (4, 5)}) == [[0, 1, 2], [4, 5], [3]]
    assert realtext_runs.union_find_clusters(6, {(4, 5), (0, 1), (1, 2)}) == [[0, 1, 2], [4, 5]]


def test_longest_shared_run_names_the_shared_words() -> None:
    a = "one two three four five six seven eight nine ten"
    b = "zero four five six seven eight eleven"
    words, shared = realtext.longest_shared_run(a, b, PARAMS)
    assert (words, shared) == (5, "four five six seven eight")
    assert realtext.longest_shared_run(a, "nothing alike here at all", PARAMS) == (0, "")


def test_language_and_length() -> None:
    assert realtext_corpus.language("重复文档检测") == "zh"
    assert realtext_corpus.language("Поиск нечётких дубликатов, fuzzy") == "ru"
    assert realtext_corpus.language("plain English text") == "en"
    assert realtext_corpus.text_length("重复文档 and two") == 4


def test_seeded_edits_change_form_not_words() -> None:
    rng = random.Random(1)
    zh = "近似重复文档的检测。它很重要，也很难。"
    spaced = realtext_corpus.respace(zh, rng)
    assert spaced.replace(" ", "") == zh
    assert realtext_corpus.punctuation(zh, rng) == "近似重复文档的检测.它很重要,也很难."
    english = 'A well-known "text" isn\'t short -- it is long.\n\nSecond paragraph here.'
    reformatted = realtext_corpus.reformat(english, rng)
    assert "\r\n" in reformatted
    assert reformatted.split() == english.split()
    assert "\u2010" in realtext_corpus.punctuation(english, random.Random(4))
    edited = realtext_corpus.cjk_edit(zh * 20, 0.2, random.Random(2), ["字"])
    assert edited != zh * 20


def test_seeded_edit_ids_name_their_parent() -> None:
    texts = [" ".join(random.Random(i).choices(WORDS, k=200)) + " - isn't it" for i in range(5)]
    bases = [CorpusDoc(f"b{i:05d}-en", t, "base", None, "x") for i, t in enumerate(texts)]
    edits = realtext_corpus.seeded_edits(bases, 40, seed=3)
    assert len(edits) == 40
    assert all(e.id.endswith(e.parent or "?") and e.text != "" for e in edits)
    assert {e.kind for e in edits} >= {"reformat", "spacing", "punctuation", "word-20%"}


def test_docstrings_have_qualified_names() -> None:
    docs = realtext_corpus.docstring_docs(limit=50)
    assert len(docs) == 50
    assert len({d.id for d in docs}) == 50
    assert all(":" in d.id and len(d.text.split()) >= 20 for d in docs)


def test_markdown_table_escapes_and_formats() -> None:
    text = realtext_report.table(["a", "b"], [["x|y", 1234], [0.5, 12.345]])
    assert text.splitlines() == ["| a | b |", "|---|---|", "| x\\|y | 1,234 |", "| 0.5 | 12.3 |"]


def test_pysrc_docs_read_the_modules_of_every_version(tmp_path: Path) -> None:
    body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(300))
    for version in ("1.0", "1.1"):
        with zipfile.ZipFile(tmp_path / f"demo_pkg-{version}-py3-none-any.whl", "w") as wheel:
            wheel.writestr("demo_pkg/__init__.py", "")
            wheel.writestr("demo_pkg/core.py", body + f"VERSION = {version!r}\n")
            wheel.writestr(f"demo_pkg-{version}.dist-info/METADATA", "Name: demo-pkg\n")
    docs = realtext_corpus.pysrc_docs({"demo-pkg": ("1.0", "1.1")}, tmp_path, min_bytes=1000)
    assert [d.id for d in docs] == [
        "demo_pkg-1.0/demo_pkg/core.py",
        "demo_pkg-1.1/demo_pkg/core.py",
    ]
    assert docs[1].text.endswith("VERSION = '1.1'\n")
    assert docs[0].source.endswith("demo_pkg-1.0-py3-none-any.whl/demo_pkg/core.py")
