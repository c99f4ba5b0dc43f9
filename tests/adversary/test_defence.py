"""The defences: each against the naive lie it is for, and what the adaptive liar achieves.

Capture is measured as in the benchmark: the liar's selection rate under attack over its rate in
the same defended run without the attack. The small setting (12 clients in 4 groups of 3, m = 4,
200 rounds) is the paper's in miniature; the figures in comments were measured with these tests'
seeds and are what the assertions pin (with the goal of the issue, 1.5x, where it is met).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from adcs.adversary import (
    Attack,
    Crafted,
    Defence,
    Defended,
    Lie,
    Poison,
    Received,
    adversarial,
    poison_updates,
    screen,
    selection_rates,
    tell_lies,
)
from adcs.adversary.defence import best_cosines, cosines, nearest_peers, neighbourhood_medians
from adcs.aggregation import Robust, norm_clipped_sum, weighted_sum
from adcs.schedulers import ADCS, OCS, ClientStats, PowerOfChoice, Uniform
from adcs.sim import RunSpec, SimConfig, simulate
from tests.adversary.conftest import Fixed, N, grouped_stats, paper_like_data

ROUNDS = 200
CONFIG = SimConfig(ROUNDS, batch_size=4, local_lr=0.3, eval_every=ROUNDS)
LIAR = 10


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def liar_rate(scheduler, attack=None, defence=None, run_id="run") -> float:
    run, hook = adversarial(scheduler, attack=attack, defence=defence)
    (result,) = simulate([RunSpec(run, 0, run_id, aggregator=hook)], paper_like_data(), CONFIG)
    return float(selection_rates(result.selected, N)[LIAR])


def capture(scheduler, lie, defence, adaptive=False) -> tuple[float, float]:
    """(rate without defence under the lie / clean rate, defended rate / defended clean rate)."""
    attack = Attack((LIAR,), lie=lie, adaptive=adaptive)
    undefended = liar_rate(scheduler, attack) / liar_rate(scheduler)
    defended = liar_rate(scheduler, attack, defence) / liar_rate(scheduler, defence=defence)
    return undefended, defended


# -- off by default -------------------------------------------------------------------------------


def test_no_defence_leaves_the_scheduler_as_it_is():
    scheduler = ADCS(4, refresh_every=5)
    assert adversarial(scheduler) == (scheduler, None)
    assert adversarial(scheduler, defence=Defence()) == (scheduler, None)
    plain, wrapped = simulate(
        [RunSpec(scheduler, 0, "a"), RunSpec(Defended(scheduler, Defence()), 0, "a2")],
        paper_like_data(),
        CONFIG,
    )
    np.testing.assert_array_equal(plain.selected, wrapped.selected)


def test_honest_consistent_rows_pass_through_the_screens_untouched():
    stats = grouped_stats()
    seen = screen(Defence(plausibility=0.5), None, stats)
    assert seen.stats.updates is stats.updates and not seen.dropped.any()
    received = Received.empty(N).updated(3, stats.clients, np.asarray(stats.updates))
    seen = screen(Defence(received=True), received, stats)
    np.testing.assert_allclose(seen.stats.updates, stats.updates, rtol=1e-5)


def test_defence_refuses_bad_values():
    with pytest.raises(ValueError, match="uniform_mix"):
        Defence(uniform_mix=1.0)
    with pytest.raises(ValueError, match="peers"):
        Defence(peers=0)
    with pytest.raises(ValueError, match="plausibility"):
        Defence(plausibility=1.5)


# -- the screens as functions ---------------------------------------------------------------------


def test_neighbourhood_medians_worked_by_hand():
    values = np.array([1.0, 2.0, 30.0, 4.0, np.nan])
    peers = np.array([[1, 2], [0, 2], [0, 1], [-1, -1], [0, 1]])
    # client 2 reports 30: it and both its peers get median(1, 2, 30) = 2
    np.testing.assert_allclose(neighbourhood_medians(values, peers), [2.0, 2.0, 2.0, 4.0, np.nan])


def test_peers_and_best_cosines_follow_the_groups():
    stats = grouped_stats()
    directions = unit(stats.updates)
    cos = cosines(directions, np.ones(N, dtype=bool))
    peers = nearest_peers(cos, np.ones(N, dtype=bool), 2)
    assert all(set(peers[i]) == set(range(3 * (i // 3), 3 * (i // 3) + 3)) - {i} for i in range(N))
    assert (best_cosines(cos) > 0.95).all()


def test_corroboration_bounds_a_loss_lie_by_the_liars_group():
    stats = grouped_stats()
    lied = tell_lies(Attack((LIAR,), lie=(Lie.LOSS,), factor=10.0), stats, 0)
    seen = screen(Defence(corroborate=True), None, lied).stats.losses
    group = [9, 10, 11]
    mates = stats.losses[[9, 11]]
    np.testing.assert_allclose(seen[group], mates.max())  # the group shares median(1 lie, 2 honest)
    assert seen[LIAR] <= stats.losses[group].max()


def test_corroboration_without_any_direction_caps_at_the_median():
    stats = grouped_stats()
    losses_only = ClientStats(stats.available, stats.clients, stats.losses * np.r_[1, 10, [1] * 10])
    seen = screen(Defence(corroborate=True), None, losses_only).stats.losses
    assert seen[1] == pytest.approx(np.median(losses_only.losses))


def test_received_directions_replace_an_inconsistent_report():
    stats = grouped_stats()
    received = Received.empty(N).updated(0, stats.clients, np.asarray(stats.updates))
    lied = tell_lies(Attack((LIAR,), lie=(Lie.DIRECTION, Lie.NORM)), stats, 1)
    seen = screen(Defence(received=True), received, lied).stats.updates
    np.testing.assert_allclose(seen[LIAR], stats.updates[LIAR], rtol=1e-5)


def test_plausibility_leaves_out_a_direction_without_a_peer():
    stats = grouped_stats()
    lied = tell_lies(Attack((LIAR,), lie=(Lie.DIRECTION,)), stats, 1)
    seen = screen(Defence(plausibility=0.9), None, lied)
    assert seen.dropped[LIAR] and seen.dropped.sum() == 1
    assert not np.isfinite(seen.stats.updates[LIAR]).any()
    assert seen.stats.usable().sum() == N - 1


def test_the_adaptive_liar_sits_just_inside_the_screens():
    """What an adaptive liar achieves against each screen, as functions (module docstring)."""
    stats = grouped_stats()
    adaptive = Attack((LIAR,), lie=(Lie.DIRECTION,), adaptive=True)
    # plausibility, nothing received: best cosine just above the threshold, so it is kept
    defence = Defence(plausibility=0.9)
    seen = screen(defence, None, tell_lies(adaptive, stats, 1, defence))
    assert not seen.dropped[LIAR]
    best = best_cosines(cosines(unit(seen.stats.updates), np.ones(N, dtype=bool)))
    assert seen.threshold is not None and 0 < best[LIAR] - seen.threshold < 0.03
    # consistency τ = 0.9: its report at cosine 0.91 with what was received is trusted
    received = Received.empty(N).updated(0, stats.clients, np.asarray(stats.updates))
    defence = Defence(received=True, consistency=0.9)
    lied = tell_lies(adaptive, stats, 1, defence, received)
    seen = screen(defence, received, lied)
    assert not seen.from_received[LIAR]
    assert unit(seen.stats.updates[LIAR]) @ unit(stats.updates[LIAR]) == pytest.approx(
        0.91, abs=1e-4
    )
    # τ = 1 (the default): whatever it reports, the received update is scheduled
    defence = Defence(received=True)
    seen = screen(defence, received, tell_lies(adaptive, stats, 1, defence, received))
    assert seen.from_received[LIAR]
    np.testing.assert_allclose(seen.stats.updates[LIAR], stats.updates[LIAR], rtol=1e-5)


def test_against_corroboration_the_naive_loss_lie_is_the_adaptive_one():
    stats = grouped_stats()
    defence = Defence(corroborate=True)
    naive = tell_lies(Attack((LIAR,)), stats, 0, defence)
    adaptive = tell_lies(Attack((LIAR,), adaptive=True), stats, 0, defence)
    np.testing.assert_array_equal(naive.losses, adaptive.losses)


# -- in the simulator: capture with and without each defence -------------------------------------


def test_corroboration_against_the_loss_lie():
    # PowerOfChoice believes losses: 1.00 without (3.6x); corroborated 1.23x, naive and adaptive
    undefended, defended = capture(PowerOfChoice(4), (Lie.LOSS,), Defence(corroborate=True))
    assert undefended > 3
    assert defended <= 1.5
    _, adaptive = capture(PowerOfChoice(4), (Lie.LOSS,), Defence(corroborate=True), True)
    assert adaptive <= 1.5


def test_received_updates_against_the_norm_lie():
    # OCS believes norms: 3.1x without; on the received update 1.00x, naive and adaptive
    undefended, defended = capture(OCS(4), (Lie.NORM,), Defence(received=True))
    assert undefended > 2.5
    assert defended <= 1.2
    _, adaptive = capture(OCS(4), (Lie.NORM,), Defence(received=True), True)
    assert adaptive <= 1.2


def test_received_updates_against_the_direction_lie_and_the_adaptive_liar_at_consistency():
    adcs = ADCS(4, refresh_every=5)
    lie = (Lie.DIRECTION,)
    undefended, defended = capture(adcs, lie, Defence(received=True))
    assert undefended > 3  # 3.2x
    assert defended <= 1.2  # 0.78x
    _, adaptive = capture(adcs, lie, Defence(received=True), True)
    assert adaptive <= 1.2  # 0.78x: once received, its report is ignored
    # the variant that trusts reports within cosine 0.9 of the received update: 2.1x
    _, at_consistency = capture(adcs, lie, Defence(received=True, consistency=0.9), True)
    assert at_consistency > 1.5


def test_plausibility_against_the_direction_lie_and_the_adaptive_liar_at_the_threshold():
    adcs = ADCS(4, refresh_every=5)
    _, naive = capture(adcs, (Lie.DIRECTION,), Defence(plausibility=0.9))
    assert naive == 0.0  # an orthogonal report is left out of every refresh
    # alone, the screen is passed by a direction just above its threshold: 1.9x
    _, adaptive = capture(adcs, (Lie.DIRECTION,), Defence(plausibility=0.9), True)
    assert adaptive > 1.5
    # with the received updates the direction only helps until the liar is first received;
    # what is left, 1.69x, is the loss lie lifting its group's median to its peers' larger loss
    # (in this small setting, 4 of 12 chosen; about 1.0–1.4x in the paper's, see the benchmark)
    everything = Defence(received=True, corroborate=True, plausibility=0.9)
    undefended, both = capture(adcs, (Lie.LOSS, Lie.DIRECTION), everything, True)
    assert undefended > 3
    assert both < 2


def test_uniform_mixture_bounds_every_selection_rate():
    """A scheduler fully captured by clients 0–3 still gives the others λ·m/N, and them ≤ 1 − λ(1 − m/N)."""
    scheduler = Defended(Fixed(4, (0, 1, 2, 3)), Defence(uniform_mix=0.5))
    rng = np.random.default_rng(0)
    state = scheduler.init(N)
    counts = np.zeros(N)
    rounds = 4000
    stats = grouped_stats()
    for t in range(rounds):
        selection, state = scheduler.select(state, t, stats, rng)
        counts[selection.clients] += 1
    rates = counts / rounds
    np.testing.assert_allclose(rates[4:], 0.5 * 4 / N, atol=0.03)
    np.testing.assert_allclose(rates[:4], 0.5 + 0.5 * 4 / N, atol=0.03)


def test_uniform_mixture_against_the_loss_lie():
    # PowerOfChoice captured (1.00) → 0.69 at λ = 0.5 (its bound 0.67, up to sampling noise)
    rate = liar_rate(PowerOfChoice(4), Attack((LIAR,)), Defence(uniform_mix=0.5))
    assert rate < 0.8


def test_robust_aggregation_against_a_scaled_poison():
    """With the selection fixed, a ×1000 update moves the mean far; the robust rules hold."""
    data = paper_like_data()
    config = SimConfig(5, batch_size=4, local_lr=0.3, eval_every=5)
    fixed = Fixed(6, (0, 2, 4, 6, 8, 10))
    poison = Attack((4,), lie=(), poison=Poison.SCALED, factor=1000.0)
    drift = {}
    for rule in Robust:
        defence = Defence(aggregation=rule)
        clean, hook = adversarial(fixed, defence=defence)
        attacked, poisoned = adversarial(fixed, attack=poison, defence=defence)
        a, b = simulate(
            [
                RunSpec(clean, 0, "clean", aggregator=hook),
                RunSpec(attacked, 0, "attacked", aggregator=poisoned),
            ],
            data,
            config,
        )
        drift[rule] = float(np.abs(a.final_params - b.final_params).max())
    assert drift[Robust.MEAN] > 10
    assert max(drift[Robust.NORM_CLIP], drift[Robust.MEDIAN], drift[Robust.TRIMMED_MEAN]) < 1


def test_norm_clipping_does_not_see_a_poison_at_the_median_norm():
    """What the direction poison achieves against norm clipping: it is sent at the median
    honest norm, so clipping leaves its contribution exactly as the mean has it."""
    rng = np.random.default_rng(1)
    clients = np.arange(7)
    updates = (rng.normal(size=(7, 30)) * rng.uniform(0.5, 2, size=(7, 1))).astype(np.float32)
    poison = Attack((3,), lie=(Lie.DIRECTION,), poison=Poison.DIRECTION)
    sent = poison_updates(poison, None, 0, clients, updates)
    coefs = np.full(7, 1 / 7)
    only_liar = np.zeros(7)
    only_liar[3] = coefs[3]
    np.testing.assert_allclose(
        norm_clipped_sum(sent, only_liar), weighted_sum(sent, only_liar), rtol=1e-6
    )
    assert np.linalg.norm(sent[3]) <= np.median(np.linalg.norm(sent, axis=1)) * (1 + 1e-6)


def test_uniform_is_never_captured_with_or_without_defences():
    lie = (Lie.LOSS, Lie.DIRECTION, Lie.NORM)
    everything = Defence(received=True, corroborate=True, plausibility=0.9)
    clean = liar_rate(Uniform(4), defence=everything, run_id="u")
    attacked = liar_rate(Uniform(4), Attack((LIAR,), lie=lie), everything, run_id="u")
    assert attacked == clean


def test_plausibility_judges_what_a_loss_probe_cannot_see_by_the_update_received():
    """PowerOfChoice never sees updates; a sign-flipping poisoner that claims a high loss is
    left out once the server has received its flipped update (no honest peer points that way)."""
    attack = Attack((LIAR,), lie=(Lie.LOSS,), poison=Poison.SIGN_FLIP)
    everything = Defence(received=True, corroborate=True, plausibility=0.9)
    assert liar_rate(PowerOfChoice(4), attack) == 1.0
    defended = liar_rate(PowerOfChoice(4), attack, everything)
    honest = liar_rate(PowerOfChoice(4), defence=everything)
    assert defended < 0.6 * honest  # 0.15 vs 0.30: left out whenever its flip is judged
    stats = grouped_stats()
    flipped = np.asarray(stats.updates).copy()
    flipped[LIAR] *= -1
    received = Received.empty(N).updated(0, stats.clients, flipped)
    losses_only = ClientStats(stats.available, stats.clients, stats.losses)
    seen = screen(everything, received, losses_only)
    assert seen.dropped[LIAR] and seen.dropped.sum() == 1
    assert np.isnan(seen.stats.losses[LIAR])


@pytest.mark.parametrize("rule", ["median", "trimmed_mean", "norm_clip"])
def test_a_robust_rule_keeps_the_model_finite_against_an_overflowing_poisoner(rule):
    # factor 1e39 is a valid factor, but × an update it overflows float32: inf and NaN rows
    attack = Attack((1,), lie=(), poison=Poison.SCALED, factor=1e39)
    run, hook = adversarial(Uniform(4), attack=attack, defence=Defence(aggregation=rule))
    config = SimConfig(4, batch_size=4, local_lr=0.3, eval_every=2)
    (result,) = simulate([RunSpec(run, 0, "r", aggregator=hook)], paper_like_data(), config)
    assert (result.selected == 1).any()  # the poisoner was aggregated
    assert np.isfinite(result.test_loss).all() and np.isfinite(result.client_acc).all()


@dataclass(frozen=True)
class StandStill:
    """A user's rule (the Aggregator protocol): records what it is given, never moves the model."""

    seen: list[np.ndarray] = field(default_factory=list, compare=False)

    def aggregate(self, state, round_idx, clients, updates, coefs, probed):
        self.seen.append(np.array(clients))
        return updates, np.zeros(updates.shape[1], dtype=np.float32)


