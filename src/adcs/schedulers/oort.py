"""Oort (Lai et al., OSDI 2021): guided participant selection by statistical and system utility.

Oort treats clients as arms of a bandit. A client it has trained reports its *statistical
utility* U_i = |B_i| · sqrt(mean_{k∈B_i} loss_k²) (B_i its training samples); a client's score is

    Util(i) = Ũ_i + sqrt(0.1 · log R / L_i)   (times (T/t_i)^α if its duration t_i exceeds T),

with Ũ the utilities clipped at their 98th percentile and scaled to [0, 1] (as the authors' code
does), R the current round and L_i the round client i last took part (the staleness bonus). Each
round a fraction ε of the k slots *explores* clients never selected (drawn, among the
``sample_window`` · εk largest by data size, with probability ∝ size) and the rest *exploit*: the
(1 − ε)k slots are drawn, with probability ∝ Util, among the explored clients whose Util is at
least ``cut_off`` times that of the (1 − ε)k-th best. ε starts at ``exploration_factor`` and decays
by ``exploration_decay`` a round down to ``exploration_min``. The *pacer* widens the preferred
round duration T (a percentile of the clients' durations) by ``pacer_delta`` points when the
exploited utility of the last ``pacer_step`` rounds stops growing, and narrows it when it swings.

Oort learns utilities only from the clients it selects (`Oort.observe`); it probes nothing.
Statements of what this form simplifies:

* **Losses.** The simulator returns each trained client's mean loss on its first minibatch at the
  round's model, not per-sample losses, so U_i = n_i · ℓ_i with n_i the client's data size (the
  authors' code uses |B_i| = the client's data size) and ℓ_i that mean loss, which stands in for
  sqrt(mean squared loss) (a lower bound by Jensen's inequality, equal when the samples' losses
  are equal).
* **System utility.** ``durations`` are the per-client expected round durations. With ``None``
  (default) Oort takes them from the runtime when it knows the clients' devices (the simulator
  with a system profile, through
  [`Oort.with_round_times`][adcs.schedulers.oort.Oort.with_round_times]); without either, Oort runs
  on statistical utility only and the pacer, which only moves T, has no effect.
* Oort's blacklist of over-selected clients (off by default in the authors' code) is omitted.
* Exactly k = min(m, available) clients are returned: when too few clients are left to explore,
  the exploitation draw takes the free slots (and the other way round), as FedScale's
  implementation would leave them empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from adcs._validate import check_int, check_number
from adcs.schedulers._common import BasicState, SchedulerBase
from adcs.schedulers.base import (
    ClientStats,
    FloatArray,
    IntArray,
    Scheduler,
    Selection,
    check_available,
    top_m,
)


@dataclass(frozen=True, eq=False)
class OortState(BasicState):
    """Per-run Oort state.

    Attributes
    ----------
    utility : ndarray of shape (n_clients,)
        The last statistical utility U_i each client reported; NaN while unexplored.
    last_round : ndarray of shape (n_clients,), int
        The round each client last reported (−1 while unexplored).
    rounds : int
        Selections made so far (ε has decayed this many times).
    round_threshold : float
        The pacer's current percentile of durations that sets the preferred duration T.
    exploited : ndarray of shape (n_exploited,), int
        The clients exploited in the last round (the pacer sums their utilities).
    history : tuple of float
        Mean reported utility of the exploited clients, one per past round (last 2·pacer_step).
    """

    utility: FloatArray | None = None
    last_round: IntArray | None = None
    rounds: int = 0
    round_threshold: float = 30.0
    exploited: IntArray | None = None
    history: tuple[float, ...] = ()


def oort_scores(
    utility: FloatArray,
    last_round: IntArray,
    round_idx: int,
    clip_bound: float,
    staleness: float,
) -> FloatArray:
    """Util(i) of explored clients (finite ``utility``), shape (n,): scaled utility + staleness.

    Utilities are clipped at their ``clip_bound`` quantile and scaled to [0, 1] by the explored
    clients' minimum (×0.999) and maximum, as the authors' code does; the staleness bonus is
    sqrt(staleness · log R / L_i) with rounds counted from 1.
    """
    explored = np.isfinite(utility)
    scores = np.full(utility.shape[0], np.nan)
    if not explored.any():
        return scores
    u = utility[explored]
    ordered = np.sort(u)
    clip = ordered[min(int(len(ordered) * clip_bound), len(ordered) - 1)]
    low = ordered[0] * 0.999
    span = max(ordered[-1] - low, 1e-4)
    now = round_idx + 1
    bonus = np.sqrt(staleness * math.log(now) / (last_round[explored] + 1))
    scores[explored] = (np.minimum(u, clip) - low) / span + bonus
    return scores


def weighted_draw(
    candidates: IntArray, weights: FloatArray, size: int, rng: np.random.Generator
) -> IntArray:
    """``size`` distinct candidates drawn with probability ∝ weight (the highest-weight ones when
    too few weights are positive)."""
    if size <= 0:
        return np.empty(0, dtype=np.intp)
    w = np.maximum(np.nan_to_num(weights, nan=0.0), 0.0)
    if np.count_nonzero(w) < size:
        return candidates[top_m(w, size)]
    return rng.choice(candidates, size=size, replace=False, p=w / w.sum()).astype(np.intp)


@dataclass(frozen=True)
class Oort(SchedulerBase[OortState]):
    """Oort's training-participant selector (module docstring).

    Parameters
    ----------
    m : int
        Clients per round.
    exploration_factor, exploration_decay, exploration_min : float
        ε₀ = 0.9, its decay 0.98 a round and its floor 0.3 (the authors' defaults), in [0, 1].
    cut_off : float
        c ∈ (0, 1]: exploited clients are drawn among those with Util ≥ c · Util of the
        (1 − ε)k-th best (the paper's 95%).
    clip_bound : float
        Quantile ∈ (0, 1] at which utilities are clipped (0.98).
    staleness : float
        The 0.1 in the staleness bonus sqrt(0.1 log R / L_i); ≥ 0.
    sample_window : float
        Exploration draws among the ``sample_window`` · εk largest unexplored clients (5), ≥ 1.
    durations : tuple of float, optional
        Per-client expected round duration t_i > 0 (the system utility); ``None``: the runtime's
        ([`with_round_times`][adcs.schedulers.oort.Oort.with_round_times]), or statistical utility
        only when it has none.
    round_threshold : float
        Initial percentile (0, 100] of the durations that sets the preferred duration T (30).
    pacer_step : int
        W, rounds per pacer window (20).
    pacer_delta : float
        Δ, percentile points the pacer moves T by (5).
    round_penalty : float
        α, the exponent of the straggler penalty (T/t_i)^α (2).
    """

    exploration_factor: float = 0.9
    exploration_decay: float = 0.98
    exploration_min: float = 0.3
    cut_off: float = 0.95
    clip_bound: float = 0.98
    staleness: float = 0.1
    sample_window: float = 5.0
    durations: tuple[float, ...] | None = None
    round_threshold: float = 30.0
    pacer_step: int = 20
    pacer_delta: float = 5.0
    round_penalty: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("exploration_factor", "exploration_decay", "exploration_min"):
            check_number(name, getattr(self, name), 0.0, 1.0)
        check_number("cut_off", self.cut_off, 0.0, 1.0, low_open=True)
        check_number("clip_bound", self.clip_bound, 0.0, 1.0, low_open=True)
        check_number("staleness", self.staleness, 0.0)
        check_number("sample_window", self.sample_window, 1.0)
        check_number("round_threshold", self.round_threshold, 0.0, 100.0, low_open=True)
        check_int("pacer_step", self.pacer_step)
        check_number("pacer_delta", self.pacer_delta, 0.0, 100.0)
        check_number("round_penalty", self.round_penalty, 0.0)
        if self.durations is not None:
            d = np.asarray(self.durations, dtype=np.float64)
            if d.ndim != 1 or d.size == 0 or not np.isfinite(d).all() or (d <= 0).any():
                raise ValueError("durations must be positive finite numbers, one per client")
            object.__setattr__(self, "durations", tuple(float(x) for x in d))

    @property
    def observes_updates(self) -> bool:
        """Oort learns from the selected clients' reports; runtimes must call `observe`."""
        return True

    @property
    def needs_round_times(self) -> bool:
        """Oort runs without durations too (statistical utility only)."""
        return False

    def with_round_times(self, round_times: FloatArray) -> Scheduler:
        """This scheduler with ``durations`` from the runtime, unless it was given its own."""
        if self.durations is not None:
            return self
        return replace(self, durations=tuple(np.asarray(round_times, dtype=np.float64).tolist()))

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> OortState:
        sizes = self._check_init(n_clients, data_sizes)
        if self.durations is not None and len(self.durations) != n_clients:
            raise ValueError(
                f"durations has {len(self.durations)} entries but there are {n_clients} clients"
            )
        return OortState(
            n_clients,
            sizes,
            utility=np.full(n_clients, np.nan),
            last_round=np.full(n_clients, -1, dtype=np.intp),
            round_threshold=self.round_threshold,
        )

    def exploration(self, rounds_done: int) -> float:
        """ε after ``rounds_done`` earlier selections (decayed once more before each selection)."""
        decayed = self.exploration_factor * self.exploration_decay ** (rounds_done + 1)
        return max(decayed, self.exploration_min)

    def _pacer(self, state: OortState, round_idx: int) -> OortState:
        """Record last round's exploited utility; every W rounds move T's percentile."""
        assert state.utility is not None
        history = state.history
        if state.exploited is not None:
            reported = state.utility[state.exploited]
            reported = reported[np.isfinite(reported)]
            history = (*history, float(reported.mean()) if reported.size else 0.0)
            history = history[-2 * self.pacer_step :]
        threshold = state.round_threshold
        now, step = round_idx + 1, self.pacer_step
        if len(history) >= 2 * step and now % step == 0:
            before, recent = sum(history[:step]), sum(history[step:])
            if abs(recent - before) <= 0.1 * before:  # utility has flattened: relax T
                threshold = min(100.0, threshold + self.pacer_delta)
            elif abs(recent - before) >= 5 * before:  # utility swings: tighten T
                threshold = max(self.pacer_delta, threshold - self.pacer_delta)
        return replace(state, history=history, round_threshold=threshold)

    def _penalty(self, state: OortState, clients: IntArray) -> FloatArray:
        """(T/t_i)^α for clients slower than the preferred duration T; 1 without durations."""
        if self.durations is None or state.round_threshold >= 100.0:
            return np.ones(clients.shape[0])
        durations = np.asarray(self.durations)
        preferred = float(np.percentile(durations, state.round_threshold, method="lower"))
        t = durations[clients]
        return np.where(t > preferred, (preferred / t) ** self.round_penalty, 1.0)

    def select(
        self, state: OortState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, OortState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        state = self._pacer(state, round_idx)
        assert state.utility is not None and state.last_round is not None
        pool = np.flatnonzero(available).astype(np.intp)
        explored = pool[np.isfinite(state.utility[pool])]
        unexplored = pool[~np.isfinite(state.utility[pool])]
        epsilon = self.exploration(state.rounds)
        n_exploit = min(k - int(k * epsilon), explored.size)
        n_explore = min(unexplored.size, k - n_exploit)
        n_exploit = min(k - n_explore, explored.size)  # unexplored ran short: exploit more
        scores = oort_scores(
            state.utility, state.last_round, round_idx, self.clip_bound, self.staleness
        )[explored] * self._penalty(state, explored)
        exploit = np.empty(0, dtype=np.intp)
        if n_exploit:
            keep = scores >= self.cut_off * np.sort(scores)[-n_exploit]
            exploit = weighted_draw(explored[keep], scores[keep], n_exploit, rng)
        explore = np.empty(0, dtype=np.intp)
        if n_explore:
            sizes = np.ones(state.n_clients) if state.data_sizes is None else state.data_sizes
            prior = sizes[unexplored] * self._penalty(state, unexplored)
            window = min(unexplored.size, max(n_explore, int(self.sample_window * n_explore)))
            front = unexplored[top_m(prior, window)]
            explore = weighted_draw(
                front, prior[np.searchsorted(unexplored, front)], n_explore, rng
            )
        chosen = np.concatenate([explore, exploit]).astype(np.intp)
        state = replace(state, rounds=state.rounds + 1, exploited=exploit)
        return Selection(chosen), state

    def observe(
        self,
        state: OortState,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> OortState:
        if losses is None or np.asarray(clients).size == 0:
            return state
        assert state.utility is not None and state.last_round is not None
        clients = np.asarray(clients, dtype=np.intp)
        loss = np.asarray(losses, dtype=np.float64)
        ok = np.isfinite(loss)
        sizes = np.ones(state.n_clients) if state.data_sizes is None else state.data_sizes
        utility, last = state.utility.copy(), state.last_round.copy()
        utility[clients[ok]] = sizes[clients[ok]] * np.abs(loss[ok])  # |B_i| · sqrt(mean loss²)
        last[clients[ok]] = round_idx
        return replace(state, utility=utility, last_round=last)
