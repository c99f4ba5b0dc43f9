"""The round's simulated clock: how long a round takes and whom its deadline keeps.

A simulator's runs follow a clock (`RoundClock`: each client's seconds per kind of work,
`adcs.sim.system`, and the training phase's deadline); the round
(`adcs.round.machine.RunRound`) asks it, once the scheduler has selected, who is aggregated and
how long the round lasted (docs/design.md §4). A live runtime has no simulated clock: its round
takes wall time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from adcs.round.contract import BoolArray, F64Array, IntArray
from adcs.schedulers.base import ClientStats, LossSource, Probe, ProbeKind

__all__ = ["ClientSeconds", "RoundClock", "locate", "probe_phase", "training_phase"]

_NO_CLIENTS: IntArray = np.empty(0, dtype=np.intp)
_NO_CLIENTS.setflags(write=False)


def locate(pool: IntArray, clients: IntArray) -> tuple[BoolArray, IntArray]:
    """Which ``clients`` are in the ascending array ``pool``, and their positions there."""
    if pool.size == 0:
        return np.zeros(clients.size, dtype=bool), np.zeros(clients.size, dtype=np.intp)
    pos = np.minimum(np.searchsorted(pool, clients), pool.size - 1)
    return np.asarray(pool[pos] == clients), pos


class ClientSeconds(Protocol):
    """Seconds each client needs per kind of work, arrays of shape (n_clients,)
    (`adcs.sim.system.ClientTimes`)."""

    @property
    def update(self) -> F64Array: ...

    @property
    def loss(self) -> F64Array: ...

    @property
    def full_loss(self) -> F64Array: ...


def probe_phase(seconds: F64Array) -> tuple[float, float]:
    """Duration (the slowest probed client) and busy client-seconds (their sum) of a probe.

    ``seconds`` (n_probed,) are the probed clients' durations; both are 0 without a probe.
    """
    if seconds.size == 0:
        return 0.0, 0.0
    return float(seconds.max()), float(seconds.sum())


def training_phase(
    response: F64Array, failed: BoolArray, target: int, deadline: float | None = None
) -> tuple[BoolArray, float, float]:
    """Who is aggregated, how long the training phase lasts, and the client-seconds it costs.

    Parameters
    ----------
    response : ndarray of shape (k,)
        When each selected client answers (seconds from the phase's start; 0 when its update
        was already probed), in selection order.
    failed : ndarray of bool, shape (k,)
        Dropped out: it answers at its time without an update.
    target : int
        Updates wanted (k without over-commitment, m with): the phase closes once that many
        are in.
    deadline : float, optional
        The phase closes at this time at the latest.

    Returns
    -------
    kept : ndarray of bool, shape (k,)
        The first ``target`` successful clients by response time (ties in selection order),
        among those in time.
    seconds : float
        When the phase closes: at the ``target``-th success, else at the last answer, and never
        after the deadline (0 with nobody selected).
    busy : float
        Σ_i min(response_i, seconds): every client works until it answers or the phase closes.
    """
    k = response.shape[0]
    kept = np.zeros(k, dtype=bool)
    if k == 0:
        return kept, 0.0, 0.0
    in_time = response <= deadline if deadline is not None else np.ones(k, dtype=bool)
    good = np.flatnonzero(~failed & in_time)
    good = good[np.argsort(response[good], kind="stable")]
    if 0 < target <= good.size:
        seconds = float(response[good[target - 1]])
        kept[good[:target]] = True
    else:
        seconds = float(response.max())
        kept[good] = True
    if deadline is not None:
        seconds = min(seconds, float(deadline))
    busy = float(np.minimum(response, seconds).sum())
    return kept, seconds, busy


@dataclass(frozen=True, eq=False)
class RoundClock:
    """A simulated clock: the clients' durations and the training phase's deadline.

    Only a simulator has one (`adcs.sim.system`); a live runtime's round takes wall time.
    """

    seconds: ClientSeconds
    deadline: float | None = None

    def time(
        self,
        probe: Probe,
        probed: IntArray,
        stats: ClientStats,
        clients: IntArray,
        ok: BoolArray,
        target: int,
    ) -> tuple[BoolArray, int, float, float]:
        """Time a round: who is aggregated, how many failed, its seconds and client-seconds.

        The probe phase waits for the slowest probed client; in the training phase a client
        whose update the probe already holds answers at once; the phase keeps the first
        ``target`` successes in time (`training_phase`).
        """
        times = self.seconds
        if probe.kind is ProbeKind.UPDATES:
            probe_s = times.update[probed]
        elif probe.kind is ProbeKind.LOSSES:
            full = probe.loss_source is LossSource.FULL
            probe_s = (times.full_loss if full else times.loss)[probed]
        else:
            probe_s = times.update[_NO_CLIENTS]
        wait, probe_busy = probe_phase(probe_s)
        response = times.update[clients]
        if stats.updates is not None:
            response = np.where(locate(stats.clients, clients)[0], 0.0, response)
        deadline = self.deadline
        kept, seconds, busy = training_phase(response, ~ok, target, deadline)
        late = response > deadline if deadline is not None else np.zeros(clients.size, bool)
        return kept, int(np.count_nonzero(~ok | late)), wait + seconds, probe_busy + busy
