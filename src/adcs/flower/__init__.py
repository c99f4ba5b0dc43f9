"""Run any adcs scheduler in a Flower deployment (the optional extra ``adcs[flower]``).

`SchedulerStrategy` runs the simulator's round (probe → gather → select → train and
aggregate → observe) over Flower's Grid, with any adcs scheduler choosing the participants;
`make_client_app` builds the matching ClientApp, which computes its update with
`adcs.sim.model.local_update` so a Flower run and adcs's simulator compute the same thing.
It runs on Flower's Simulation and Deployment Runtimes alike.

`Scheduled` wraps any Flower strategy (``Scheduled(FedAdam(...), scheduler=...)``), the
way Flower's DP wrappers do, in any Flower app: an adcs scheduler chooses who trains, the wrapped
strategy builds the app's own ``train`` and ``evaluate`` messages and aggregates the replies;
`ScheduledFedAvg` is ``Scheduled(FedAvg(...))``.
"""

from __future__ import annotations

try:
    import flwr  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "adcs.flower needs Flower: install the extra with `pip install 'adcs[flower]'`"
    ) from err

from adcs.flower.client import LocalData, TrainDefaults, make_client_app, minibatch_indices
from adcs.flower.fedavg import ScheduledFedAvg
from adcs.flower.scheduled import Scheduled
from adcs.flower.settings import Settings
from adcs.flower.strategy import (
    EvaluationRecord,
    RejectedReply,
    RoundRecord,
    SchedulerStrategy,
    history_dicts,
)

__all__ = [
    "EvaluationRecord",
    "LocalData",
    "RejectedReply",
    "RoundRecord",
    "Scheduled",
    "ScheduledFedAvg",
    "SchedulerStrategy",
    "Settings",
    "TrainDefaults",
    "history_dicts",
    "make_client_app",
    "minibatch_indices",
]
