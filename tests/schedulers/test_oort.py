"""Oort: exploration of unexplored clients, exploitation by utility, staleness, pacer, durations."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from adcs.schedulers import ClientStats, Oort, ProbeKind
from adcs.schedulers.oort import oort_scores

EVERYONE = np.ones(20, dtype=bool)


def select(scheduler, state, t, rng, mask=EVERYONE):
    return scheduler.select(state, t, ClientStats.blind(mask), rng)


def test_first_round_explores_the_largest_clients_by_size():
    sizes = np.arange(1.0, 21.0)
    scheduler = Oort(4, sample_window=1.0)  # the window is exactly the 4 largest
    state = scheduler.init(20, sizes)
    assert scheduler.probe(state, 0, EVERYONE, np.random.default_rng(0)).kind is ProbeKind.NONE
    selection, _ = select(scheduler, state, 0, np.random.default_rng(0))
    assert sorted(selection.clients.tolist()) == [16, 17, 18, 19]


def test_observed_losses_become_utilities_and_the_high_ones_are_exploited():
    sizes = np.full(20, 10.0)
    scheduler = Oort(5, exploration_factor=0.0, exploration_min=0.0)
    state = scheduler.init(20, sizes)
    losses = np.linspace(0.1, 2.0, 20)
    state = scheduler.observe(state, 0, np.arange(20), np.zeros((20, 1)), losses)
    assert state.utility is not None
    np.testing.assert_allclose(state.utility, 10.0 * losses)  # |B_i| · loss
    rng = np.random.default_rng(1)
    counts = np.zeros(20)
    for _ in range(200):
        selection, _ = select(scheduler, state, 1, rng)
        counts[selection.clients] += 1
    assert counts[15:].sum() > 0.8 * counts.sum()  # drawn among the top utilities
    assert counts[:10].sum() == 0  # below the cut-off: never exploited


def test_scores_are_scaled_utility_plus_staleness_bonus():
    utility = np.array([1.0, 2.0, 3.0, np.nan])
    last = np.array([0, 4, 9, -1])
    scores = oort_scores(utility, last, round_idx=9, clip_bound=1.0, staleness=0.1)
    low, span = 0.999, 3.0 - 0.999
    expected = (utility[:3] - low) / span + np.sqrt(0.1 * math.log(10) / (last[:3] + 1))
    np.testing.assert_allclose(scores[:3], expected)
    assert np.isnan(scores[3])


def test_exploration_decays_to_its_floor_and_unexplored_slots_go_to_exploitation():
    scheduler = Oort(10)
    assert scheduler.exploration(0) == pytest.approx(0.9 * 0.98)
    assert scheduler.exploration(500) == pytest.approx(0.3)
    state = scheduler.init(20)
    state = scheduler.observe(state, 0, np.arange(18), np.zeros((18, 1)), np.ones(18))
    selection, state = select(scheduler, state, 1, np.random.default_rng(2))
    assert {18, 19} <= set(selection.clients.tolist())  # the two unexplored ones
    assert selection.clients.size == 10 and state.rounds == 1


def test_nan_losses_leave_a_client_unexplored():
    scheduler = Oort(3)
    state = scheduler.init(20)
    state = scheduler.observe(state, 0, np.array([1, 2]), np.zeros((2, 1)), np.array([np.nan, 1.0]))
    assert state.utility is not None and np.isnan(state.utility[1]) and state.utility[2] == 1.0


def test_slow_clients_are_penalised_only_with_durations():
    durations = tuple([1.0] * 10 + [10.0] * 10)
    fast = Oort(5, durations=durations, exploration_factor=0.0, exploration_min=0.0)
    blind = Oort(5, exploration_factor=0.0, exploration_min=0.0)
    rng = np.random.default_rng(3)
    losses = np.r_[np.full(10, 1.0), np.full(10, 1.2)]  # the slow clients have more utility
    for scheduler, slow_share in ((fast, 0.1), (blind, 0.5)):
        state = scheduler.init(20)
        state = scheduler.observe(state, 0, np.arange(20), np.zeros((20, 1)), losses)
        counts = np.zeros(20)
        for _ in range(100):
            selection, _ = select(scheduler, state, 1, rng)
            counts[selection.clients] += 1
        share = counts[10:].sum() / counts.sum()
        assert share < slow_share if scheduler is fast else share > slow_share


def test_pacer_relaxes_the_preferred_duration_when_utility_flattens():
    scheduler = Oort(4, durations=tuple(np.linspace(1, 2, 20)), pacer_step=2, pacer_delta=5.0)
    state = scheduler.init(20)
    state = scheduler.observe(state, 0, np.arange(20), np.zeros((20, 1)), np.ones(20))
    rng = np.random.default_rng(4)
    thresholds = []
    for t in range(1, 9):  # utilities never change: flat
        _, state = select(scheduler, state, t, rng)
        thresholds.append(state.round_threshold)
    assert thresholds[0] == 30.0 and thresholds[-1] > 30.0
    assert all(b - a in (0.0, 5.0) for a, b in itertools.pairwise(thresholds))


def test_durations_must_match_the_clients():
    with pytest.raises(ValueError, match="durations"):
        Oort(3, durations=(1.0, 2.0)).init(20)
