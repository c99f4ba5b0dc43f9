"""The federated-learning simulator (docs/design.md §1, §3, §4).

Many independent runs advance together in one array program; each run's scheduler decides who
trains each round through the protocol of [`adcs.schedulers.base`][adcs.schedulers.base]. Cost
follows the clients a round actually uses, and every random draw is counter-based (`adcs.streams`).
"""

from __future__ import annotations

from adcs.sim.availability import (
    AlwaysAvailable,
    Availability,
    BernoulliAvailability,
    CyclicAvailability,
    TraceAvailability,
)
from adcs.sim.data import PIXEL_SCALE, ClientData, FederatedData, to_unit_float
from adcs.sim.engine import RunResult, RunSpec, SimConfig, simulate
from adcs.sim.metrics import (
    group_accuracy,
    group_share,
    percentile_accuracy,
    selection_counts,
    tv_distance,
    tv_to_uniform,
    uniform_group_share,
    worst_and_average,
)
from adcs.sim.model import (
    LogisticRegression,
    Model,
    SharedForward,
    SharedInputs,
    local_update,
)
from adcs.sim.spec import Evaluation
from adcs.streams import minibatch_indices, scheduler_rng, stream_key

__all__ = [
    "PIXEL_SCALE",
    "AlwaysAvailable",
    "Availability",
    "BernoulliAvailability",
    "ClientData",
    "CyclicAvailability",
    "Evaluation",
    "FederatedData",
    "LogisticRegression",
    "Model",
    "RunResult",
    "RunSpec",
    "SharedForward",
    "SharedInputs",
    "SimConfig",
    "TraceAvailability",
    "group_accuracy",
    "group_share",
    "local_update",
    "minibatch_indices",
    "percentile_accuracy",
    "scheduler_rng",
    "selection_counts",
    "simulate",
    "stream_key",
    "to_unit_float",
    "tv_distance",
    "tv_to_uniform",
    "uniform_group_share",
    "worst_and_average",
]
