"""Selection rates, capture ratios and honest clients' accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.adversary import capture_ratio, honest_accuracy, selection_rates


def test_selection_rates_count_rounds_and_skip_padding():
    selected = np.array([[0, 1], [0, -1], [2, 0], [-1, -1]], dtype=np.int32)
    np.testing.assert_allclose(selection_rates(selected, 4), [0.75, 0.25, 0.25, 0.0])
    with pytest.raises(ValueError, match="shape"):
        selection_rates(np.array([0, 1]), 4)


def test_capture_ratio_is_the_rate_over_the_no_attack_rate():
    attacked = np.array([1.0, 0.5, 0.2, 0.0])
    clean = np.array([0.5, 0.5, 0.0, 0.0])
    np.testing.assert_array_equal(
        capture_ratio(attacked, clean, [0, 1, 2, 3]), [2.0, 1.0, np.inf, np.nan]
    )


def test_honest_accuracy_leaves_the_malicious_clients_out():
    acc = np.array([[0.0] * 5, [0.9, 0.1, 0.8, 0.7, 0.6]])  # history: the last row counts
    result = honest_accuracy(acc, malicious=[1])
    assert result.worst == pytest.approx(0.6)
    assert result.average == pytest.approx(0.75)
    assert result.p10 == pytest.approx(np.percentile([0.9, 0.8, 0.7, 0.6], 10))
    assert honest_accuracy(acc).worst == pytest.approx(0.1)
    with pytest.raises(ValueError, match="every client"):
        honest_accuracy(acc[-1], malicious=range(5))
