"""Selection metrics: group shares and TV distance (Table 1), worst/average accuracy (Fig. 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adcs.sim import (
    group_accuracy,
    group_share,
    percentile_accuracy,
    selection_counts,
    tv_distance,
    uniform_group_share,
    worst_and_average,
)


def test_group_share_counts_selection_slots() -> None:
    groups = np.array([0, 0, 1, 2])
    selected = np.array([[0, 2], [1, 2], [0, 3]])  # groups: (0, 1), (0, 1), (0, 2)
    np.testing.assert_allclose(group_share(selected, groups, 3), [3 / 6, 2 / 6, 1 / 6])


@given(
    st.integers(1, 6).flatmap(
        lambda n_groups: st.tuples(
            st.just(n_groups),
            st.lists(st.integers(0, n_groups - 1), min_size=2, max_size=12),
        )
    ),
    st.integers(0, 2**32 - 1),
)
def test_group_share_is_a_distribution(case: tuple[int, list[int]], seed: int) -> None:
    n_groups, groups = case
    rng = np.random.default_rng(seed)
    n = len(groups)
    selected = np.array([rng.choice(n, size=2, replace=False) for _ in range(7)])
    share = group_share(selected, np.array(groups), n_groups)
    assert share.shape == (n_groups,)
    assert share.sum() == pytest.approx(1.0) and (share >= 0).all()
    assert 0.0 <= tv_distance(share, uniform_group_share(groups, n_groups)) <= 1.0


def test_tv_distance_known_values() -> None:
    assert tv_distance([0.5, 0.5], [0.5, 0.5]) == 0.0
    assert tv_distance([1.0, 0.0], [0.0, 1.0]) == 1.0
    assert tv_distance([1.0, 0.0], [0.5, 0.5]) == pytest.approx(0.5)
    assert tv_distance([0.2, 0.3, 0.5], [0.3, 0.3, 0.4]) == pytest.approx(0.1)
    # the paper's Table 1 OCS row against the uniform target 0.1 gives its reported 0.2241
    ocs = [0.1257, 0.0433, 0.1661, 0.1004, 0.1666, 0.0583, 0.1653, 0.0477, 0.0733, 0.0533]
    assert tv_distance(ocs, [0.1] * 10) == pytest.approx(0.2241, abs=1e-4)


def test_tv_distance_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="same length"):
        tv_distance([0.5, 0.5], [1.0])


def test_uniform_group_share_is_group_size_over_n() -> None:
    np.testing.assert_allclose(uniform_group_share([0, 0, 0, 1, 2, 2], 4), [0.5, 1 / 6, 1 / 3, 0])
    np.testing.assert_allclose(uniform_group_share(np.arange(30) // 3, 10), 0.1)


def test_selection_counts_and_range_check() -> None:
    np.testing.assert_array_equal(selection_counts([[0, 2], [2, 1]], 4), [1, 1, 2, 0])
    with pytest.raises(ValueError, match="outside"):
        selection_counts([[0, 4]], 4)
    with pytest.raises(ValueError, match="groups must lie"):
        group_share([[0]], [0, 3], 3)


def test_worst_and_average() -> None:
    worst, avg = worst_and_average([[0.5, 0.9, 0.7], [0.2, 0.4, 0.6]])
    np.testing.assert_allclose(worst, [0.5, 0.2])
    np.testing.assert_allclose(avg, [0.7, 0.4])


def test_tenth_percentile_by_hand() -> None:
    acc = np.array([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0]])
    # position 0.1 · 10 = 1 of the sorted values: exactly the second smallest
    np.testing.assert_allclose(percentile_accuracy(acc), [0.2])
    np.testing.assert_allclose(percentile_accuracy(acc, 0.0), acc.min(axis=1))
    np.testing.assert_allclose(percentile_accuracy(np.array([0.0, 1.0]), 0.1), 0.1)
    with pytest.raises(ValueError, match="q"):
        percentile_accuracy(acc, 1.5)


def test_no_client_or_a_bad_q_is_named() -> None:
    # were an IndexError, NumPy's "zero-size array to reduction" and a str/float TypeError
    with pytest.raises(ValueError, match=r"client_acc must be of shape \(\.\.\., n_clients"):
        percentile_accuracy(np.empty((3, 0)))
    with pytest.raises(ValueError, match="client_acc must be of shape"):
        worst_and_average(np.empty(0))
    with pytest.raises(ValueError, match=r"q must be a number in \[0, 1\], got '0\.1'"):
        percentile_accuracy(np.ones(3), "0.1")  # type: ignore[arg-type]


def test_group_accuracy_is_the_mean_of_its_clients() -> None:
    acc = np.array([[0.5, 0.7, 0.9, 0.1], [1.0, 0.0, 0.5, 0.5]])
    got = group_accuracy(acc, np.array([0, 0, 2, 2]), 3)
    np.testing.assert_allclose(got[:, [0, 2]], [[0.6, 0.5], [0.5, 0.5]])
    assert np.isnan(got[:, 1]).all()  # a group with no evaluated client
    with pytest.raises(ValueError, match="groups"):
        group_accuracy(acc, np.array([0, 1]), 3)
    with pytest.raises(ValueError, match="groups"):
        group_accuracy(acc, np.array([0, 1, 2, 3]), 3)
