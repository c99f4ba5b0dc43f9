"""ADCS-2 with θ adapted online: a bandit over θ rewarded by the loss decrease a selection bought.

ADCS-2 ([`adcs.schedulers.adcs2`][adcs.schedulers.adcs2]) fixes θ, the balance between how high a
client's loss is and how different its update is. The leaderboard shows that no single θ suits every
workload: where a few groups lag far behind, quality should dominate; where the population has
crisp label groups, diversity should (``results/successor/FINDINGS.md``). This scheduler lets the
server choose θ each round from what it observes, with no knowledge of the workload.

Each round ADCS-2 already probes the loss of every available client at the current model w⁽ᵗ⁾, so
the server sees, for free, how fast the losses fall. θ is held for a block of L rounds
(``block``); the block's reward is how fast the losses of the clients furthest behind fell while
it was held — minus the least-squares slope, per round, of the log of the tracked loss over the
rounds that follow the block's selections (the losses probed at rounds b + 1, …, b + L for the
block of rounds b, …, b + L − 1):

    r = −slope of ( t ↦ log mean of the ⌈φ n_t⌉ highest losses probed at t ),  t = b + 1, …, b + L,

n_t the clients probed at t and φ the ``focus`` (a quarter by default). The leaderboard ranks the
worst client's accuracy: a θ that lowers the average loss fastest by spreading the slots over
every group can leave the groups furthest behind where they are, so the reward watches those.
One round's loss decrease is far smaller than the noise of one-minibatch losses; a slope over L
rounds sees L times the decrease and averages the noise of L probes. The logarithm makes the reward
scale-free: losses shrink over training, and an absolute decrease would shrink with them for every
arm.

θ is drawn from a fixed grid of arms (``arms``) by discounted Gaussian Thompson sampling:

1. every arm a keeps a discounted count N_a, sum S_a and sum of squares Q_a of its rewards; each
   reward first multiplies all three, of every arm, by γ (``discount``), then adds to its arm, so
   an estimate forgets all but about the last 1 / (1 − γ) blocks (the best θ may change as
   training goes on);
2. the first blocks play the arms in order, once each (until every arm has a reward);
3. then each arm's mean is drawn from N(S_a / N_a, σ² / N_a), σ² the rewards' pooled discounted
   variance Σ_a (Q_a − S_a² / N_a) / Σ_a N_a, and the arm of the highest draw is held for the next
   block.

The selection with the chosen θ is exactly ADCS-2's (the same probe, standardised quality, cached
directions and greedy MAP; θ = 1 is top-m by loss). The rewards use the probe that ADCS-2 makes
anyway, so the client computation is ADCS-2's, which is PowerOfChoice's (n loss evaluations and m
updates a round, plus the update probes of clients first seen). A block with fewer than two
rounds of finite probed losses adds no reward (its arm is replayed).

What the reward cannot see: it is short-sighted — L rounds of the tracked loss, not the accuracy of the
worst client at the end — and noisy (each loss is one minibatch), and early blocks fall faster than
late ones whatever their θ (the discount lets those rewards fade). Thompson sampling spends rounds
on every arm in proportion to how plausible it is that the arm is best, so a θ that harms the
federation is still played now and then. The rewards are the clients' reported losses: clients that
lie about their loss steer θ as they steer ADCS-2's quality (docs/concepts/threat-model.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from adcs._validate import check_int, check_number, check_unit_interval
from adcs.schedulers.adcs2 import ADCS2, ADCS2State
from adcs.schedulers.base import BoolArray, ClientStats, FloatArray, Probe, Selection

DEFAULT_ARMS: tuple[float, ...] = (0.5, 0.7, 0.8, 0.9, 1.0)
"""The θ grid: from diversity-leaning (0.5) to top-m by loss (1.0, PowerOfChoice's choice)."""


@dataclass(frozen=True, eq=False)
class ADCS2AdaptiveState(ADCS2State):
    """ADCS-2's state plus the bandit's.

    Attributes
    ----------
    counts, sums, squares : ndarray of shape (n_arms,) or None
        Discounted number, sum and sum of squares of each arm's rewards (``None`` before the
        first selection).
    arm : int
        The arm held in the current block (−1 before the first selection).
    block_start : int
        The round the current block began (−1 before the first selection).
    trace : tuple of (int, float)
        (round t, the tracked log loss at t) for the rounds after ``block_start`` so far.
    """

    counts: FloatArray | None = None
    sums: FloatArray | None = None
    squares: FloatArray | None = None
    arm: int = -1
    block_start: int = -1
    trace: tuple[tuple[int, float], ...] = ()


def tracked_loss(losses: FloatArray | None, focus: float) -> float | None:
    """log of the mean of the ⌈focus · n⌉ highest of the n finite ``losses``.

    ``None`` when no loss is finite or that mean is not positive.
    """
    if losses is None:
        return None
    values = np.asarray(losses, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    k = max(1, math.ceil(focus * values.size - 1e-9))
    mean = float(np.mean(np.sort(values)[values.size - k :]))
    return math.log(mean) if mean > 0.0 else None


def decline_rate(trace: Sequence[tuple[int, float]]) -> float | None:
    """Minus the least-squares slope of ``trace``'s (round, log loss) points, per round.

    ``None`` with fewer than two distinct rounds.
    """
    if len(trace) < 2:
        return None
    rounds = np.array([t for t, _ in trace], dtype=np.float64)
    logs = np.array([y for _, y in trace], dtype=np.float64)
    centred = rounds - rounds.mean()
    spread = float(centred @ centred)
    if spread == 0.0:
        return None
    return -float(centred @ (logs - logs.mean())) / spread


@dataclass(frozen=True)
class ADCS2Adaptive(ADCS2):
    """ADCS-2 whose θ is chosen block by block by a bandit over ``arms`` (module docstring).

    Parameters
    ----------
    m : int
        Clients per round.
    arms : tuple of float
        The θ values the bandit chooses from, each in [0, 1], distinct (default
        `DEFAULT_ARMS`).
    block : int
        L ≥ 2: rounds a θ is held before its reward is scored and the next θ drawn.
    discount : float
        γ ∈ (0, 1]: the rewards' discount per block (1 keeps every reward with equal weight).
    focus : float
        φ ∈ (0, 1]: the reward tracks the mean of the highest ⌈φ n⌉ of the n probed losses (the
        clients furthest behind; 1 tracks every client's).
    theta : float
        Unused (θ is the arm's); ADCS-2's other parameters (``quality_scale``, ``refresh_every``,
        the ablation switches) apply unchanged.
    """

    named_params: ClassVar[tuple[str, ...]] = ()

    arms: tuple[float, ...] = DEFAULT_ARMS
    block: int = 40
    discount: float = 0.9
    focus: float = 0.25

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.arms, (str, bytes)) or not isinstance(self.arms, Iterable):
            raise ValueError(f"arms must be a list of θ values in [0, 1], got {self.arms!r}")
        arms = tuple(check_unit_interval("arms", a) for a in self.arms)
        if not arms:
            raise ValueError("arms must list at least one θ value, got none")
        if len(set(arms)) != len(arms):
            raise ValueError(f"arms must be distinct, got {list(arms)}")
        object.__setattr__(self, "arms", arms)
        check_int("block", self.block, minimum=2)
        check_number("discount", self.discount, 0.0, 1.0, low_open=True)
        check_number("focus", self.focus, 0.0, 1.0, low_open=True)

    @property
    def observes_updates(self) -> bool:
        """Some arm below θ = 1 needs the selected clients' directions."""
        return min(self.arms) < 1.0 and self.observe_directions

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> ADCS2AdaptiveState:
        return ADCS2AdaptiveState(n_clients, self._check_init(n_clients, data_sizes))

    def _at(self, theta: float) -> ADCS2:
        """ADCS-2 itself at ``theta``, with every other parameter of this scheduler."""
        return ADCS2(
            self.m,
            theta=theta,
            quality_scale=self.quality_scale,
            refresh_every=self.refresh_every,
            select_every=self.select_every,
            standardise_quality=self.standardise_quality,
            observe_directions=self.observe_directions,
            group_cosine=self.group_cosine,
        )

    def probe(
        self,
        state: ADCS2State,
        round_idx: int,
        available: BoolArray,
        rng: np.random.Generator,
    ) -> Probe:
        # every round, the probe of the arm that needs the most: θ < 1 also probes the updates
        # of clients without a direction, so every arm finds the directions it needs
        return self._at(min(self.arms)).probe(state, round_idx, available, rng)

    def select(
        self,
        state: ADCS2State,
        round_idx: int,
        stats: ClientStats,
        rng: np.random.Generator,
    ) -> tuple[Selection, ADCS2State]:
        assert isinstance(state, ADCS2AdaptiveState)
        if state.counts is None:
            zeros = np.zeros(len(self.arms))
            state = replace(state, counts=zeros, sums=zeros.copy(), squares=zeros.copy())
        point = tracked_loss(stats.losses, self.focus)
        if state.arm >= 0 and point is not None and round_idx > state.block_start:
            state = replace(state, trace=(*state.trace, (round_idx, point)))
        if state.arm < 0 or round_idx - state.block_start >= self.block:
            state = self._rewarded(state)
            state = replace(state, arm=self._choose(state, rng), block_start=round_idx, trace=())
        selection, inner = self._at(self.arms[state.arm]).select(state, round_idx, stats, rng)
        return selection, inner

    def _rewarded(self, state: ADCS2AdaptiveState) -> ADCS2AdaptiveState:
        """``state`` with the closing block's arm credited its reward (when it can be scored)."""
        reward = decline_rate(state.trace) if state.arm >= 0 else None
        if reward is None:
            return state
        assert state.counts is not None and state.sums is not None and state.squares is not None
        gamma = self.discount
        counts, sums, squares = gamma * state.counts, gamma * state.sums, gamma * state.squares
        counts[state.arm] += 1.0
        sums[state.arm] += reward
        squares[state.arm] += reward * reward
        return replace(state, counts=counts, sums=sums, squares=squares)

    def _choose(self, state: ADCS2AdaptiveState, rng: np.random.Generator) -> int:
        """The next block's arm: the first without a reward, else the highest Thompson draw."""
        assert state.counts is not None and state.sums is not None and state.squares is not None
        counts = state.counts
        unplayed = np.flatnonzero(counts <= 0.0)
        if counts.size == 1:
            return 0  # one arm: ADCS-2 at that θ, draw for draw
        if unplayed.size:
            return int(unplayed[0])
        means = state.sums / counts
        spread = float(np.sum(state.squares - state.sums * means)) / float(np.sum(counts))
        draws = means + np.sqrt(max(spread, 0.0) / counts) * rng.standard_normal(counts.size)
        return int(np.argmax(draws))

    def theta_of(self, state: ADCS2State) -> float | None:
        """The θ held in the current block (``None`` before the first selection)."""
        assert isinstance(state, ADCS2AdaptiveState)
        return self.arms[state.arm] if state.arm >= 0 else None
