"""The result columns: each declared once, and every file, reader and runtime goes over the table.

A `Column` says what one result is (its name, whether it is recorded at every evaluation
or once per run), how it is computed from a finished run (`RunView`: the run's
[`RunResult`][adcs.sim.RunResult] and its data) and, for per-evaluation columns that need only the
clients' accuracies, from one evaluation of any runtime (`EvalView`, what the Flower
strategy's history records), and how a cell of a results file is parsed back.
`COLUMNS` is the table, in the order the columns appear in ``metrics.csv`` (per
evaluation) and ``runs.csv`` / ``summary.json`` (per run); `adcs.experiments.run.results`
writes and reads every file by going over it, and the leaderboard ranks any per-evaluation
column by its final value. Adding a column is one declaration (docs/design.md §8)::

    COLUMNS.add(Column("median_acc", "eval", of_eval=lambda e: float(np.median(e.accuracy))))

A per-evaluation column with ``of_eval`` then reaches every file and reader, live tracking (each
[`Evaluation`][adcs.sim.Evaluation] event carries the clients' accuracies and goes over the table)
and the Flower strategies' metrics. The accuracy statistics are computed here only: the
simulator's [`RunResult`][adcs.sim.RunResult] (``worst_acc``, ``avg_acc``, ``p10_acc``), its
evaluation events, the honest clients' accuracy of an attacked run and the Flower strategies go
through `WORST_ACC`, `AVG_ACC` and `P10_ACC`. The module imports nothing of adcs when it runs,
so every runtime may compute through it.

The columns a run's record holds as attributes (`RunRecord`,
``field``) are the built-in ones; any other is kept in the record's ``extra``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

if TYPE_CHECKING:  # types only: the simulator computes through this module
    from adcs.sim.data import ClientData
    from adcs.sim.spec import F64Array, RunResult

__all__ = [
    "AVG_ACC",
    "COLUMNS",
    "P10_ACC",
    "WORST_ACC",
    "Column",
    "ColumnTable",
    "EvalView",
    "RunView",
    "eval_values",
]


@dataclass(frozen=True, eq=False)
class RunView:
    """What a column is computed from at the end of a run.

    Attributes
    ----------
    result : RunResult
    data : ClientData
        The run's clients (groups, sizes).
    """

    result: RunResult
    data: ClientData


@dataclass(frozen=True, eq=False)
class EvalView:
    """One evaluation as any runtime has it.

    Attributes
    ----------
    accuracy : ndarray of shape (n_reported,)
        Test accuracy of each evaluated client (those that reported).
    loss : float or None
        The evaluation's test loss, where the runtime has one (the simulator's mean over the
        evaluated clients' test sets); None elsewhere.
    """

    accuracy: F64Array
    loss: float | None = None


Per = Literal["eval", "run"]
Presence = Literal["always", "any", "all"]


def _float(cell: str) -> float:
    return float(cell or "nan")


@dataclass(frozen=True, eq=False)
class Column:
    """One result column (or a block of them).

    Parameters
    ----------
    name : str
        The column's name in the files (the prefix ``name<k>`` with ``per_group``, the key in
        ``summary.json``).
    per : {"eval", "run"}
        One value per evaluation (``metrics.csv``) or per run (``runs.csv``, ``summary.json``).
    of_run : callable, optional
        ``of_run(RunView)`` → the run's value: per evaluation an array of shape (n_evals,) (or
        (n_evals, width) for ``parts`` and ``per_group``), per run a number (or an array of
        shape (n_groups,) with ``per_group``); None where the run has none. Default: ``of_eval``
        applied to each evaluation's client accuracies.
    of_eval : callable, optional
        ``of_eval(EvalView)`` → one evaluation's value, from the clients' accuracies (and the
        test loss, where there is one) alone: what every runtime can give (live tracking, the
        Flower strategy's history); None where the view lacks what it needs.
    parse : callable
        A cell of a results file → its value (``""`` for a blank or absent cell).
    field : str or None
        The attribute of `RunRecord` it fills (default its
        name); a column declared outside the built-in table goes to the record's ``extra``.
    parts : tuple of str
        Names of the file columns of a block of fixed width (default: one column, ``name``).
    per_group : bool
        One file column per group, ``name0``, ``name1``, … (as many as the widest run has).
    present : {"always", "any", "all"}
        When the file has the column: always, when any run has a value, when every run has.
    final : bool
        Per evaluation: ``runs.csv`` and ``summary.json`` give its final and last values
        (``final_<name>``, ``last_<name>``).
    nan_blank : bool
        Write NaN as a blank cell.
    summary_key : str or None
        Its key in ``summary.json`` (default ``name``).
    lower_is_better : bool
        Ranked lower first (a loss, a cost, a distance); else higher first.
    """

    name: str
    per: Per
    of_run: Callable[[RunView], Any] | None = None
    of_eval: Callable[[EvalView], Any] | None = None
    parse: Callable[[str], Any] = _float
    field: str | None = None
    parts: tuple[str, ...] = ()
    per_group: bool = False
    present: Presence = "always"
    final: bool = False
    nan_blank: bool = False
    summary_key: str | None = None
    lower_is_better: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"name must be a lower-case identifier, got {self.name!r}")
        if self.per not in ("eval", "run"):
            raise ValueError(f"per must be 'eval' or 'run', got {self.per!r}")
        if self.of_run is None and self.of_eval is None:
            raise ValueError(f"column {self.name!r}: give of_run or of_eval")
        if self.of_eval is not None and self.per != "eval":
            raise ValueError(f"column {self.name!r}: of_eval is for per-evaluation columns")
        if self.present not in ("always", "any", "all"):
            raise ValueError(f"present must be 'always', 'any' or 'all', got {self.present!r}")

    @property
    def attr(self) -> str:
        """The record attribute (or ``extra`` key) holding the column's value."""
        return self.field or self.name

    @property
    def key(self) -> str:
        """Its key in ``summary.json``."""
        return self.summary_key or self.name

    def compute(self, view: RunView) -> Any:
        """The run's value (see ``of_run``)."""
        if self.of_run is not None:
            return self.of_run(view)
        return self.series(view.result.client_acc)

    def evaluate(self, view: EvalView) -> Any:
        """One evaluation's value (``of_eval``)."""
        if self.of_eval is None:
            raise ValueError(f"column {self.name!r} has no value of one evaluation (no of_eval)")
        return self.of_eval(view)

    def series(self, client_acc: Any) -> F64Array:
        """``of_eval`` at each evaluation of a run, shape (n_evals,).

        Parameters
        ----------
        client_acc : ndarray of shape (n_evals, n_clients)
            Each evaluation's per-client accuracies (every client reported).
        """
        acc = np.asarray(client_acc, dtype=np.float64)
        return np.array([self.evaluate(EvalView(row)) for row in acc], dtype=np.float64)

    def over(self, accuracy: Any, loss: float | None = None) -> Any:
        """One evaluation's value over the clients that reported (NaN when none did).

        Parameters
        ----------
        accuracy : ndarray of shape (n_clients,)
            Each client's accuracy; NaN for a client that did not report.
        loss : float, optional
            The evaluation's test loss.
        """
        acc = np.asarray(accuracy, dtype=np.float64)
        acc = acc[np.isfinite(acc)]
        return self.evaluate(EvalView(acc, loss)) if acc.size else math.nan

    def has(self, value: Any) -> bool:
        """Whether a run's value counts as present (not None, not an empty array)."""
        return value is not None and not (isinstance(value, np.ndarray) and value.size == 0)

    def shown(self, values: Sequence[Any]) -> bool:
        """Whether a file of runs with these values has the column (``present``)."""
        if self.present == "always":
            return True
        found = [self.has(v) for v in values]
        return bool(found) and (any(found) if self.present == "any" else all(found))

    def headers(self, values: Sequence[Any]) -> list[str]:
        """The file columns for runs with these values."""
        if self.per_group:
            width = max((_width(v, self.per) for v in values), default=0)
            return [f"{self.name}{k}" for k in range(width)]
        return list(self.parts) or [self.name]

    def cells(self, value: Any, i: int | None, n_headers: int) -> list[Any]:
        """The cells of one row: evaluation ``i`` of a per-evaluation value, else the run's."""
        if i is not None:
            value = value[i] if self.has(value) and len(value) > i else None
        if self.per_group:
            row = [] if value is None else np.asarray(value).tolist()
            if self.per == "eval":  # short rows are padded
                row += [math.nan] * (n_headers - len(row))
        elif self.parts:
            row = [None] * len(self.parts) if value is None else np.asarray(value).tolist()
        else:
            row = [value]
        return [None if self.nan_blank and _is_nan(c) else c for c in row]

    def read(self, rows: Sequence[Any], headers: Sequence[str]) -> Any:
        """The value back from a file: ``rows`` the dict rows of one run (or the run's row)."""
        if self.per == "run":
            cells = [rows[0].get(h, "") for h in headers]
            if self.per_group:
                return np.array([self.parse(c) for c in cells if c != ""])
            return self.parse(cells[0])
        table = [[self.parse(row.get(h, "")) for h in headers] for row in rows]
        if self.per_group:
            return np.array(table)
        if self.parts:
            return np.array(table).reshape(-1, len(self.parts))
        return np.array([r[0] for r in table])

    def file_headers(self, fields: Sequence[str]) -> list[str] | None:
        """This column's headers among a file's ``fields``; None when the file has none."""
        if self.per_group:
            pattern = re.compile(rf"{re.escape(self.name)}\d+")
            found = [f for f in fields if pattern.fullmatch(f)]
            return found if found or self.present == "always" else None
        names = list(self.parts) or [self.name]
        if set(names) <= set(fields):
            return names
        return names if self.present == "always" else None


def _width(value: Any, per: Per) -> int:
    if value is None:
        return 0
    array = np.asarray(value)
    if per == "run":
        return int(array.size)
    return int(array.shape[1]) if array.ndim == 2 else 0


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


class ColumnTable:
    """The ordered table of columns; `add` declares one more (names are unique)."""

    def __init__(self, columns: Sequence[Column]) -> None:
        self._columns: list[Column] = []
        for column in columns:
            self.add(column)

    def add(self, column: Column) -> Column:
        """Declare ``column`` (after the others); returns it."""
        if not isinstance(column, Column):
            raise ValueError(f"a column must be a Column, got {type(column).__name__}")
        if any(c.name == column.name for c in self._columns):
            raise ValueError(f"a column named {column.name!r} is already declared")
        self._columns.append(column)
        return column

    def remove(self, name: str) -> None:
        """Forget the column ``name``."""
        self._columns = [c for c in self._columns if c.name != name]

    def __iter__(self) -> Iterator[Column]:
        return iter(list(self._columns))

    def __getitem__(self, name: str) -> Column:
        for column in self._columns:
            if column.name == name:
                return column
        raise KeyError(name)

    def names(self) -> list[str]:
        return [c.name for c in self._columns]

    def per(self, per: Per) -> list[Column]:
        """The columns recorded per evaluation, or per run, in order."""
        return [c for c in self._columns if c.per == per]


def eval_values(accuracy: Any, loss: float | None = None) -> dict[str, float]:
    """Every per-evaluation column of `COLUMNS` a runtime can give from one evaluation.

    Parameters
    ----------
    accuracy : ndarray of shape (n_clients,)
        The evaluated clients' test accuracies (NaN entries, clients that did not report, are
        left out).
    loss : float, optional
        The evaluation's test loss, where the runtime has one.

    Returns
    -------
    dict of column name to value (NaN when no client reported); a column whose ``of_eval``
    gives None (the test loss without a loss) is left out.
    """
    out = {}
    for column in COLUMNS.per("eval"):
        if column.of_eval is not None:
            value = column.over(accuracy, loss)
            if value is not None:
                out[column.name] = float(value)
    return out


# ---------------------------------------------------------------------------------------------
# the built-in columns


def _f64(name: str) -> Callable[[RunView], Any]:
    return lambda v: np.asarray(getattr(v.result, name), dtype=np.float64)


def _worst(view: EvalView) -> float:
    return float(view.accuracy.min())


def _average(view: EvalView) -> float:
    return float(view.accuracy.mean())


def _p10(view: EvalView) -> float:
    """The 10th percentile (linear interpolation between order statistics, NumPy's default)."""
    return float(np.quantile(view.accuracy, 0.1))


def _test_loss(view: EvalView) -> float | None:
    return view.loss


def _honest(view: RunView) -> F64Array:
    """Worst / p10 / mean accuracy of the evaluated honest clients at each evaluation (n, 3);
    NaN when every evaluated client is malicious."""
    result = view.result
    malicious = result.spec.meta.get("malicious", ())
    if not malicious:
        return np.empty((0, 3))
    honest = ~np.isin(result.eval_clients, malicious)
    accuracy = np.asarray(result.client_acc, dtype=np.float64)
    if not honest.any():  # every evaluated client is malicious: no honest value
        return np.full((accuracy.shape[0], 3), math.nan)
    stats = (WORST_ACC, P10_ACC, AVG_ACC)
    rows = [[c.evaluate(EvalView(acc[honest])) for c in stats] for acc in accuracy]
    return np.array(rows, dtype=np.float64).reshape(-1, 3)


def _mean_available(view: RunView) -> float:
    n = view.result.n_available
    return float(np.mean(n)) if n.size else math.nan


def _int_or(default: int) -> Callable[[str], int]:
    return lambda cell: int(cell or default)


def _optional_float(cell: str) -> float | None:
    return float(cell) if cell else None


def _epsilon(view: RunView) -> float | None:
    """The largest client ε of a private run (`adcs.privacy`), at its ``delta``."""
    eps = view.result.client_epsilon
    return None if eps is None else float(eps.max(initial=0.0))


WORST_ACC = Column("worst_acc", "eval", of_eval=_worst, final=True)
"""The worst (minimum) accuracy over the evaluated clients (paper Fig. 1)."""
AVG_ACC = Column("avg_acc", "eval", of_eval=_average, final=True)
"""The average accuracy over the evaluated clients (paper Fig. 1)."""
P10_ACC = Column("p10_acc", "eval", of_eval=_p10)
"""The 10th percentile of the evaluated clients' accuracy (the worst-decile view)."""

COLUMNS = ColumnTable(
    [
        # per evaluation, in the order of metrics.csv
        WORST_ACC,
        AVG_ACC,
        Column("test_loss", "eval", _f64("test_loss"), _test_loss, final=True,
               lower_is_better=True),
        P10_ACC,
        Column("acc_g", "eval", _f64("group_acc"), field="group_acc", per_group=True,
               nan_blank=True),
        Column("honest", "eval", _honest, field="honest_acc", present="any",
               parts=("honest_worst_acc", "honest_p10_acc", "honest_avg_acc")),
        Column("clock_s", "eval", lambda v: v.result.eval_clock, field="eval_clock",
               present="all", lower_is_better=True),
        # per run, in the order of runs.csv and summary.json
        Column("tv_to_uniform", "run", lambda v: float(v.result.tv_to_uniform),
               lower_is_better=True),
        Column("client_updates", "run", lambda v: int(v.result.client_updates), parse=int,
               lower_is_better=True),
        Column("loss_evals", "run", lambda v: int(v.result.loss_evals), parse=int,
               lower_is_better=True),
        Column("share_g", "run", _f64("group_share"), field="group_share", per_group=True,
               summary_key="group_share"),
        Column("dropped", "run", lambda v: int(v.result.dropped), parse=_int_or(0),
               lower_is_better=True),
        Column("mean_available", "run", _mean_available),
        Column("non_finite", "run", lambda v: int(v.result.non_finite), parse=_int_or(0),
               lower_is_better=True),
        Column("sim_time_s", "run", lambda v: v.result.total_time, parse=_optional_float,
               field="total_time", present="all", lower_is_better=True),
        Column("client_time_s", "run", lambda v: v.result.client_time, parse=_optional_float,
               field="client_time", present="all", lower_is_better=True),
        Column("epsilon", "run", _epsilon, parse=_optional_float, present="any",
               lower_is_better=True),
        Column("delta", "run", lambda v: v.result.delta, parse=_optional_float, present="any"),
    ]
)  # fmt: skip
"""The result columns, in file order (`ColumnTable`; ``COLUMNS.add`` declares one more)."""
