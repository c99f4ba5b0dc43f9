"""The bounds by construction: the sliding-window cap's guarantee, the span screen."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcs.adversary import (
    Defence,
    Defended,
    Window,
    cap_budget,
    capped_availability,
    outside_span,
    screen,
)
from adcs.schedulers._common import BasicState
from adcs.schedulers.base import ClientStats, Probe, ProbeKind, Selection
from tests.adversary.conftest import N, grouped_stats


@dataclass(frozen=True)
class Hoarder:
    """Selects the lowest-indexed available clients every round: the most concentrated choice."""

    m: int
    observes_updates: bool = False

    def init(self, n_clients: int, data_sizes: Any = None) -> BasicState:
        return BasicState(n_clients)

    def probe(self, state: BasicState, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.LOSSES)

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: Any
    ) -> tuple[Selection, BasicState]:
        return Selection(np.flatnonzero(stats.available)[: self.m].astype(np.intp)), state

    def observe(self, state: BasicState, *args: Any) -> BasicState:
        return state


def run_capped(n: int, m: int, cap: float, window: int, rounds: int, p: float, seed: int):
    """Selections (rounds, ≤ m) of a capped Hoarder under Bernoulli(p) availability."""
    rng = np.random.default_rng(seed)
    sched = Defended(Hoarder(m), Defence(cap=cap, window=window), seed)
    state = sched.init(n)
    chosen = []
    for t in range(rounds):
        available = rng.random(n) < p
        stats = ClientStats(available, np.flatnonzero(available), rng.random(available.sum()))
        selection, state = sched.select(state, t, stats, rng)
        assert len(selection.clients) == min(m, available.sum())  # the contract holds
        assert available[selection.clients].all()
        chosen.append(np.asarray(selection.clients))
    return chosen


def most_in_any_window(chosen: list[np.ndarray], n: int, window: int) -> int:
    counts = np.zeros((len(chosen), n), dtype=int)
    for t, c in enumerate(chosen):
        counts[t, c] = 1
    csum = np.vstack([np.zeros(n, dtype=int), np.cumsum(counts, axis=0)])
    span = min(window, len(chosen))
    return int((csum[span:] - csum[:-span]).max())


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(4, 16),
    m_share=st.floats(0.1, 0.9),
    extra=st.integers(0, 3),
    window=st.integers(2, 12),
    seed=st.integers(0, 10_000),
)
def test_no_client_exceeds_its_budget_in_any_window(n, m_share, extra, window, seed):
    """The guarantee, with every client available and b ≥ (W − 1) m / (N − m) (cap_budget)."""
    m = max(1, min(n - 1, round(m_share * n)))
    budget = -(-(window - 1) * m // (n - m)) + extra
    cap = (budget + 0.5) * n / (window * m)  # the c whose budget is `budget`
    assert cap_budget(cap, window, m, n) == max(1, budget)
    chosen = run_capped(n, m, cap, window, rounds=3 * window + 5, p=1.0, seed=seed)
    assert most_in_any_window(chosen, n, window) <= max(1, budget)


def test_under_partial_availability_the_budget_can_need_a_fill():
    """Where too few available clients are under budget the round is filled (the contract
    wins): the documented limit of the guarantee, found by the property test above."""
    chosen = run_capped(4, 1, 4 / 3, 3, rounds=40, p=0.7, seed=0)
    assert most_in_any_window(chosen, 4, 3) > cap_budget(4 / 3, 3, 1, 4)


def test_a_tight_cap_still_fills_every_round_and_binds_the_hoarded_clients():
    n, m, window = 10, 6, 10
    chosen = run_capped(n, m, cap=1.2, window=window, rounds=60, p=1.0, seed=0)
    budget = cap_budget(1.2, window, m, n)  # 7 of 10 rounds
    counts = np.bincount(np.concatenate(chosen), minlength=n)
    assert counts.max() <= budget * 6 + window  # no client far above 1.2 × its fair share
    assert counts.min() > 0  # the Hoarder's neglected clients are now chosen
    uncapped = run_capped(n, m, cap=100.0, window=window, rounds=60, p=1.0, seed=0)
    assert np.bincount(np.concatenate(uncapped), minlength=n)[m:].sum() == 0


def test_capped_availability_fills_with_the_fewest_selections_first():
    window = Window(np.array([5, 5, 1, 5, 2, 5]))
    available = np.ones(6, dtype=bool)
    got = capped_availability(available, window, budget=5, m=4, key=1, round_idx=0)
    assert got.tolist() == [False, False, True, False, True, False] or got.sum() == 4
    assert got[[2, 4]].all() and got.sum() == 4  # both under budget, then two of the full ones


def test_the_window_forgets_rounds_older_than_w():
    w = Window.empty(3)
    for sel in ([0, 1], [0], [2], [0]):
        w = w.pushed(np.array(sel), window=3)
    assert w.counts.tolist() == [1, 0, 1]  # only the last W − 1 = 2 rounds


def test_outside_span_matches_a_brute_force_projection():
    rng = np.random.default_rng(3)
    d = rng.normal(size=(7, 20))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    got = outside_span(d, np.ones(7, dtype=bool))
    for i in range(7):
        others = np.delete(d, i, axis=0)
        coef, *_ = np.linalg.lstsq(others.T, d[i], rcond=None)
        assert got[i] == pytest.approx(np.linalg.norm(d[i] - others.T @ coef), abs=1e-6)
    twin = np.vstack([d[:3], d[:1]])
    assert outside_span(twin, np.ones(4, dtype=bool))[[0, 3]] == pytest.approx([0, 0], abs=1e-3)
    usable = np.array([True, False, True, True, True, True, True])
    assert np.isnan(outside_span(d, usable)[1])


def test_the_span_screen_leaves_out_a_novel_direction_and_keeps_honest_groups():
    stats = grouped_stats()
    updates = np.array(stats.updates)
    rng = np.random.default_rng(0)
    honest = updates[np.arange(N) != 5]
    novel = rng.normal(size=updates.shape[1])
    q, _ = np.linalg.qr(honest.T)
    novel -= q @ (q.T @ novel)  # outside every honest update
    own = updates[5] / np.linalg.norm(updates[5])
    updates[5] = (0.5 * own + np.sqrt(0.75) * novel / np.linalg.norm(novel)) * 2.0
    crafted = ClientStats(stats.available, stats.clients, stats.losses, updates)
    dropped = screen(Defence(novelty=3.0), None, crafted).dropped
    assert dropped.tolist() == [i == 5 for i in range(N)]
    assert not screen(Defence(novelty=3.0), None, stats).dropped.any()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"novelty": 0.5}, "novelty"), ({"cap": -1.0}, "cap"), ({"window": 0}, "window")],
)
def test_bad_bounds_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Defence(**kwargs)


# -- the cap over any interval (Defence.any_interval) ---------------------------------------------


def most_over_any_interval(
    chosen: list[np.ndarray], n: int, window: int, rate: float, clients: Any = slice(None)
) -> float:
    """max over ``clients`` and intervals of L ≥ W rounds of (selections − rate · L)."""
    hits = np.zeros((len(chosen), n), dtype=int)
    for t, c in enumerate(chosen):
        hits[t, c] = 1
    hits = hits[:, clients]
    csum = np.vstack([np.zeros(hits.shape[1], dtype=int), np.cumsum(hits, axis=0)])
    worst = -np.inf
    for length in range(window, len(chosen) + 1):
        worst = max(worst, float((csum[length:] - csum[:-length]).max()) - rate * length)
    return worst


@dataclass(frozen=True)
class Favourite(Hoarder):
    """A Hoarder of a fixed order of the clients (a seed's permutation), not of their indices."""

    order: tuple[int, ...] = ()

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: Any
    ) -> tuple[Selection, BasicState]:
        ranked = [c for c in self.order if stats.available[c]]
        return Selection(np.asarray(ranked[: self.m], dtype=np.intp)), state


