"""One table-driven contract test over all six schedulers (after optax's alias_test)."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.schedulers import ADCS, OCS, SCHEDULERS, DivFL, PowerOfChoice, StaticDPP, Uniform
from adcs.schedulers.adcs import Quality
from tests.schedulers.fake_runtime import gather, run_rounds

N, M, DIM, ROUNDS = 30, 18, 12, 12

FACTORIES = {
    "uniform": lambda: Uniform(m=M),
    "powerofchoice": lambda: PowerOfChoice(m=M),
    "powerofchoice-d": lambda: PowerOfChoice(m=M, candidates=24),
    "ocs": lambda: OCS(m=M),
    "ocs-unbiased": lambda: OCS(m=M, unbiased=True),
    "divfl": lambda: DivFL(m=M),
    "divfl-stale": lambda: DivFL(m=M, stale=True),
    "divfl-stochastic": lambda: DivFL(m=M, stochastic_epsilon=0.1),
    "staticdpp": lambda: StaticDPP(m=M),
    "adcs": lambda: ADCS(m=M, theta=0.8, refresh_every=3),
    "adcs-theta0": lambda: ADCS(m=M, theta=0.0, refresh_every=1),
    "adcs-theta1": lambda: ADCS(m=M, theta=1.0, refresh_every=1),
    "adcs-gradnorm": lambda: ADCS(m=M, quality=Quality.GRAD_NORM),
    "adcs-comm": lambda: ADCS(m=M, gamma=0.5, comm_score=tuple(np.linspace(0, 1, N))),
}

BAD_HYPERPARAMETERS = [
    (Uniform, {"m": 0}, "m"),
    (Uniform, {"m": -3}, "m"),
    (Uniform, {"m": 2.5}, "m"),
    (Uniform, {"m": True}, "m"),
    (PowerOfChoice, {"m": 5, "candidates": 4}, "candidates"),
    (PowerOfChoice, {"m": 5, "loss_source": "full"}, "loss_source"),
    (DivFL, {"m": 5, "stochastic_epsilon": 1.5}, "stochastic_epsilon"),
    (ADCS, {"m": 5, "theta": 1.2}, "theta"),
    (ADCS, {"m": 5, "theta": -0.1}, "theta"),
    (ADCS, {"m": 5, "refresh_every": 0}, "refresh_every"),
    (ADCS, {"m": 5, "quality": "loss"}, "quality"),
    (ADCS, {"m": 5, "gamma": 0.3}, "comm_score"),
    (ADCS, {"m": 5, "gamma": 2.0, "comm_score": (1.0,)}, "gamma"),
    (ADCS, {"m": 5, "comm_score": (1.0, float("nan"))}, "comm_score"),
]


def clustered_data(seed: int, rounds: int = ROUNDS):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(10, DIM))
    updates, losses, available = [], [], []
    for _ in range(rounds):
        updates.append(np.repeat(centres, 3, axis=0) + 0.3 * rng.normal(size=(N, DIM)))
        losses.append(rng.uniform(0.5, 2.5, size=N))
        mask = np.ones(N, dtype=bool)
        mask[rng.choice(N, size=int(rng.integers(0, N - M + 1)), replace=False)] = False
        available.append(mask)
    return updates, losses, available


def test_table_lists_every_method():
    assert set(SCHEDULERS) == {"uniform", "powerofchoice", "ocs", "divfl", "staticdpp", "adcs"}
    for name, cls in SCHEDULERS.items():
        assert isinstance(cls(m=3), cls), name


@pytest.mark.parametrize("name", FACTORIES)
def test_exactly_m_distinct_available_clients(name):
    updates, losses, available = clustered_data(seed=1)
    for t, selection in enumerate(run_rounds(FACTORIES[name](), updates, losses, available)):
        clients = selection.clients
        assert clients.shape == (M,)
        assert np.issubdtype(clients.dtype, np.integer)
        assert len(set(clients.tolist())) == M
        assert ((clients >= 0) & (clients < N)).all()
        assert available[t][clients].all(), f"round {t}: selected an unavailable client"
        if selection.weights is not None:
            assert selection.weights.shape == (M,)
            assert np.isfinite(selection.weights).all() and (selection.weights > 0).all()


@pytest.mark.parametrize("name", FACTORIES)
def test_same_seed_same_choice(name):
    updates, losses, available = clustered_data(seed=2)
    first = run_rounds(FACTORIES[name](), updates, losses, available, seed=7)
    second = run_rounds(FACTORIES[name](), updates, losses, available, seed=7)
    assert [s.clients.tolist() for s in first] == [s.clients.tolist() for s in second]


@pytest.mark.parametrize("name", FACTORIES)
def test_inputs_untouched(name):
    scheduler = FACTORIES[name]()
    updates, losses, available = clustered_data(seed=3, rounds=1)
    g, q, avail = updates[0], losses[0], available[0]
    rng = np.random.default_rng(0)
    state = scheduler.init(N)
    stats = gather(scheduler, state, 0, avail, g, q, rng)
    snapshot = {k: None if v is None else v.copy() for k, v in vars(stats).items()}
    g0, q0, a0 = g.copy(), q.copy(), avail.copy()
    selection, _ = scheduler.select(state, 0, stats, rng)
    for key, value in vars(stats).items():
        if value is not None:
            np.testing.assert_array_equal(value, snapshot[key], err_msg=key)
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(q, q0)
    np.testing.assert_array_equal(avail, a0)
    # the returned selection must not alias the scheduler's state
    selection.clients[:] = -1
    again, _ = scheduler.select(state, 0, stats, np.random.default_rng(0))
    assert (again.clients >= 0).all()


@pytest.mark.parametrize(("cls", "kwargs", "argument"), BAD_HYPERPARAMETERS)
def test_bad_hyperparameters_raise_naming_the_argument(cls, kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        cls(**kwargs)


@pytest.mark.parametrize("name", FACTORIES)
def test_too_few_clients_or_available_raise(name):
    scheduler = FACTORIES[name]()
    with pytest.raises(ValueError, match="n_clients"):
        scheduler.init(M - 1)
    state = scheduler.init(N)
    available = np.zeros(N, dtype=bool)
    available[: M - 1] = True
    with pytest.raises(ValueError, match="available"):
        scheduler.probe(state, 0, available, np.random.default_rng(0))
        scheduler.select(state, 0, gather_blind(available), np.random.default_rng(0))


def gather_blind(available):
    from adcs.schedulers.base import ClientStats

    n = available.shape[0]
    return ClientStats(
        available, np.ones(n, dtype=bool), np.ones(n), np.ones((n, DIM)) + np.arange(n)[:, None]
    )


@pytest.mark.parametrize("name", FACTORIES)
def test_observes_updates_flag_matches_behaviour(name):
    scheduler = FACTORIES[name]()
    assert scheduler.observes_updates is (name == "divfl-stale")
