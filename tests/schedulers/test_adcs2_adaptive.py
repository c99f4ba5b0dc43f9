"""ADCS-2 with adaptive θ: the bandit's reward, its choice, and ADCS-2 underneath (issue 35)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adcs.schedulers import ADCS2, ADCS2Adaptive
from adcs.schedulers.adcs2_adaptive import decline_rate, tracked_loss
from adcs.schedulers.base import ClientStats
from tests.schedulers.fake_runtime import gather, run_rounds
from tests.schedulers.test_adcs2 import N, grouped


def test_decline_rate_is_the_exponential_rate_of_the_losses():
    rate, rounds = 0.003, np.arange(1, 41)
    trace = [(int(t), math.log(2.0) - rate * t) for t in rounds]
    # the slope's rounding error: each of the two sums has 40 terms of size ≤ 20·0.8, each
    # rounded at ε; divided by Σ(t − t̄)² ≈ 5 330
    spread = float(((rounds - rounds.mean()) ** 2).sum())
    bound = 4 * 40 * 20 * 0.8 * np.finfo(float).eps / spread
    assert abs(decline_rate(trace) - rate) <= bound
    assert decline_rate(trace[:1]) is None
    assert decline_rate([(3, 1.0), (3, 2.0)]) is None  # one distinct round: no slope


def test_the_tracked_loss_is_the_mean_of_the_highest_finite_losses():
    losses = np.array([1.0, np.nan, 3.0, np.inf, 2.0, 6.0])  # four finite
    assert tracked_loss(losses, 1.0) == math.log(3.0)
    assert tracked_loss(losses, 0.5) == math.log(4.5)  # the two highest: 3 and 6
    assert tracked_loss(losses, 0.25) == math.log(6.0)
    assert tracked_loss(losses, 0.01) == math.log(6.0)  # at least one
    assert tracked_loss(np.array([np.nan]), 1.0) is None
    assert tracked_loss(None, 1.0) is None
    assert tracked_loss(np.zeros(3), 1.0) is None


@pytest.mark.parametrize("theta", [0.0, 0.7, 1.0])
def test_one_arm_selects_exactly_what_adcs2_at_that_theta_selects(theta):
    updates, losses, _ = grouped(seed=2, rounds=30, spread=0.6)
    rng = np.random.default_rng(7)
    available = [rng.random(N) < 0.7 for _ in range(30)]
    ours = run_rounds(ADCS2Adaptive(m=8, arms=(theta,), block=4), updates, losses, available)
    theirs = run_rounds(ADCS2(m=8, theta=theta), updates, losses, available)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.clients, b.clients)


def test_a_block_is_rewarded_by_the_losses_after_its_selections_only():
    # the loss probed at the block's first round was measured before any of its selections:
    # a huge loss there must not count
    block, rate = 5, 0.01
    updates, _, _ = grouped(seed=3, rounds=block + 1)
    scheduler = ADCS2Adaptive(m=6, arms=(0.5, 0.9), block=block)
    state, rng = scheduler.init(N), np.random.default_rng(0)
    available = np.ones(N, dtype=bool)
    for t in range(block + 1):
        loss = np.full(N, 50.0) if t == 0 else np.full(N, math.exp(-rate * t))
        stats = gather(scheduler, state, t, available, updates[t], loss, rng)
        selection, state = scheduler.select(state, t, stats, rng)
        c = selection.clients
        state = scheduler.observe(state, t, c, updates[t][c], loss[c])
    assert state.counts[0] == 1.0 and state.counts[1] == 0.0
    assert state.sums[0] == pytest.approx(rate, rel=1e-9)
    assert scheduler.theta_of(state) == 0.9  # the second block plays the arm not yet rewarded


def test_the_bandit_settles_on_the_theta_whose_selections_lower_the_loss_fastest():
    # a federation where θ = 0.8 makes the losses fall twice as fast as any other θ, seen
    # through noisy one-minibatch losses (5 % noise a client a round, against a decrease of at
    # most 0.2 % a round), for the leaderboard's T = 4 000 rounds at the default block and
    # discount: the bandit must find it from its rewards alone
    arms, block, blocks = (0.5, 0.7, 0.8, 0.9, 1.0), 40, 100
    rates = {0.5: 0.001, 0.7: 0.001, 0.8: 0.002, 0.9: 0.001, 1.0: 0.001}
    updates, _, _ = grouped(seed=4, rounds=1)
    scheduler = ADCS2Adaptive(m=6, arms=arms)
    state, rng = scheduler.init(N), np.random.default_rng(0)
    noise = np.random.default_rng(1)
    available, level, played = np.ones(N, dtype=bool), 0.0, []
    for t in range(block * blocks):
        loss = np.exp(level) * (1.0 + 0.05 * noise.standard_normal(N))
        stats = gather(scheduler, state, t, available, updates[0], loss, rng)
        selection, state = scheduler.select(state, t, stats, rng)
        theta = scheduler.theta_of(state)
        if t % block == 0:
            played.append(theta)
        level -= rates[theta]
        state = scheduler.observe(state, t, selection.clients, updates[0][selection.clients], None)
    assert played[: len(arms)] == list(arms)  # every arm once, in order, first
    late = played[blocks // 2 :]
    assert late.count(0.8) > 0.6 * len(late)
    assert late.count(0.8) > 3 * max(late.count(a) for a in arms if a != 0.8)


def test_every_block_holds_its_theta_for_its_rounds():
    updates, losses, _ = grouped(seed=5, rounds=12)
    scheduler = ADCS2Adaptive(m=6, block=4)
    state, rng = scheduler.init(N), np.random.default_rng(0)
    thetas = []
    for t in range(12):
        stats = gather(scheduler, state, t, np.ones(N, dtype=bool), updates[t], losses[t], rng)
        _, state = scheduler.select(state, t, stats, rng)
        thetas.append(scheduler.theta_of(state))
    assert [thetas[i : i + 4] == [thetas[i]] * 4 for i in (0, 4, 8)] == [True] * 3
    assert thetas[0] == 0.5 and thetas[4] == 0.7  # round-robin over the default arms


def test_a_round_with_no_loss_leaves_the_block_unscored():
    scheduler = ADCS2Adaptive(m=2, arms=(0.5, 0.9), block=2)
    state = scheduler.init(4)
    rng = np.random.default_rng(0)
    g = np.eye(4, 3) * 5.0
    for t in range(3):
        stats = ClientStats(np.ones(4, dtype=bool), np.arange(4), np.full(4, np.nan), g)
        _, state = scheduler.select(state, t, stats, rng)
    assert not state.counts.any()  # nothing to score: the first arm is replayed
    assert scheduler.theta_of(state) == 0.5
