"""Corroborating peers chosen from history, not from what clients send now (threat model).

``Defence.corroborate`` sets a client's reported loss and norm to the median of its
neighbourhood. With peers chosen by the directions clients *report this round*, two colluders
that report (and send) the mean of a group's last directions become every member's two nearest
peers and report loss 0: the group's corroborated loss is median(own, 0, 0) = 0, and it is never
selected again (issue 33). With ``Defence.peer_history`` the peers are chosen from what the
server *received and aggregated*:

* **affinity** — whenever the server receives an update from client i, it adds cos(Δᵢ, Δⱼ) to
  the pair (i, j) for every client j whose last received update is at most W rounds old; the
  affinity of a pair is the mean over the period's additions (`Affinity`);
* **fixed over a period** — every W rounds (``Defence.window``), each client's p peers become
  the p clients of highest affinity over the period just ended with at least `MIN_PAIRS`
  additions (consistently close, not once), and stay fixed for the next W rounds; what a client
  reports this round changes no one's peers;
* **near-duplicates collapsed** — a candidate whose affinity with an already chosen peer q is
  closer to 1 than half its and q's distance to the client (1 − A_jq ≤ (1 − min(A_ij, A_iq)) / 2)
  stands for the same evidence as q and is skipped: a coalition sending one direction is one
  peer.

Why it holds: to become a client's peer, a colluder must have *sent* updates close to that
client's over a whole period and have had them received — selected and aggregated, which the cap
bounds and which moves the model toward the group it imitates — at least `MIN_PAIRS` times; a
colluder the scheduler does not select (a loss-0 reporter) has no affinity at all. Two colluders
sending one direction count as one peer, so with p = 2 a member's median keeps one honest value
of its own group or of the next-closest clients. What it does not stop: k ≥ p colluders that
each get selected regularly for a period, sending *distinct* directions close to a group's, can
still be its peers for the next period (at the price of a capped share of aggregated updates).
Rows without history peers (the first period; a client never received) keep the peers of their
reported directions.

Memory O(N²) per run (float64 sums and int counts): fine for cross-silo populations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adcs.schedulers.base import FloatArray, IntArray

__all__ = ["MIN_PAIRS", "Affinity", "history_peers"]

MIN_PAIRS = 3
"""Additions a pair needs in a period before its affinity counts (consistency, not one match)."""


@dataclass(frozen=True, eq=False)
class Affinity:
    """Pairwise affinities of the received updates over the current period, and the peers fixed
    from the last one.

    Attributes
    ----------
    sums : ndarray of shape (n_clients, n_clients)
        Σ cos(Δᵢ, Δⱼ) added at the receipts of client i (row) against client j (column).
    counts : ndarray of shape (n_clients, n_clients), int
        The number of those additions.
    peers : ndarray of shape (n_clients, p), int
        Each client's peers for this period (−1 where none).
    period : int
        The index ⌊t / W⌋ of the current period.
    """

    sums: FloatArray
    counts: IntArray
    peers: IntArray
    period: int = 0

    @classmethod
    def empty(cls, n_clients: int, peers: int) -> Affinity:
        return cls(
            np.zeros((n_clients, n_clients)),
            np.zeros((n_clients, n_clients), dtype=np.intp),
            np.full((n_clients, peers), -1, dtype=np.intp),
        )

    def received(
        self, clients: IntArray, units: FloatArray, rows: FloatArray, fresh: IntArray
    ) -> Affinity:
        """The affinity after receiving ``clients``' unit updates ``units`` (k, dim), against the
        ``fresh`` clients' last received unit updates ``rows`` (f, dim) (the new ones included).
        """
        if clients.size == 0 or fresh.size == 0:
            return self
        cos = (np.asarray(units, dtype=np.float64) @ np.asarray(rows, dtype=np.float64).T).clip(
            -1.0, 1.0
        )
        sums, counts = self.sums.copy(), self.counts.copy()
        mine = clients[:, None] != fresh[None, :]
        ii, jj = np.nonzero(mine)
        np.add.at(sums, (clients[ii], fresh[jj]), cos[ii, jj])
        np.add.at(counts, (clients[ii], fresh[jj]), 1)
        return Affinity(sums, counts, self.peers, self.period)

    def rolled(self, round_idx: int, window: int) -> Affinity:
        """At a new period (⌊round / W⌋ changed): peers fixed from the period just ended, and the
        sums reset; otherwise itself."""
        period = round_idx // window
        if period == self.period:
            return self
        peers = history_peers(self.sums, self.counts, self.peers.shape[1])
        n = self.sums.shape[0]
        return Affinity(np.zeros((n, n)), np.zeros((n, n), dtype=np.intp), peers, period)


def history_peers(sums: FloatArray, counts: IntArray, p: int) -> IntArray:
    """Each client's p peers from a period's affinities (module docstring), shape (n, p), −1 pad.

    Parameters
    ----------
    sums, counts : ndarray of shape (n, n)
        As `Affinity` holds them (asymmetric: row i's receipts).
    p : int
        Peers per client.
    """
    total = counts + counts.T
    with np.errstate(invalid="ignore", divide="ignore"):
        affinity = np.where(total >= MIN_PAIRS, (sums + sums.T) / np.maximum(total, 1), np.nan)
    np.fill_diagonal(affinity, np.nan)
    n = affinity.shape[0]
    out = np.full((n, p), -1, dtype=np.intp)
    for i in range(n):
        row = affinity[i]
        candidates = np.flatnonzero(np.isfinite(row))
        chosen: list[int] = []
        for j in candidates[np.argsort(-row[candidates], kind="stable")].tolist():
            if any(_duplicates(affinity, i, j, q) for q in chosen):
                continue
            chosen.append(j)
            if len(chosen) == p:
                break
        out[i, : len(chosen)] = chosen
    return out


def _duplicates(affinity: FloatArray, i: int, j: int, q: int) -> bool:
    """Whether j stands for the same evidence as q, seen from i (module docstring)."""
    between = affinity[j, q]
    if not np.isfinite(between):
        return False
    return bool(1.0 - between <= (1.0 - min(affinity[i, j], affinity[i, q])) / 2)
