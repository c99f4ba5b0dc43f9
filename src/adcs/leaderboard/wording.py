"""How the leaderboard's report writes numbers, differences and lists (one place for its words)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from adcs.experiments.analysis.report import pct
from adcs.experiments.analysis.timing import Estimate

__all__ = ["finite_key", "join_words", "plus_minus", "points", "rank_text", "rounds_text"]


def plus_minus(mean: float, half: float) -> str:
    """An accuracy in % with its interval's half-width."""
    return pct(mean, unit="") + ("" if not math.isfinite(half) else f" ± {100 * half:.2f}")


def points(mean: float, half: float) -> str:
    """A difference in accuracy points, signed, with its interval."""
    sign = "+" if mean >= 0 else "−"
    text = f"{sign}{abs(100 * mean):.2f}"
    return text + ("" if not math.isfinite(half) else f" ± {100 * half:.2f}")


def rounds_text(e: Estimate) -> str:
    """Rounds to a target: a mean ± interval, ``never``, or how many seeds got there."""
    if e.complete:
        return f"{e.mean:,.0f}" + ("" if not math.isfinite(e.half) else f" ± {e.half:,.0f}")
    return "never" if e.n == 0 else f"{e.n} of {e.of} seeds"


def join_words(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def rank_text(r: float) -> str:
    """A rank (a shared rank is a mean of places, e.g. 3.5)."""
    return f"{r:g}"


def finite_key(x: float) -> float:
    """``x`` for sorting, −∞ when it is not finite."""
    return x if math.isfinite(x) else -math.inf
