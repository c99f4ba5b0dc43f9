"""Which (run, client) jobs a stream's round needs, apart from how they are computed.

A round's client work comes in two phases (docs/design.md §4). The *early* jobs are known before
any run selects: every client a probe asks about at w⁽ᵗ⁾ (updates, or minibatch losses) and the
selection of every blind run (one that probes nothing). They are planned here, as the union of
their clients, so that one gather and one shared product serve them all. The jobs of the
training phase (the selected clients a probe did not already cover) are routed by
`_EarlyJobs.covers`: into the shared product when the union holds them, else into
independent jobs. The products themselves are `adcs.sim.lot`'s.

Vocabulary of the simulator (one word, one meaning):

- *run*: one [`RunSpec`][adcs.sim.RunSpec], a scheduler with a seed;
- *stream*: the runs that share a minibatch stream (a seed's runs, with
  ``SimConfig.common_minibatches``), advanced together (`adcs.sim.lockstep`);
- *job*: one (run, client) computation at w⁽ᵗ⁾, a loss or a local update;
- *lot*: the jobs of one stream in one round, computed in batched products (`adcs.sim.lot`);
- *lane*: the streams one worker advances (`adcs.sim.lanes`, `adcs.sim.workers`).

The experiment layer's *batch* (runs simulated in one [`simulate`][adcs.sim.simulate] call)
and *shard* (one seed of a batch, run on an executor) are its own words; ``batch_size`` is the
minibatch size B.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adcs.round.clock import locate as _locate
from adcs.schedulers.base import LossSource, Probe, ProbeKind, Selection
from adcs.sim.spec import IntArray

__all__ = ["_EarlyJobs", "_locate", "_plan_early"]


@dataclass(frozen=True)
class _EarlyJobs:
    """The early jobs of a stream's round: their clients' union and the blind runs.

    Attributes
    ----------
    union : ndarray of shape (n_union,), int
        Ascending, distinct: every probed client (updates or minibatch losses) and every client a
        blind run selected.
    blind : frozenset of int
        Runs (positions in the stream) that selected before anything was computed; their selection
        is in ``union`` by construction.
    """

    union: IntArray
    blind: frozenset[int]

    def covers(self, j: int, clients: IntArray) -> bool:
        """Whether the union holds every one of run j's ``clients``."""
        return j in self.blind or bool(_locate(self.union, clients)[0].all())


def _plan_early(
    probes: Sequence[Probe],
    targets: Sequence[IntArray],
    selections: Sequence[Selection | None],
    nobody: IntArray,
    everyone: IntArray | None = None,
) -> _EarlyJobs:
    """Plan the early jobs of a round from each run's probe, probed clients and blind selection.

    ``targets[j]`` are the clients run j's probe names (distinct, available, ascending);
    ``selections[j]`` is run j's selection when it is blind, else None; ``nobody`` an empty index
    array (the union when there is no early job). ``everyone``, the round's available clients
    (ascending), is the union at once when a probe names that very array: every early job is of
    an available client (a blind selection of another is refused by the selection contract
    before anything uses the plan).
    """
    picked = {j: s.clients for j, s in enumerate(selections) if s is not None}
    early = [
        tg
        for p, tg in zip(probes, targets, strict=True)
        if p.kind is ProbeKind.UPDATES
        or (p.kind is ProbeKind.LOSSES and p.loss_source is LossSource.MINIBATCH)
    ]
    if everyone is not None and any(tg is everyone for tg in early):
        return _EarlyJobs(everyone, frozenset(picked))
    early += [np.asarray(c, dtype=np.intp) for c in picked.values()]
    parts = [a for a in early if a.size]
    if len(parts) == 1 or (parts and all(a is parts[0] for a in parts)):
        union: IntArray = np.unique(parts[0])
    else:
        union = np.unique(np.concatenate(parts)) if parts else nobody
    return _EarlyJobs(union, frozenset(picked))
