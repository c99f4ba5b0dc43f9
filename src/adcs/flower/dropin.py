"""What `adcs.flower.Scheduled` needs beyond the round: the model's layout, the checks of a
standard app's replies, and the scheduler named by a string.

A standard Flower app exchanges an ``ArrayRecord`` of any number of arrays of any dtypes (a
PyTorch ``state_dict()``) and one ``MetricRecord`` per reply. `Template` is that layout as
the server first sent it: every ``train`` reply must return the same keys, shapes and dtypes, and
the update Δ the scheduler sees is the returned arrays minus the sent ones, flattened in the
template's key order (docs/design.md §7).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, Message, MetricRecord
from numpy.typing import NDArray

from adcs.flower.round import RejectedReply, finite_metric, one_metric_record
from adcs.flower.settings import Settings
from adcs.schedulers import SCHEDULERS
from adcs.schedulers.base import Scheduler, check_scheduler

__all__ = [
    "Template",
    "decoded",
    "read_evaluate_loss",
    "read_evaluation",
    "read_train_reply",
    "resolve_scheduler",
]

F32Array = NDArray[np.float32]
_DESCR = re.compile(r"'descr':\s*'([^']+)'")
_SHAPE = re.compile(r"'shape':\s*\(([^)]*)\)")


def decoded(array: Array) -> NDArray[Any]:
    """``array.numpy()`` without ``np.load``'s header parsing (``ast.literal_eval``), which is
    most of the cost of reading a reply: the ``.npy`` bytes Flower's ``Array`` holds are read as
    a view of their data after the header (each distinct header parsed once). Anything but a
    C-ordered, non-object array of a version 1–3 header is left to ``np.load``; the result is
    read-only."""
    data = array.data
    if array.stype != "numpy.ndarray" or data[:6] != b"\x93NUMPY" or data[6] not in (1, 2, 3):
        return array.numpy()
    width = 2 if data[6] == 1 else 4
    start = 8 + width + int.from_bytes(data[8 : 8 + width], "little")
    layout = _layout(bytes(data[8 + width : start]))
    if layout is None or len(data) - start != math.prod(layout[1]) * layout[0].itemsize:
        return array.numpy()
    return np.frombuffer(data, dtype=layout[0], offset=start).reshape(layout[1])


@functools.lru_cache(maxsize=256)
def _layout(header: bytes) -> tuple[np.dtype[Any], tuple[int, ...]] | None:
    """A ``.npy`` header's dtype and shape; None unless C-ordered and of a non-object dtype."""
    text = header.decode("latin1")
    descr, shape = _DESCR.search(text), _SHAPE.search(text)
    if "'fortran_order': False" not in text or descr is None or shape is None:
        return None
    dtype = np.dtype(descr.group(1))
    if dtype.hasobject:
        return None
    return dtype, tuple(int(d) for d in shape.group(1).split(",") if d.strip())


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
        values = {k: decoded(arrays[k]) for k in arrays.keys()}
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
        return self.flat_values([decoded(arrays[k]) for k in self.keys])

    def flat_values(self, values: list[NDArray[Any]]) -> F32Array:
        if not values:
            return np.empty(0, dtype=np.float32)
        return np.concatenate([np.asarray(v, dtype=np.float32).ravel() for v in values])

    def check(self, record: ArrayRecord) -> list[NDArray[Any]]:
        """A reply's arrays in key order; `RejectedReply` unless they match the layout."""
        if set(record.keys()) != set(self.keys):
            raise RejectedReply(
                f"arrays {sorted(record.keys())} differ from the model's {sorted(self.keys)}"
            )
        out = []
        for key, shape, dtype in zip(self.keys, self.shapes, self.dtypes, strict=True):
            try:
                value = decoded(record[key])
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

    def weighted_step(
        self, arrays: ArrayRecord, replies: list[Message], coef: NDArray[np.float64]
    ) -> ArrayRecord:
        """w + Σ_i c_i (w_i − w) per array, in float64, cast back to each array's dtype."""
        out = {}
        for key, dtype in zip(self.keys, self.dtypes, strict=True):
            sent = decoded(arrays[key]).astype(np.float64)
            step = np.zeros_like(sent)
            for c, reply in zip(coef, replies, strict=True):
                record = next(iter(reply.content.array_records.values()))
                step += float(c) * (decoded(record[key]).astype(np.float64) - sent)
            value = sent + step
            value = (np.rint(value) if dtype.kind in "iub" else value).astype(dtype)
            out[key] = Array(np.array(value))
        return ArrayRecord(out)

    def restore(self, values: Mapping[str, NDArray[Any]], source: str) -> ArrayRecord:
        """An ArrayRecord of saved arrays, in the template's key order, after checking they
        have its keys and shapes and are finite (their dtypes are the wrapped strategy's: FedAdam
        sends float64, FedAvg averages integer arrays to floats)."""
        if set(values) != set(self.keys):
            raise ValueError(
                f"checkpoint {source} does not fit initial_arrays: arrays {sorted(values)} "
                f"differ from the model's {sorted(self.keys)}"
            )
        for key, shape in zip(self.keys, self.shapes, strict=True):
            value = np.asarray(values[key])
            if value.shape != shape or (value.dtype.kind in "fc" and not np.isfinite(value).all()):
                raise ValueError(
                    f"checkpoint {source} does not fit initial_arrays: array {key!r} is "
                    f"{value.dtype}{list(value.shape)}, expected {list(shape)} and finite"
                )
        return ArrayRecord({k: Array(np.array(values[k])) for k in self.keys})


