"""Clustered sampling's allocation and draw (Fraboni et al., ICML 2021), shared by Algorithms 1 and 2.

Clustered sampling fills k *rows* r_1 … r_k, each a distribution over clients, so that the rows add
up to the clients' shares: Σ_r r_r(i) = k p_i (p_i the aggregation weight, Σ p = 1). One client is
drawn from each row and the aggregate is (1/k) Σ_r Δ_{X_r}; since each draw X_r has marginal r_r,
E[(1/k) Σ_r Δ_{X_r}] = Σ_i p_i Δ_i, whatever the joint law of the draws (the paper's Prop. 1).

Two departures from the paper, both forced by the selection contract of [`adcs.round.contract`][adcs.round.contract]
(exactly k *distinct* clients per round) and neither touching unbiasedness:

* **Distinct draws.** The paper draws the rows independently, so a client whose share was split
  across two rows can be drawn twice (fewer than k distinct clients). Here the rows are drawn in
  order and a row that shares a client i with earlier rows is drawn from the conditional law
  that keeps its marginal exactly r_r and never repeats i (`sample_rows`). By construction
  every row shares at most one client with the rows before it (`allocate`), and a client's
  total share k p_i is below 1, so such a law exists.
* **Clients of share k p_i ≥ 1** would fill a whole row (and be drawn in several): they are taken
  for certain, with weight p_i, and the others are clustered into the remaining rows with their
  shares renormalised (`certain_clients`) — the standard treatment of "certainty units" in
  survey sampling; Fraboni et al. assume no such client.

The weights are then p_i for a certain client and P_rest / k' for every row's draw (P_rest the
others' total weight, k' the number of rows); they sum to 1 and the aggregate is unbiased.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from adcs.schedulers.base import BoolArray, FloatArray, IntArray

_TOL = 1e-12


@dataclass(frozen=True, eq=False)
class Row:
    """One row: clients (positions) and their masses, which sum to 1."""

    clients: IntArray
    masses: FloatArray


def certain_clients(p: FloatArray, k: int) -> tuple[BoolArray, int, float]:
    """Clients whose share of the k slots is at least one slot, found iteratively.

    Parameters
    ----------
    p : ndarray of shape (n,)
        Aggregation weights, Σ p = 1, p ≥ 0.
    k : int
        Slots, 0 ≤ k ≤ n.

    Returns
    -------
    certain : ndarray of bool, shape (n,)
        Clients with k' p_i / P_rest ≥ 1 at some step (taken with probability 1).
    rows : int
        k', the slots left for clustering.
    rest : float
        P_rest, the weight of the clients that are not certain.
    """
    certain = np.zeros(p.shape[0], dtype=bool)
    rows, rest = k, 1.0
    while rows > 0 and rest > _TOL:
        big = ~certain & (rows * p >= rest * (1.0 - 1e-9))
        if not big.any():
            break
        certain |= big
        rows -= int(big.sum())
        rest = max(rest - float(p[big].sum()), 0.0)
    return certain, rows, rest


def allocate(
    clients: Sequence[int] | IntArray,
    units: FloatArray,
    n_rows: int,
    kept: Sequence[IntArray] = (),
) -> list[Row]:
    """Pour clients, in order, into rows of unit mass (Fraboni et al., Alg. 1 and the end of Alg. 2).

    Rows ``0 … len(kept) − 1`` start with the clients of ``kept[r]`` (Alg. 2's largest clusters);
    then each client of ``clients`` puts its mass ``units[i]`` (= k' p_i / P_rest, < 1) into the
    first row that is not full, the overflow into the next one. So every row shares at most one
    client (the one poured across its start) with the rows before it.

    Parameters
    ----------
    clients : sequence of int, length n_pour
        Positions to pour, in pouring order.
    units : ndarray of shape (n,)
        Mass of every position in row units; the masses poured and kept add up to ``n_rows``.
    n_rows : int
        Number of rows, ≥ 1.
    kept : sequence of int arrays
        Positions already in rows 0, 1, … (each row's kept mass at most 1).

    Returns
    -------
    list of Row
        ``n_rows`` rows, masses normalised to sum to 1.
    """
    members: list[list[int]] = [[] for _ in range(n_rows)]
    masses: list[list[float]] = [[] for _ in range(n_rows)]
    fill = [0.0] * n_rows
    for r, group in enumerate(kept):
        members[r].extend(int(c) for c in group)
        masses[r].extend(float(units[c]) for c in group)
        fill[r] = float(units[group].sum())
    r = 0
    for c in clients:
        left = float(units[c])
        while left > _TOL:
            while r < n_rows - 1 and fill[r] >= 1.0 - _TOL:
                r += 1
            put = left if r == n_rows - 1 else min(1.0 - fill[r], left)
            members[r].append(int(c))
            masses[r].append(put)
            fill[r] += put
            left -= put
    rows = []
    for mem, mass in zip(members, masses, strict=True):
        m = np.asarray(mass, dtype=np.float64)
        rows.append(Row(np.asarray(mem, dtype=np.intp), m / m.sum()))
    return rows


def sample_rows(rows: Sequence[Row], rng: np.random.Generator) -> IntArray:
    """One client per row, all distinct, row r's draw distributed exactly as its masses r_r.

    Row by row: if the row holds a client i that appeared in earlier rows with total mass A (so
    P(i already drawn) = A) and holds mass b of it here, then i is drawn with probability b/(1 − A)
    when not yet drawn, never when drawn, and every other client j of the row with probability
    r(j)(1 − A − b)/((1 − A)(1 − b)) or r(j)/(1 − b) respectively — which averages to r(j) and b
    (A + b ≤ 1 because i's total share is below one row).

    Returns
    -------
    ndarray of shape (len(rows),)
        The drawn positions, in row order.
    """
    seen: dict[int, float] = {}
    taken: set[int] = set()
    picks = np.empty(len(rows), dtype=np.intp)
    for r, row in enumerate(rows):
        prob = row.masses.copy()
        shared = [j for j, c in enumerate(row.clients.tolist()) if c in seen]
        if len(shared) > 1:
            raise AssertionError("a row shares more than one client with the rows before it")
        if shared:
            j = shared[0]
            client = int(row.clients[j])
            before, here = seen[client], float(prob[j])
            if client in taken or 1.0 - before <= _TOL:
                prob[j] = 0.0
            else:
                scale = (1.0 - before - here) / ((1.0 - before) * (1.0 - here)) if here < 1 else 0.0
                prob *= max(scale, 0.0)
                prob[j] = here / (1.0 - before)
        cumulative = np.maximum(prob, 0.0).cumsum()
        pos = int(cumulative.searchsorted(rng.random() * cumulative[-1], side="right"))
        picks[r] = row.clients[min(pos, row.clients.size - 1)]
        taken.add(int(picks[r]))
        for c, mass in zip(row.clients.tolist(), row.masses.tolist(), strict=True):
            seen[c] = seen.get(c, 0.0) + mass
    return picks


@dataclass(frozen=True, eq=False)
class Plan:
    """Who is taken for certain and the rows the others are drawn from (positions into a pool).

    Attributes
    ----------
    certain : ndarray of shape (n_certain,), int
    rows : list of Row
    row_weight : float
        P_rest / k', the aggregation weight of every row's draw.
    """

    certain: IntArray
    rows: list[Row]
    row_weight: float


def draw(plan: Plan, p: FloatArray, rng: np.random.Generator) -> tuple[IntArray, FloatArray]:
    """The plan's selection (positions) and its unbiased aggregation weights (module docstring)."""
    picks = sample_rows(plan.rows, rng)
    positions = np.concatenate([plan.certain, picks]).astype(np.intp)
    weights = np.concatenate([p[plan.certain], np.full(picks.size, plan.row_weight)])
    return positions, weights


def plan(
    p: FloatArray,
    k: int,
    build_rows: Callable[[IntArray, FloatArray, int], list[Row]],
) -> Plan:
    """Take the certain clients, and build ``k'`` rows over the others with ``build_rows``.

    ``build_rows(rest, units, k')`` gets the positions that are not certain, the row-unit masses
    ``units`` of shape (n,) (k' p_i / P_rest at those positions, so ``units[rest]`` adds up to
    k'), and k'. Clients without weight (p_i = 0, e.g. no data) are never drawn while weight is
    left; when only they are left, they fill the remaining slots with weight 0.
    """
    certain, n_rows, rest = certain_clients(p, k)
    taken = np.flatnonzero(certain).astype(np.intp)
    if n_rows == 0:
        return Plan(taken, [], 0.0)
    others = np.flatnonzero(~certain).astype(np.intp)
    if rest <= _TOL:
        fill = [Row(np.array([c], dtype=np.intp), np.ones(1)) for c in others[:n_rows]]
        return Plan(taken, fill, 0.0)
    units = np.zeros(p.shape[0])
    units[others] = n_rows * p[others] / rest
    positive = others[units[others] > 0]
    return Plan(taken, build_rows(positive, units, n_rows), rest / n_rows)
