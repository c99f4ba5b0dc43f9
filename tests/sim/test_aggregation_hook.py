"""The engine's aggregation hook (RunSpec.aggregator) and the robust rules."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.aggregation import (
    Robust,
    RobustAggregation,
    coordinate_median,
    norm_clipped_sum,
    trimmed_mean,
    weighted_sum,
)
from adcs.schedulers import ADCS, OCS, DivFL, Uniform
from adcs.sim import RunSpec, SimConfig, simulate
from tests.sim.conftest import make_data

CONFIG = SimConfig(10, batch_size=4, local_lr=0.3, eval_every=5)


@pytest.mark.parametrize(
    "scheduler",
    [Uniform(3), ADCS(3, refresh_every=3), OCS(3), DivFL(3, stale=True)],
    ids=["uniform", "adcs", "ocs", "divfl-stale"],
)
@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_the_mean_through_the_hook_is_the_engines_mean(scheduler, dropout):
    data = make_data(seed=3)
    config = SimConfig(10, batch_size=4, local_lr=0.3, eval_every=5, dropout=dropout)
    (plain,) = simulate([RunSpec(scheduler, 0, "run")], data, config)
    hook = RobustAggregation(Robust.MEAN)
    (hooked,) = simulate([RunSpec(scheduler, 0, "run", aggregator=hook)], data, config)
    np.testing.assert_array_equal(plain.selected, hooked.selected)
    np.testing.assert_allclose(plain.final_params, hooked.final_params, atol=1e-6)
    assert plain.client_updates == hooked.client_updates


class Recorder:
    """An aggregator that keeps what it is given and steps nowhere."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []

    def aggregate(self, state, round_idx, clients, updates, coefs, probed):
        self.calls.append((round_idx, clients.copy(), updates.copy(), coefs.copy()))
        return updates, np.zeros(updates.shape[1], dtype=np.float32)


def test_the_hook_gets_every_returned_clients_own_update():
    data = make_data(seed=3)
    config = SimConfig(6, batch_size=4, local_lr=0.3, eval_every=6, dropout=0.3)
    recorder = Recorder()
    (frozen,) = simulate([RunSpec(OCS(3), 0, "o", aggregator=recorder)], data, config)
    assert [c[0] for c in recorder.calls] == list(range(6))
    for t, clients, updates, coefs in recorder.calls:
        np.testing.assert_array_equal(clients, frozen.selected[t][frozen.returned[t]])
        assert updates.shape[0] == clients.size == coefs.size
        if clients.size:
            assert coefs.sum() == pytest.approx(1.0)
            assert (np.linalg.norm(updates, axis=1) > 0).all()
    # the recorder's zero step keeps w⁽⁰⁾; one plain round moves it by Σ c_i Δ_i of the updates
    # the recorder was given in round 0 — they are the clients' own updates
    one_round = SimConfig(1, batch_size=4, local_lr=0.3, eval_every=1, dropout=0.3)
    (moved,) = simulate([RunSpec(OCS(3), 0, "o")], data, one_round)
    _, _, updates, coefs = recorder.calls[0]
    np.testing.assert_allclose(
        moved.final_params - frozen.final_params, weighted_sum(updates, coefs), atol=1e-6
    )


def test_run_spec_refuses_an_aggregator_without_aggregate():
    with pytest.raises(ValueError, match="Aggregator protocol"):
        RunSpec(Uniform(3), 0, "u", aggregator=object())  # type: ignore[arg-type]


# -- the rules, worked by hand -------------------------------------------------------------------

UPDATES = np.array(
    [[1.0, 10.0], [2.0, -1.0], [3.0, 0.0], [4.0, 1.0], [100.0, 2.0]], dtype=np.float32
)
EQUAL = np.full(5, 0.2)


def test_coordinate_median_ignores_one_outlier_per_coordinate():
    np.testing.assert_allclose(coordinate_median(UPDATES, EQUAL), [3.0, 1.0])
    np.testing.assert_allclose(coordinate_median(UPDATES, EQUAL * 2), [6.0, 2.0])  # × Σ c


def test_trimmed_mean_cuts_each_end_of_each_coordinate():
    np.testing.assert_allclose(trimmed_mean(UPDATES, EQUAL, 0.2), [3.0, 1.0])  # 1 cut per end
    np.testing.assert_allclose(trimmed_mean(UPDATES, EQUAL, 0.0), UPDATES.mean(axis=0), rtol=1e-6)


def test_norm_clipping_bounds_each_update_at_the_median_norm():
    norms = np.linalg.norm(UPDATES, axis=1)
    tau = np.median(norms)
    expected = sum(0.2 * u * min(1.0, tau / n) for u, n in zip(UPDATES, norms, strict=True))
    np.testing.assert_allclose(norm_clipped_sum(UPDATES, EQUAL), expected, rtol=1e-5)
    assert np.linalg.norm(norm_clipped_sum(UPDATES, EQUAL)) <= tau * (1 + 1e-6)


def test_rules_of_no_update_step_nowhere():
    empty = np.empty((0, 3), dtype=np.float32)
    for rule in Robust:
        np.testing.assert_array_equal(RobustAggregation(rule).combine(empty, np.empty(0)), 0.0)


@pytest.mark.parametrize("rule", [Robust.MEDIAN, Robust.TRIMMED_MEAN, Robust.NORM_CLIP])
def test_a_non_finite_update_is_left_out_of_the_robust_rules(rule):
    # a poisoner's overflow (Poison.SCALED × 1e39 in float32): inf, and NaN where 0 × inf
    poisoned = np.vstack([UPDATES, [[np.inf, np.nan]]]).astype(np.float32)
    coefs = np.full(6, 1 / 6)
    step = RobustAggregation(rule).combine(poisoned, coefs)
    if rule is Robust.NORM_CLIP:  # the others' weights are kept
        want = norm_clipped_sum(UPDATES, coefs[:5])
    else:  # the median and trimmed mean of the others, × Σ c = 1
        want = RobustAggregation(rule).combine(UPDATES, EQUAL)
    np.testing.assert_allclose(step, want, rtol=1e-6)
