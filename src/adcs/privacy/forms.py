"""Private forms of the schedulers: selection that stays useful when every reply is noised.

Behind the private probe channel (`adcs.privacy.Private`) a client's budget bounds what the server
can learn of it over the whole run, however the releases are spread: k Gaussian releases of noise
multiplier z compose to one of multiplier z/√k (docs/concepts/privacy.md). A scheduler that acts on
each round's replies alone (PowerOfChoice ranks by this round's loss) sees noise of σ = z Δ with
z ≈ √T / μ — hundreds of times the losses' spread at T = 4 000. Averaging a client's replies over
the run is post-processing (free) and brings the noise of the average down to Δ / μ: the whole
budget's information, spent on one number per client. `AveragedLoss` is PowerOfChoice on that
average; with ``sample = true`` it ranks by a draw within each mean's standard error, so that the
error, which persists over the run, does not leave a client unchosen for good.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from adcs._validate import check_bool, check_int, check_number
from adcs.schedulers._common import BasicState, SchedulerBase, fill_from
from adcs.schedulers.base import (
    NO_PROBE,
    BoolArray,
    ClientStats,
    FloatArray,
    Probe,
    ProbeKind,
    Selection,
    check_available,
    top_m,
)

__all__ = ["AveragedLoss", "AveragedLossState"]


@dataclass(frozen=True, eq=False)
class AveragedLossState(BasicState):
    """Per-run state of `AveragedLoss`.

    Attributes
    ----------
    total : ndarray of shape (n_clients,), float64
        Each client's (discounted) sum of the losses it replied.
    weight : ndarray of shape (n_clients,), float64
        The (discounted) number of its replies; 0: never probed.
    squares : ndarray of shape (n_clients,), float64
        The (discounted) sum of the squares of its replies.
    """

    total: FloatArray | None = None
    weight: FloatArray | None = None
    squares: FloatArray | None = None


@dataclass(frozen=True)
class AveragedLoss(SchedulerBase[AveragedLossState]):
    """PowerOfChoice on each client's average probed loss: the m available clients of largest
    average, a client never probed first.

    Every ``probe_every`` rounds every available client is asked its loss (one release each); the
    selection ranks the clients by the mean of all the losses each has replied (or an exponential
    average with the given half-life), so that the private channel's noise averages out over the
    run (module docstring). Without privacy it is PowerOfChoice with a memory.

    Parameters
    ----------
    m : int
        Clients per round.
    probe_every : int
        R ≥ 1: the rounds between two probes (round 0 is probed); the budget's plan is T/R losses
        per client.
    halflife : float or None
        In rounds: a reply's weight halves every ``halflife`` rounds. None (default): the plain
        mean over the run, which averages the most noise.
    sample : bool
        Rank by a draw from each client's mean ± its standard error (the spread of its replies
        over √(their number)), drawn afresh each round (Thompson sampling), not by the mean
        itself. Behind the private channel the error of a client's mean persists round after
        round; ranked by the mean, a client whose noise happens to sit low is never chosen —
        a whole group, sometimes, whose accuracy then falls to nothing. A draw of that error
        gives it its chance in proportion to how uncertain its mean still is; without privacy
        the error is the losses' own small spread, and the ranking is the mean's.
    """

    probe_every: int = 1
    halflife: float | None = None
    sample: bool = False

    named_params = ("probe_every",)

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("probe_every", self.probe_every)
        check_bool("sample", self.sample)
        if self.halflife is not None:
            check_number("halflife", self.halflife, 0.0, low_open=True)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> AveragedLossState:
        sizes = self._check_init(n_clients, data_sizes)
        zeros = np.zeros(n_clients, dtype=np.float64)
        return AveragedLossState(n_clients, sizes, zeros, zeros.copy(), zeros.copy())

    def probe(
        self,
        state: AveragedLossState,
        round_idx: int,
        available: BoolArray,
        rng: np.random.Generator,
    ) -> Probe:
        if round_idx % self.probe_every:
            return NO_PROBE
        return Probe(ProbeKind.LOSSES)

    def select(
        self, state: AveragedLossState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, AveragedLossState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        assert state.total is not None and state.weight is not None and state.squares is not None
        total, weight, squares = state.total, state.weight, state.squares
        if stats.losses is not None and stats.n_probed:
            decay = 1.0 if self.halflife is None else 0.5 ** (self.probe_every / self.halflife)
            total, weight, squares = total * decay, weight * decay, squares * decay
            usable = stats.usable()
            clients = stats.clients[usable]
            replies = np.asarray(stats.losses, dtype=np.float64)[usable]
            total[clients] += replies
            weight[clients] += 1.0
            squares[clients] += replies * replies
            state = replace(state, total=total, weight=weight, squares=squares)
        pool = np.flatnonzero(available)
        seen = weight[pool] > 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(seen, total[pool] / weight[pool], np.inf)
            if self.sample:
                spread = np.maximum(squares[pool] / weight[pool] - mean * mean, 0.0)
                error = np.where(seen, np.sqrt(spread / weight[pool]), 0.0)
                mean = np.where(seen, mean + error * rng.standard_normal(pool.size), np.inf)
        ranked = pool[top_m(mean, k)]
        return Selection(fill_from(ranked, available, k, rng)), state
