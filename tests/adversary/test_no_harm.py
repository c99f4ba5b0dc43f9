"""Defences that do no harm where nobody attacks: the fence on corroborated claims and the cap
on uncorroborated selections (docs/concepts/threat-model.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adcs.adversary import Defence, Defended, cap_budget, screen
from adcs.adversary.screens import fenced
from adcs.schedulers._common import BasicState
from adcs.schedulers.base import ClientStats, Probe, ProbeKind, Selection
from tests.adversary.conftest import grouped_stats
from tests.adversary.test_bound import most_in_any_window


def test_a_value_its_peers_corroborate_is_kept_and_an_outlier_is_clipped():
    values = np.array([1.0, 1.2, 1.1, 30.0, 0.9])
    peers = np.array([[1, 2], [0, 2], [0, 1], [0, 1], [-1, -1]])
    out, clipped = fenced(values, peers, 2.0)
    # fences: 2 · max(peers' smallest, median 1.1) = 2.2 for every row (no peer: the median)
    assert out.tolist() == [1.0, 1.2, 1.1, 2.2, 0.9]
    assert clipped.tolist() == [False, False, False, True, False]


def test_peers_that_report_zero_cannot_pull_a_claim_below_the_rounds_median():
    """The smother: both peers of client 0 report 0; its fence is 2 × the round's median."""
    values = np.array([3.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    peers = np.array([[1, 2], [0, 2], [0, 1], [4, 5], [3, 5], [3, 4], [3, 4]])
    out, clipped = fenced(values, peers, 2.0)
    assert out[0] == 2.0 and clipped[0]  # 2 × median 1.0, not median(3, 0, 0) = 0
    assert out[0] > out[3:].max()  # still the neediest claim of the round


def test_one_colluding_peer_does_not_lift_a_fence():
    """A Sybil whose peers are a fellow Sybil (× 10) and an honest group-mate: every peer must
    corroborate, so its fence is the honest one's."""
    values = np.array([1.0, 1.1, 10.0, 10.0, 1.0, 1.2])
    peers = np.array([[1, 2], [0, 2], [3, 1], [2, 4], [5, 3], [4, 3]])
    out, clipped = fenced(values, peers, 2.0)
    assert clipped.tolist() == [False, False, True, True, False, False]
    # 2 × max(the honest peer's 1.1 or 1.0, the round's median 1.15) = 2.3, not 2 × 10
    assert out[2] == pytest.approx(2.3, rel=1e-15) and out[3] == pytest.approx(2.3, rel=1e-15)
    by_largest, _ = fenced(values, np.array([[2, 2]] * 6), 2.0)
    assert by_largest[3] == 10.0  # with only Sybils as peers, the claim stands


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.one_of(st.floats(0.0, 1e6), st.just(float("nan"))), min_size=1, max_size=12),
    fence=st.floats(1.0, 10.0),
    seed=st.integers(0, 10_000),
)
def test_a_fence_only_ever_lowers_an_outlier_to_its_fence(values, fence, seed):
    vals = np.asarray(values)
    n = vals.size
    rng = np.random.default_rng(seed)
    peers = rng.integers(-1, n, size=(n, 2))
    out, clipped = fenced(vals, peers, fence)
    finite = np.isfinite(vals)
    np.testing.assert_array_equal(np.isfinite(out), finite)
    assert (out[~clipped & finite] == vals[~clipped & finite]).all()  # kept bit for bit
    assert (out[clipped] < vals[clipped]).all()  # lowered, never raised
    if finite.any():  # a clipped value sits at or above φ × the round's median
        floor = fence * float(np.median(vals[finite]))
        assert (out[clipped] >= floor * (1 - 1e-12)).all()


