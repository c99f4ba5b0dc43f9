"""How far an attack captured a scheduler: selection rates and honest clients' accuracy.

A scheduler is judged under attack by two numbers (docs/design.md §7): how often each malicious client is
selected compared with how often the same client is selected in the same run without the attack
(its *capture ratio*; Uniform's is 1 by construction), and the accuracy of the global model on the
honest clients — the worst, the 10th percentile and the average over them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs.columns import AVG_ACC, P10_ACC, WORST_ACC, EvalView
from adcs.sim.metrics import selection_counts

__all__ = ["HonestAccuracy", "capture_ratio", "honest_accuracy", "selection_rates"]

FloatArray = NDArray[np.float64]


def selection_rates(selected: ArrayLike, n_clients: int) -> FloatArray:
    """Share of rounds in which each client was selected, shape (n_clients,).

    Parameters
    ----------
    selected : ndarray of shape (rounds, m), int
        The selection records (``RunResult.selected``, or ``selected/<run_id>`` of a results
        folder's ``selections.npz``); −1 is padding.
    n_clients : int
    """
    sel = np.asarray(selected)
    if sel.ndim != 2:
        raise ValueError(f"selected must have shape (rounds, m), got {sel.shape}")
    rounds = sel.shape[0]
    counts = selection_counts(sel, n_clients).astype(np.float64)
    return counts / rounds if rounds else counts


def capture_ratio(attacked: ArrayLike, clean: ArrayLike, clients: Sequence[int]) -> FloatArray:
    """Each listed client's selection rate under attack over its rate without, shape (k,).

    ``attacked`` and ``clean`` are selection rates (n_clients,) of the same scheduler and seed;
    a client never selected without the attack gets +inf if selected with it (NaN if neither).
    """
    a = np.asarray(attacked, dtype=np.float64)[list(clients)]
    c = np.asarray(clean, dtype=np.float64)[list(clients)]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, a / np.where(c > 0, c, 1.0), np.where(a > 0, np.inf, np.nan))


@dataclass(frozen=True)
class HonestAccuracy:
    """Test accuracy of the global model over the honest clients (at one evaluation).

    Attributes
    ----------
    worst, p10, average : float
        Minimum, 10th percentile (linear interpolation) and mean over the honest clients.
    """

    worst: float
    p10: float
    average: float

    def as_dict(self) -> dict[str, Any]:
        return {"worst": self.worst, "p10": self.p10, "average": self.average}


def honest_accuracy(client_acc: ArrayLike, malicious: Sequence[int] = ()) -> HonestAccuracy:
    """Worst, 10th-percentile and mean accuracy over the clients not in ``malicious``.

    Parameters
    ----------
    client_acc : ndarray of shape (n_clients,) or (n_evals, n_clients)
        Per-client accuracy; for a history, its last evaluation is used.
    malicious : sequence of int
    """
    acc = np.asarray(client_acc, dtype=np.float64)
    if acc.ndim == 2:
        acc = acc[-1]
    honest = np.ones(acc.shape[0], dtype=bool)
    honest[list(malicious)] = False
    values = acc[honest]
    if values.size == 0:
        raise ValueError("every client is malicious: no honest accuracy to report")
    view = EvalView(values)
    return HonestAccuracy(*(float(c.evaluate(view)) for c in (WORST_ACC, P10_ACC, AVG_ACC)))


def rates_of(selections: Mapping[str, ArrayLike], run_id: str, n_clients: int) -> FloatArray:
    """Selection rates of one run from the arrays of a ``selections.npz`` (``selected/<run_id>``)."""
    key = f"selected/{run_id}"
    if key not in selections:
        raise KeyError(f"no {key!r} in the selections records")
    return selection_rates(np.asarray(selections[key]), n_clients)
