"""Attackers that send what they report: each family's behaviour, and the bounds against them."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.adversary import (
    Crafted,
    Crafting,
    Defence,
    Sending,
    adversarial,
    cap_budget,
    crafted_directions,
    outside_span,
    screen,
    selection_rates,
)
from adcs.adversary.crafted import craft
from adcs.schedulers import ADCS, DivFL, PowerOfChoice, Uniform
from adcs.schedulers.base import ClientStats
from adcs.sim import RunSpec, SimConfig, simulate
from tests.adversary.conftest import Fixed, N, grouped_stats, paper_like_data


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def built(**kwargs) -> Crafted:
    kwargs.setdefault("clients", (4,))
    return Crafted(**kwargs).build(0, N)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"clients": (1,), "n_malicious": 1}, "exactly one"),
        ({}, "exactly one"),
        ({"clients": (1, 1)}, "repeats a client"),
        ({"n_malicious": 1, "cosine": 1.5}, "cosine"),
        ({"n_malicious": 1, "target": "nearest"}, "target"),
        ({"n_malicious": 1, "scale": 0.0}, "scale"),
        ({"n_malicious": 1, "start": -1}, "start"),
    ],
)
def test_bad_crafted_attacks_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Crafted(**kwargs)


def test_a_crafted_direction_keeps_its_cosine_and_leaves_the_honest_span():
    stats = grouped_stats()
    attack = built(clients=(4, 9), cosine=0.5)
    rows = np.array([4, 9])
    honest = np.delete(stats.updates, rows, axis=0)
    d = crafted_directions(attack, rows, stats.updates[rows], honest, None)
    assert np.linalg.norm(d, axis=1) == pytest.approx([1, 1])
    assert np.einsum("ij,ij->i", d, unit(stats.updates[rows])) == pytest.approx([0.5, 0.5])
    novel = d - 0.5 * unit(stats.updates[rows])
    assert np.abs(novel @ unit(honest).T).max() < 1e-5  # the added part is outside every honest
    spread = unit(novel)
    assert abs(spread[0] @ spread[1]) < 0.5  # a spreading coalition: k different novel parts
    shared = crafted_directions(
        built(clients=(4, 9), shared=True), rows, stats.updates[rows], honest, None
    )
    parts = unit(shared - 0.5 * unit(stats.updates[rows]))
    assert parts[0] @ parts[1] > 0.9  # a sharing coalition: one novel part


def test_the_update_sent_is_the_update_reported():
    stats = grouped_stats()
    attack = built(cosine=0.5, scale=0.01)  # a free rider: 1 % of its norm
    run = Crafting(Fixed(6, chosen=(0, 1, 2, 3, 4, 5)), attack)
    state = run.init(N)
    rng = np.random.default_rng(0)
    _, state = run.select(state, 3, stats, rng)
    clients = np.arange(6)
    received, _ = Sending(attack).aggregate(
        state, 3, clients, stats.updates[:6], np.full(6, 1 / 6), stats
    )
    told, _, _ = craft(attack, stats, 3)
    assert unit(received[4]) @ unit(told.updates[4]) == pytest.approx(1.0, abs=1e-6)
    own = np.linalg.norm(stats.updates[4])
    assert np.linalg.norm(received[4]) == pytest.approx(0.01 * own, rel=1e-5)
    assert np.array_equal(received[:4], stats.updates[:4])  # honest updates untouched


def test_a_sleeper_is_honest_before_its_start_round():
    stats = grouped_stats()
    attack = built(start=10, factor=10.0)
    told, rows, _ = craft(attack, stats, 9)
    assert told is stats and rows.size == 0
    told, rows, _ = craft(attack, stats, 10)
    assert rows.tolist() == [4] and told.losses[4] == pytest.approx(10 * stats.losses[4])


def test_an_impersonator_aims_at_the_worst_served_honest_client():
    stats = grouped_stats()
    attack = built(target="worst", cosine=0.9)
    told, _, _ = craft(attack, stats, 0)
    honest = np.arange(N) != 4
    worst = np.flatnonzero(honest)[np.argmax(stats.losses[honest])]
    # The direction is built in float64 with cosine exactly 0.9; what is sent is its float32
    # rounding, each element within u = 2⁻²⁴ of it relatively, which moves a cosine by at most 2u.
    u = float(np.finfo(np.float32).eps) / 2
    cosine = unit(told.updates[4]) @ unit(stats.updates[worst])
    assert cosine == pytest.approx(0.9, abs=2 * u)


def test_the_adaptive_form_passes_the_screens_the_naive_form_fails():
    stats = grouped_stats()
    defence = Defence(plausibility=0.9, novelty=3.0)
    naive, _, _ = craft(built(cosine=0.3), stats, 0, defence)
    adaptive, _, _ = craft(built(cosine=0.3, adaptive=True), stats, 0, defence)
    assert screen(defence, None, naive).dropped[4]
    assert not screen(defence, None, adaptive).dropped.any()
    outside = outside_span(unit(adaptive.updates), np.ones(N, dtype=bool))
    others = np.delete(outside, 4)
    assert outside[4] <= 3.0 * np.median(outside) and outside[4] > others.max()  # most novel


CONFIG = SimConfig(60, batch_size=4, local_lr=0.3, eval_every=60)


def attacked_rates(scheduler, defence: Defence | None) -> np.ndarray:
    attack = Crafted(clients=(4,), cosine=0.3)
    run, hook = adversarial(scheduler, attack=attack.build(0, N), defence=defence)
    result = simulate([RunSpec(run, 0, "x", aggregator=hook)], paper_like_data(), CONFIG)[0]
    return np.asarray(result.selected)


@pytest.mark.parametrize("scheduler", [DivFL(6), ADCS(4, theta=0.5, refresh_every=5)])
def test_a_consistent_attacker_captures_a_diversity_scheduler_and_the_cap_bounds_it(scheduler):
    window, cap = 20, 1.5
    budget = cap_budget(cap, window, scheduler.m, N)
    selected = attacked_rates(scheduler, None)
    assert selection_rates(selected, N)[4] > budget / window  # above 1.5 × its fair share
    capped = attacked_rates(scheduler, Defence(received=True, cap=cap, window=window))
    hits = (capped == 4).any(axis=1).astype(int)
    most = max(hits[t : t + window].sum() for t in range(len(hits) - window + 1))
    assert most <= budget  # 1.5 × the fair share over every window of 20 rounds


def test_under_a_loss_probe_the_adaptive_sender_crafts_what_passes_the_screens():
    stats = grouped_stats()
    defence = Defence(plausibility=0.9, novelty=3.0)
    clients = np.arange(N)
    sent = {}
    for adaptive in (False, True):
        attack = built(cosine=0.3, adaptive=adaptive)
        hook = adversarial(Fixed(N), attack=attack, defence=defence)[1]
        assert isinstance(hook, Sending)
        sent[adaptive], _ = hook.aggregate(
            None, 0, clients, stats.updates, np.full(N, 1 / N), stats
        )
    as_received = [
        screen(defence, None, ClientStats(stats.available, clients, None, sent[a])).dropped[4]
        for a in (False, True)
    ]
    assert as_received == [True, False]


def test_absent_clients_are_unavailable_and_unprobed_from_their_start():
    stats = grouped_stats()
    attack = built(clients=(4, 9), absent=True, start=5)
    told, rows, directions = craft(attack, stats, 4)
    assert told is stats and rows.size == 0 and directions is None
    told, rows, directions = craft(attack, stats, 5)
    assert rows.size == 0 and directions is None
    assert np.flatnonzero(~told.available).tolist() == [4, 9]
    keep = np.isin(np.arange(N), [4, 9], invert=True)
    assert told.clients.tolist() == np.arange(N)[keep].tolist()
    assert np.array_equal(told.losses, stats.losses[keep])
    assert np.array_equal(told.updates, stats.updates[keep])


@pytest.mark.parametrize("scheduler", [Uniform(6), PowerOfChoice(6), DivFL(6)])
def test_absent_clients_are_never_selected_and_the_others_run_as_without_them(scheduler):
    """Uniform probes nothing, PowerOfChoice losses, DivFL updates: each is told the clients are
    gone. Before ``start`` they are selected like anyone (so the assertion after it can fail)."""
    attack = Crafted(clients=(4, 9), absent=True, start=20).build(0, N)
    run, hook = adversarial(scheduler, attack=attack)
    selected = np.asarray(
        simulate([RunSpec(run, 0, "x", aggregator=hook)], paper_like_data(), CONFIG)[0].selected
    )
    gone = np.isin(selected, [4, 9]).any(axis=1)
    assert gone[:20].any() and not gone[20:].any()
