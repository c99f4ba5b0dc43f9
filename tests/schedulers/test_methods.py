"""Method-specific tests: each scheduler does what docs/design.md §2 says it does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adcs.dpp import greedy_map, greedy_map_features
from adcs.schedulers import (
    ADCS,
    OCS,
    ClientStats,
    DivFL,
    PowerOfChoice,
    ProbeKind,
    StaticDPP,
    Uniform,
)
from adcs.schedulers.adcs import Quality, alpha_of, speed_score
from adcs.schedulers.divfl import facility_location_greedy, pairwise_distances
from adcs.schedulers.ocs import ocs_inclusion_probabilities, systematic_sample
from tests.schedulers.fake_runtime import gather, run_rounds

ALL = np.ones(30, dtype=bool)


def full_stats(updates, losses):
    n = updates.shape[0]
    return ClientStats(np.ones(n, dtype=bool), np.arange(n), losses, updates)


def select_once(scheduler, updates, losses, seed=0):
    state = scheduler.init(updates.shape[0])
    selection, _ = scheduler.select(
        state, 0, full_stats(updates, losses), np.random.default_rng(seed)
    )
    return selection.clients


# --- ADCS ------------------------------------------------------------------------------------


def test_adcs_equals_greedy_map_of_the_paper_kernel():
    rng = np.random.default_rng(0)
    updates = rng.normal(size=(30, 20))
    losses = rng.uniform(0.5, 2.0, size=30)
    theta = 0.6
    phi = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    q_diag = np.diag(np.exp(alpha_of(theta) * losses))
    kernel = q_diag @ (phi @ phi.T) @ q_diag  # L = Q C Q, eq. 7
    picks = select_once(ADCS(m=18, theta=theta), updates, losses)
    assert picks.tolist() == greedy_map(kernel, 18).tolist()


def test_adcs_theta_one_is_top_m_by_quality():
    rng = np.random.default_rng(1)
    updates = rng.normal(size=(30, 5))
    losses = rng.uniform(size=30)
    picks = select_once(ADCS(m=18, theta=1.0), updates, losses)
    assert picks.tolist() == np.argsort(-losses, kind="stable")[:18].tolist()


def test_adcs_theta_zero_is_pure_diversity():
    rng = np.random.default_rng(2)
    updates = rng.normal(size=(30, 25))
    losses = rng.uniform(size=30) * 100  # must be ignored at θ = 0
    phi = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    picks = select_once(ADCS(m=18, theta=0.0), updates, losses)
    assert picks.tolist() == greedy_map_features(phi, 18).tolist()


def test_adcs_near_one_theta_is_finite_and_follows_quality_where_diversity_ties():
    rng = np.random.default_rng(3)
    updates = np.eye(30) * rng.uniform(0.1, 5.0, size=30)[:, None]  # orthogonal: diversity ties
    losses = 10.0 + rng.normal(scale=0.05, size=30)
    picks = select_once(ADCS(m=18, theta=0.999999), updates, losses)
    assert picks.tolist() == np.argsort(-losses, kind="stable")[:18].tolist()


def test_adcs_duplicate_groups_cover_all_groups_first():
    rng = np.random.default_rng(4)
    updates = np.repeat(rng.normal(size=(10, 40)), 3, axis=0)
    groups = np.repeat(np.arange(10), 3)
    losses = rng.uniform(1.0, 2.0, size=30)
    picks = select_once(ADCS(m=18, theta=0.8), updates, losses)
    assert len(set(picks.tolist())) == 18
    assert sorted(groups[picks[:10]].tolist()) == list(range(10))


def test_adcs_nan_and_zero_updates_are_documented_handling():
    rng = np.random.default_rng(5)
    updates = rng.normal(size=(30, 40))
    updates[3] = np.nan
    updates[7] = 0.0
    losses = rng.uniform(size=30)
    losses[11] = np.inf
    picks = select_once(ADCS(m=18, theta=0.5), updates, losses)
    assert len(set(picks.tolist())) == 18
    assert not {3, 11} & set(picks.tolist())  # non-finite clients left out while others remain
    assert 7 not in picks.tolist()  # a zero update has no direction: chosen only when needed
    picks_all = select_once(ADCS(m=30, theta=0.5), updates, losses)
    assert sorted(picks_all.tolist()) == list(range(30))  # still exactly m, no duplicates
    assert set(picks_all[-3:].tolist()) == {3, 7, 11}


def test_adcs_refreshes_every_r_rounds_and_holds_the_selection_between():
    rng = np.random.default_rng(6)
    scheduler = ADCS(m=10, theta=0.7, refresh_every=4)
    state = scheduler.init(30)
    kinds, selections = [], []
    for t in range(12):
        updates = rng.normal(size=(30, 8))
        losses = rng.uniform(size=30)
        kinds.append(scheduler.probe(state, t, ALL, rng).kind)
        stats = gather(scheduler, state, t, ALL, updates, losses, rng)
        selection, state = scheduler.select(state, t, stats, rng)
        selections.append(selection.clients.tolist())
    assert [k is ProbeKind.UPDATES for k in kinds] == [t % 4 == 0 for t in range(12)]
    for t in range(12):
        assert selections[t] == selections[t - t % 4]
    assert selections[0] != selections[4] or selections[4] != selections[8]


def test_adcs_unavailable_cached_client_reruns_map_on_cached_kernel():
    rng = np.random.default_rng(7)
    scheduler = ADCS(m=5, theta=0.5, refresh_every=10)
    updates = rng.normal(size=(30, 8))
    losses = rng.uniform(size=30)
    state = scheduler.init(30)
    first, state = scheduler.select(state, 0, full_stats(updates, losses), rng)
    available = ALL.copy()
    available[first.clients[0]] = False
    assert scheduler.probe(state, 1, available, rng).kind is ProbeKind.NONE
    second, _ = scheduler.select(state, 1, ClientStats.blind(available), rng)
    assert first.clients[0] not in second.clients
    eligible = np.flatnonzero(available)
    phi = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    expected = eligible[greedy_map_features(phi[eligible], 5, 2 * alpha_of(0.5) * losses[eligible])]
    assert second.clients.tolist() == expected.tolist()


def test_adcs_quality_mix_with_comm_score():
    losses = np.zeros(30)
    comm = np.linspace(0.0, 1.0, 30)
    scheduler = ADCS(m=5, theta=1.0, gamma=1.0, comm_score=tuple(comm))
    picks = select_once(scheduler, np.eye(30), losses)
    assert picks.tolist() == [29, 28, 27, 26, 25]
    with pytest.raises(ValueError, match="comm_score"):
        scheduler.init(10)


def test_speed_score_is_the_scaled_negative_log_round_time():
    tau = np.array([1.0, 10.0, 100.0, 10.0])
    np.testing.assert_allclose(speed_score(tau), [1.0, 0.5, 0.0, 0.5])  # log-linear
    np.testing.assert_allclose(speed_score(3600 * tau), speed_score(tau))  # unit-free
    np.testing.assert_array_equal(speed_score(np.full(4, 2.0)), np.zeros(4))
    with pytest.raises(ValueError, match="round_times"):
        speed_score(np.array([1.0, 0.0]))


def test_adcs_speed_takes_its_comm_score_from_the_round_times():
    tau = np.array([8.0, 1.0, 4.0, 2.0, 16.0, 1.0])
    scheduler = ADCS(m=2, theta=1.0, gamma=1.0, comm_score="speed")
    assert scheduler.needs_round_times
    with pytest.raises(ValueError, match="comm_score='speed' needs the clients' round"):
        scheduler.init(6)
    resolved = scheduler.with_round_times(tau)
    assert isinstance(resolved, ADCS) and not resolved.needs_round_times
    np.testing.assert_allclose(resolved.comm_score, speed_score(tau))
    assert select_once(resolved, np.eye(6), np.zeros(6)).tolist() == [1, 5]  # the two fastest
    plain = ADCS(m=2, comm_score=(1.0,) * 6)
    assert plain.with_round_times(tau) is plain and not plain.needs_round_times


# --- PowerOfChoice ---------------------------------------------------------------------------


def test_power_of_choice_picks_largest_losses():
    losses = np.array([0.3, 2.0, 1.0, 2.0, 0.1, 5.0])
    scheduler = PowerOfChoice(m=3)
    state = scheduler.init(6)
    probe = scheduler.probe(state, 0, np.ones(6, dtype=bool), np.random.default_rng(0))
    assert probe.kind is ProbeKind.LOSSES and probe.clients is None
    selection, _ = scheduler.select(
        state, 0, ClientStats(np.ones(6, bool), np.arange(6), losses), np.random.default_rng(0)
    )
    assert selection.clients.tolist() == [5, 1, 3]  # tie 1 vs 3 to the lowest index


def test_power_of_d_probes_d_candidates_proportional_to_size():
    sizes = np.zeros(30)
    sizes[:12] = np.arange(1, 13)
    scheduler = PowerOfChoice(m=4, candidates=8)
    state = scheduler.init(30, data_sizes=sizes)
    rng = np.random.default_rng(1)
    counts = np.zeros(30)
    for _ in range(2000):
        probe = scheduler.probe(state, 0, ALL, rng)
        assert probe.clients is not None and probe.clients.size == 8
        counts[probe.clients] += 1
    assert counts[12:].sum() == 0  # zero-size clients are never drawn
    assert counts[11] > counts[0] * 3  # larger clients are drawn more often


# --- OCS -------------------------------------------------------------------------------------


def test_ocs_top_norms():
    norms = np.array([1.0, 5.0, 3.0, 5.0, 0.5])
    updates = np.diag(norms)
    picks = select_once(OCS(m=3), updates, np.zeros(5))
    assert picks.tolist() == [1, 3, 2]


def test_ocs_inclusion_probabilities_hand_worked():
    # a = (4, 1, 1, 1, 1), m = 2: c = 2/8 gives 4c = 1 exactly, so π = (1, .25, .25, .25, .25)
    pi = ocs_inclusion_probabilities(np.array([4.0, 1.0, 1.0, 1.0, 1.0]), 2)
    np.testing.assert_allclose(pi, [1.0, 0.25, 0.25, 0.25, 0.25])
    # a = (10, 1, 1, 1), m = 2: 10 is capped, the rest share 1: π = (1, 1/3, 1/3, 1/3)
    pi = ocs_inclusion_probabilities(np.array([10.0, 1.0, 1.0, 1.0]), 2)
    np.testing.assert_allclose(pi, [1.0, 1 / 3, 1 / 3, 1 / 3])


def test_ocs_unbiased_variant_is_unbiased():
    rng = np.random.default_rng(2)
    updates = rng.normal(size=(12, 4)) * rng.uniform(0.1, 3.0, size=(12, 1))
    target = updates.mean(axis=0)  # uniform p: the full-participation update
    scheduler = OCS(m=4, unbiased=True)
    state = scheduler.init(12)
    stats = full_stats(updates, np.zeros(12))
    draws = 20000
    estimate = np.zeros(4)
    inclusion = np.zeros(12)
    for _ in range(draws):
        selection, _ = scheduler.select(state, 0, stats, rng)
        assert selection.weights is not None
        estimate += selection.weights @ updates[selection.clients]
        inclusion[selection.clients] += 1
    pi = ocs_inclusion_probabilities(np.linalg.norm(updates, axis=1) / 12, 4)
    np.testing.assert_allclose(inclusion / draws, pi, atol=0.02)
    np.testing.assert_allclose(estimate / draws, target, atol=0.05 * np.abs(updates).max())


def test_ocs_unbiased_takes_every_usable_client_when_too_few_have_an_update():
    # zero-norm usable updates give no importance to rank by: they must still go before the
    # clients whose update overflowed, whatever the draw
    updates = np.zeros((9, 3))
    updates[::3] = np.inf
    scheduler = OCS(m=7, unbiased=True)
    state = scheduler.init(9)
    stats = full_stats(updates, np.zeros(9))
    usable = {1, 2, 4, 5, 7, 8}
    for seed in range(50):
        selection, _ = scheduler.select(state, 0, stats, np.random.default_rng(seed))
        assert usable <= set(selection.clients.tolist())
        assert len(set(selection.clients.tolist())) == 7
        assert selection.weights is not None and np.isfinite(selection.weights).all()


def test_systematic_sample_is_exact_size_and_distinct():
    rng = np.random.default_rng(3)
    pi = ocs_inclusion_probabilities(rng.uniform(size=50), 17)
    for _ in range(200):
        picks = systematic_sample(pi, rng)
        assert picks.size == 17 and len(set(picks.tolist())) == 17


# --- DivFL -----------------------------------------------------------------------------------


def test_facility_location_hand_example():
    # points on a line at 0, 1, 10, 11: the 1-median is 1 (sum 1+0+9+10=20 vs 0: 0+1+10+11=22)
    points = np.array([[0.0], [1.0], [10.0], [11.0]])
    dist = pairwise_distances(points)
    picks = facility_location_greedy(dist, 2, np.ones(4, dtype=bool))
    assert picks.tolist() == [1, 2]  # then 2 covers {10, 11} best (ties 2 vs 3 to 2)


def test_divfl_fresh_probes_every_round_and_stale_once():
    rng = np.random.default_rng(4)
    updates = [rng.normal(size=(30, 6)) for _ in range(5)]
    losses = [np.ones(30)] * 5
    available = [ALL] * 5
    for stale, expected in ((False, [True] * 5), (True, [True] + [False] * 4)):
        scheduler = DivFL(m=6, stale=stale)
        state = scheduler.init(30)
        kinds = []
        for t in range(5):
            kinds.append(scheduler.probe(state, t, ALL, rng).kind is ProbeKind.UPDATES)
            stats = gather(scheduler, state, t, ALL, updates[t], losses[t], rng)
            selection, state = scheduler.select(state, t, stats, rng)
            state = scheduler.observe(
                state, t, selection.clients, updates[t][selection.clients], None
            )
        assert kinds == expected
    fresh = run_rounds(DivFL(m=6), updates, losses, available)
    for t, selection in enumerate(fresh):
        dist = pairwise_distances(updates[t])
        assert selection.clients.tolist() == facility_location_greedy(dist, 6, ALL.copy()).tolist()


def test_divfl_stale_refreshes_only_selected_rows():
    scheduler = DivFL(m=2, stale=True)
    state = scheduler.init(4)
    updates = np.arange(8, dtype=float).reshape(4, 2)
    selection, state = scheduler.select(
        state, 0, full_stats(updates, np.zeros(4)), np.random.default_rng(0)
    )
    new = np.full((2, 2), 100.0)
    state = scheduler.observe(state, 0, selection.clients, new, None)
    changed = np.flatnonzero((state.updates != updates).any(axis=1))
    assert sorted(changed.tolist()) == sorted(selection.clients.tolist())


# --- StaticDPP and Uniform -------------------------------------------------------------------


def test_static_dpp_probes_once_and_keeps_its_subset():
    rng = np.random.default_rng(5)
    updates = [rng.normal(size=(30, 10)) for _ in range(6)]
    scheduler = StaticDPP(m=8)
    state = scheduler.init(30)
    kinds = []
    chosen = []
    for t in range(6):
        kinds.append(scheduler.probe(state, t, ALL, rng).kind)
        stats = gather(scheduler, state, t, ALL, updates[t], np.ones(30), rng)
        selection, state = scheduler.select(state, t, stats, rng)
        chosen.append(selection.clients.tolist())
    assert kinds[0] is ProbeKind.UPDATES and all(k is ProbeKind.NONE for k in kinds[1:])
    assert all(c == chosen[0] for c in chosen)
    phi = updates[0] / np.linalg.norm(updates[0], axis=1, keepdims=True)
    assert chosen[0] == greedy_map_features(phi, 8).tolist()


def test_static_dpp_probes_at_the_first_round_anybody_is_available():
    rng = np.random.default_rng(7)
    updates = rng.normal(size=(30, 10))
    scheduler = StaticDPP(m=8)
    state = scheduler.init(30)
    nobody = np.zeros(30, dtype=bool)
    kinds = []
    for t, available in enumerate([nobody, nobody, ALL, ALL]):
        kinds.append(scheduler.probe(state, t, available, rng).kind)
        stats = gather(scheduler, state, t, available, updates, np.ones(30), rng)
        selection, state = scheduler.select(state, t, stats, rng)
    assert kinds == [ProbeKind.UPDATES, ProbeKind.UPDATES, ProbeKind.UPDATES, ProbeKind.NONE]
    phi = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    assert selection.clients.tolist() == greedy_map_features(phi, 8).tolist()


def test_uniform_inclusion_frequency_is_m_over_n():
    rng = np.random.default_rng(6)
    scheduler = Uniform(m=18)
    state = scheduler.init(30)
    counts = np.zeros(30)
    draws = 6000
    for _ in range(draws):
        selection, _ = scheduler.select(state, 0, ClientStats.blind(ALL), rng)
        counts[selection.clients] += 1
    freq = counts / draws
    sd = math.sqrt(0.6 * 0.4 / draws)
    assert np.abs(freq - 0.6).max() < 5 * sd


@pytest.mark.parametrize("factory", [lambda: ADCS(m=6, theta=0.7), lambda: StaticDPP(m=6)])
def test_dense_and_feature_kernels_pick_the_same(monkeypatch, factory):
    from adcs.schedulers import _common

    rng = np.random.default_rng(11)
    centres = rng.normal(size=(8, 40))
    updates = np.repeat(centres, 5, axis=0) + 0.2 * rng.normal(size=(40, 40))
    losses = rng.uniform(0.5, 2.0, size=40)
    available = np.ones(40, dtype=bool)
    available[rng.choice(40, 9, replace=False)] = False
    picks = {}
    for limit in (10_000, 0):  # dense kernel, then unit features only
        monkeypatch.setattr(_common, "DENSE_KERNEL_MAX", limit)
        scheduler = factory()
        state = scheduler.init(40)
        stats = ClientStats(np.ones(40, dtype=bool), np.arange(40), losses, updates)
        first, state = scheduler.select(state, 0, stats, np.random.default_rng(0))
        assert (state.pool.kernel is None) == (limit == 0)
        later, _ = scheduler.select(
            state, 1, ClientStats.blind(available), np.random.default_rng(0)
        )
        picks[limit] = (first.clients.tolist(), later.clients.tolist())
    assert picks[10_000] == picks[0]


# ------------------------------------------------------------------ inputs at the float64 limits


def test_a_loss_near_the_float64_limit_leaves_the_other_choices_alone():
    rng = np.random.default_rng(11)
    updates = rng.normal(size=(30, 16))
    losses = rng.uniform(1.0, 2.0, size=30)
    base = select_once(ADCS(m=8, theta=0.8), updates, losses)
    outlier = int(np.setdiff1d(np.arange(30), base)[0])
    extreme = losses.copy()
    extreme[outlier] = 1e308
    picks = select_once(ADCS(m=8, theta=0.8), updates, extreme)
    assert picks[0] == outlier  # by far the heaviest
    assert set(picks[1:].tolist()) <= set(base.tolist())  # the others by the same trade-off
    tiny = losses.copy()
    tiny[int(base[0])] = -1e308
    assert int(base[0]) not in select_once(ADCS(m=8, theta=0.8), updates, tiny).tolist()


@pytest.mark.parametrize("scale", [1e200, 1e-200])
@pytest.mark.parametrize(
    "make",
    [lambda: OCS(m=6), lambda: OCS(m=6, unbiased=True), lambda: DivFL(m=6),
     lambda: ADCS(m=6), lambda: StaticDPP(m=6)],
)  # fmt: skip
def test_updates_of_any_finite_scale_select_as_at_unit_scale(make, scale):
    rng = np.random.default_rng(12)
    updates = rng.normal(size=(30, 16)) * rng.uniform(0.5, 2.0, size=(30, 1))
    losses = rng.uniform(1.0, 2.0, size=30)
    base = select_once(make(), updates, losses)
    assert select_once(make(), updates * scale, losses).tolist() == base.tolist()


def test_update_norm_quality_at_a_huge_scale_is_top_m_by_norm():
    # q = ‖g‖ ~ 1e200: the quality term dwarfs any log det, so ADCS picks the m largest norms
    rng = np.random.default_rng(13)
    updates = rng.normal(size=(30, 16)) * rng.uniform(0.5, 2.0, size=(30, 1)) * 1e200
    picks = select_once(ADCS(m=6, quality=Quality.GRAD_NORM), updates, np.ones(30))
    largest = np.argsort(-np.linalg.norm(updates / 1e200, axis=1))[:6]
    assert sorted(picks.tolist()) == sorted(largest.tolist())
