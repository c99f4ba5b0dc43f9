"""ADCS-2's ablation switches (issue 35): each turns one of its four changes off, and only that.

Every test builds clients in groups of near-parallel updates (``grouped`` of test_adcs2) and
checks what the switch claims against an independent computation of the selection.
"""

from __future__ import annotations

import numpy as np
import pytest

from adcs.dpp import greedy_map, unit_rows
from adcs.schedulers import ADCS, ADCS2
from adcs.schedulers.adcs import log_weights
from adcs.schedulers.adcs2 import QualityScale, standardise
from adcs.schedulers.base import ProbeKind
from tests.schedulers.fake_runtime import gather, run_rounds
from tests.schedulers.test_adcs2 import N_GROUPS, N, grouped

# Selections of the case below made by ADCS-2 before the switches existed (the same scheduler
# calls at the commit before them): the defaults must reproduce them exactly.
BEFORE_SWITCHES = {
    "zscore": [[10, 9, 11, 21, 13, 24], [10, 11, 14, 28, 24, 4], [10, 11, 29, 25, 19, 8],
               [10, 9, 19, 24, 29, 22], [11, 3, 0, 13, 27, 25], [10, 9, 6, 26, 16, 12],
               [9, 10, 28, 22, 15, 8], [11, 9, 7, 5, 21, 24]],
    "normal": [[10, 21, 6, 24, 13, 15], [10, 4, 14, 24, 28, 18], [10, 29, 25, 11, 8, 19],
               [10, 19, 9, 29, 24, 14], [11, 3, 0, 13, 27, 25], [10, 6, 16, 26, 12, 20],
               [9, 28, 15, 22, 8, 1], [11, 7, 5, 21, 9, 24]],
    "robust_r3": [[9, 11, 10, 21, 6, 24], [10, 11, 4, 14, 24, 28], [10, 11, 29, 25, 8, 19],
                  [9, 10, 19, 20, 29, 24], [11, 3, 0, 13, 27, 25], [9, 10, 6, 16, 26, 12],
                  [9, 10, 28, 27, 15, 22], [9, 11, 7, 5, 21, 24]],
}  # fmt: skip


def _case():
    updates, losses, group = grouped(seed=11, rounds=8, spread=0.6, hard=3)
    rng = np.random.default_rng(12)
    available = [np.ones(N, dtype=bool)] + [rng.random(N) < 0.6 for _ in range(7)]
    return updates, losses, available, group


def _picks(scheduler, updates, losses, available, seed=5):
    return [s.clients.tolist() for s in run_rounds(scheduler, updates, losses, available, seed)]


@pytest.mark.parametrize(
    ("name", "scheduler"),
    [
        ("zscore", ADCS2(m=6)),
        ("normal", ADCS2(m=6, theta=0.5, quality_scale=QualityScale.NORMAL_SCORES)),
        ("robust_r3", ADCS2(6, theta=0.8, quality_scale=QualityScale.ROBUST, refresh_every=3)),
    ],
)
def test_the_defaults_select_exactly_what_adcs2_selected_before_the_switches(name, scheduler):
    updates, losses, available, _ = _case()
    explicit = ADCS2(
        scheduler.m, scheduler.theta, scheduler.quality_scale, scheduler.refresh_every,
        select_every=1, standardise_quality=True, observe_directions=True, group_cosine=None,
    )  # fmt: skip
    assert _picks(scheduler, updates, losses, available) == BEFORE_SWITCHES[name]
    assert _picks(explicit, updates, losses, available) == BEFORE_SWITCHES[name]


