"""What [`ScheduledFedAvg`][adcs.flower.ScheduledFedAvg] needs beyond the round: settings, the
model's layout, the checks of a standard app's replies, and the scheduler named by a string.

A standard Flower app exchanges an ``ArrayRecord`` of any number of arrays of any dtypes (a
PyTorch ``state_dict()``) and one ``MetricRecord`` per reply. `Template` is that layout as
the server first sent it: every ``train`` reply must return the same keys, shapes and dtypes, and
the update Δ the scheduler sees is the returned arrays minus the sent ones, flattened in the
template's key order (docs/design.md §7).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, Message
from numpy.typing import NDArray

from adcs._validate import check_int, check_number
from adcs.flower.round import RejectedReply, finite_metric, one_metric_record
from adcs.schedulers import SCHEDULERS
from adcs.schedulers.base import Scheduler, check_scheduler

__all__ = [
    "DropInSettings",
    "Template",
    "read_evaluate_loss",
    "read_evaluation",
    "read_train_reply",
    "resolve_scheduler",
]

F32Array = NDArray[np.float32]


@dataclass(frozen=True)
class DropInSettings:
    """Settings of [`ScheduledFedAvg`][adcs.flower.ScheduledFedAvg], validated on construction.

    Attributes
    ----------
    n_clients : int
        N: the first N nodes to appear are clients 0..N−1.
    fraction_evaluate : float
        Share of the available clients that get a federated ``evaluate`` after each round
        (FedAvg's; 0 turns it off).
    min_evaluate_nodes : int
        At least this many clients evaluate (when that many are available).
    min_available_nodes : int
        A round waits until this many clients are connected (the first: also m).
    weighted_by_key : str
        MetricRecord key of a client's number of examples, FedAvg's aggregation weight.
    arrayrecord_key, configrecord_key : str
        Keys of the model and of the config in requests (FedAvg's).
    loss_key : str
        MetricRecord key of the loss in ``evaluate`` replies (a loss probe's value).
    accuracy_key : str or None
        MetricRecord key of the accuracy in ``evaluate`` replies (Flower's quickstart apps'
        ``eval_acc``): each evaluated client's, from which the evaluation's result columns are
        computed ([`columns`][adcs.flower.EvaluationRecord.columns]); a reply without it
        counts as not reported. None: the app reports none.
    train_loss_key : str or None
        MetricRecord key of the loss in ``train`` replies (an update probe's quality, e.g.
        ADCS's q_n); None: the app reports none and the quality is 0 for every client.
    seed : int
        Seeds the scheduler's stream (with ``run_id``), the evaluation sample and the sketch.
    run_id : str
        Names the scheduler's stream, [`adcs.streams.scheduler_rng`][adcs.sim.scheduler_rng] (seed,
        run_id).
    sketch_dim : int or None
        Updates longer than this reach the scheduler as a seeded JL sketch of this length
        (`adcs.sketch.UpdateSketch`); None: never sketched.
    checkpoint_path : str or None
        Where the server's state is saved and, at start, resumed from.
    checkpoint_every : int
        Save every this many rounds (and after the last).
    connect_timeout_s : float
        How long a round waits for enough connected clients before the run fails.
    wait_for_all_s : float
        Once the first round has enough clients, how much longer it waits for all N.
    """

    n_clients: int
    fraction_evaluate: float = 1.0
    min_evaluate_nodes: int = 2
    min_available_nodes: int = 2
    weighted_by_key: str = "num-examples"
    arrayrecord_key: str = "arrays"
    configrecord_key: str = "config"
    loss_key: str = "eval_loss"
    accuracy_key: str | None = "eval_acc"
    train_loss_key: str | None = "train_loss"
    seed: int = 0
    run_id: str = "flower"
    sketch_dim: int | None = 1024
    checkpoint_path: str | None = None
    checkpoint_every: int = 1
    connect_timeout_s: float = 120.0
    wait_for_all_s: float = 0.0

    def __post_init__(self) -> None:
        check_int("n_clients", self.n_clients)
        check_number("fraction_evaluate", self.fraction_evaluate, 0.0, 1.0)
        check_int("min_evaluate_nodes", self.min_evaluate_nodes, minimum=0)
        check_int("min_available_nodes", self.min_available_nodes, minimum=0)
        for name in ("weighted_by_key", "arrayrecord_key", "configrecord_key", "loss_key"):
            _check_key(name, getattr(self, name))
        for name in ("train_loss_key", "accuracy_key"):
            if getattr(self, name) is not None:
                _check_key(name, getattr(self, name))
        check_int("seed", self.seed, minimum=0)
        _check_key("run_id", self.run_id)
        if self.sketch_dim is not None:
            check_int("sketch_dim", self.sketch_dim)
        if self.checkpoint_path is not None:
            if not isinstance(self.checkpoint_path, (str, Path)) or not str(self.checkpoint_path):
                raise ValueError(f"checkpoint_path must be a path, got {self.checkpoint_path!r}")
            object.__setattr__(self, "checkpoint_path", str(self.checkpoint_path))
        check_int("checkpoint_every", self.checkpoint_every)
        check_number("connect_timeout_s", self.connect_timeout_s, 0.0)
        check_number("wait_for_all_s", self.wait_for_all_s, 0.0)


def _check_key(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


@dataclass(frozen=True, eq=False)
class Template:
    """The model's layout: its arrays' keys (in order), shapes and dtypes.

    Attributes
    ----------
    keys : tuple of str
    shapes : tuple of tuple of int
    dtypes : tuple of numpy.dtype
    """

    keys: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype[Any], ...]

    @staticmethod
    def of(arrays: ArrayRecord) -> Template:
        """The layout of ``initial_arrays`` (ValueError unless it holds finite arrays)."""
        if not isinstance(arrays, ArrayRecord) or len(arrays) == 0:
            raise ValueError("initial_arrays must be a non-empty ArrayRecord (the model's arrays)")
        values = {k: arrays[k].numpy() for k in arrays.keys()}
        for key, value in values.items():
            if value.dtype.kind in "fc" and not np.isfinite(value).all():
                raise ValueError(f"initial array {key!r} holds NaN or inf")
        return Template(
            tuple(values),
            tuple(v.shape for v in values.values()),
            tuple(v.dtype for v in values.values()),
        )

    @property
    def size(self) -> int:
        """dim: the number of scalars in the model."""
        return int(sum(math.prod(s) for s in self.shapes))

    def flat(self, arrays: ArrayRecord) -> F32Array:
        """The arrays as one float32 vector of shape (dim,), in key order."""
        return self.flat_values([arrays[k].numpy() for k in self.keys])

    def flat_values(self, values: list[NDArray[Any]]) -> F32Array:
        if not values:
            return np.empty(0, dtype=np.float32)
        return np.concatenate([np.asarray(v, dtype=np.float32).ravel() for v in values])

    def check(self, record: ArrayRecord) -> list[NDArray[Any]]:
        """A reply's arrays in key order; [`RejectedReply`][adcs.flower.RejectedReply] unless they
        match the layout."""
        if set(record.keys()) != set(self.keys):
            raise RejectedReply(
                f"arrays {sorted(record.keys())} differ from the model's {sorted(self.keys)}"
            )
        out = []
        for key, shape, dtype in zip(self.keys, self.shapes, self.dtypes, strict=True):
            try:
                value = record[key].numpy()
            except Exception as err:  # any undecodable payload is a bad reply
                raise RejectedReply(f"array {key!r} cannot be decoded: {err}") from err
            if value.shape != shape or value.dtype != dtype:
                raise RejectedReply(
                    f"array {key!r} is {value.dtype}{list(value.shape)}, expected "
                    f"{dtype}{list(shape)}"
                )
            if value.dtype.kind in "fc" and not np.isfinite(value).all():
                raise RejectedReply(f"array {key!r} holds NaN or inf")
            out.append(value)
        return out

    def conform(self, arrays: ArrayRecord) -> ArrayRecord:
        """``arrays`` with every array in the template's dtype (FedAvg's mean makes ints float)."""
        out = {}
        for key, dtype in zip(self.keys, self.dtypes, strict=True):
            value = arrays[key].numpy()
            if value.dtype != dtype:
                value = (np.rint(value) if dtype.kind in "iub" else value).astype(dtype)
                out[key] = Array(np.array(value))
            else:
                out[key] = arrays[key]
        return ArrayRecord(out)

    def weighted_step(
        self, arrays: ArrayRecord, replies: list[Message], coef: NDArray[np.float64]
    ) -> ArrayRecord:
        """w + Σ_i c_i (w_i − w) per array, in float64, cast back to each array's dtype."""
        out = {}
        for key, dtype in zip(self.keys, self.dtypes, strict=True):
            sent = arrays[key].numpy().astype(np.float64)
            step = np.zeros_like(sent)
            for c, reply in zip(coef, replies, strict=True):
                record = next(iter(reply.content.array_records.values()))
                step += float(c) * (record[key].numpy().astype(np.float64) - sent)
            value = sent + step
            value = (np.rint(value) if dtype.kind in "iub" else value).astype(dtype)
            out[key] = Array(np.array(value))
        return ArrayRecord(out)

    def restore(self, values: Mapping[str, NDArray[Any]], source: str) -> ArrayRecord:
        """An ArrayRecord of saved arrays, after checking they fit the layout."""
        record = ArrayRecord({k: Array(np.array(v)) for k, v in values.items()})
        try:
            self.check(record)
        except RejectedReply as why:
            raise ValueError(f"checkpoint {source} does not fit initial_arrays: {why}") from why
        return ArrayRecord({k: record[k] for k in self.keys})


def read_train_reply(
    reply: Message, template: Template, sent: F32Array, settings: DropInSettings
) -> tuple[F32Array, float, float]:
    """A ``train`` reply's update Δ of shape (dim,) float32, its training loss and its size.

    Raises
    ------
    RejectedReply
        Unless the reply holds one ArrayRecord of the model's layout, with finite values, and
        one MetricRecord with a non-negative ``weighted_by_key`` (and ``train_loss_key``).
    """
    metrics = one_metric_record(reply)
    size = _weight_of(metrics, settings)
    loss = 0.0
    if settings.train_loss_key is not None:
        loss = finite_metric(metrics, settings.train_loss_key)
    records = list(reply.content.array_records.values())
    if len(records) != 1:
        raise RejectedReply(f"expected one ArrayRecord, got {len(records)}")
    update = template.flat_values(template.check(records[0])) - sent
    if not np.isfinite(update).all():
        raise RejectedReply("the update overflows float32")
    return update, loss, size


def _weight_of(metrics: Any, settings: DropInSettings) -> float:
    """A reply's ``weighted_by_key``, FedAvg's weight ([`RejectedReply`][adcs.flower.RejectedReply]
    unless >= 0)."""
    size = finite_metric(metrics, settings.weighted_by_key)
    if size < 0:
        raise RejectedReply(f"'{settings.weighted_by_key}' is negative ({size})")
    return size


def read_evaluate_loss(reply: Message, settings: DropInSettings) -> float:
    """An ``evaluate`` reply's ``loss_key`` ([`RejectedReply`][adcs.flower.RejectedReply] unless
    finite)."""
    return finite_metric(one_metric_record(reply), settings.loss_key)


def read_evaluation(reply: Message, settings: DropInSettings) -> tuple[float, float]:
    """An ``evaluate`` reply's loss ([`RejectedReply`][adcs.flower.RejectedReply] unless finite, or
    without a ``weighted_by_key`` >= 0, FedAvg's weight of its metrics) and accuracy, the
    ``accuracy_key`` (NaN when the app reports none, or not a finite number)."""
    metrics = one_metric_record(reply)
    loss = finite_metric(metrics, settings.loss_key)
    _weight_of(metrics, settings)
    if settings.accuracy_key is None:
        return loss, math.nan
    try:
        return loss, finite_metric(metrics, settings.accuracy_key)
    except RejectedReply:
        return loss, math.nan


def resolve_scheduler(
    scheduler: Scheduler | str, params: Mapping[str, Any] | None, n_clients: int
) -> Scheduler:
    """The scheduler object: given, or built from a name of [`adcs.SCHEDULERS`][adcs.SCHEDULERS] (or
    an import path ``"package.module:Class"``) and its constructor arguments ``params``."""
    if isinstance(scheduler, str):
        cls = _scheduler_class(scheduler)
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"scheduler_params must be a dict, got {params!r}")
        try:
            scheduler = cls(**dict(params or {}))
        except (TypeError, ValueError) as err:
            raise ValueError(f"scheduler {scheduler!r}: {err}") from err
    elif params is not None:
        raise ValueError("scheduler_params is only for a scheduler given by name")
    scheduler = check_scheduler(scheduler)
    if scheduler.m > n_clients:
        raise ValueError(f"scheduler.m={scheduler.m} exceeds n_clients={n_clients}")
    return scheduler


def _scheduler_class(name: str) -> type[Any]:
    """A built-in name (any case), ``"package.module:Name"`` or an entry point's name."""
    lowered = name.lower()
    return SCHEDULERS.resolve(lowered if lowered in SCHEDULERS else name)
