"""The settings of a scheduled Flower server (docs/design.md §7), validated on construction.

One `Settings` serves both adapters of `adcs.flower.driver.Driver`; each takes the
fields that mean something for its wire protocol (`take`) and refuses the others by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from adcs import defaults
from adcs._validate import check_int, check_number

__all__ = ["SIMULATOR_IDENTICAL", "WRAPPED", "Settings", "take"]


@dataclass(frozen=True)
class Settings:
    """The settings of `adcs.flower.Scheduled` (beside the wrapped strategy's own
    arguments) and of `adcs.flower.SchedulerStrategy`.

    Attributes
    ----------
    n_clients : int or None
        N. ``Scheduled``: the first N nodes to appear are clients 0..N−1; None: N is the number
        of nodes connected when the first round starts (after ``wait_for_all_s``).
        ``SchedulerStrategy``: the nodes report partition ids 0..N−1 (required).
    server_lr : float
        ``SchedulerStrategy``: η_s > 0 in w⁽ᵗ⁺¹⁾ = w⁽ᵗ⁾ + η_s Σ c_i Δ_i (docs/design.md §2).
    weighting : {"uniform", "data_size"}
        ``SchedulerStrategy``: p_n, uniform or the client's reported number of examples.
    evaluate_every : int
        ``SchedulerStrategy``: federated evaluation (``evaluate`` to every available client)
        every this many rounds and after the last; 0 turns it off. (``Scheduled`` evaluates as
        its wrapped strategy does.)
    loss_key : str
        MetricRecord key of the loss in ``evaluate`` replies (a loss probe's value).
    accuracy_key : str or None
        MetricRecord key of the accuracy in ``evaluate`` replies (Flower's quickstart apps'
        ``eval_acc``), from which the evaluation's result columns are computed
        (`adcs.flower.round.EvaluationRecord.columns`); a reply without it counts as
        not reported. None: the app reports none.
    train_loss_key : str or None
        MetricRecord key of the loss in ``train`` replies (an update probe's quality, e.g.
        ADCS's q_n); None: the app reports none and the quality is 0 for every client.
    partition_key : str
        MetricRecord key of the app's partition id in replies, when the app sends one: the
        selection line names it beside the node id.
    seed : int
        Seeds the scheduler's stream (with ``run_id``) and the update sketch;
        ``SchedulerStrategy`` also sends it to clients as ``adcs-seed`` (their minibatches).
    run_id : str
        Names the scheduler's stream, `adcs.streams.scheduler_rng` (seed, run_id).
    sketch_dim : int or None
        Updates longer than this reach the scheduler as a seeded JL sketch of this length
        (`adcs.sketch.UpdateSketch`); None: never sketched (``Scheduled``'s default is
        1024).
    checkpoint_path : str or None
        Where the server's state is saved and, at start, resumed from.
    checkpoint_every : int
        Save every this many rounds (and after the last).
    connect_timeout_s : float
        How long a round waits for enough connected clients before the run fails.
    wait_for_all_s : float
        Once the first round has enough clients, how much longer it waits for all N (for
        more nodes, when N is inferred).
    max_in_flight : int
        At most this many requests open at once, 0 for no limit (`adcs.flower.link`).
    """

    n_clients: int | None = None
    server_lr: float = defaults.SERVER_LR
    weighting: Literal["uniform", "data_size"] = "uniform"
    evaluate_every: int = 0
    loss_key: str = "eval_loss"
    accuracy_key: str | None = "eval_acc"
    train_loss_key: str | None = "train_loss"
    partition_key: str = "partition-id"
    seed: int = 0
    run_id: str = "flower"
    sketch_dim: int | None = None
    checkpoint_path: str | None = None
    checkpoint_every: int = 1
    connect_timeout_s: float = 120.0
    wait_for_all_s: float = 0.0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        if self.n_clients is not None:
            check_int("n_clients", self.n_clients)
        check_number("server_lr", self.server_lr, 0.0, low_open=True)
        if self.weighting not in ("uniform", "data_size"):
            raise ValueError(f"weighting must be 'uniform' or 'data_size', got {self.weighting!r}")
        check_int("evaluate_every", self.evaluate_every, minimum=0)
        for name in ("loss_key", "partition_key", "run_id"):
            check_key(name, getattr(self, name))
        for name in ("train_loss_key", "accuracy_key"):
            if getattr(self, name) is not None:
                check_key(name, getattr(self, name))
        check_int("seed", self.seed, minimum=0)
        if self.sketch_dim is not None:
            check_int("sketch_dim", self.sketch_dim)
        if self.checkpoint_path is not None:
            if not isinstance(self.checkpoint_path, (str, Path)) or not str(self.checkpoint_path):
                raise ValueError(f"checkpoint_path must be a path, got {self.checkpoint_path!r}")
            object.__setattr__(self, "checkpoint_path", str(self.checkpoint_path))
        check_int("checkpoint_every", self.checkpoint_every)
        check_number("connect_timeout_s", self.connect_timeout_s, 0.0)
        check_number("wait_for_all_s", self.wait_for_all_s, 0.0)
        check_int("max_in_flight", self.max_in_flight, minimum=0)


def check_key(name: str, value: Any) -> None:
    """ValueError unless ``value`` is a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")


_SHARED = frozenset(
    {
        "n_clients",
        "seed",
        "run_id",
        "sketch_dim",
        "checkpoint_path",
        "checkpoint_every",
        "connect_timeout_s",
        "wait_for_all_s",
        "max_in_flight",
    }
)

WRAPPED = _SHARED | {"loss_key", "accuracy_key", "train_loss_key", "partition_key"}
"""The fields `adcs.flower.Scheduled` takes (the wrapped strategy aggregates and
evaluates: no ``server_lr``, ``weighting`` or ``evaluate_every``)."""

SIMULATOR_IDENTICAL = _SHARED | {"server_lr", "weighting", "evaluate_every"}
"""The fields `adcs.flower.SchedulerStrategy` takes (its ClientApp's protocol fixes the
reply keys)."""


def take(who: str, allowed: frozenset[str], given: dict[str, Any]) -> Settings:
    """``Settings(**given)``, after refusing any field ``who`` does not take, by name."""
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise ValueError(
            f"{who} takes no setting {unknown[0]!r} (its settings: {sorted(allowed)}); a wrapped "
            "strategy's own arguments go to its constructor"
        )
    return Settings(**given)