def run_favourite(n, m, cap, window, rounds, seed, any_interval=True, absent=()):
    """Selections of a capped Favourite; ``absent`` clients are unavailable in rounds < window."""
    rng = np.random.default_rng(seed)
    order = tuple(int(c) for c in rng.permutation(n))
    if absent:  # the absent clients are the most wanted once back
        order = (*absent, *(c for c in order if c not in absent))
    sched = Defended(Favourite(m, order=order), Defence(cap=cap, window=window,
                                                  any_interval=any_interval), seed)  # fmt: skip
    state, chosen, fills = sched.init(n), [], 0
    budget, rate = cap_budget(cap, window, m, n), cap * m / n
    for t in range(rounds):
        available = np.ones(n, dtype=bool)
        if t < window:
            available[list(absent)] = False
        under = available & (state.window.counts < budget) & state.window.interval_ok(rate)
        fills += int(under.sum() < min(m, available.sum()))
        stats = ClientStats(available, np.flatnonzero(available), rng.random(available.sum()))
        selection, state = sched.select(state, t, stats, rng)
        assert len(selection.clients) == min(m, available.sum())
        chosen.append(np.asarray(selection.clients))
    return chosen, fills


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(4, 14),
    m_share=st.floats(0.1, 0.6),
    window=st.integers(2, 10),
    slack=st.floats(1.05, 3.0),
    seed=st.integers(0, 10_000),
)
def test_no_client_exceeds_its_rate_over_any_interval(n, m_share, window, slack, seed):
    """With ``any_interval``: at most b in any W rounds and r · L in any L ≥ W rounds, in every
    run whose rounds needed no fill (the fill is the documented limit, counted here)."""
    m = max(1, min(n - 1, round(m_share * n)))
    cap = slack * n / (n - m)  # above N / (N − m): room for the m slots under the rate
    chosen, fills = run_favourite(n, m, cap, window, rounds=4 * window + 7, seed=seed)
    rate = cap * m / n
    if fills == 0:
        assert most_in_any_window(chosen, n, window) <= cap_budget(cap, window, m, n)
        assert most_over_any_interval(chosen, n, window, rate) <= 1e-9 * rate * len(chosen)