def test_a_fenced_defence_passes_honest_reports_on_unchanged():
    stats = grouped_stats()
    defence = Defence(corroborate=True, fence=2.0)
    seen = screen(defence, None, stats)
    assert seen.stats.losses is not None
    np.testing.assert_array_equal(seen.stats.losses, stats.losses)
    assert seen.stats.updates is stats.updates  # not even rebuilt
    assert seen.clipped is not None and not seen.clipped.any()
    # the median rule moves the same honest losses
    medians = screen(Defence(corroborate=True), None, stats).stats.losses
    assert medians is not None and not np.array_equal(medians, stats.losses)


def test_a_fenced_defence_clips_a_loss_lie_to_its_groups_fence():
    stats = grouped_stats()
    assert stats.losses is not None
    lied = np.array(stats.losses, dtype=float)
    lied[0] *= 10  # client 0's group is clients 0–2
    out = screen(Defence(corroborate=True, fence=2.0), None, ClientStats(
        stats.available, stats.clients, lied, stats.updates))  # fmt: skip
    assert out.clipped is not None and out.clipped.tolist() == [True] + [False] * 11
    assert out.stats.losses is not None
    top = max(min(stats.losses[1], stats.losses[2]), float(np.median(lied)))
    assert out.stats.losses[0] == pytest.approx(2.0 * top, rel=1e-12)


@dataclass(frozen=True)
class Greedy:
    """Selects the m available clients of highest finite loss (PowerOfChoice without sampling)."""

    m: int
    observes_updates: bool = False

    def init(self, n_clients: int, data_sizes: Any = None) -> BasicState:
        return BasicState(n_clients)

    def probe(self, state: BasicState, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.LOSSES)

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: Any
    ) -> tuple[Selection, BasicState]:
        assert stats.losses is not None
        usable = stats.available[stats.clients] & np.isfinite(stats.losses)
        score = np.where(usable, stats.losses, -np.inf)
        order = np.argsort(-score, kind="stable")
        ok = stats.available[stats.clients[order]]
        return Selection(stats.clients[order][ok][: self.m].astype(np.intp)), state

    def observe(self, state: BasicState, *args: Any) -> BasicState:
        return state


