"""``ScheduledFedAvg``: the short form of ``Scheduled(FedAvg(...), scheduler)``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flwr.serverapp.strategy import FedAvg

from adcs._validate import check_number
from adcs.flower.scheduled import Scheduled
from adcs.schedulers.base import Scheduler

__all__ = ["ScheduledFedAvg"]


class ScheduledFedAvg(Scheduled):
    """``Scheduled(FedAvg(...), scheduler)``: Flower's FedAvg with an adcs scheduler choosing who
    trains (training is the scheduler's: no ``fraction_train``).

    Parameters
    ----------
    scheduler : Scheduler or str
    n_clients : int, optional
        N (None: the number of nodes connected at the first round).
    scheduler_params : dict, optional
    fraction_evaluate, min_evaluate_nodes, min_available_nodes, weighted_by_key, \
arrayrecord_key, configrecord_key, train_metrics_aggr_fn, evaluate_metrics_aggr_fn
        As in Flower's ``FedAvg``.
    **settings
        The other fields of `adcs.flower.settings.Settings`.
    """

    def __init__(
        self,
        scheduler: Scheduler | str,
        n_clients: int | None = None,
        *,
        scheduler_params: Mapping[str, Any] | None = None,
        fraction_evaluate: float = 1.0,
        min_evaluate_nodes: int = 2,
        min_available_nodes: int = 2,
        weighted_by_key: str = "num-examples",
        arrayrecord_key: str = "arrays",
        configrecord_key: str = "config",
        train_metrics_aggr_fn: Any = None,
        evaluate_metrics_aggr_fn: Any = None,
        **settings: Any,
    ) -> None:
        check_number("fraction_evaluate", fraction_evaluate, 0.0, 1.0)
        fedavg = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=fraction_evaluate,
            min_train_nodes=1,
            min_evaluate_nodes=min_evaluate_nodes,
            min_available_nodes=min_available_nodes,
            weighted_by_key=weighted_by_key,
            arrayrecord_key=arrayrecord_key,
            configrecord_key=configrecord_key,
            train_metrics_aggr_fn=train_metrics_aggr_fn,
            evaluate_metrics_aggr_fn=evaluate_metrics_aggr_fn,
        )
        super().__init__(
            fedavg,
            scheduler,
            scheduler_params=scheduler_params,
            n_clients=n_clients,
            **settings,
        )