def test_select_every_holds_the_selection_between_selection_rounds_as_adcs_does():
    updates, losses, _ = grouped(seed=21, rounds=8, spread=0.6)
    rng = np.random.default_rng(22)
    losses = [q + 0.5 * rng.random(N) for q in losses]  # the top of the losses moves each round
    everyone = [np.ones(N, dtype=bool)] * 8
    held = ADCS2(m=6, select_every=4)
    picks = _picks(held, updates, losses, everyone)
    assert picks[0] == picks[1] == picks[2] == picks[3]
    assert picks[4] == picks[5] == picks[6] == picks[7]
    assert picks[4] != picks[0]
    fresh = _picks(ADCS2(m=6), updates, losses, everyone)
    assert fresh[0] == picks[0]
    assert any(fresh[t] != picks[t] for t in (1, 2, 3))  # the default moves in between
    # round 4 is the default's MAP: fresh losses, and the cache updated by the held clients'
    # updates of rounds 0-3 (observed as in the default)
    cached = unit_rows(updates[0]).astype(np.float64)
    cached[picks[0]] = unit_rows(updates[3][picks[0]])
    w = log_weights(held.alpha, standardise(losses[4], QualityScale.ZSCORE), everyone[4])
    assert sorted(picks[4]) == sorted(greedy_map(cached @ cached.T, 6, w, rtol=1e-5).tolist())
    # nothing is probed between selection rounds
    state, kinds = held.init(N), []
    for t in range(8):
        kinds.append(held.probe(state, t, everyone[t], rng).kind)
        stats = gather(held, state, t, everyone[t], updates[t], losses[t], rng)
        selection, state = held.select(state, t, stats, rng)
        c = selection.clients
        state = held.observe(state, t, c, updates[t][c], losses[t][c])
    assert [k is ProbeKind.NONE for k in kinds] == [False, True, True, True] * 2


def test_when_part_of_the_held_selection_is_away_it_remaps_the_pool_then_tops_up_at_random():
    updates, losses, _ = grouped(seed=23, rounds=2, spread=0.6, hard=4)
    first = run_rounds(ADCS2(m=6, select_every=5), updates, losses, [np.ones(N, dtype=bool)] * 2)
    away = np.ones(N, dtype=bool)
    away[first[0].clients[:3]] = False  # three of the held six leave
    away[np.setdiff1d(np.arange(N), first[0].clients)[::2]] = False  # and half of the others
    available = [np.ones(N, dtype=bool), away]
    picks = [run_rounds(ADCS2(m=6, select_every=5), updates, losses, available, seed=s)[1]
             for s in range(2)]  # fmt: skip
    # expected: the greedy MAP over the available part of the round-0 pool, with round 0's
    # directions and standardised losses (ADCS's rule between refreshes)
    idx = np.flatnonzero(away)
    phi = unit_rows(updates[0]).astype(np.float64)[idx]
    s = standardise(losses[0], QualityScale.ZSCORE)[idx]
    w = log_weights(ADCS2(m=6).alpha, s, np.ones(idx.size, dtype=bool))
    expect = idx[greedy_map(phi @ phi.T, 6, w, rtol=1e-5)]
    for p in picks:
        assert sorted(p.clients.tolist()) == sorted(expect.tolist())
        assert away[p.clients].all()
    # with fewer pool clients available than slots, the top-up is random (seeded by the rng):
    # a pool of the 8 clients there at round 0, of whom only 0 and 1 are back at round 1
    at_first, scarce = np.zeros(N, dtype=bool), np.zeros(N, dtype=bool)
    at_first[:8] = True
    scarce[[0, 1]] = True
    scarce[10:20] = True
    tops = [run_rounds(ADCS2(m=6, select_every=5), updates, losses, [at_first, scarce],
                       seed=s)[1].clients for s in range(6)]  # fmt: skip
    for c in tops:
        assert {0, 1} <= set(c.tolist()) and scarce[c].all() and c.size == 6
    assert len({tuple(sorted(c.tolist())) for c in tops}) > 1


