"""Reports outside their domain are refused at the protocol (docs/concepts/threat-model.md).

A reported loss is a mean cross-entropy (or any loss the runtime computes): finite and ≥ 0. A
reported update is a finite vector with a finite, positive norm. A client whose report breaks
either rule — a negative or non-finite loss, a non-finite entry, a zero update — has its *whole*
report refused for the round: its loss and its update row become NaN, which every scheduler
treats as no report (`ClientStats.usable`: such a client is chosen only to keep a selection
full, after every usable client). `Defended` refuses before any screen, so a refused value never
reaches a median, a cosine or a standardisation.
"""

from __future__ import annotations

import numpy as np

from adcs.dpp import row_norms
from adcs.schedulers.base import BoolArray, ClientStats, finite_rows

__all__ = ["refuse"]


def refuse(stats: ClientStats) -> tuple[ClientStats, BoolArray]:
    """``stats`` with every report outside its domain refused, and the refused rows.

    Parameters
    ----------
    stats : ClientStats
        One round's reports: ``losses`` of shape (n_probed,) or None, ``updates`` of shape
        (n_probed, dim) or None.

    Returns
    -------
    stats : ClientStats
        ``stats`` itself when nothing is refused; otherwise a copy whose refused rows have a NaN
        loss and a NaN update row.
    refused : ndarray of bool, shape (n_probed,)
        Rows that reported a value outside its domain. A row that reported nothing (NaN loss and
        no update) is not counted as refused: it already is no report.
    """
    n = stats.n_probed
    refused = np.zeros(n, dtype=bool)
    if stats.losses is not None:
        losses = np.asarray(stats.losses, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            refused |= ~np.isnan(losses) & ~(np.isfinite(losses) & (losses >= 0))
    if stats.updates is not None and n:
        rows = np.asarray(stats.updates)
        finite = finite_rows(rows)
        silent = np.isnan(rows).all(axis=1)  # the protocol's own "no update" row
        bad = ~finite & ~silent
        bad[finite] = ~(row_norms(rows[finite]) > 0)
        refused |= bad
    if not refused.any():
        return stats, refused
    losses_out = None
    if stats.losses is not None:
        losses_out = np.where(refused, np.nan, np.asarray(stats.losses, dtype=np.float64))
    updates_out = None
    if stats.updates is not None:
        updates_out = np.array(stats.updates, copy=True)
        updates_out[refused] = np.nan
    return ClientStats(stats.available, stats.clients, losses_out, updates_out), refused