def test_the_interval_rule_never_needs_a_fill_with_room_for_m_slots():
    # the regime of the property test above: every example of this grid runs without a fill
    for n, m, window in ((10, 3, 5), (12, 6, 4), (7, 2, 9)):
        for seed in range(5):
            _, fills = run_favourite(n, m, 1.2 * n / (n - m), window, 4 * window + 7, seed)
            assert fills == 0


def test_a_burst_after_an_emptied_window_is_bounded():
    # the red team's attack in the paper's numbers: b = 90 of W = 100 rounds, r = 0.9 a round;
    # the favourite client is absent for the first window, then wanted every round
    n, m, window, cap, rounds = 30, 18, 100, 1.5, 280
    burst = rounds - window  # 180 rounds of attack
    sliding, _ = run_favourite(n, m, cap, window, rounds, 0, any_interval=False, absent=(0,))
    interval, _ = run_favourite(n, m, cap, window, rounds, 0, any_interval=True, absent=(0,))
    held = [sum(int(0 in rnd) for rnd in run[window:]) for run in (sliding, interval)]
    assert held[0] == 90 + 80  # the W-budget alone: b, then b again 80 rounds on (1.57 ×)
    assert held[1] <= cap * m / n * burst  # ≤ 162: 1.5 × the fair share over the 180 rounds
    rate = cap * m / n
    assert most_over_any_interval(interval, n, window, rate, [0]) <= 1e-9 * rate * rounds
    assert most_over_any_interval(sliding, n, window, rate, [0]) >= 8  # 170 − 162
