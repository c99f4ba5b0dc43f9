"""The selection contract and aggregation weights shared by every runtime."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.round.contract import SelectionError, aggregation_weights, check_selection
from adcs.schedulers.base import n_to_select

AVAILABLE = np.array([True, False, True, True, False, True])


def test_the_contract_is_min_m_available_distinct_available_clients() -> None:
    assert n_to_select(3, AVAILABLE) == 3 and n_to_select(9, AVAILABLE) == 4
    np.testing.assert_array_equal(check_selection([5, 0, 2], AVAILABLE, 3), [5, 0, 2])
    np.testing.assert_array_equal(check_selection([0, 2, 3, 5], AVAILABLE, 9), [0, 2, 3, 5])
    assert check_selection([], np.zeros(4, dtype=bool), 2).size == 0
    bad = ([0, 2], [0, 0, 2], [0, 1, 2], [0, 2, 6], [0, 2, -1], [0.0, 2.0, 3.0], [0, 2, 3, 5])
    for clients in bad:
        with pytest.raises(SelectionError, match="distinct available"):
            check_selection(clients, AVAILABLE, 3, who="run 'x'")


def test_default_weights_renormalise_over_the_returned_clients() -> None:
    clients = np.array([4, 1, 2])
    returned = np.array([True, False, True])
    np.testing.assert_allclose(aggregation_weights(clients, returned), [0.5, 0.0, 0.5])
    base = np.array([0.0, 9.0, 1.0, 0.0, 3.0])
    np.testing.assert_allclose(aggregation_weights(clients, returned, base=base), [0.75, 0, 0.25])
    assert not aggregation_weights(clients, np.zeros(3, dtype=bool)).any()


def test_scheduler_weights_keep_their_total_when_clients_drop() -> None:
    clients = np.array([0, 1, 2, 3])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    everyone = np.ones(4, dtype=bool)
    np.testing.assert_allclose(aggregation_weights(clients, everyone, scheduler_weights=w), w)
    some = np.array([True, False, True, False])
    coef = aggregation_weights(clients, some, scheduler_weights=w)
    np.testing.assert_allclose(coef, [2.5, 0.0, 7.5, 0.0])
    assert coef.sum() == pytest.approx(w.sum())
    with pytest.raises(SelectionError, match="finite"):
        aggregation_weights(clients, everyone, scheduler_weights=[1.0, np.nan, 1.0, 1.0])


@pytest.mark.parametrize(
    "weights", [[0.5, -0.5], [0.5, np.nan], [0.5, np.inf], [1.0], [[1.0, 1.0]], ["a", "b"]]
)
def test_selection_weights_that_are_negative_or_not_finite_break_the_contract(
    weights: list[object],
) -> None:
    available = np.ones(4, dtype=bool)
    with pytest.raises(SelectionError, match="2 finite, non-negative selection weights"):
        check_selection([0, 1], available, 2, weights=weights)  # was: accepted silently
    assert check_selection([0, 1], available, 2, weights=[0.0, 2.5]).tolist() == [0, 1]
