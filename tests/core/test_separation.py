"""The minimum cuts that part pairs judged not duplicates, against exhaustive search."""

from __future__ import annotations

import itertools
import random

import pytest

from dedup_store.core.separation import capacity, separate


def brute_force_cut(n: int, links: dict[tuple[int, int], int | None], s: int, t: int) -> int | None:
    """The least capacity of a cut between ``s`` and ``t`` over every split of the nodes."""
    best = None
    for mask in range(1 << n):
        if not (mask >> s) & 1 or (mask >> t) & 1:
            continue
        crossing = [c for (a, b), c in links.items() if ((mask >> a) & 1) != ((mask >> b) & 1)]
        if None in crossing:
            continue
        value = sum(c for c in crossing if c is not None)
        best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize("seed", range(300))
def test_a_cut_is_minimum_and_parts_the_pair(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 8)
    links: dict[tuple[int, int], int | None] = {}
    for a, b in itertools.combinations(range(n), 2):
        if rng.random() < 0.5:
            links[(a, b)] = None if rng.random() < 0.1 else rng.choice([1, 2, 3, 5, 8])
    s, t = rng.sample(range(n), 2)
    result = separate(range(n), [(a, b, c) for (a, b), c in links.items()], [(s, t)])
    joined = any(s in c and t in c for c in result.components)
    best = brute_force_cut(n, links, s, t)
    if (s, t) in result.cuts:
        assert not joined
        assert sum(links[edge] or 0 for edge in result.cuts[(s, t)]) == best
    elif result.unseparated:
        assert joined and best is None
    else:  # never joined
        assert not joined


def test_copies_of_one_text_hang_off_the_first_and_only_the_judged_one_leaves() -> None:
    exact = capacity(1.0)
    links = [(1, 2, exact), (1, 3, exact), (1, 4, capacity(0.8))]
    result = separate([1, 2, 3, 4], links, [(1, 2)])
    assert result.components == [[1, 3, 4], [2]]
    assert result.cuts == {(1, 2): [(1, 2)]}


def test_the_cut_leaves_the_first_document_the_fewest_companions() -> None:
    # 1 - 2 - 3 with equal weights: cutting 1-2 and cutting 2-3 are both minimum
    result = separate([1, 2, 3], [(1, 2, 5), (2, 3, 5)], [(1, 3)])
    assert result.cuts == {(1, 3): [(1, 2)]}
    assert result.components == [[1], [2, 3]]


def test_pairs_joined_only_by_confirmed_links_stay_joined() -> None:
    result = separate([1, 2, 3], [(1, 2, None), (2, 3, None), (1, 3, 7)], [(1, 3)])
    assert result.unseparated == [(1, 3)] and result.components == [[1, 2, 3]]


def test_later_cuts_never_join_what_earlier_ones_parted() -> None:
    rng = random.Random(7)
    nodes = list(range(40))
    links = [(a, b, rng.randint(1, 9)) for a, b in itertools.combinations(nodes, 2)
             if rng.random() < 0.15]  # fmt: skip
    vetoes = [tuple(rng.sample(nodes, 2)) for _ in range(15)]
    result = separate(nodes, links, vetoes)  # type: ignore[arg-type]
    where = {node: i for i, c in enumerate(result.components) for node in c}
    assert all(where[a] != where[b] for a, b in vetoes)