@dataclass(frozen=True)
class OwnRule(Defence):
    """A defence bringing its own rule through ``aggregator()`` (docs/how-to/attacks.md)."""

    rule_of: Any = None

    def aggregator(self) -> Any:
        return self.rule_of


@pytest.mark.parametrize("kind", ["poison", "crafted"])
def test_a_defences_own_rule_takes_the_received_updates_under_any_attack(kind):
    # a poison or a crafted attack called the rule's combine(), which only RobustAggregation has
    rule = StandStill()
    attack = (
        Attack((1,), lie=(), poison=Poison.SIGN_FLIP)
        if kind == "poison"
        else Crafted(clients=(1,)).build(0, N)
    )
    run, hook = adversarial(Fixed(4), attack=attack, defence=OwnRule(rule_of=rule))
    config = SimConfig(4, batch_size=4, local_lr=0.3, eval_every=2)
    (result,) = simulate([RunSpec(run, 0, "r", aggregator=hook)], paper_like_data(), config)
    assert len(rule.seen) == 4 and all(c.tolist() == [0, 1, 2, 3] for c in rule.seen)
    assert np.ptp(result.test_loss) == 0  # its step, zero, is the server's
    with pytest.raises(TypeError, match=r"aggregator\(\) must give an adcs.aggregation Aggregator"):
        adversarial(Fixed(4), attack=attack, defence=OwnRule(rule_of=object()))