def read_train_reply(
    reply: Message,
    template: Template,
    sent: F32Array | None,
    settings: Settings,
    weight_key: str,
) -> tuple[MetricRecord, F32Array | None, float, float]:
    """A ``train`` reply's MetricRecord, its update Δ of shape (dim,) float32 (the returned
    arrays minus ``sent``; None without ``sent``), its training loss and its size.

    Raises
    ------
    RejectedReply
        Unless the reply holds one ArrayRecord of the model's layout, with finite values, and
        one MetricRecord with a non-negative ``weight_key`` (the wrapped strategy's
        ``weighted_by_key``) and ``train_loss_key``.
    """
    metrics = one_metric_record(reply)
    size = _weight_of(metrics, weight_key)
    loss = 0.0
    if settings.train_loss_key is not None:
        loss = finite_metric(metrics, settings.train_loss_key)
    records = [r for r in reply.content.values() if isinstance(r, ArrayRecord)]
    if len(records) != 1:
        raise RejectedReply(f"expected one ArrayRecord, got {len(records)}")
    values = template.check(records[0])
    if sent is None:
        return metrics, None, loss, size
    update = template.flat_values(values) - sent
    if not np.isfinite(update).all():
        raise RejectedReply("the update overflows float32")
    return metrics, update, loss, size


def _weight_of(metrics: Any, weight_key: str) -> float:
    """A reply's ``weight_key``, FedAvg's weight (`RejectedReply` unless >= 0)."""
    size = finite_metric(metrics, weight_key)
    if size < 0:
        raise RejectedReply(f"'{weight_key}' is negative ({size})")
    return size


def read_evaluate_loss(reply: Message, settings: Settings) -> float:
    """An ``evaluate`` reply's ``loss_key`` (`RejectedReply` unless finite)."""
    return finite_metric(one_metric_record(reply), settings.loss_key)


def read_evaluation(reply: Message, settings: Settings, weight_key: str) -> tuple[float, float]:
    """An ``evaluate`` reply's loss (`RejectedReply` unless finite, or without a
    ``weight_key`` >= 0, the weight of its metrics) and accuracy, the ``accuracy_key`` (NaN
    when the app reports none, or not a finite number)."""
    metrics = one_metric_record(reply)
    loss = finite_metric(metrics, settings.loss_key)
    _weight_of(metrics, weight_key)
    if settings.accuracy_key is None:
        return loss, math.nan
    try:
        return loss, finite_metric(metrics, settings.accuracy_key)
    except RejectedReply:
        return loss, math.nan


def resolve_scheduler(
    scheduler: Scheduler | str, params: Mapping[str, Any] | None, n_clients: int | None
) -> Scheduler:
    """The scheduler object: given, or built from a name of `adcs.SCHEDULERS` (or an
    import path ``"package.module:Class"``) and its constructor arguments ``params``."""
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
    if n_clients is not None and scheduler.m > n_clients:
        raise ValueError(f"scheduler.m={scheduler.m} exceeds n_clients={n_clients}")
    return scheduler


def _scheduler_class(name: str) -> type[Any]:
    """A built-in name (any case), ``"package.module:Name"`` or an entry point's name."""
    lowered = name.lower()
    return SCHEDULERS.resolve(lowered if lowered in SCHEDULERS else name)
