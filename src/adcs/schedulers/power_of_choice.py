"""PowerOfChoice (Cho, Wang & Joshi, 2022), in the paper's form: the m clients of largest local loss."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adcs._validate import check_int
from adcs.schedulers._common import BasicState, SchedulerBase, fill_from
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    LossSource,
    Probe,
    ProbeKind,
    Selection,
    check_available,
    top_m,
)


@dataclass(frozen=True)
class PowerOfChoice(SchedulerBase[BasicState]):
    """Probe the loss of every available client at w⁽ᵗ⁾ and pick the ``m`` largest (eq. 1, q = loss).

    Parameters
    ----------
    m : int
        Clients per round.
    candidates : int or None
        The original pow-d variant: draw ``candidates`` = d ≥ m distinct available clients with
        probability proportional to their data size (uniform if sizes are unknown), probe only those,
        and keep the ``m`` of largest loss. ``None`` (default, the paper's form) probes every client.
    loss_source : LossSource
        ``MINIBATCH`` (default; one minibatch of size B, cpow-d) or ``FULL`` local training data.

    Notes
    -----
    Clients whose loss is missing or NaN rank below every probed client; they are chosen only to keep
    the selection at exactly ``m`` (lowest index first).
    """

    candidates: int | None = None
    loss_source: LossSource = LossSource.MINIBATCH

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.candidates is not None:
            check_int("candidates", self.candidates, minimum=self.m)
        if not isinstance(self.loss_source, LossSource):
            raise ValueError(f"loss_source must be a LossSource, got {self.loss_source!r}")

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> BasicState:
        state = BasicState(n_clients, self._check_init(n_clients, data_sizes))
        if self.candidates is not None and self.candidates > n_clients:
            raise ValueError(f"candidates={self.candidates} exceeds n_clients={n_clients}")
        return state

    def probe(
        self, state: BasicState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        if self.candidates is None:
            return Probe(ProbeKind.LOSSES, loss_source=self.loss_source)
        available, _ = check_available(available, state.n_clients, self.m)
        pool = np.flatnonzero(available)
        d = min(self.candidates, pool.size)
        weights = None
        if d and state.data_sizes is not None and np.count_nonzero(state.data_sizes[pool]) >= d:
            weights = state.data_sizes[pool] / state.data_sizes[pool].sum()
        chosen = rng.choice(pool, size=d, replace=False, p=weights)
        return Probe(ProbeKind.LOSSES, clients=np.sort(chosen), loss_source=self.loss_source)

    def select(
        self, state: BasicState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, BasicState]:
        available, k = check_available(stats.available, state.n_clients, self.m)
        if stats.losses is None:
            raise ValueError("PowerOfChoice needs probed losses but stats.losses is None")
        usable = stats.usable()
        losses = np.asarray(stats.losses, dtype=np.float64)[usable]
        ranked = stats.clients[usable][top_m(losses, k)]
        return Selection(fill_from(ranked, available, k, rng, stats.non_finite())), state