def run_greedy(n, m, defence, rounds, liars, factor, seed):
    """Selections (rounds, m) of a Greedy scheduler under ``defence`` (None: undefended), with
    honest losses drawn each round and ``liars`` reporting theirs × ``factor``.

    Honest losses lie in [0.75 · 0.95, 1.25 · 1.05]: the largest is below 1.85 × the smallest,
    so below φ = 2 × the round's median — no honest claim is ever clipped."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(0.75, 1.25, size=n)
    sched: Any = Greedy(m) if defence is None else Defended(Greedy(m), defence, seed)
    state = sched.init(n)
    chosen = []
    available = np.ones(n, dtype=bool)
    for t in range(rounds):
        losses = base * rng.uniform(0.95, 1.05, size=n)
        losses[list(liars)] *= factor
        stats = ClientStats(available, np.arange(n), losses)
        selection, state = sched.select(state, t, stats, rng)
        chosen.append(np.sort(np.asarray(selection.clients)))
    return chosen


NO_HARM = Defence(
    corroborate=True, fence=2.0, cap=1.5, window=10, any_interval=True, cap_uncorroborated=True
)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(6, 16), m_share=st.floats(0.2, 0.8), seed=st.integers(0, 10_000))
def test_where_no_claim_exceeds_its_fence_the_scheduler_chooses_as_undefended(n, m_share, seed):
    """No harm by construction: honest losses that no fence clips (`run_greedy`) reach the
    scheduler unchanged, so the defended run selects exactly what the undefended
    one does, in every round — the cap never binds on a client the scheduler wants every round."""
    m = max(1, min(n - 1, round(m_share * n)))
    undefended = run_greedy(n, m, None, 40, (), 1.0, seed)
    defended = run_greedy(n, m, NO_HARM, 40, (), 1.0, seed)
    for a, b in zip(undefended, defended, strict=True):
        np.testing.assert_array_equal(a, b)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(6, 16),
    m_share=st.floats(0.2, 0.8),
    k=st.integers(1, 2),
    seed=st.integers(0, 10_000),
)
def test_a_persistent_outlier_holds_at_most_its_budget_in_any_window(n, m_share, k, seed):
    """Liars × 100 are clipped every round, so every selection of theirs counts: at most b in
    any W consecutive rounds (the window rule; the honest clients fill the rest)."""
    m = max(1, min(n - 1 - k, round(m_share * n)))
    window = NO_HARM.window
    liars = tuple(range(k))
    chosen = run_greedy(n, m, NO_HARM, 4 * window, liars, 100.0, seed)
    budget = cap_budget(NO_HARM.cap, window, m, n)
    liar_rows = [c[np.isin(c, liars)] for c in chosen]
    assert most_in_any_window(liar_rows, n, window) <= budget
    undefended = run_greedy(n, m, None, 4 * window, liars, 100.0, seed)
    assert most_in_any_window([c[np.isin(c, liars)] for c in undefended], n, window) == window


def test_uniform_behind_the_recommended_bounds_draws_what_it_draws_alone():
    """Uniform reads no statistic the bounds change: given the same generator it selects the
    same clients (a bench's defended and undefended runs differ only by their streams, keyed by
    run id)."""
    from adcs.schedulers import SCHEDULERS

    uniform = SCHEDULERS["uniform"](5)
    defended = Defended(uniform, NO_HARM, seed=3)
    stats = grouped_stats()
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    s_plain, s_def = uniform.init(stats.n_probed), defended.init(stats.n_probed)
    for t in range(30):
        plain, s_plain = uniform.select(s_plain, t, stats, a)
        mine, s_def = defended.select(s_def, t, stats, b)
        np.testing.assert_array_equal(plain.clients, mine.clients)


@dataclass(frozen=True)
class Refreshing:
    """Probes every client's loss every R rounds and selects the m highest of that probe in the
    rounds between (ADCS's refresh, in small): most rounds probe nothing."""

    m: int
    every: int = 5
    observes_updates: bool = False

    def init(self, n_clients: int, data_sizes: Any = None) -> Any:
        return np.arange(self.m, dtype=np.intp)

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Probe:
        return Probe(ProbeKind.LOSSES)

    def select(self, state: Any, round_idx: int, stats: ClientStats, rng: Any) -> Any:
        if stats.n_probed and stats.losses is not None:
            order = np.argsort(-np.where(np.isfinite(stats.losses), stats.losses, -np.inf))
            state = stats.clients[order][: self.m].astype(np.intp)
        kept = state[stats.available[state]]  # its pool where available, then the others
        others = np.setdiff1d(np.flatnonzero(stats.available), kept)
        return Selection(np.concatenate([kept, others])[: self.m].astype(np.intp)), state

    def observe(self, state: Any, *args: Any) -> Any:
        return state


def test_a_verdict_stands_between_probes_so_a_refreshing_scheduler_is_capped_too():
    n, m, liars = 10, 4, [0]
    window = NO_HARM.window
    rng = np.random.default_rng(0)
    sched = Defended(Refreshing(m), NO_HARM, 0)
    state = sched.init(n)
    chosen = []
    for t in range(4 * window):
        available = np.ones(n, dtype=bool)
        if t % 5 == 0:  # a refresh: every loss, the liar's × 100
            losses = rng.uniform(0.9, 1.1, size=n)
            losses[liars] *= 100
            stats = ClientStats(available, np.arange(n), losses)
        else:  # no probe
            stats = ClientStats(available, np.zeros(0, dtype=np.intp))
        selection, state = sched.select(state, t, stats, rng)
        chosen.append(np.asarray(selection.clients))
    liar_rows = [c[np.isin(c, liars)] for c in chosen]
    assert most_in_any_window(liar_rows, n, window) <= cap_budget(NO_HARM.cap, window, m, n)
    assert most_in_any_window(liar_rows, n, window) > window // 5  # counted between refreshes
