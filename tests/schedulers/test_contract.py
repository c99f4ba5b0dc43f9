"""One table-driven contract test over every scheduler of ``SCHEDULERS`` (after optax's alias_test)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adcs.round.contract import check_selection
from adcs.schedulers import (
    ADCS,
    ADCS2,
    DELTA,
    KDPP,
    OCS,
    SCHEDULERS,
    ADCS2Adaptive,
    ClusteredSimilarity,
    DivFL,
    FedCor,
    Oort,
    PowerOfChoice,
    Uniform,
)
from adcs.schedulers.adcs import Quality
from adcs.schedulers.adcs2 import QualityScale
from adcs.schedulers.clustered_similarity import Distance
from tests.schedulers.fake_runtime import gather, run_rounds

N, M, DIM, ROUNDS = 30, 18, 12, 12

VARIANTS: dict[str, list[dict]] = {
    "uniform": [{}],
    "powerofchoice": [{}, {"candidates": 24}],
    "ocs": [{}, {"unbiased": True}, {"candidates": 24}, {"unbiased": True, "candidates": 24}],
    "divfl": [{}, {"stale": True}, {"stochastic_epsilon": 0.1}, {"candidates": 24}],
    "staticdpp": [{}],
    "adcs": [
        {"theta": 0.8, "refresh_every": 3},
        {"theta": 0.0, "refresh_every": 1},
        {"theta": 1.0, "refresh_every": 1},
        {"quality": Quality.GRAD_NORM},
        {"gamma": 0.5, "comm_score": tuple(np.linspace(0, 1, N))},
        {"fresh_quality": True, "refresh_every": 4},
        {"theta": 0.8, "refresh_every": 2, "candidates": 24},
    ],
    "md": [{}],
    "clustered_size": [{}],
    "clustered_similarity": [{}, {"distance": Distance.L2}],
    "delta": [{}, {"alpha": 0.0, "variance_decay": 0.0}],
    "oort": [{}, {"durations": tuple(np.linspace(1, 3, N)), "pacer_step": 2}],
    "fedcor": [
        {"warmup": 2, "refit_every": 4},
        {"warmup": 0, "refit_every": 3, "dimension": 2, "epsilon": 0.3},
    ],
    "kdpp": [
        {"refresh_every": 3},
        {"theta": 0.0, "refresh_every": 1},
        {"quality": Quality.GRAD_NORM},
    ],
    "adcs2": [
        {},
        {"theta": 0.0},
        {"theta": 1.0},
        {"quality_scale": QualityScale.NORMAL_SCORES, "refresh_every": 3},
        # the ablation switches (issue 35), each off
        {"select_every": 4},
        {"standardise_quality": False},
        {"observe_directions": False, "refresh_every": 3},
        {"group_cosine": 0.5},
    ],
    "adcs2_adaptive": [{}, {"arms": (0.0, 1.0), "block": 2}, {"arms": (1.0,), "block": 3}],
}
"""Hyperparameter variants of every row of ``SCHEDULERS``; a row without one fails the table test."""

FACTORIES = {
    f"{name}-{i}" if i else name: (lambda cls=SCHEDULERS[name], kw=kw: cls(m=M, **kw))
    for name, variants in VARIANTS.items()
    for i, kw in enumerate(variants)
}

BAD_HYPERPARAMETERS = [
    (Uniform, {"m": 0}, "m"),
    (Uniform, {"m": -3}, "m"),
    (Uniform, {"m": 2.5}, "m"),
    (Uniform, {"m": True}, "m"),
    (PowerOfChoice, {"m": 5, "candidates": 4}, "candidates"),
    (PowerOfChoice, {"m": 5, "loss_source": "full"}, "loss_source"),
    (DivFL, {"m": 5, "stochastic_epsilon": 1.5}, "stochastic_epsilon"),
    (DivFL, {"m": 5, "candidates": 4}, "candidates"),
    (OCS, {"m": 5, "candidates": 2.5}, "candidates"),
    (OCS, {"m": 5, "unbiased": "no"}, "unbiased must be true or false"),  # was truthy: unbiased
    (DivFL, {"m": 5, "stale": 1}, "stale must be true or false"),
    (ADCS, {"m": 5, "candidates": 0}, "candidates"),
    (ADCS, {"m": 5, "theta": 1.2}, "theta"),
    (ADCS, {"m": 5, "theta": -0.1}, "theta"),
    (ADCS2, {"m": 5, "theta": 1.5}, "theta"),
    (ADCS2, {"m": 5, "quality_scale": "zscore"}, "quality_scale"),
    (ADCS2, {"m": 5, "refresh_every": 0}, "refresh_every"),
    (ADCS2, {"m": 5, "select_every": 0}, "select_every"),
    (ADCS2, {"m": 5, "observe_directions": False}, "observe_directions"),
    (ADCS2, {"m": 5, "group_cosine": -0.2}, "group_cosine"),
    (ADCS2Adaptive, {"m": 5, "arms": ()}, "arms"),
    (ADCS2Adaptive, {"m": 5, "arms": (0.5, 0.5)}, "arms must be distinct"),
    (ADCS2Adaptive, {"m": 5, "arms": (0.5, 1.2)}, "arms"),
    (ADCS2Adaptive, {"m": 5, "arms": 0.5}, "arms"),
    (ADCS2Adaptive, {"m": 5, "arms": "0.5"}, "arms"),
    (ADCS2Adaptive, {"m": 5, "block": 1}, "block"),
    (ADCS2Adaptive, {"m": 5, "discount": 0.0}, "discount"),
    (ADCS2Adaptive, {"m": 5, "focus": 1.5}, "focus"),
    (ADCS, {"m": 5, "refresh_every": 0}, "refresh_every"),
    (ADCS, {"m": 5, "quality": "loss"}, "quality"),
    (ADCS, {"m": 5, "gamma": 0.3}, "comm_score"),
    (ADCS, {"m": 5, "gamma": 2.0, "comm_score": (1.0,)}, "gamma"),
    (ADCS, {"m": 5, "comm_score": (1.0, float("nan"))}, "comm_score"),
    (ADCS, {"m": 5, "fresh_quality": 1}, "fresh_quality"),
    (ADCS, {"m": 5, "fresh_quality": True, "quality": Quality.GRAD_NORM}, "fresh_quality"),
    (ClusteredSimilarity, {"m": 5, "distance": "arccos"}, "distance"),
    (DELTA, {"m": 5, "alpha": -1.0}, "alpha"),
    (DELTA, {"m": 5, "beta": float("inf")}, "beta"),
    (DELTA, {"m": 5, "alpha": 0.0, "beta": 0.0}, "alpha \\+ beta"),
    (DELTA, {"m": 5, "variance_decay": 1.0}, "variance_decay"),
    (Oort, {"m": 5, "exploration_factor": 1.5}, "exploration_factor"),
    (Oort, {"m": 5, "cut_off": 0.0}, "cut_off"),
    (Oort, {"m": 5, "pacer_step": 0}, "pacer_step"),
    (Oort, {"m": 5, "round_threshold": 0.0}, "round_threshold"),
    (Oort, {"m": 5, "durations": (1.0, -2.0)}, "durations"),
    (FedCor, {"m": 5, "warmup": -1}, "warmup"),
    (FedCor, {"m": 5, "refit_every": 0}, "refit_every"),
    (FedCor, {"m": 5, "gamma": 0.0}, "gamma"),
    (FedCor, {"m": 5, "noise": 0.0}, "noise"),
    (FedCor, {"m": 5, "discount": 1.5}, "discount"),
    (FedCor, {"m": 5, "loss_source": "full"}, "loss_source"),
    (KDPP, {"m": 5, "theta": 1.0}, "theta"),
    (KDPP, {"m": 5, "jitter": 0.0}, "jitter"),
    (KDPP, {"m": 5, "refresh_every": 0}, "refresh_every"),
    (ADCS, {"m": 5, "comm_score": "fast"}, "comm_score"),
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


def test_every_table_row_is_under_contract():
    assert set(VARIANTS) == set(SCHEDULERS), "give every SCHEDULERS row its VARIANTS entry"
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
    fields = [f.name for f in dataclasses.fields(stats)]  # (not its cached finiteness mask)
    snapshot = {k: None if (v := getattr(stats, k)) is None else v.copy() for k in fields}
    g0, q0, a0 = g.copy(), q.copy(), avail.copy()
    selection, _ = scheduler.select(state, 0, stats, rng)
    for key in fields:
        value = getattr(stats, key)
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
def test_too_few_clients_raise_and_too_few_available_are_all_selected(name):
    scheduler = FACTORIES[name]()
    with pytest.raises(ValueError, match="n_clients"):
        scheduler.init(M - 1)
    updates, losses, _ = clustered_data(seed=4, rounds=4)
    few = np.zeros(N, dtype=bool)
    few[[2, 5, 11, 17, 29]] = True
    none = np.zeros(N, dtype=bool)
    everyone = np.ones(N, dtype=bool)
    masks = [few, none, everyone, few]
    for t, selection in enumerate(run_rounds(scheduler, updates, losses, masks)):
        clients = check_selection(selection.clients, masks[t], M)  # min(m, available) distinct
        if masks[t].sum() <= M:
            assert sorted(clients.tolist()) == np.flatnonzero(masks[t]).tolist()
        if selection.weights is not None:
            assert selection.weights.shape == clients.shape


OBSERVING = {
    "divfl-1",
    "clustered_similarity",
    "clustered_similarity-1",
    "oort",
    "oort-1",
    "adcs2",
    "adcs2-1",
    "adcs2-3",
    "adcs2-4",
    "adcs2-5",
    "adcs2-7",  # adcs2-6 (observe_directions=False) learns directions from probes only
    "adcs2_adaptive",
    "adcs2_adaptive-1",  # adcs2_adaptive-2's one arm, θ = 1, needs no direction
}
"""Variants whose ``observe`` uses the selected clients' reports (the simulator calls it only then)."""


@pytest.mark.parametrize("name", FACTORIES)
def test_observes_updates_flag_matches_behaviour(name):
    scheduler = FACTORIES[name]()
    assert scheduler.observes_updates is (name in OBSERVING)


@pytest.mark.parametrize("name", FACTORIES)
def test_a_scheduler_that_does_not_observe_ignores_observe(name):
    # the simulator skips observe when observes_updates is False, the Flower strategy does not:
    # both runtimes agree only if observe then leaves the state as it is
    scheduler = FACTORIES[name]()
    updates, losses, available = clustered_data(seed=5, rounds=2)
    rng = np.random.default_rng(0)
    state = scheduler.init(N)
    for t in range(2):
        stats = gather(scheduler, state, t, available[t], updates[t], losses[t], rng)
        selection, state = scheduler.select(state, t, stats, rng)
        c = selection.clients
        after = scheduler.observe(state, t, c, updates[t][c], losses[t][c])
        if not scheduler.observes_updates:
            assert after is state
        state = after
