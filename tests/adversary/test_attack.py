"""The adversary model: who is malicious, what the lies change (only their rows), the poisons."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.adversary import (
    Attack,
    Defence,
    Direction,
    Lie,
    Lying,
    LyingState,
    Poison,
    Poisoned,
    Received,
    adversarial,
    lie_directions,
    malicious_clients,
    poison_updates,
    tell_lies,
)
from adcs.schedulers import ADCS, OCS, PowerOfChoice, Uniform
from adcs.sim import RunSpec, SimConfig, simulate
from tests.adversary.conftest import Fixed, N, Recording, grouped_stats, paper_like_data

LIES = {
    "loss": (Lie.LOSS,),
    "direction": (Lie.DIRECTION,),
    "norm": (Lie.NORM,),
    "all": (Lie.LOSS, Lie.DIRECTION, Lie.NORM),
}
CONFIG = SimConfig(12, batch_size=4, local_lr=0.3, eval_every=12)


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


# -- the malicious set ---------------------------------------------------------------------------


def test_malicious_clients_are_drawn_from_the_seed_and_nested_in_k():
    three = malicious_clients(4, 30, 3)
    assert three == malicious_clients(4, 30, 3)  # a pure function of the seed
    assert len(set(three)) == 3 and all(0 <= c < 30 for c in three)
    assert set(malicious_clients(4, 30, 1)) <= set(three)
    draws = {malicious_clients(seed, 30, 3) for seed in range(20)}
    assert len(draws) > 15  # seeds differ


def test_attack_refuses_bad_values():
    with pytest.raises(ValueError, match="distinct"):
        Attack((1, 1))
    with pytest.raises(ValueError, match="factor"):
        Attack((1,), factor=0.0)
    with pytest.raises(ValueError, match="cosine"):
        Attack((1,), direction=Direction.COSINE, cosine=1.5)
    with pytest.raises(ValueError, match="needs a lie or a poison"):
        Attack((1,), lie=())
    with pytest.raises(ValueError, match=r"\[0, 12\)"):
        Lying(Uniform(3), Attack((12,))).init(N)


# -- the lie changes only the malicious clients' rows --------------------------------------------


@pytest.mark.parametrize("lie", LIES)
@pytest.mark.parametrize("adaptive", [False, True])
def test_lies_rewrite_only_the_malicious_rows(lie, adaptive):
    stats = grouped_stats()
    attack = Attack((2, 7), lie=LIES[lie], adaptive=adaptive)
    defence = Defence(received=True, consistency=0.9, corroborate=True, plausibility=0.8)
    received = Received.empty(N).updated(0, np.array([2, 3]), np.asarray(stats.updates[[2, 3]]))
    lied = tell_lies(attack, stats, 5, defence, received)
    honest = ~np.isin(stats.clients, attack.clients)
    assert lied.available is stats.available and lied.clients is stats.clients
    np.testing.assert_array_equal(lied.losses[honest], stats.losses[honest])
    np.testing.assert_array_equal(lied.updates[honest], stats.updates[honest])
    changed = (lied.losses != stats.losses) | (lied.updates != stats.updates).any(axis=1)
    assert changed[~honest].all()


def test_each_lie_does_what_it_says():
    stats = grouped_stats()
    rows = np.array([2, 7])
    honest = np.setdiff1d(np.arange(N), rows)
    true = np.asarray(stats.updates[rows], dtype=np.float64)
    loss = tell_lies(Attack(tuple(rows), lie=(Lie.LOSS,), factor=10.0), stats, 0)
    np.testing.assert_allclose(loss.losses[rows], 10.0 * stats.losses[rows])
    norm = tell_lies(Attack(tuple(rows), lie=(Lie.NORM,), factor=10.0), stats, 0)
    lied = np.asarray(norm.updates[rows], dtype=np.float64)
    np.testing.assert_allclose(
        np.linalg.norm(lied, axis=1), 10 * np.linalg.norm(true, axis=1), 1e-5
    )
    np.testing.assert_allclose(np.sum(unit(lied) * unit(true), axis=1), 1.0, atol=1e-6)
    ortho = tell_lies(Attack(tuple(rows), lie=(Lie.DIRECTION,)), stats, 0)
    lied = np.asarray(ortho.updates[rows], dtype=np.float64)
    np.testing.assert_allclose(np.linalg.norm(lied, axis=1), np.linalg.norm(true, axis=1), 1e-5)
    assert np.abs(unit(lied) @ unit(stats.updates[honest]).T).max() < 1e-5  # ⊥ every honest row
    aimed = tell_lies(
        Attack(tuple(rows), lie=(Lie.DIRECTION,), direction=Direction.COSINE, cosine=0.35),
        stats,
        0,
    )
    mean = unit(unit(stats.updates[honest]).mean(axis=0))
    np.testing.assert_allclose(unit(aimed.updates[rows]) @ mean, 0.35, atol=1e-5)


def test_random_directions_are_per_seed_round_and_client():
    reference = grouped_stats().updates[:8]
    attack = Attack((8, 9), lie=(Lie.DIRECTION,), direction=Direction.RANDOM, seed=3)
    a = lie_directions(attack, reference, np.array([8, 9]), 4)
    np.testing.assert_array_equal(a, lie_directions(attack, reference, np.array([8, 9]), 4))
    np.testing.assert_array_equal(a[1:], lie_directions(attack, reference, np.array([9]), 4))
    assert abs(float(a[0] @ a[1])) < 0.6  # two liars, two directions
    assert not np.allclose(a, lie_directions(attack, reference, np.array([8, 9]), 5))
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0)


def test_blind_rounds_and_absent_liars_are_passed_through():
    stats = grouped_stats()
    blind = type(stats).blind(stats.available)
    assert tell_lies(Attack((1,)), blind, 0) is blind
    others = type(stats)(stats.available, np.arange(6), stats.losses[:6], stats.updates[:6])
    assert tell_lies(Attack((9,)), others, 0) is others


def test_the_scheduler_sees_the_lie_and_nothing_else_changes():
    """Same fixed selection with and without the lie: every round, every honest row is equal,
    the liar's rows are falsified, and (no poison) the models are the same."""
    data = paper_like_data()
    attack = Attack((4,), lie=(Lie.LOSS, Lie.DIRECTION))
    honest_view, lied_view = Recording(Fixed(4, (0, 4, 6, 9))), Recording(Fixed(4, (0, 4, 6, 9)))
    runs = [RunSpec(honest_view, 0, "honest"), RunSpec(Lying(lied_view, attack), 0, "lied")]
    honest, lied = simulate(runs, data, CONFIG)
    np.testing.assert_allclose(honest.final_params, lied.final_params, atol=1e-6)
    assert len(honest_view.seen) == len(lied_view.seen) == CONFIG.rounds
    for a, b in zip(honest_view.seen, lied_view.seen, strict=True):
        keep = a.clients != 4
        np.testing.assert_allclose(a.updates[keep], b.updates[keep], atol=1e-6)
        np.testing.assert_allclose(a.losses[keep], b.losses[keep], rtol=1e-6)
        assert b.losses[4] == pytest.approx(10 * a.losses[4], rel=1e-5)
        assert abs(float(unit(a.updates[4]) @ unit(b.updates[4]))) < 0.1


