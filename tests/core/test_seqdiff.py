"""The anchored diff under alignment: correct on any input, and bounded in work."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_store.core import matchblocks
from dedup_store.core.matchblocks import heaviest_chain, matching_blocks
from dedup_store.core.seqdiff import BUDGET_BASE, BUDGET_PER_TOKEN, TokenDiff, diff_tokens


def check(diff: TokenDiff, a: Sequence[object], b: Sequence[object]) -> None:
    """The opcodes cover both sequences in order, equal ones are equal, and they alternate."""
    at_a = at_b = 0
    previous = None
    for kind, alo, ahi, blo, bhi in diff.opcodes:
        assert (alo, blo) == (at_a, at_b)
        sizes = {
            "equal": ahi - alo == bhi - blo > 0,
            "replace": ahi > alo and bhi > blo,
            "delete": ahi > alo and bhi == blo,
            "insert": ahi == alo and bhi > blo,
        }
        assert sizes[kind]
        if kind == "equal":
            assert list(a[alo:ahi]) == list(b[blo:bhi])
        if previous is not None:
            assert (previous == "equal") != (kind == "equal")
        at_a, at_b, previous = ahi, bhi, kind
    assert (at_a, at_b) == (len(a), len(b))


def shared(diff: TokenDiff) -> int:
    return sum(ahi - alo for kind, alo, ahi, _, _ in diff.opcodes if kind == "equal")


# sequences long enough (beyond difflib's small regions) to be anchored on n-grams
_TOKENS = st.lists(st.integers(0, 6), max_size=900)


@settings(max_examples=200, deadline=None)
@given(_TOKENS, _TOKENS)
def test_any_two_sequences(a: list[int], b: list[int]) -> None:
    check(diff_tokens(a, b), a, b)


@settings(max_examples=200, deadline=None)
@given(_TOKENS, st.data())
def test_a_sequence_and_an_edited_copy(a: list[int], data: st.DataObject) -> None:
    b = list(a)
    for _ in range(data.draw(st.integers(0, 8))):
        at = data.draw(st.integers(0, len(b)))
        b[at:at] = data.draw(st.lists(st.integers(0, 9), max_size=5))
        del b[data.draw(st.integers(0, len(b))) :][: data.draw(st.integers(0, 5))]
    diff = diff_tokens(a, b)
    check(diff, a, b)
    assert diff_tokens(a, a).opcodes == ((("equal", 0, len(a), 0, len(a)),) if a else ())


@settings(max_examples=100, deadline=None)
@given(_TOKENS, _TOKENS, st.integers(0, 20_000))
def test_any_budget_still_covers_both_sequences(a: list[int], b: list[int], budget: int) -> None:
    diff = diff_tokens(a, b, budget=budget)
    check(diff, a, b)
    if diff.exhausted:
        assert diff.operations <= budget + 2 * (len(a) + len(b)) + 2


def test_hash_collisions_never_make_unequal_tokens_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    # every n-gram hashes to one of two values: most pairs are false, and verified away
    monkeypatch.setattr(
        matchblocks, "ngram_hashes", lambda ids, n: (ids[: len(ids) - n + 1] % 2).astype(np.uint32)
    )
    rng = random.Random(3)
    a = [rng.randrange(50) for _ in range(3000)]
    b = a[:1000] + [rng.randrange(50) for _ in range(500)] + a[1500:]
    check(diff_tokens(a, b), a, b)


def test_passages_repeated_on_both_sides_pair_in_order() -> None:
    # no 4-gram is unique, but they occur as often on both sides: the k-th copies pair up
    passage = list(range(40))
    a = np.array(passage * 3 + [100] + passage, dtype=np.int64)
    b = np.array(passage * 3 + [200] + passage, dtype=np.int64)
    assert matching_blocks(a, b, 4, 16) == [(0, 0, 120), (121, 121, 40)]
    # only unique 4-grams: none is on both sides
    assert matching_blocks(a, b, 4, 1) == []


def test_the_heaviest_chain_of_crossing_blocks() -> None:
    # (a position, b position, length): the second and third cross, the third is heavier
    blocks = [(0, 0, 10), (10, 50, 5), (20, 20, 30), (60, 60, 4)]
    assert heaviest_chain(blocks) == [(0, 0, 10), (20, 20, 30), (60, 60, 4)]
    # a block overlapping the one before it on a side cannot follow it
    assert heaviest_chain([(0, 0, 10), (5, 20, 8), (12, 12, 3)]) == [(0, 0, 10), (12, 12, 3)]


# -- the bound: operations grow linearly with the input, on the worst inputs -------------------


def _inputs(size: int) -> dict[str, tuple[list[int], list[int]]]:
    rng = random.Random(size)
    small = [rng.randrange(10) for _ in range(size)]
    return {
        "one token": ([0] * size, [0] * (size // 2) + [1] + [0] * (size // 2)),
        "one token, edited": ([0] * size, [int(rng.random() < 0.01) for _ in range(size)]),
        "unrelated": (
            [rng.randrange(size) for _ in range(size)],
            [rng.randrange(size) for _ in range(size)],
        ),
        "ten tokens, unrelated": (small, [rng.randrange(10) for _ in range(size)]),
        "ten tokens, reversed": (small, small[::-1]),
        "distinct, reversed": (list(range(size)), list(range(size))[::-1]),
        "periods 8 and 9": ([k % 8 for k in range(size)], [k % 9 for k in range(size)]),
    }


@pytest.mark.parametrize("name", list(_inputs(10)))
def test_operations_are_linear_in_the_input(name: str) -> None:
    small_a, small_b = _inputs(20_000)[name]
    large_a, large_b = _inputs(80_000)[name]
    small = diff_tokens(small_a, small_b)
    large = diff_tokens(large_a, large_b)
    check(large, large_a, large_b)
    tokens = len(large_a) + len(large_b)
    assert large.operations <= BUDGET_BASE + (BUDGET_PER_TOKEN + 2) * tokens
    # four times the input, at most about four times the work (quadratic would be sixteen)
    assert large.operations <= 5 * small.operations + BUDGET_BASE


def test_a_light_edit_costs_a_few_operations_per_token() -> None:
    rng = random.Random(9)
    a = [rng.randrange(20_000) for _ in range(200_000)]
    b = list(a)
    for at in sorted(rng.sample(range(len(b)), 2000), reverse=True):
        b[at] = -1
    diff = diff_tokens(a, b)
    check(diff, a, b)
    assert not diff.exhausted and shared(diff) == len(a) - 2000
    assert diff.operations <= 4 * (len(a) + len(b))
    # one replace per changed token (fewer where two are neighbours), equal runs between
    assert len(diff.opcodes) <= 2 * 2000 + 1
