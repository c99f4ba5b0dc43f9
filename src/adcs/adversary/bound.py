"""Defences that bound a client's influence by construction (docs/concepts/threat-model.md).

Two screens that do not rely on a client's report being honest:

* **the sliding-window cap** (``Defence.cap`` c, ``Defence.window`` W). The server counts each
  client's selections over the last W − 1 rounds; a client that already holds its budget
  b = max(1, ⌊c · W · m / N⌋) of them is not available to the scheduler this round. So no client
  is selected more than b times in any W consecutive rounds — at most c × its fair share m / N
  over every window, whatever it reports or sends, and a coalition of k clients at most k · b
  (c × the coalition's fair share). The budget is met exactly whenever at least min(m, available)
  available clients are under it; when fewer are (a scheduler that concentrated on few clients,
  or c < N / (N − m)), the round is filled with the over-budget clients that hold the fewest
  selections, so the contract (exactly min(m, available) clients) holds and the excess is at most
  that fill. With every client available and b ≥ (W − 1) · m / (N − m) a fill is never needed
  (`cap_budget` says why); under partial availability one may be (a round where the only
  available clients are over budget). With ``Defence.any_interval`` the cap also holds over
  every *longer* interval: at most r · L selections in any L ≥ W consecutive rounds, r = c · m / N
  (`Window.interval_ok`), so a client that emptied its window (absent, or reporting nothing)
  cannot then take b in each of two back-to-back windows — without it, b + (L − W) in L rounds
  are possible for W < L ≤ W + b (1.57 × the fair share over 180 rounds at b = 90, W = 100).
* **the span screen** (``Defence.novelty`` ν, the second side of the plausibility test). A
  direction's part outside the span of the other clients' directions, ‖(I − P₋ᵢ) dᵢ‖ ∈ [0, 1]
  (`outside_span`), is what a determinant or a facility-location gain rewards, and what a
  crafted update adds to its sender's true one. A direction whose part outside exceeds ν × the
  round's median is left out of the round's statistics, like an implausible one. A client can
  still send a direction just inside: its novel part is then at most ν × the honest median.

Both compose with every scheduler (they act on what `Defended` hands it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adcs.schedulers.base import BoolArray, FloatArray, IntArray
from adcs.streams import Domain, counter_uniform

__all__ = ["Window", "cap_budget", "capped_availability", "outside_span"]

_FILL = 4
"""Salt of the cap's tie-break draws (`adcs.streams.Domain` ATTACK)."""


def cap_budget(cap: float, window: int, m: int, n_clients: int) -> int:
    """b = max(1, ⌊c · W · m / N⌋): the most selections a client may hold in any W rounds.

    The cap never needs a fill when every round's available clients under the budget number at
    least m: in the last W − 1 rounds at most (W − 1) · m / b clients can hold b selections, so
    with every client available b ≥ (W − 1) · m / (N − m) suffices (c a little above
    N / (N − m), since b is rounded down).
    """
    return max(1, int(np.floor(cap * window * m / n_clients + 1e-9)))