def test_without_standardised_quality_the_weights_are_adcss_on_raw_losses():
    updates, losses, group = grouped(seed=4, rounds=2, spread=0.2, hard=7)
    everyone = [np.ones(N, dtype=bool)] * 2
    raw = ADCS2(m=6, standardise_quality=False)
    picks = _picks(raw, updates, losses, everyone)
    # round 0: every update probed, so it is the paper's ADCS at the same θ with R = 1 exactly
    assert picks[0] == _picks(ADCS(m=6, theta=0.7, refresh_every=1), updates[:1], losses[:1],
                              everyone[:1])[0]  # fmt: skip
    # the hard group's lead of 0.4 in raw loss is worth 2α·0.4 = 0.93 in log weight, less than a
    # second client of the group costs in log det: one slot; standardised, it takes several
    assert (group[picks[1]] == 7).sum() == 1
    assert (group[_picks(ADCS2(m=6), updates, losses, everyone)[1]] == 7).sum() >= 2
    # raw losses are not scale-free: multiplying them by 20 changes the choice
    assert _picks(raw, updates, [20.0 * q for q in losses], everyone)[1] != picks[1]


def test_without_observed_directions_the_kernel_is_that_of_the_last_update_probe():
    rounds = 7
    _, losses, _ = grouped(seed=31, rounds=rounds)
    rng = np.random.default_rng(32)
    updates = [rng.normal(size=(N, 5)) for _ in range(rounds)]  # few dimensions, new each round
    everyone = [np.ones(N, dtype=bool)] * rounds
    stale = ADCS2(m=6, refresh_every=3, observe_directions=False)
    assert not stale.observes_updates
    picks = _picks(stale, updates, losses, everyone)
    for t in range(rounds):
        probe_round = 3 * (t // 3)  # the all-client update probes: rounds 0, 3, 6
        phi = unit_rows(updates[probe_round]).astype(np.float64)
        s = standardise(losses[t], QualityScale.ZSCORE)
        w = log_weights(stale.alpha, s, np.ones(N, dtype=bool))
        assert sorted(picks[t]) == sorted(greedy_map(phi @ phi.T, 6, w, rtol=1e-5).tolist()), t
    observed = _picks(ADCS2(m=6, refresh_every=3), updates, losses, everyone)
    assert observed[0] == picks[0]
    assert any(observed[t] != picks[t] for t in (1, 2, 4, 5))  # observing moves the kernel


def test_group_cosine_gives_one_slot_per_group_until_every_group_has_one():
    updates, losses, group = grouped(seed=4, rounds=2, spread=0.2, hard=7)  # in-group cos ≈ 0.98
    everyone = [np.ones(N, dtype=bool)] * 2
    assert (group[_picks(ADCS2(m=6), updates, losses, everyone)[1]] == 7).sum() >= 2
    one = _picks(ADCS2(m=6, group_cosine=0.9), updates, losses, everyone)[1]
    assert np.bincount(group[one], minlength=N_GROUPS).max() == 1
    assert 7 in group[one]  # the hard group still gets its slot, first
    # 14 slots, 10 groups: a second pass, so every group once and four groups twice
    many = _picks(ADCS2(m=14, group_cosine=0.9), updates, losses, everyone)[1]
    counts = np.bincount(group[many], minlength=N_GROUPS)
    assert counts.min() == 1 and counts.max() == 2 and len(many) == len(set(many)) == 14
    # a τ above every in-group cosine makes every client its own group: the default greedy
    assert _picks(ADCS2(m=6, group_cosine=1.0), updates, losses, everyone) == _picks(
        ADCS2(m=6), updates, losses, everyone
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"select_every": 0}, "select_every must be an integer >= 1"),
        ({"standardise_quality": "no"}, "standardise_quality must be true or false"),
        ({"observe_directions": 1}, "observe_directions must be true or false"),
        ({"observe_directions": False}, "observe_directions=false needs refresh_every"),
        ({"group_cosine": 0.0}, r"group_cosine must be a number in \(0, 1\]"),
        ({"group_cosine": 1.5}, r"group_cosine must be a number in \(0, 1\]"),
    ],
)
def test_bad_switch_values_are_refused_with_one_line(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        ADCS2(m=6, **kwargs)
    assert "\n" not in str(info.value)
