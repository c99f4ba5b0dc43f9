"""Statistics of results, in one place: the final window, t-intervals over seeds, paired tests.

**Final** has one meaning in every file and on the console: the mean over a run's last
`FINAL_FRACTION` of evaluations (at least one), steadier than the single last evaluation,
which is kept as ``last_*``. Over seeds: the mean, with a 95 % Student-t interval
(`t_interval`); two methods run on the same seeds are compared by a paired t-test over the
seeds (`paired_difference`, `tied`, `paired_p_value`), which the common random numbers make
fair. Several comparisons read together (every entry of a leaderboard's workload against its
best) control their family-wise error with Holm's step-down adjustment (`holm`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.special import stdtr, stdtrit

__all__ = [
    "CONFIDENCE",
    "FINAL_FRACTION",
    "SeedValues",
    "final_note",
    "holm",
    "paired_difference",
    "paired_p_value",
    "t_interval",
    "tail_length",
    "tied",
]

FloatArray = NDArray[np.float64]
SeedValues = Mapping[int, float]
"""One entry's value on each seed it ran."""

CONFIDENCE = 0.95
"""Of every interval and of the tie test (5 % two-sided)."""

FINAL_FRACTION = 0.1
"""Share of a run's last evaluations whose mean is its *final* accuracy and loss."""


def tail_length(n_evals: int) -> int:
    """Evaluations in the final window: ⌈FINAL_FRACTION · n_evals⌉, at least 1 (0 without any)."""
    return 0 if n_evals == 0 else max(1, math.ceil(FINAL_FRACTION * n_evals - 1e-9))


def final_note() -> str:
    """The definition of *final*, as the report and the console state it."""
    return (
        f"final = mean over each run's last {100 * FINAL_FRACTION:.0f}% of evaluations "
        "(last = the last evaluation alone); over seeds: mean ± 95% t-interval"
    )


def t_interval(values: FloatArray, confidence: float = CONFIDENCE) -> tuple[FloatArray, FloatArray]:
    """Mean over seeds and half-width of the Student-t confidence interval.

    Parameters
    ----------
    values : ndarray of shape (n_seeds, ...)
    confidence : float

    Returns
    -------
    mean, half_width : ndarray of shape values.shape[1:]
        ``half_width`` is NaN with a single seed (no interval can be formed).
    """
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    mean = values.mean(axis=0)
    if n < 2:
        return mean, np.full_like(mean, np.nan)
    sem = values.std(axis=0, ddof=1) / math.sqrt(n)
    return mean, sem * float(stdtrit(n - 1, 0.5 + confidence / 2.0))


def paired_difference(
    a: SeedValues, b: SeedValues, confidence: float = CONFIDENCE
) -> tuple[float, float, int]:
    """Mean over common seeds of ``a − b``, its paired t half-width, and the number of seeds.

    The half-width is NaN with fewer than two common seeds, and the mean NaN with none or when
    a value is not finite.
    """
    seeds = sorted(set(a) & set(b))
    d = np.array([a[s] - b[s] for s in seeds], dtype=np.float64)
    if d.size == 0 or not np.isfinite(d).all():
        return math.nan, math.nan, int(d.size)
    mean, half = t_interval(d, confidence)
    return float(mean), float(half), int(d.size)


def tied(a: SeedValues, b: SeedValues, confidence: float = CONFIDENCE) -> bool:
    """Whether a two-sided paired t-test over the common seeds cannot tell ``a`` from ``b``.

    |mean(d)| ≤ t(0.5 + confidence/2, n − 1) · sd(d)/√n with d_s = a_s − b_s over n ≥ 2 common
    seeds (the boundary counts as tied); with one common seed only an exact equality ties; with
    none, or a value that is not finite, nothing does.
    """
    mean, half, n = paired_difference(a, b, confidence)
    if math.isnan(mean):
        return False
    if n < 2:
        return mean == 0.0
    return abs(mean) <= half


def paired_p_value(a: SeedValues, b: SeedValues) -> float:
    """Two-sided p-value of the paired t-test of ``a − b`` over their common seeds.

    p = 2 · F(−|t|; n − 1) with t = mean(d) / (sd(d)/√n), d_s = a_s − b_s over n ≥ 2 common seeds
    (F the Student-t distribution function): ``p ≥ 1 − confidence`` exactly when `tied` ties them.
    The degenerate cases decide as `tied` does: no spread (sd = 0) or a single common seed gives
    1 for an exact equality and 0 otherwise; no common seed, or a value that is not finite, 0
    (nothing ties them).
    """
    mean, _, n = paired_difference(a, b)
    if math.isnan(mean):
        return 0.0
    if n < 2:
        return 1.0 if mean == 0.0 else 0.0
    seeds = sorted(set(a) & set(b))
    sd = float(np.std([a[s] - b[s] for s in seeds], ddof=1))
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = abs(mean) / (sd / math.sqrt(n))
    return float(2.0 * stdtr(n - 1, -t))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the order given.

    With the k p-values sorted, p₍₁₎ ≤ … ≤ p₍ₖ₎, the adjusted value of the j-th is
    max over i ≤ j of min(1, (k − i + 1) p₍ᵢ₎). Rejecting the hypotheses whose adjusted value is
    below α keeps the probability of any false rejection among the k at most α, whatever their
    dependence. With k = 1 the value is the p-value itself. Equal p-values keep their given order.

    Parameters
    ----------
    p_values : sequence of float, length k

    Returns
    -------
    list of float, length k
    """
    p = np.asarray(p_values, dtype=np.float64)
    k = p.size
    adjusted = np.empty(k, dtype=np.float64)
    running = 0.0
    for j, i in enumerate(np.argsort(p, kind="stable")):
        running = max(running, min(1.0, (k - j) * float(p[i])))
        adjusted[i] = running
    return [float(x) for x in adjusted]
