"""The server optimizers' contract, over every row of the table (optax's alias tests' shape).

Their arithmetic against Flower's strategies is in ``tests/flower/test_server_optimizers.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from adcs.optimizers import (
    SERVER_OPTIMIZERS,
    FedAdagrad,
    FedAdam,
    FedAvg,
    FedAvgM,
    FedYogi,
    ServerOptimizer,
    check_server_optimizer,
)

ROWS = sorted(SERVER_OPTIMIZERS)
ROUNDINGS = 7 * 2.0**-24
"""Relative error of one round's step in float32: at most 7 roundings from Δ (the square, the
moment's products and sum, the root, τ, the quotient, the rate)."""


def aggregates(rounds: int, n_runs: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, (rounds, n_runs, dim)).astype(np.float32)


def play(opt: Any, deltas: np.ndarray, stepped: np.ndarray | None = None) -> np.ndarray:
    """The models (rounds + 1, n_runs, dim) from w⁽⁰⁾ = 0 under ``deltas`` (rounds, n_runs, dim)."""
    params = np.zeros(deltas.shape[1:], dtype=np.float32)
    state = opt.init(params)
    out = [params.copy()]
    for t, delta in enumerate(deltas):
        step, state = opt.update(delta, state, None if stepped is None else stepped[t])
        params = params + step
        out.append(params.copy())
    return np.stack(out)


@pytest.mark.parametrize("name", ROWS)
def test_every_row_is_a_frozen_server_optimizer_with_a_state_per_run(name: str) -> None:
    opt = SERVER_OPTIMIZERS[name]()
    assert isinstance(opt, ServerOptimizer)
    with pytest.raises(AttributeError):
        opt.eta = 2.0  # frozen
    params = np.zeros((3, 7), dtype=np.float32)
    state = opt.init(params)
    for leaf in state:  # a NamedTuple of arrays with the runs on axis 0
        assert leaf.shape[0] == 3
    step, new = opt.update(aggregates(1, 3, 7)[0], state)
    assert step.dtype == np.float32 and step.shape == (3, 7)
    assert type(new) is type(state)


@pytest.mark.parametrize("name", ROWS)
def test_runs_are_independent_rows_one_call_equals_each_run_alone(name: str) -> None:
    opt = SERVER_OPTIMIZERS[name]()
    deltas = aggregates(6, 4, 9)
    together = play(opt, deltas)
    for j in range(4):
        alone = play(opt, deltas[:, j : j + 1])
        np.testing.assert_array_equal(together[:, j : j + 1], alone)


@pytest.mark.parametrize("name", ROWS)
def test_a_run_that_aggregated_nothing_keeps_its_model_and_moments(name: str) -> None:
    opt = SERVER_OPTIMIZERS[name]()
    deltas = aggregates(5, 2, 6)
    stepped = np.ones((5, 2), dtype=bool)
    stepped[2, 1] = False  # run 1 got no update in round 2
    models = play(opt, deltas, stepped)
    np.testing.assert_array_equal(models[3, 1], models[2, 1])
    # its moments are those of a run that never saw round 2's aggregate (only the round counts)
    skipped = np.delete(deltas[:, 1:2], 2, axis=0)
    without = play(opt, skipped)
    if name == "fedadam":  # its rate depends on the round, which still advanced
        assert not np.array_equal(models[-1, 1], without[-1, 0])
    else:
        np.testing.assert_array_equal(models[-1, 1], without[-1, 0])
    np.testing.assert_array_equal(models[:, 0], play(opt, deltas[:, 0:1])[:, 0])


def test_worked_values_of_the_first_round() -> None:
    delta = np.array([[0.5, -2.0]], dtype=np.float32)
    zeros = np.zeros_like(delta)
    step, _ = FedAvg(eta=0.5).update(delta, FedAvg(eta=0.5).init(zeros))
    np.testing.assert_array_equal(step, [[0.25, -1.0]])
    momentum = FedAvgM(eta=1.0, momentum=0.5)
    first, state = momentum.update(delta, momentum.init(zeros))
    second, _ = momentum.update(delta, state)
    np.testing.assert_array_equal(first, delta)
    np.testing.assert_array_equal(second, 1.5 * delta)  # v = 0.5 Δ + Δ
    # Adagrad: m = Δ, v = Δ², step = η Δ / (|Δ| + τ)
    step, _ = FedAdagrad(eta=0.1, tau=0.5).update(delta, FedAdagrad().init(zeros))
    np.testing.assert_allclose(step, 0.1 * delta / (np.abs(delta) + 0.5), rtol=ROUNDINGS)
    # Adam without bias correction: m = (1 − β₁)Δ, v = (1 − β₂)Δ²
    adam = FedAdam(eta=0.1, beta_1=0.5, beta_2=0.75, tau=0.5, bias_correction=False)
    step, _ = adam.update(delta, adam.init(zeros))
    np.testing.assert_allclose(
        step, 0.1 * 0.5 * delta / (0.5 * np.abs(delta) + 0.5), rtol=ROUNDINGS
    )
    # Yogi from v = 0: sign(0 − Δ²) = −1, so v = (1 − β₂)Δ², as Adam's
    yogi = FedYogi(eta=0.1, beta_1=0.5, beta_2=0.75, tau=0.5)
    np.testing.assert_array_equal(yogi.update(delta, yogi.init(zeros))[0], step)


@pytest.mark.parametrize(
    ("build", "named"),
    [
        (lambda: FedAvg(eta=0), "eta"),
        (lambda: FedAvgM(momentum=1.0), "momentum"),
        (lambda: FedAdagrad(tau=0.0), "tau"),
        (lambda: FedAdam(beta_1=-0.1), "beta_1"),
        (lambda: FedAdam(beta_2=1.0), "beta_2"),
        (lambda: FedAdam(bias_correction="yes"), "bias_correction"),
        (lambda: FedYogi(eta=float("nan")), "eta"),
    ],
)
def test_a_bad_hyperparameter_is_refused_naming_it(build: Any, named: str) -> None:
    with pytest.raises(ValueError, match=f"^{named} must be"):
        build()


def test_what_is_not_a_server_optimizer_is_refused() -> None:
    assert check_server_optimizer(None) is None
    with pytest.raises(ValueError, match="server_optimizer must have init"):
        check_server_optimizer(object())
