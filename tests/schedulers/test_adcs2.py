"""ADCS-2: what each of its design choices promises (issue 23), checked on constructed clients."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.dpp import greedy_map, unit_rows
from adcs.schedulers import ADCS, ADCS2, PowerOfChoice
from adcs.schedulers.adcs import log_weights
from adcs.schedulers.adcs2 import QualityScale, standardise
from adcs.schedulers.base import ClientStats, ProbeKind
from tests.schedulers.fake_runtime import gather, run_rounds

N_GROUPS, PER_GROUP, DIM = 10, 3, 40
N = N_GROUPS * PER_GROUP


def grouped(seed: int, rounds: int, spread: float = 0.05, hard: int | None = None):
    """Clients in groups of near-parallel updates (cosine ≈ 1 − spread²/2 inside a group, groups
    near-orthogonal); losses ≈ 1 ± 0.02, and 1.4 ± 0.02 for every client of group ``hard``."""
    rng = np.random.default_rng(seed)
    centres = np.linalg.qr(rng.normal(size=(DIM, N_GROUPS)))[0].T  # orthonormal group directions
    group = np.repeat(np.arange(N_GROUPS), PER_GROUP)
    updates, losses = [], []
    for _ in range(rounds):
        updates.append(centres[group] + spread * rng.normal(size=(N, DIM)) / np.sqrt(DIM))
        loss = 1.0 + 0.02 * rng.normal(size=N)
        if hard is not None:
            loss[group == hard] += 0.4
        losses.append(loss)
    return updates, losses, group


@pytest.mark.parametrize("scale", list(QualityScale))
def test_standardise_is_invariant_to_an_affine_rescaling_of_the_losses(scale):
    losses = np.random.default_rng(0).gamma(2.0, size=50)
    np.testing.assert_allclose(
        standardise(1000.0 * losses + 7.0, scale), standardise(losses, scale), atol=1e-9
    )


def test_standardise_ties_share_a_score_and_equal_losses_score_zero():
    scores = standardise(np.array([2.0, 1.0, 2.0, 3.0]), QualityScale.NORMAL_SCORES)
    assert scores[0] == scores[2]  # tied losses, one mean rank
    assert scores[1] < scores[0] < scores[3]
    for scale in QualityScale:
        assert not standardise(np.full(7, np.log(10.0)), scale).any()
    z = standardise(np.array([1.0, 2.0, 3.0, 10.0]), QualityScale.ZSCORE)
    assert abs(z.mean()) < 1e-12 and abs(z.std() - 1.0) < 1e-12


@pytest.mark.parametrize("scale", list(QualityScale))
def test_theta_means_the_same_whatever_the_scale_of_the_losses(scale):
    updates, losses, _ = grouped(seed=1, rounds=6, spread=0.8)
    scaled = [1e4 * q + 3.0 for q in losses]
    available = [np.ones(N, dtype=bool)] * 6
    scheduler = ADCS2(m=8, theta=0.7, quality_scale=scale)
    ours = run_rounds(scheduler, updates, losses, available)
    rescaled = run_rounds(scheduler, updates, scaled, available)
    assert [s.clients.tolist() for s in ours] == [s.clients.tolist() for s in rescaled]
    # ADCS multiplies raw losses by α, so the same rescaling changes what it picks
    adcs = ADCS(m=8, theta=0.7, refresh_every=1)
    raw = run_rounds(adcs, updates, losses, available)
    raw_scaled = run_rounds(adcs, updates, scaled, available)
    assert [s.clients.tolist() for s in raw] != [s.clients.tolist() for s in raw_scaled]


def test_selection_is_the_map_over_the_clients_available_now():
    # round 0 sees everyone; afterwards availability changes every round: each selection must be
    # the greedy MAP over exactly the available clients, with their cached directions
    updates, losses, _ = grouped(seed=2, rounds=5, spread=0.8)
    rng = np.random.default_rng(3)
    available = [np.ones(N, dtype=bool)] + [rng.random(N) < 0.5 for _ in range(4)]
    scheduler = ADCS2(m=6, theta=0.6)
    picks = run_rounds(scheduler, updates, losses, available, seed=0)
    again = run_rounds(scheduler, updates, losses, available, seed=99)
    assert [s.clients.tolist() for s in picks] == [s.clients.tolist() for s in again]
    # expected: directions are last seen at round 0 (everyone) or when selected since
    cached = unit_rows(updates[0]).astype(np.float64)
    for t in range(1, 5):
        cached[picks[t - 1].clients] = unit_rows(updates[t - 1][picks[t - 1].clients])
        idx = np.flatnonzero(available[t])
        s = standardise(losses[t][idx], scheduler.quality_scale)
        w = log_weights(scheduler.alpha, s, np.ones(idx.size, dtype=bool))
        expect = idx[greedy_map(cached[idx] @ cached[idx].T, 6, w, rtol=1e-5)]
        assert sorted(picks[t].clients.tolist()) == sorted(expect.tolist()), t


def test_a_group_with_much_higher_loss_gets_more_than_one_slot():
    updates, losses, group = grouped(seed=4, rounds=1, spread=0.2, hard=7)
    available = [np.ones(N, dtype=bool)]
    # one round to see every direction, then the choice at a higher-loss round
    pick = run_rounds(ADCS2(m=6), updates * 2, losses * 2, available * 2)[-1].clients
    assert (group[pick] == 7).sum() >= 2
    # the paper's ADCS on the same losses gives the hard group one slot: diversity wins
    paper = run_rounds(ADCS(m=6, theta=0.8, refresh_every=1), updates, losses, available)[0]
    assert (group[paper.clients] == 7).sum() == 1


def test_at_theta_one_it_is_power_of_choice():
    updates, losses, _ = grouped(seed=5, rounds=5)
    available = [np.random.default_rng(t).random(N) < 0.7 for t in range(5)]
    ours = run_rounds(ADCS2(m=5, theta=1.0), updates, losses, available)
    poc = run_rounds(PowerOfChoice(m=5), updates, losses, available)
    assert [s.clients.tolist() for s in ours] == [s.clients.tolist() for s in poc]


def _probe_kinds(scheduler, available, rounds):
    updates, losses, _ = grouped(seed=6, rounds=rounds)
    rng = np.random.default_rng(0)
    state = scheduler.init(N)
    kinds, cost = [], {"updates": 0, "losses": 0}
    for t in range(rounds):
        probe = scheduler.probe(state, t, available[t], rng)
        stats = gather(scheduler, state, t, available[t], updates[t], losses[t], rng)
        kinds.append(probe.kind)
        n = int(available[t].sum())
        cost["updates" if probe.kind is ProbeKind.UPDATES else "losses"] += n
        selection, state = scheduler.select(state, t, stats, rng)
        c = selection.clients
        new = np.setdiff1d(c, stats.clients) if probe.kind is ProbeKind.UPDATES else c
        cost["updates"] += new.size  # probed updates are reused, the rest are computed
        state = scheduler.observe(state, t, c, updates[t][c], losses[t][c])
    return kinds, cost


def test_cost_per_round_is_power_of_choices_after_every_client_is_seen():
    rounds, m = 12, 6
    everyone = [np.ones(N, dtype=bool)] * rounds
    kinds, cost = _probe_kinds(ADCS2(m=m), everyone, rounds)
    assert kinds == [ProbeKind.UPDATES] + [ProbeKind.LOSSES] * (rounds - 1)
    # PowerOfChoice: N loss evaluations and m updates a round; here round 0 costs N updates
    assert cost == {"updates": N + m * (rounds - 1), "losses": N * (rounds - 1)}
    kinds, _ = _probe_kinds(ADCS2(m=m, refresh_every=4), everyone, rounds)
    assert [t for t, k in enumerate(kinds) if k is ProbeKind.UPDATES] == [0, 4, 8]


def test_update_probes_only_while_a_client_is_seen_for_the_first_time():
    rng = np.random.default_rng(7)
    available = [rng.random(N) < 0.5 for _ in range(30)]
    kinds, _ = _probe_kinds(ADCS2(m=4), available, 30)
    seen = np.zeros(N, dtype=bool)
    for t, kind in enumerate(kinds):
        expect = ProbeKind.UPDATES if (available[t] & ~seen).any() else ProbeKind.LOSSES
        assert kind is expect, t
        seen |= available[t]


def test_observe_refreshes_the_returned_clients_directions_only_from_finite_updates():
    scheduler = ADCS2(m=2)
    state = scheduler.init(4)
    g = np.eye(4, 3) * 5.0
    stats = ClientStats(np.ones(4, dtype=bool), np.arange(4), np.ones(4), g)
    _, state = scheduler.select(state, 0, stats, np.random.default_rng(0))
    new = np.array([[0.0, 3.0, 4.0], [np.nan, 1.0, 1.0]])
    after = scheduler.observe(state, 0, np.array([0, 1]), new, None)
    np.testing.assert_allclose(after.directions[0], [0.0, 0.6, 0.8], atol=1e-6)
    np.testing.assert_array_equal(after.directions[1], state.directions[1])  # NaN: kept
    np.testing.assert_array_equal(state.directions[0], [1.0, 0.0, 0.0])  # old state untouched


def test_in_the_simulator_it_costs_what_power_of_choice_costs_and_follows_availability():
    from adcs.sim import BernoulliAvailability, RunSpec, SimConfig, simulate
    from tests.sim.conftest import make_data

    data = make_data(seed=3, n_clients=30, clients_per_group=3)
    rounds, m = 60, 10
    config = SimConfig(rounds, batch_size=4, local_lr=0.3, eval_every=rounds,
                       availability=BernoulliAvailability(0.5))  # fmt: skip
    ours, poc, top = simulate(
        [RunSpec(ADCS2(m), 0, "adcs2"), RunSpec(PowerOfChoice(m), 0, "poc"),
         RunSpec(ADCS2(m, theta=1.0), 0, "top")], data, config,
    )  # fmt: skip
    np.testing.assert_array_equal(top.selected, poc.selected)  # θ = 1 is PowerOfChoice
    assert (top.client_updates, top.loss_evals) == (poc.client_updates, poc.loss_evals)
    # the update probes of the first rounds, until every client has been seen once (a few rounds
    # at p = 0.5), replace loss evaluations: a few times N − m more updates than PowerOfChoice,
    # never more computations in all
    assert poc.client_updates <= ours.client_updates <= poc.client_updates + 4 * (30 - m)
    assert ours.client_updates + ours.loss_evals <= poc.client_updates + poc.loss_evals
    assert (ours.selected >= 0).sum() == (poc.selected >= 0).sum()  # min(m, available) a round