@pytest.mark.parametrize("lie", LIES)
def test_uniform_selections_under_any_lie_equal_its_no_attack_selections(lie):
    data = paper_like_data()
    attack = Attack(malicious_clients(0, N, 3), lie=LIES[lie])
    runs = [RunSpec(Uniform(4), 0, "u"), RunSpec(Lying(Uniform(4), attack), 0, "u")]
    clean, attacked = (simulate([r], data, CONFIG)[0] for r in runs)  # same run id: same stream
    np.testing.assert_array_equal(clean.selected, attacked.selected)
    np.testing.assert_array_equal(clean.final_params, attacked.final_params)


@pytest.mark.parametrize("name", ["powerofchoice", "ocs", "adcs"])
def test_a_naive_liar_captures_the_scheduler_that_believes_it(name):
    """The issue's finding in small: the lie each scheduler reads gets the liar chosen always."""
    scheduler, lie = {
        "powerofchoice": (PowerOfChoice(4), (Lie.LOSS,)),
        "ocs": (OCS(4), (Lie.NORM,)),
        "adcs": (ADCS(4, refresh_every=3), (Lie.LOSS, Lie.DIRECTION)),
    }[name]
    data = paper_like_data()
    config = SimConfig(30, batch_size=4, local_lr=0.3, eval_every=30)
    liar = 10
    clean, attacked = simulate(
        [
            RunSpec(scheduler, 0, "clean"),
            RunSpec(Lying(scheduler, Attack((liar,), lie=lie)), 0, "attacked"),
        ],
        data,
        config,
    )
    rate = (attacked.selected == liar).any(axis=1).mean()
    assert rate == 1.0
    assert (clean.selected == liar).any(axis=1).mean() < 0.9


# -- the poison -----------------------------------------------------------------------------------