@dataclass(frozen=True, eq=False)
class Window:
    """Each client's selections over the last W − 1 rounds, and over every longer interval.

    Attributes
    ----------
    counts : ndarray of shape (n_clients,), int
        Selections held in the window.
    recent : tuple of ndarray of int
        The selections of the last rounds, oldest first (at most W − 1).
    total : ndarray of shape (n_clients,), int, or None
        S_t, each client's selections in the rounds pushed so far (None: intervals not tracked).
    low : ndarray of shape (n_clients,) or None
        min over s ≤ t − W + 1 of S_s − r · s (+inf before the first full window): the slack of
        the any-interval rule (`interval_ok`), r the cap's rate c · m / N.
    rounds : int
        t, the rounds pushed so far.
    """

    counts: IntArray
    recent: tuple[IntArray, ...] = ()
    total: IntArray | None = None
    low: FloatArray | None = None
    rounds: int = 0

    @classmethod
    def empty(cls, n_clients: int, intervals: bool = False) -> Window:
        """No selection yet; ``intervals``: also track every interval of ≥ W rounds."""
        zeros = np.zeros(n_clients, dtype=np.intp)
        if not intervals:
            return cls(zeros)
        return cls(zeros, (), zeros.copy(), np.full(n_clients, np.inf))

    def pushed(self, selected: IntArray, window: int, rate: float = 0.0) -> Window:
        """The window after a round that selected ``selected`` (shape (k,)), W = ``window``.

        ``rate`` r = c · m / N: the any-interval rule's rate (used only where intervals are
        tracked).
        """
        counts = self.counts.copy()
        np.add.at(counts, np.asarray(selected, dtype=np.intp), 1)
        recent = (*self.recent, np.asarray(selected, dtype=np.intp).copy())
        while len(recent) > window - 1:
            np.subtract.at(counts, recent[0], 1)
            recent = recent[1:]
        rounds = self.rounds + 1
        if self.total is None or self.low is None:
            return Window(counts, recent, None, None, rounds)
        total = self.total.copy()
        np.add.at(total, np.asarray(selected, dtype=np.intp), 1)
        low, start = self.low, rounds - window + 1  # s = t − W + 1 of the next round t
        if start >= 0:  # S_s = S_t − (selections of rounds s .. t − 1, the W − 1 held)
            low = np.minimum(low, (total - counts) - rate * start)
        return Window(counts, recent, total, low, rounds)

    def interval_ok(self, rate: float) -> BoolArray:
        """Clients that may be selected this round without exceeding r · L selections in any
        interval of L ≥ W rounds ending now, shape (n_clients,) (all True where not tracked).

        The interval [s, t] holds S_t − S_s + 1 selections if the client is selected at round
        t, at most r (t + 1 − s) ⟺ S_t + 1 − r (t + 1) ≤ S_s − r s, for every s ≤ t − W + 1:
        the bound by the running minimum ``low`` (a relative 1e-9 of slack for the rounding of
        r · s; counts are integers, so no real excess passes).
        """
        if self.total is None or self.low is None:
            return np.ones(self.counts.shape, dtype=bool)
        need = self.total + 1 - rate * (self.rounds + 1)
        return np.asarray(need <= self.low + 1e-9 * (1.0 + rate * self.rounds), dtype=bool)


def capped_availability(
    available: BoolArray,
    window: Window,
    budget: int,
    m: int,
    key: int,
    round_idx: int,
    rate: float = 0.0,
) -> BoolArray:
    """The available clients under the budget, filled up to min(m, available) when short.

    Parameters
    ----------
    available : ndarray of bool, shape (n_clients,)
    window : Window
    budget : int
        b of `cap_budget`.
    m : int
    key, round_idx : int
        The run's stream key and the round: ties among the fill's candidates are broken by a
        counter-based draw, not by index.
    rate : float
        r = c · m / N of the any-interval rule (`Window.interval_ok`; used only where the
        window tracks intervals).

    Returns
    -------
    ndarray of bool, shape (n_clients,)
        Available clients the scheduler may select this round.
    """
    under = available & (window.counts < budget) & window.interval_ok(rate)
    need = min(m, int(available.sum())) - int(under.sum())
    if need <= 0:
        return under
    over = np.flatnonzero(available & ~under)
    ties = counter_uniform(key, Domain.ATTACK, round_idx, over, salt=_FILL)
    order = np.lexsort((ties, window.counts[over]))
    out = under.copy()
    out[over[order[:need]]] = True
    return out


def outside_span(directions: FloatArray, usable: BoolArray) -> FloatArray:
    """‖(I − P₋ᵢ) dᵢ‖ of each usable unit row against the span of the other usable rows, (n,).

    Parameters
    ----------
    directions : ndarray of shape (n, dim)
        Unit rows (non-usable rows are ignored).
    usable : ndarray of bool, shape (n,)

    Returns
    -------
    ndarray of shape (n,), float64
        In [0, 1]; NaN for rows that are not usable, 1 for a lone usable row.

    Notes
    -----
    The squared distance of dᵢ from span{dⱼ : j ≠ i} is 1 / (G⁻¹)ᵢᵢ for the Gram matrix G of the
    rows; a small ridge (1e-9 · n) keeps G invertible when rows repeat (distance ≈ 0 then). O(n³)
    in the probed clients, O(n² · dim) to form G.
    """
    n = directions.shape[0]
    out = np.full(n, np.nan)
    idx = np.flatnonzero(usable)
    if idx.size == 1:
        out[idx] = 1.0
    if idx.size < 2:
        return out
    d = np.asarray(directions[idx])
    gram = (d @ d.T).astype(np.float64)
    ridge = 1e-9 * idx.size
    inverse = np.linalg.inv(gram + ridge * np.eye(idx.size))
    dist2 = 1.0 / np.diag(inverse) - ridge
    out[idx] = np.sqrt(np.clip(dist2, 0.0, 1.0))
    return out
