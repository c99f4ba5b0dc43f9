"""A minimal runtime that drives any scheduler through the protocol on plain arrays."""

from __future__ import annotations

import numpy as np

from adcs.schedulers.base import ClientStats, ProbeKind, Selection


def gather(scheduler, state, round_idx, available, updates, losses, rng) -> ClientStats:
    """Answer the scheduler's probe from the given arrays (copies, so inputs stay untouched)."""
    probe = scheduler.probe(state, round_idx, available, rng)
    if probe.kind is ProbeKind.NONE:
        return ClientStats.blind(available)
    targets = np.unique(probe.targets(available))
    stat_updates = updates[targets].copy() if probe.kind is ProbeKind.UPDATES else None
    return ClientStats(available, targets, losses[targets].copy(), stat_updates)


def run_rounds(scheduler, updates_per_round, losses_per_round, available_per_round, seed=0):
    """Run the protocol for as many rounds as given; return the selections."""
    rng = np.random.default_rng(seed)
    n = updates_per_round[0].shape[0]
    state = scheduler.init(n)
    out: list[Selection] = []
    for t, (g, q, avail) in enumerate(
        zip(updates_per_round, losses_per_round, available_per_round, strict=True)
    ):
        stats = gather(scheduler, state, t, avail, g, q, rng)
        selection, state = scheduler.select(state, t, stats, rng)
        state = scheduler.observe(
            state, t, selection.clients, g[selection.clients], q[selection.clients]
        )
        out.append(selection)
    return out
