"""Run records and series: the numbers of finished runs, and which runs make one curve.

Everything downstream of a simulation works on `RunRecord` values — plain numbers of
finished runs — so the same code serves a fresh run and a results folder read back from disk,
and tests can feed it constructed numbers. Nothing here knows the paper or any method's
hyperparameters: a series is a method and whichever of its hyperparameters identify it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.experiments.stats import tail_length
from adcs.schedulers import SCHEDULERS

__all__ = [
    "RunRecord",
    "Series",
    "curve_series",
    "method_label",
    "select_runs",
    "variant_labels",
]

FloatArray = NDArray[np.float64]


def method_label(method: str) -> str:
    """A method's display name: its scheduler class's ``display_name``, else the class's name
    (``powerofchoice`` → PowerOfChoice)."""
    cls = SCHEDULERS.get(method)
    return str(getattr(cls, "display_name", cls.__name__)) if cls is not None else method


# ---------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True, eq=False)
class RunRecord:
    """The numbers of one finished run: what every results file is written from and read into.

    Attributes
    ----------
    run_id : str
        Unique within an experiment; ``variant`` plus the seed.
    variant : str
        The run's method and identifying hyperparameters, without the seed (one curve's runs).
    method : str
        A key of [`adcs.schedulers.SCHEDULERS`][adcs.schedulers.SCHEDULERS].
    seed : int
    params : dict
        Every hyperparameter of the scheduler but ``m`` (JSON-able).
    eval_rounds : ndarray of shape (n_evals,)
    worst_acc, avg_acc, test_loss : ndarray of shape (n_evals,)
        Minimum and mean over clients of test accuracy, and global test loss.
    group_share : ndarray of shape (n_groups,)
        Share of selection slots each group received.
    tv_to_uniform : float
        TV distance of ``group_share`` to what uniform selection gives (the groups' real sizes).
    client_updates, loss_evals : int
        Client computations spent (see the simulator's accounting).
    dropped : int
        Selected clients that dropped out (did not return their update).
    mean_available : float
        Mean number of clients available per round.
    non_finite : int
        Probed client statistics that were NaN or infinite (excluded from selection).
    group_clients : ndarray of shape (n_groups,) or None
        Clients in each group of this run's partition (None when unknown).
    wall_s : float
        This run's share of the simulation's wall time (NaN when unknown; never in the
        byte-reproducible files, see the manifest).
    eval_clock : ndarray of shape (n_evals,) or None
        Simulated seconds at each evaluation (runs with a system profile; else None).
    total_time, client_time : float or None
        Simulated seconds of the whole run, and client-seconds spent (with a system profile).
    p10_acc : ndarray of shape (n_evals,)
        10th-percentile client accuracy (empty when not recorded).
    group_acc : ndarray of shape (n_evals, n_groups)
        Mean accuracy of each group's evaluated clients (NaN: none evaluated).
    honest_acc : ndarray of shape (n_evals, 3)
        Worst, 10th-percentile and mean accuracy of the evaluated honest clients (runs with
        malicious clients, ``[sim.attack]``; empty otherwise).
    extra : dict
        The values of the columns declared beyond the built-in ones (`adcs.columns.COLUMNS`),
        by name.
    """

    run_id: str
    variant: str
    method: str
    seed: int
    params: Mapping[str, Any]
    eval_rounds: NDArray[np.int64]
    worst_acc: FloatArray
    avg_acc: FloatArray
    test_loss: FloatArray
    group_share: FloatArray
    tv_to_uniform: float
    client_updates: int
    loss_evals: int
    dropped: int = 0
    mean_available: float = math.nan
    non_finite: int = 0
    group_clients: NDArray[np.int64] | None = None
    wall_s: float = math.nan
    eval_clock: FloatArray | None = None
    total_time: float | None = None
    client_time: float | None = None
    p10_acc: FloatArray = field(default_factory=lambda: np.empty(0))
    group_acc: FloatArray = field(default_factory=lambda: np.empty((0, 0)))
    honest_acc: FloatArray = field(default_factory=lambda: np.empty((0, 3)))
    extra: Mapping[str, Any] = field(default_factory=dict)

    def value(self, name: str) -> Any:
        """The value of a column's attribute: a field of the record, else one of ``extra``, else
        None (an optional column, such as a private run's ``epsilon``, this file does not hold)."""
        if name in self.extra:
            return self.extra[name]
        return getattr(self, name, None)

    @property
    def tail(self) -> slice:
        """The evaluations of the final window."""
        return slice(self.eval_rounds.size - tail_length(self.eval_rounds.size), None)

    def final(self, attr: str) -> float:
        """Mean of ``attr`` (``worst_acc``, ``avg_acc``, ``test_loss``) over the final window."""
        values = np.asarray(self.value(attr))[self.tail]
        return float(values.mean()) if values.size else math.nan

    def last(self, attr: str) -> float:
        """``attr`` at the last evaluation."""
        values = np.asarray(self.value(attr))
        return float(values[-1]) if values.size else math.nan

    @property
    def final_rounds(self) -> tuple[int, int] | None:
        """First and last round of the final window (None without evaluations)."""
        rounds = self.eval_rounds[self.tail]
        return (int(rounds[0]), int(rounds[-1])) if rounds.size else None


# ---------------------------------------------------------------------------------------------
# series


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return not isinstance(b, bool) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


@dataclass(frozen=True, eq=False)
class Series:
    """Which runs make one curve (or one table row): a method and the hyperparameters it fixes.

    Attributes
    ----------
    label : str
    method : str
    params : mapping
        Hyperparameters a run must have (others are free); numbers compare with a tolerance.
    """

    label: str
    method: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, record: RunRecord) -> bool:
        if record.method != self.method:
            return False
        return all(
            k in record.params and _same(record.params[k], v) for k, v in self.params.items()
        )


def select_runs(records: Sequence[RunRecord], series: Series) -> list[RunRecord]:
    """The runs of one series, one per seed, sorted by seed.

    When several variants match (e.g. two Uniform runs with different options), the first one in
    ``records`` is used.
    """
    matching = [r for r in records if series.matches(r)]
    if not matching:
        return []
    variant = matching[0].variant
    return sorted((r for r in matching if r.variant == variant), key=lambda r: r.seed)


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"[{len(value)} values]"
    return str(value)


def variant_labels(records: Sequence[RunRecord]) -> dict[str, str]:
    """A short label per variant: the method's name and the hyperparameters that tell it apart.

    Only the hyperparameters whose value differs between the variants of the same method in
    ``records`` are named (``ADCS gamma=0.25`` beside ``ADCS gamma=0``, not every fixed setting);
    a method with one variant is its name alone.
    """
    first: dict[str, RunRecord] = {}
    for r in records:
        first.setdefault(r.variant, r)
    by_method: dict[str, list[RunRecord]] = {}
    for r in first.values():
        by_method.setdefault(r.method, []).append(r)
    labels: dict[str, str] = {}
    for method, runs in by_method.items():
        keys = list(dict.fromkeys(k for r in runs for k in r.params))
        varying = [k for k in keys if len({_value_text(r.params.get(k)) for r in runs}) > 1]
        for r in runs:
            parts = [f"{k}={_value_text(r.params.get(k))}" for k in varying]
            labels[r.variant] = " ".join([method_label(method), ", ".join(parts)]).strip()
    return labels


def curve_series(records: Sequence[RunRecord]) -> tuple[Series, ...]:
    """One series per variant, in the order of ``records``, matching exactly its runs."""
    labels = variant_labels(records)
    seen: dict[str, RunRecord] = {}
    for r in records:
        seen.setdefault(r.variant, r)
    return tuple(Series(labels[r.variant], r.method, dict(r.params)) for r in seen.values())
