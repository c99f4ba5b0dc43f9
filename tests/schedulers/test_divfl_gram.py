"""DivFL's Gram without the scaled copy: the same numbers as the scaled copy's, at any scale."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.dpp import gram_matrix, power_of_two_scale
from adcs.schedulers.divfl import distances_from_gram, facility_location_greedy, unit_scale_gram


@pytest.mark.parametrize("scale", [1e-30, 1e-12, 1e-3, 1.0, 1e5, 1e30])
def test_unit_scale_gram_is_the_scaled_copys_gram_bit_for_bit(scale: float) -> None:
    rng = np.random.default_rng(3)
    updates = (rng.standard_normal((23, 1500)) * scale).astype(np.float32)
    updates[rng.random(updates.shape) < 0.3] = 0.0  # zero pixels: exact zeros in the updates
    updates[5] = 0.0  # a client whose update is zero
    updates[7] *= np.float32(1e-25)  # a far smaller row: the scaled copy is formed instead
    expected = gram_matrix(updates * power_of_two_scale(updates))
    got = unit_scale_gram(updates)
    assert got.dtype == np.float64
    assert got.tobytes() == expected.tobytes()


def test_power_of_two_scale_without_the_absolute_copy() -> None:
    assert power_of_two_scale(np.array([0.3, -5.0, 2.0])) == 0.125  # max |v| = 5 in [4, 8)
    assert power_of_two_scale(np.array([-0.0, 0.0])) == 1.0
    assert power_of_two_scale(np.array([1.0, np.nan])) == 1.0
    assert power_of_two_scale(np.array([-np.inf, 1.0])) == 1.0
    assert power_of_two_scale(np.empty(0)) == 1.0


def test_rows_of_ordinary_scale_take_the_unscaled_product() -> None:
    rng = np.random.default_rng(4)
    updates = (rng.standard_normal((10, 300)) * 1e-3).astype(np.float32)
    scale = power_of_two_scale(updates)
    unscaled = gram_matrix(updates) * (scale * scale)
    assert unit_scale_gram(updates).tobytes() == unscaled.tobytes()


@pytest.mark.parametrize("scale", [1e-30, 1e-12, 1e-3, 1.0, 1e5, 1e30])
def test_without_rescaling_the_distances_differ_by_the_scale_alone(scale: float) -> None:
    rng = np.random.default_rng(5)
    updates = (rng.standard_normal((23, 1500)) * scale).astype(np.float32)
    updates[rng.random(updates.shape) < 0.3] = 0.0
    updates[5] = 0.0
    everyone = np.ones(23, dtype=bool)

    rescaled = distances_from_gram(unit_scale_gram(updates))
    as_is = distances_from_gram(unit_scale_gram(updates, rescale=False))

    s = power_of_two_scale(updates)
    assert (as_is * s).tobytes() == rescaled.tobytes() or as_is.tobytes() == rescaled.tobytes()
    picks = facility_location_greedy(rescaled, 12, everyone)
    assert facility_location_greedy(as_is, 12, everyone).tolist() == picks.tolist()
