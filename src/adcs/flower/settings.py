"""The settings of a scheduled Flower server (docs/design.md §7), validated on construction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcs._validate import check_int, check_number

__all__ = ["Settings"]


@dataclass(frozen=True)
class Settings:
    """What :class:`~adcs.flower.Scheduled` adds to the wrapped strategy's own arguments.

    Attributes
    ----------
    n_clients : int or None
        N: the first N nodes to appear are clients 0..N−1. None: N is the number of nodes
        connected when the first round starts (after ``wait_for_all_s``).
    loss_key : str
        MetricRecord key of the loss in ``evaluate`` replies (a loss probe's value).
    accuracy_key : str or None
        MetricRecord key of the accuracy in ``evaluate`` replies (Flower's quickstart apps'
        ``eval_acc``), from which the evaluation's result columns are computed
        (:attr:`~adcs.flower.round.EvaluationRecord.columns`); a reply without it counts as
        not reported. None: the app reports none.
    train_loss_key : str or None
        MetricRecord key of the loss in ``train`` replies (an update probe's quality, e.g.
        ADCS's q_n); None: the app reports none and the quality is 0 for every client.
    partition_key : str
        MetricRecord key of the app's partition id in replies, when the app sends one: the
        selection line names it beside the node id.
    seed : int
        Seeds the scheduler's stream (with ``run_id``) and the update sketch.
    run_id : str
        Names the scheduler's stream, :func:`adcs.streams.scheduler_rng` (seed, run_id).
    sketch_dim : int or None
        Updates longer than this reach the scheduler as a seeded JL sketch of this length
        (:class:`adcs.sketch.UpdateSketch`); None: never sketched.
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
        At most this many requests open at once, 0 for no limit (:mod:`adcs.flower.link`).
    """

    n_clients: int | None = None
    loss_key: str = "eval_loss"
    accuracy_key: str | None = "eval_acc"
    train_loss_key: str | None = "train_loss"
    partition_key: str = "partition-id"
    seed: int = 0
    run_id: str = "flower"
    sketch_dim: int | None = 1024
    checkpoint_path: str | None = None
    checkpoint_every: int = 1
    connect_timeout_s: float = 120.0
    wait_for_all_s: float = 0.0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        if self.n_clients is not None:
            check_int("n_clients", self.n_clients)
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
