"""The vectorised federated-learning simulator (DESIGN §1, §3, §4).

Many independent runs advance together in one array program; each run's scheduler decides who
trains each round through the protocol of :mod:`adcs.schedulers.base`.
"""

from __future__ import annotations

from adcs.sim.engine import (
    FederatedData,
    MinibatchSampler,
    RunResult,
    RunSpec,
    SimConfig,
    draw_local_indices,
    minibatch_seed_sequence,
    scheduler_rng,
    simulate,
)
from adcs.sim.metrics import (
    group_share,
    selection_counts,
    tv_distance,
    uniform_group_share,
    worst_and_average,
)
from adcs.sim.model import (
    PIXEL_SCALE,
    LogisticRegression,
    Model,
    SharedForward,
    local_update,
    to_unit_float,
)

__all__ = [
    "PIXEL_SCALE",
    "FederatedData",
    "LogisticRegression",
    "MinibatchSampler",
    "Model",
    "RunResult",
    "RunSpec",
    "SharedForward",
    "SimConfig",
    "draw_local_indices",
    "group_share",
    "local_update",
    "minibatch_seed_sequence",
    "scheduler_rng",
    "selection_counts",
    "simulate",
    "to_unit_float",
    "tv_distance",
    "uniform_group_share",
    "worst_and_average",
]