def test_poisons_replace_only_the_malicious_updates():
    rng = np.random.default_rng(0)
    clients = np.array([0, 3, 5, 8])
    updates = rng.normal(size=(4, 20)).astype(np.float32)
    flip = poison_updates(Attack((3,), poison=Poison.SIGN_FLIP), None, 0, clients, updates)
    np.testing.assert_array_equal(flip[1], -updates[1])
    np.testing.assert_array_equal(flip[[0, 2, 3]], updates[[0, 2, 3]])
    scaled = poison_updates(
        Attack((3,), poison=Poison.SCALED, factor=5.0), None, 0, clients, updates
    )
    np.testing.assert_allclose(scaled[1], 5 * updates[1], rtol=1e-6)
    honest_norm = np.median(np.linalg.norm(updates[[0, 2, 3]], axis=1))
    reported = unit(rng.normal(size=(1, 20))).astype(np.float32)
    state = LyingState(None, reported, np.array([True]))
    attack = Attack((3,), lie=(Lie.DIRECTION,), poison=Poison.DIRECTION)
    sent = poison_updates(attack, state, 0, clients, updates)
    np.testing.assert_allclose(sent[1], reported[0] * honest_norm, rtol=1e-5)
    unreported = poison_updates(attack, None, 0, clients, updates)  # never reported: the lie's
    assert np.linalg.norm(unreported[1]) == pytest.approx(honest_norm, rel=1e-5)
    assert np.abs(unit(unreported[1]) @ unit(updates[[0, 2, 3]]).T).max() < 1e-5


def test_a_poison_reaches_the_model_and_the_lie_alone_does_not():
    data = paper_like_data()
    fixed = Fixed(4, (0, 4, 6, 9))
    flipped = Attack((4,), lie=(Lie.LOSS,), poison=Poison.SIGN_FLIP)
    lie_only = Attack((4,), lie=(Lie.LOSS,))
    runs = []
    for name, attack in [("clean", None), ("lie", lie_only), ("flip", flipped)]:
        scheduler, hook = adversarial(fixed, attack=attack)
        runs.append(RunSpec(scheduler, 0, name, aggregator=hook))
    clean, lie, flip = simulate(runs, data, CONFIG)
    np.testing.assert_allclose(lie.final_params, clean.final_params, atol=1e-6)
    drift = np.abs(flip.final_params - clean.final_params).max()
    assert drift > 1e-2


def test_the_direction_poison_sends_the_reported_direction():
    """What the scheduler was shown is what the liar sends for aggregation."""
    data = paper_like_data()
    attack = Attack((4,), lie=(Lie.DIRECTION,), poison=Poison.DIRECTION)
    scheduler, hook = adversarial(Fixed(4, (0, 4, 6, 9)), attack=attack)
    assert isinstance(hook, Poisoned)
    checked: list[int] = []

    class Spy:
        def aggregate(self, state, round_idx, clients, updates, coefs, probed):
            received, step = hook.aggregate(state, round_idx, clients, updates, coefs, probed)
            assert state.has_reported[0]  # Fixed probes every round: reported this round
            np.testing.assert_allclose(unit(received[1]), state.reported[0], atol=1e-5)
            honest = np.linalg.norm(updates[[0, 2, 3]], axis=1)
            assert np.linalg.norm(received[1]) == pytest.approx(np.median(honest), rel=1e-5)
            checked.append(round_idx)
            return received, step

    simulate([RunSpec(scheduler, 0, "p", aggregator=Spy())], data, CONFIG)
    assert checked == list(range(CONFIG.rounds))


def test_observe_receives_what_the_server_received():
    """A scheduler that observes gets the poisoned updates, not the honest ones."""
    data = paper_like_data()
    observed: dict[str, np.ndarray] = {}

    class Observer(Fixed):
        def observe(self, state, round_idx, clients, updates, losses):
            if round_idx == 0:
                observed[self.name] = np.array(updates)
            return state

    def observer(name: str) -> Fixed:
        o = Observer(4, (0, 4, 6, 9), True)
        object.__setattr__(o, "name", name)
        return o

    attack = Attack((4,), lie=(), poison=Poison.SCALED, factor=100.0)
    poisoned, hook = adversarial(observer("poisoned"), attack=attack)
    simulate([RunSpec(observer("honest"), 0, "h"), RunSpec(poisoned, 0, "p", aggregator=hook)],
             data, CONFIG)  # fmt: skip
    np.testing.assert_allclose(observed["poisoned"][1], 100 * observed["honest"][1], rtol=1e-5)
    np.testing.assert_array_equal(observed["poisoned"][[0, 2, 3]], observed["honest"][[0, 2, 3]])
