"""optimal_bands integrates its curves without numpy as the numpy integration did: the same areas
(to 1e-15 of an area in [0, 1], as numpy's summation order varies with its version and the CPU's
vector width) and the same choice of bands."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dedup_store.core.params import (
    DEFAULT_CHOICES,
    FingerprintParams,
    band_error_areas,
    integrated_bands,
    optimal_bands,
)

THRESHOLDS = [round(0.05 * i, 2) for i in range(1, 20)]
NUM_PERMS = [16, 32, 64, 84, 128, 256]
WEIGHTS = [0.5, 0.95]


def _numpy_areas(threshold: float, num_perm: int) -> dict[tuple[int, int], tuple[float, float]]:
    """Every ``(b, r)``'s areas as the numpy integration computed them (257-point trapezoids)."""

    def area(curve: np.ndarray, xs: np.ndarray) -> float:
        return float(np.sum((curve[1:] + curve[:-1]) * np.diff(xs)) / 2.0)

    low = np.linspace(0.0, threshold, 257)
    high = np.linspace(threshold, 1.0, 257)
    return {
        (b, r): (area(1.0 - (1.0 - low**r) ** b, low), area((1.0 - high**r) ** b, high))
        for b in range(1, num_perm + 1)
        for r in range(1, num_perm // b + 1)
    }


def _numpy_choice(
    areas: dict[tuple[int, int], tuple[float, float]], false_negative_weight: float
) -> tuple[int, int]:
    best: tuple[float, int, int] = (math.inf, 0, 0)
    for (b, r), (fp, fn) in areas.items():
        error = fp * (1.0 - false_negative_weight) + fn * false_negative_weight
        if error < best[0]:
            best = (error, b, r)
    return best[1], best[2]


@pytest.mark.parametrize("num_perm", NUM_PERMS)
def test_bands_are_chosen_as_the_numpy_integration_chose_them(num_perm: int) -> None:
    for threshold in THRESHOLDS:
        expected = _numpy_areas(threshold, num_perm)
        areas = {(b, r): (fp, fn) for b, r, fp, fn in band_error_areas(threshold, num_perm)}
        assert list(areas) == list(expected)
        for key, (fp, fn) in expected.items():
            assert math.isclose(areas[key][0], fp, rel_tol=1e-9, abs_tol=1e-15), (threshold, key)
            assert math.isclose(areas[key][1], fn, rel_tol=1e-9, abs_tol=1e-15), (threshold, key)
        for weight in WEIGHTS:
            chosen = optimal_bands(threshold, num_perm, weight)
            assert chosen == _numpy_choice(expected, weight), (threshold, weight)


def test_the_written_down_choices_are_the_integrated_ones() -> None:
    defaults = FingerprintParams()
    assert defaults.threshold in DEFAULT_CHOICES
    assert list(DEFAULT_CHOICES) == THRESHOLDS
    for threshold, chosen in DEFAULT_CHOICES.items():
        integrated = integrated_bands(threshold, defaults.num_perm, defaults.false_negative_weight)
        assert chosen == integrated, threshold
        assert optimal_bands(threshold, defaults.num_perm, defaults.false_negative_weight) == chosen
