"""Run records and series: the numbers of finished runs, and which runs make one curve.

Everything downstream of a simulation works on `RunRecord` values — plain numbers of
finished runs — so the same code serves a fresh run and a results folder read back from disk,
and tests can feed it constructed numbers. Nothing here knows the paper or any method's
hyperparameters: a series is a method and whichever of its hyperparameters identify it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs.experiments.analysis.stats import tail_length
from adcs.schedulers import SCHEDULERS

__all__ = [
    "RunRecord",
    "Series",
    "curve_series",
    "method_label",
    "select_runs",
    "tell_apart",
    "variant_labels",
    "with_every_variant",
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


def _value_text(value: Any, exact: bool = False) -> str:
    """A hyperparameter's value in a label: short (``0.8``, ``[6 values]``), or ``exact``."""
    if exact:
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)) and len(value) > 4:
        return f"[{len(value)} values]"
    return str(value)


def _firsts(records: Sequence[RunRecord]) -> dict[str, RunRecord]:
    """The first run of each variant, in the order of ``records``."""
    first: dict[str, RunRecord] = {}
    for r in records:
        first.setdefault(r.variant, r)
    return first


def _differing(params: Sequence[Mapping[str, Any]]) -> list[str]:
    """The hyperparameters whose value is not the same in all of ``params``, by name: a label is
    the same whether written as the runs end or from ``runs.csv``, which stores them sorted."""
    keys = sorted({k for p in params for k in p})
    return [
        k
        for k in keys
        if len({json.dumps(p.get(k), default=str, sort_keys=True) for p in params}) > 1
    ]


def _varying(records: Sequence[RunRecord]) -> dict[str, list[str]]:
    """Per method, the hyperparameters whose value differs between its variants in ``records``."""
    by_method: dict[str, list[Mapping[str, Any]]] = {}
    for r in _firsts(records).values():
        by_method.setdefault(r.method, []).append(r.params)
    return {method: _differing(params) for method, params in by_method.items()}


def tell_apart(
    names: Mapping[str, str], params: Mapping[str, Mapping[str, Any]], sep: str = " "
) -> dict[str, str]:
    """``names`` (by variant) made unique: the one naming rule of every table, figure and report.

    Variants that share a name get, after it (joined by ``sep``), the hyperparameters whose
    values differ between them — ``ADCS θ=0.8, fresh q, quality=grad_norm`` beside ``…,
    quality=loss`` — in short form (``0.8``, ``[6 values]``), in full where the short form does
    not tell them apart, and followed by the variant itself where nothing else does (two
    schedulers of one display name and the same hyperparameters).

    Parameters
    ----------
    names : mapping of variant to str
    params : mapping of variant to (mapping of hyperparameter to value)
    sep : str
        Between a shared name and its telling hyperparameters.
    """
    groups: dict[str, list[str]] = {}
    for variant, name in names.items():
        groups.setdefault(name, []).append(variant)
    out: dict[str, str] = {}
    for name, group in groups.items():
        if len(group) == 1:
            out[group[0]] = name
            continue
        keys = _differing([params[v] for v in group])
        made = {v: f"{name} [{v}]" for v in group}
        for exact in (False, True):
            told = {
                v: sep.join(
                    [name, ", ".join(f"{k}={_value_text(params[v].get(k), exact)}" for k in keys)]
                )
                for v in group
            }
            if keys and len(set(told.values())) == len(group):
                made = told
                break
        out.update(made)
    seen: dict[str, int] = {}
    for label in out.values():
        seen[label] = seen.get(label, 0) + 1
    return {v: f"{label} [{v}]" if seen[label] > 1 else label for v, label in out.items()}


def variant_labels(records: Sequence[RunRecord]) -> dict[str, str]:
    """A short label per variant: the method's name and the hyperparameters that tell it apart.

    Only the hyperparameters whose value differs between the variants of the same method in
    ``records`` are named (``ADCS gamma=0.25`` beside ``ADCS gamma=0``, not every fixed setting);
    a method with one variant is its name alone. Labels are unique (`tell_apart`;
    docs/design.md §8).
    """
    firsts = _firsts(records)
    names = {v: method_label(r.method) for v, r in firsts.items()}
    return tell_apart(names, {v: r.params for v, r in firsts.items()})


def curve_series(records: Sequence[RunRecord]) -> tuple[Series, ...]:
    """One series per variant, in the order of ``records``, matching exactly its runs."""
    labels = variant_labels(records)
    return tuple(
        Series(labels[r.variant], r.method, dict(r.params)) for r in _firsts(records).values()
    )


def with_every_variant(
    records: Sequence[RunRecord], series: Sequence[Series], covered: Sequence[Series] = ()
) -> tuple[Series, ...]:
    """``series`` (those with runs), then one series per variant that none of ``series`` and
    ``covered`` shows: a figure or table of chosen series that leaves no run out.

    A chosen series keeps its label, followed by the hyperparameters of the variant it shows that
    tell it apart from its method's other variants and that it does not fix itself (``ADCS (θ=0.8,
    R=20) quality=loss`` beside ``ADCS quality=grad_norm``); every other variant is labelled as by
    `variant_labels`. No two series returned share a label.
    """
    varying, labels, firsts = _varying(records), variant_labels(records), _firsts(records)
    chosen: dict[str, Series] = {}  # by the variant each shows
    for s in series:
        runs = select_runs(records, s)
        if runs and runs[0].variant not in chosen:
            r = runs[0]
            told = [
                f"{k}={_value_text(r.params.get(k))}"
                for k in varying[r.method]
                if k not in s.params
            ]
            label = " ".join([s.label, ", ".join(told)]).strip()
            chosen[r.variant] = Series(label, s.method, s.params)
    shown = set(chosen) | {runs[0].variant for s in covered if (runs := select_runs(records, s))}
    rest = {
        v: Series(labels[v], r.method, dict(r.params)) for v, r in firsts.items() if v not in shown
    }
    everything = {**chosen, **rest}
    unique = tell_apart(
        {v: s.label for v, s in everything.items()}, {v: firsts[v].params for v in everything}
    )
    return tuple(Series(unique[v], s.method, s.params) for v, s in everything.items())
