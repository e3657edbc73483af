"""An anchored diff of two token sequences, bounded in time on any input.

:func:`diff_tokens` strips the common prefix and suffix of a region and compares what is left:

- a small region (its two sides multiply to at most :data:`DIFFLIB_LIMIT`) with
  :class:`difflib.SequenceMatcher`;
- a larger one by anchoring it on word n-grams that occur as often on both sides (the heaviest
  chain of such blocks, :mod:`dedup_store.core.matchblocks`; 4-grams, or in long regions
  8-grams first), then going on into the stretches between the anchors, whose n-grams are
  counted afresh. A large region without any (its n-grams all repeat too often, or none match) is
  compared step by step from its start, skipping a few tokens to the next equal stretch while
  there are such stretches; what is left is one change.

Every step is charged against a budget proportional to the input's length; when it is spent,
the regions left are changes. Work is thus at most linear in the input (times a logarithm),
whatever the input: the same token repeated, two unrelated texts, a text against its reverse.

Finally, short equal stretches between larger changes (the few words two unrelated passages
share by chance) are folded into the changes around them, so that the result reads as a
reviewer expects: the passages the texts share, and what differs between them.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np

from dedup_store.core.matchblocks import Block, matching_blocks

#: ``equal``: the same tokens on both sides; ``replace``, ``delete`` (only in ``a``),
#: ``insert`` (only in ``b``): a change.
OpKind = Literal["equal", "replace", "delete", "insert"]
#: ``(kind, a_lo, a_hi, b_lo, b_hi)``: token ranges (half-open) of the two sequences.
Opcode = tuple[OpKind, int, int, int, int]

#: Budget per token of the two sequences, in operations (see :attr:`TokenDiff.operations`).
BUDGET_PER_TOKEN = 12
#: Operations charged for each search of a region for anchors, besides its length (the fixed
#: cost of a search, a few dozen array operations, is about that of this many tokens).
SEARCH_COST = 2000
#: Budget every diff has, however short its input.
BUDGET_BASE = 100_000
#: Regions whose sides multiply to at most this many are compared by difflib (its cost grows
#: with that product).
DIFFLIB_LIMIT = 40_000
#: Anchors of larger regions: n-grams of this many tokens (a shingle) ...
ANCHOR_TOKENS = 4
#: ... or in a region of at least :data:`LONG_REGION` tokens on each side, first of this many
#: (fewer blocks to chain, the shorter n-grams then find the rest in the regions between) ...
LONG_ANCHOR_TOKENS = 8
LONG_REGION = 4096
#: ... that occur as often on both sides of the region, at most this many times.
ANCHOR_REPEATS = 16
#: In a large region without anchors, the most tokens skipped to find ...
STEP_TOKENS = 4
#: ... a stretch of at least this many tokens the same on both sides ...
STEP_EQUAL = 4
#: ... before the rest is taken as one change after this many steps without one in a row.
STEP_MISSES = 8
#: Equal stretches of at most this many tokens can be folded into the changes around them:
#: shorter than a shingle (4 words), they are no reason for two documents to match.
FOLD_MAX_TOKENS = 3

# what a region is on the work stack
_GAP, _EQUAL, _CHANGE = 0, 1, 2
# ``(what, a_lo, a_hi, b_lo, b_hi)``
_Region = tuple[int, int, int, int, int]


@dataclasses.dataclass(frozen=True)
class TokenDiff:
    """The differences between two token sequences.

    Attributes:
        opcodes: ranges of both sequences, in order, covering every token of both; no two
            adjacent opcodes are both changes, nor both equal.
        operations: work done, in token steps: each token compared while stripping a common
            prefix or suffix, each token of a region searched for anchors (and
            :data:`SEARCH_COST` for each search), each anchor block
            chained (times the logarithm of their number), and for each region difflib
            compares, its tokens and its pairs of equal tokens.
        exhausted: whether the budget ran out, leaving regions as changes unexamined.
    """

    opcodes: tuple[Opcode, ...]
    operations: int
    exhausted: bool


def diff_tokens(
    a: Sequence[Hashable], b: Sequence[Hashable], *, budget: int | None = None
) -> TokenDiff:
    """The anchored diff of two token sequences (see the module docstring).

    Args:
        a: the first sequence (any hashable tokens; they are compared with ``==``).
        b: the second sequence.
        budget: the most work (:attr:`TokenDiff.operations`, give or take one region's
            search) to spend before leaving the regions still to examine as changes; by default
            ``BUDGET_BASE + BUDGET_PER_TOKEN * (len(a) + len(b))``.
    """
    if budget is None:
        budget = BUDGET_BASE + BUDGET_PER_TOKEN * (len(a) + len(b))
    ids = {token: k for k, token in enumerate(dict.fromkeys(itertools.chain(a, b)))}
    differ = _Differ(list(map(ids.__getitem__, a)), list(map(ids.__getitem__, b)), budget)
    segments = differ.run()
    opcodes = tuple(_opcode(region) for region in _fold_short_equals(segments))
    return TokenDiff(opcodes, differ.operations, differ.exhausted)


class _Differ:
    """The state of one diff: both sequences of token ids, the work done and its budget."""

    def __init__(self, a: list[int], b: list[int], budget: int) -> None:
        self.a, self.b = a, b
        self.array_a = np.array(a, dtype=np.int64)
        self.array_b = np.array(b, dtype=np.int64)
        self.budget = budget
        self.operations = 0
        self.exhausted = False

    def run(self) -> list[_Region]:
        """Equal and change regions, in order, adjacent ones of a kind merged."""
        out: list[_Region] = []
        stack: list[_Region] = [(_GAP, 0, len(self.a), 0, len(self.b))]
        while stack:
            region = stack.pop()
            if region[0] == _GAP:
                stack.extend(reversed(self._split(region)))
            elif region[1] < region[2] or region[3] < region[4]:
                _append(out, region)
        return out

    def _split(self, gap: _Region) -> list[_Region]:
        """A gap as regions in order: equal, change, and smaller gaps to examine."""
        _, alo, ahi, blo, bhi = gap
        if alo == ahi or blo == bhi:
            return [(_CHANGE, alo, ahi, blo, bhi)]
        head = self._common_prefix(alo, ahi, blo, bhi)
        tail = self._common_suffix(alo + head, ahi, blo + head, bhi)
        regions = [(_EQUAL, alo, alo + head, blo, blo + head)]
        regions.extend(self._middle(alo + head, ahi - tail, blo + head, bhi - tail))
        regions.append((_EQUAL, ahi - tail, ahi, bhi - tail, bhi))
        return regions

    def _middle(self, alo: int, ahi: int, blo: int, bhi: int) -> list[_Region]:
        """A gap without common prefix or suffix, as regions in order."""
        change = [(_CHANGE, alo, ahi, blo, bhi)]
        product = (ahi - alo) * (bhi - blo)
        if product == 0:
            return change
        if product <= DIFFLIB_LIMIT:
            return (
                self._difflib(alo, ahi, blo, bhi)
                if self._charge(self._pairs(alo, ahi, blo, bhi))
                else change
            )
        array_a, array_b = self.array_a[alo:ahi], self.array_b[blo:bhi]
        long = min(ahi - alo, bhi - blo) >= LONG_REGION
        for size in (LONG_ANCHOR_TOKENS, ANCHOR_TOKENS) if long else (ANCHOR_TOKENS,):
            if not self._charge(SEARCH_COST + (ahi - alo) + (bhi - blo)):
                return change
            blocks = matching_blocks(array_a, array_b, size, ANCHOR_REPEATS)
            if blocks:
                self.operations += len(blocks) * len(blocks).bit_length()
                return _between(blocks, alo, ahi, blo, bhi)
        return self._stepwise(alo, ahi, blo, bhi)

    def _stepwise(self, alo: int, ahi: int, blo: int, bhi: int) -> list[_Region]:
        """A region without anchors (its n-grams all repeat, or none match), from its start.

        Each step skips the fewest tokens (at most :data:`STEP_TOKENS` in all) after which at
        least :data:`STEP_EQUAL` tokens are the same on both sides, and takes those as equal;
        where there is no such stretch, the next :data:`STEP_TOKENS` tokens of each side are a
        change. After :data:`STEP_MISSES` such misses in a row (unrelated text), the rest is
        one change. Text made of one word or phrase repeated, with edits, is thus aligned edit
        by edit, in a few comparisons per step.
        """
        regions: list[_Region] = []
        misses = 0
        while alo < ahi and blo < bhi and misses < STEP_MISSES and self._charge(0):
            equal, skip_a, skip_b = self._step(alo, ahi, blo, bhi)
            if equal >= STEP_EQUAL:
                misses = 0
            else:
                misses += 1
                equal, skip_a, skip_b = 0, STEP_TOKENS, STEP_TOKENS
            skip_a, skip_b = min(skip_a, ahi - alo), min(skip_b, bhi - blo)
            regions.append((_CHANGE, alo, alo + skip_a, blo, blo + skip_b))
            alo, blo = alo + skip_a, blo + skip_b
            regions.append((_EQUAL, alo, alo + equal, blo, blo + equal))
            alo, blo = alo + equal, blo + equal
        regions.append((_CHANGE, alo, ahi, blo, bhi))
        return regions

    def _step(self, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, int, int]:
        """``(equal tokens, skipped in a, skipped in b)`` of the best step (see
        :meth:`_stepwise`), or the longest equal stretch found if none is long enough."""
        best = (0, 0, 0)
        for skipped in range(1, STEP_TOKENS + 1):
            for skip_a in range(skipped + 1):
                skip_b = skipped - skip_a
                if alo + skip_a < ahi and blo + skip_b < bhi:
                    equal = self._common_prefix(alo + skip_a, ahi, blo + skip_b, bhi)
                    best = max(best, (equal, -skip_a, -skip_b))
            if best[0] >= STEP_EQUAL:
                break
        return best[0], -best[1], -best[2]

    def _charge(self, work: int) -> bool:
        """Spend ``work`` if the budget allows it; ``False`` (and exhausted) if not (nor if it
        is spent already)."""
        if self.operations + work > self.budget:
            self.exhausted = True
            return False
        self.operations += work
        return True

    def _pairs(self, alo: int, ahi: int, blo: int, bhi: int) -> int:
        """The work of difflib on a region: its tokens, and its pairs of equal tokens (the
        positions of ``b`` its search for the longest match goes through for each of ``a``)."""
        counts = Counter(self.b[blo:bhi])
        return (ahi - alo) + (bhi - blo) + sum(map(counts.__getitem__, self.a[alo:ahi]))

    def _difflib(self, alo: int, ahi: int, blo: int, bhi: int) -> list[_Region]:
        """A small gap compared by :class:`difflib.SequenceMatcher`."""
        matcher = difflib.SequenceMatcher(None, self.a[alo:ahi], self.b[blo:bhi], autojunk=False)
        return [
            (_EQUAL if tag == "equal" else _CHANGE, alo + i1, alo + i2, blo + j1, blo + j2)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        ]

    def _common_prefix(self, alo: int, ahi: int, blo: int, bhi: int) -> int:
        """Length of the common prefix of ``a[alo:ahi]`` and ``b[blo:bhi]``."""
        return self._common_run(alo, blo, min(ahi - alo, bhi - blo), 1)

    def _common_suffix(self, alo: int, ahi: int, blo: int, bhi: int) -> int:
        """Length of the common suffix of ``a[alo:ahi]`` and ``b[blo:bhi]``."""
        return self._common_run(ahi, bhi, min(ahi - alo, bhi - blo), -1)

    def _common_run(self, at_a: int, at_b: int, limit: int, way: int) -> int:
        """Length (at most ``limit``) of the run of equal items of ``a`` and ``b`` going from
        ``at_a`` and ``at_b`` forwards (``way`` 1: items ``at``, ``at + 1``...) or backwards
        (-1: items ``at - 1``, ``at - 2``...)."""
        a, b = self.a, self.b
        size, step = 0, 1
        # double the stretch compared while it matches, then halve it (slices compare in C)
        while size < limit:
            step = min(step, limit - size)
            near, far = size * way, (size + step) * way
            span_a = slice(at_a + near, at_a + far) if way > 0 else slice(at_a + far, at_a + near)
            span_b = slice(at_b + near, at_b + far) if way > 0 else slice(at_b + far, at_b + near)
            if a[span_a] == b[span_b]:
                size += step
                step *= 2
            elif step == 1:
                break
            else:
                step //= 2
        self.operations += size + 1
        return size


def _between(blocks: list[Block], alo: int, ahi: int, blo: int, bhi: int) -> list[_Region]:
    """The blocks (positions relative to ``alo`` and ``blo``) as equal regions, and the
    stretches between them as gaps."""
    regions: list[_Region] = []
    i, j = alo, blo
    for ai, bj, size in blocks:
        regions.append((_GAP, i, alo + ai, j, blo + bj))
        i, j = alo + ai + size, blo + bj + size
        regions.append((_EQUAL, alo + ai, i, blo + bj, j))
    regions.append((_GAP, i, ahi, j, bhi))
    return regions


def _append(out: list[_Region], region: _Region) -> None:
    """Append a region, merged with the last one if of the same kind (they are adjacent)."""
    if out and out[-1][0] == region[0]:
        what, alo, _, blo, _ = out[-1]
        out[-1] = (what, alo, region[2], blo, region[4])
    else:
        out.append(region)


def _fold_short_equals(segments: list[_Region]) -> list[_Region]:
    """Fold each equal region of at most :data:`FOLD_MAX_TOKENS` tokens that lies between two
    changes, each larger than it on some side, into one change with them."""
    out: list[_Region] = []
    for region in segments:
        _append(out, region)
        while len(out) >= 3 and _foldable(out[-3], out[-2], out[-1]):
            right, _, left = out.pop(), out.pop(), out.pop()
            out.append((_CHANGE, left[1], right[2], left[3], right[4]))
    return out


def _foldable(left: _Region, middle: _Region, right: _Region) -> bool:
    if middle[0] != _EQUAL or left[0] != _CHANGE or right[0] != _CHANGE:
        return False
    size = middle[2] - middle[1]
    return size <= FOLD_MAX_TOKENS and size < _largest_side(left) and size < _largest_side(right)


def _largest_side(region: _Region) -> int:
    return max(region[2] - region[1], region[4] - region[3])


def _opcode(region: _Region) -> Opcode:
    what, alo, ahi, blo, bhi = region
    if what == _EQUAL:
        return ("equal", alo, ahi, blo, bhi)
    if alo == ahi:
        return ("insert", alo, ahi, blo, bhi)
    if blo == bhi:
        return ("delete", alo, ahi, blo, bhi)
    return ("replace", alo, ahi, blo, bhi)
