"""The model and the replies of `adcs.flower.SchedulerStrategy`'s wire protocol (docs/design.md §7).

The model is one flat float32 array (the simulator's `adcs.sim.model.Model` protocol), sent as the
only array of an ``ArrayRecord``; a client answers with its update Δ, not a model
(`adcs.flower.client`). Replies are untrusted: a missing or wrong partition id, a missing or
non-finite loss, or an update of another key, shape or dtype than the model, or with NaN/inf, is
a `adcs.flower.round.RejectedReply`; the round goes on without that client.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from numpy.typing import NDArray

from adcs.flower.client import ACCURACY, LOSS, METRICS_KEY, NUM_EXAMPLES, PARTITION_ID
from adcs.flower.round import EvaluationRecord, RejectedReply, finite_metric, one_metric_record
from adcs.round.play import Played, Trained
from adcs.schedulers.base import FloatArray

__all__ = [
    "FlatModel",
    "aggregate",
    "evaluation_metrics",
    "flat_model",
    "read_evaluation",
    "read_metrics",
    "read_update",
    "step",
    "train_metrics",
]

logger = logging.getLogger("flwr").getChild("adcs")

F32Array = NDArray[np.float32]
_WEIGHT = "adcs-weight"
"""Metric key of the weights handed to Flower's metric aggregation."""


@dataclass(frozen=True, eq=False)
class FlatModel:
    """The global model: the ArrayRecord key and the flat float32 parameters w of shape (dim,)."""

    key: str
    params: F32Array

    def record(self) -> ArrayRecord:
        return ArrayRecord({self.key: Array(self.params)})


def aggregate(
    played: Played, model: FlatModel, server_lr: float
) -> tuple[ArrayRecord, MetricRecord]:
    """w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s · (Σ c_i Δ_i over the delivered clients, or the aggregation rule's
    step), in float32, and the round's train metrics."""
    done = played.record
    delivered, coef = done.aggregated, done.aggregated_coef
    losses = np.asarray([played.held[int(c)].loss for c in delivered], dtype=np.float64)
    rule_step = played.step
    if rule_step is None and delivered.size:
        rule_step = coef.astype(np.float32) @ played.rows(delivered, model.params.size)
    stepped = step(model, rule_step if delivered.size else None, server_lr)
    return stepped.record(), train_metrics(coef, losses, len(played.failed))


def step(model: FlatModel, step: F32Array | None, server_lr: float) -> FlatModel:
    """w + η_s · step (Σ c_i Δ_i, or the aggregation rule's), in float32 as `adcs.sim.lot`
    forms it; None: nobody delivered, the model is kept."""
    if step is None:
        logger.warning("no selected client returned a valid update; the model is kept")
        return model
    step = np.asarray(step, dtype=np.float32) * np.float32(server_lr)
    return FlatModel(model.key, model.params + step)


def train_metrics(coef: FloatArray, losses: FloatArray, failures: int) -> MetricRecord:
    """The round's train metrics: the aggregated clients' loss (weighted by c), and the counts."""
    metrics = MetricRecord()
    if coef.size and float(np.abs(coef).sum()) > 0:
        metrics = aggregate_metricrecords(
            [
                RecordDict({METRICS_KEY: MetricRecord({_WEIGHT: abs(float(c)), LOSS: float(q)})})
                for c, q in zip(coef, losses, strict=True)
            ],
            _WEIGHT,
        )
    metrics["results"] = int(coef.size)
    metrics["failures"] = int(failures)
    return metrics


def flat_model(arrays: ArrayRecord) -> FlatModel:
    """w⁽⁰⁾ from ``initial_arrays``: exactly one 1-D, finite float32 array."""
    if not isinstance(arrays, ArrayRecord) or len(arrays) != 1:
        raise ValueError(
            "initial_arrays must be an ArrayRecord holding one array, the model's flat float32 "
            "parameters (the Model protocol of adcs.sim.model)"
        )
    key = next(iter(arrays.keys()))
    params = arrays[key].numpy()
    if params.dtype != np.float32 or params.ndim != 1 or params.size == 0:
        raise ValueError(
            f"initial array {key!r} must be a non-empty 1-D float32 array, got "
            f"{params.dtype}{list(params.shape)}"
        )
    if not np.isfinite(params).all():
        raise ValueError(f"initial array {key!r} holds NaN or inf")
    return FlatModel(key, np.array(params, dtype=np.float32))


def read_metrics(reply: Message, client: int) -> MetricRecord:
    """The reply's one MetricRecord, after checking it names the client asked."""
    metrics = one_metric_record(reply)
    pid = metrics.get(PARTITION_ID)
    if pid != client or isinstance(pid, (bool, float)):
        raise RejectedReply(f"reports {PARTITION_ID}={pid!r} but the node serves {client}")
    return metrics


def read_evaluation(client: int, reply: Message) -> tuple[float, float]:
    """An ``evaluate`` reply's (loss, accuracy), after checking it names the client asked."""
    metrics = read_metrics(reply, client)
    accuracy = finite_metric(metrics, ACCURACY)
    return finite_metric(metrics, LOSS), accuracy


def read_update(reply: Message, client: int, model: FlatModel, weighting: str) -> Trained:
    """A ``train`` reply's update Δ (checked against the model), loss and data size."""
    metrics = read_metrics(reply, client)
    loss = finite_metric(metrics, LOSS)
    size = metrics.get(NUM_EXAMPLES, math.nan)
    num_examples = float(size) if isinstance(size, (int, float)) else math.nan
    if weighting == "data_size" and not num_examples >= 0:
        raise RejectedReply(f"missing or invalid '{NUM_EXAMPLES}' (weighting by data size)")
    records = list(reply.content.array_records.values())
    if len(records) != 1 or list(records[0].keys()) != [model.key]:
        keys = [list(r.keys()) for r in records]
        raise RejectedReply(f"expected one array {model.key!r}, got {keys}")
    try:
        update = records[0][model.key].numpy()
    except Exception as err:  # any undecodable payload is a bad reply, whatever it raises
        raise RejectedReply(f"array {model.key!r} cannot be decoded: {err}") from err
    if update.shape != model.params.shape or update.dtype != np.float32:
        raise RejectedReply(
            f"update is {update.dtype}{list(update.shape)}, expected float32{[model.params.size]}"
        )
    if not np.isfinite(update).all():
        raise RejectedReply("update holds NaN or inf")
    return Trained(update, loss, num_examples)


def evaluation_metrics(record: EvaluationRecord) -> MetricRecord | None:
    """The mean accuracy and loss of the clients that reported (None: none did), their worst
    accuracy and the evaluation's result columns."""
    reported = np.flatnonzero(np.isfinite(record.accuracy))
    if reported.size == 0:
        return None
    mean = aggregate_metricrecords(
        [
            RecordDict(
                {
                    METRICS_KEY: MetricRecord(
                        {
                            _WEIGHT: 1.0,
                            ACCURACY: float(record.accuracy[c]),
                            LOSS: float(record.loss[c]),
                        }
                    )
                }
            )
            for c in reported
        ],
        _WEIGHT,
    )
    mean["worst-accuracy"] = record.worst_accuracy
    mean.update(record.columns)
    return mean
