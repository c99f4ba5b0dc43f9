"""The successor comparison's verdict under the leaderboard's Holm rule."""

from __future__ import annotations

import math

from adcs.leaderboard.ranking import rank_workload
from scripts.successor_compare import placing_verdict

SEEDS = range(5)


def entries(**offsets: tuple[float, float]) -> dict[str, dict[int, float]]:
    """Per entry, values base + spread · (seed − 2) over five seeds."""
    return {
        name: {s: base + spread * (s - 2) for s in SEEDS}
        for name, (base, spread) in offsets.items()
    }


def test_a_clear_winner_is_significantly_best_with_the_closest_p_value():
    # b and c trail a by 5 and 9 points with a paired spread of ±1: both behind after Holm
    placing = rank_workload(entries(a=(60.0, 1.0), b=(55.0, 0.5), c=(51.0, 1.2)))
    verdict, p = placing_verdict(placing, "a")
    assert verdict == "significantly best"
    assert p == max(placing["b"].p_value, placing["c"].p_value) and p < 0.05


def test_a_winner_that_others_cannot_be_told_from_is_best_tied_and_the_others_tied_or_behind():
    values = entries(a=(60.0, 1.0), c=(40.0, 1.2))
    values["b"] = {s: 60.0 - 0.1 + (1.0 if s % 2 else -1.0) for s in SEEDS}  # noisy, close to a
    placing = rank_workload(values)
    assert placing_verdict(placing, "a")[0] == "best, tied with 1"
    verdict, p = placing_verdict(placing, "b")
    assert verdict == "tied" and p == placing["b"].p_value and p >= 0.05
    verdict, p = placing_verdict(placing, "c")
    assert verdict == "behind" and p < 0.05 and not math.isnan(p)
