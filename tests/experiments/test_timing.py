"""Time to accuracy on the simulated clock: hand-computed times, targets, ratios, the section."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adcs.experiments.analysis.report import RunRecord
from adcs.experiments.analysis.timing import (
    TARGET_FRACTION,
    default_targets,
    time_section,
    time_summaries,
    time_to_reach,
)

ROUNDS = np.arange(0, 101, 10)  # 11 evaluations; the final window is the last two


def timed(variant: str, seed: int, seconds_per_round: float, avg: np.ndarray,
          worst: np.ndarray | None = None) -> RunRecord:  # fmt: skip
    """A run whose rounds all take ``seconds_per_round`` simulated seconds."""
    worst = avg - 0.2 if worst is None else worst
    return RunRecord(
        run_id=f"{variant}-seed={seed}", variant=variant, method=variant.split("-")[0],
        seed=seed, params={}, eval_rounds=ROUNDS,
        worst_acc=worst, avg_acc=avg, test_loss=np.zeros(ROUNDS.size),
        group_share=np.full(2, 0.5), tv_to_uniform=0.0, client_updates=0, loss_evals=0,
        wall_s=0.0, eval_clock=ROUNDS * seconds_per_round,
        total_time=100 * seconds_per_round, client_time=300 * seconds_per_round,
    )  # fmt: skip


RAMP = np.linspace(0.1, 0.6, ROUNDS.size)  # 0.1, 0.15, …, 0.6


def test_time_to_reach_is_the_first_evaluation_at_the_target() -> None:
    clock = np.array([0.0, 5.0, 9.0, 20.0])
    assert time_to_reach(clock, np.array([0.1, 0.4, 0.3, 0.5]), 0.4) == 5.0
    assert time_to_reach(clock, np.array([0.1, 0.2, 0.3, 0.5]), 0.45) == 20.0
    assert math.isnan(time_to_reach(clock, np.array([0.1, 0.2, 0.3, 0.5]), 0.6))


def test_targets_come_from_the_reference_curve() -> None:
    records = [timed("uniform", s, 2.0, RAMP) for s in (0, 1)] + [
        timed("adcs", s, 1.0, RAMP + 0.1) for s in (0, 1)
    ]
    worst, avg = default_targets(records)
    assert avg == pytest.approx(TARGET_FRACTION * (0.55 + 0.6) / 2)  # final: the last 10%+
    assert worst == pytest.approx(TARGET_FRACTION * (0.35 + 0.4) / 2)


def test_time_summaries_by_hand() -> None:
    slow = [timed("uniform", 0, 2.0, RAMP), timed("uniform", 1, 4.0, RAMP)]
    fast = [timed("adcs", 0, 1.0, RAMP), timed("adcs", 1, 1.0, RAMP)]
    starved = [timed("ocs", 0, 1.0, RAMP, worst=np.zeros(ROUNDS.size)),
               timed("ocs", 1, 1.0, RAMP)]  # fmt: skip
    uni, adcs, ocs = time_summaries([*slow, *fast, *starved], targets=(0.3, 0.5))
    # average ≥ 0.5 first at round 80: 160 s and 320 s (uniform), 80 s (adcs)
    assert uni.avg_time.mean == pytest.approx(240.0) and uni.avg_time.complete
    assert adcs.avg_time.mean == pytest.approx(80.0) and adcs.avg_time.half == pytest.approx(0.0)
    # paired by seed: 80/160 and 80/320
    assert adcs.avg_ratio.mean == pytest.approx((0.5 + 0.25) / 2)
    assert adcs.total_ratio.mean == pytest.approx((0.5 + 0.25) / 2)
    assert adcs.round_time == pytest.approx(1.0) and uni.round_time == pytest.approx(3.0)
    assert uni.client_time.mean == pytest.approx(900.0)
    # one seed of OCS never reaches worst ≥ 0.3: no mean, and it says how many did
    assert not ocs.worst_time.complete and (ocs.worst_time.n, ocs.worst_time.of) == (1, 2)


def test_the_section_states_targets_and_unreached_seeds() -> None:
    records = [timed("uniform", s, 2.0, RAMP) for s in (0, 1)] + [
        timed("ocs", 0, 1.0, RAMP, worst=np.zeros(ROUNDS.size)),
        timed("ocs", 1, 1.0, RAMP),
    ]
    text = "\n".join(time_section(records, figure="time.png", targets=(0.3, 0.5)))
    assert "worst accuracy 30.00%, average accuracy 50.00%" in text
    assert "![accuracy against simulated time](time.png)" in text
    assert "| OCS | 2 | reached by 1 of 2 seeds | — |" in text
    assert "| Uniform | 2 | 160.0 ± 0.0 | 1.00 ± 0.00× | 160.0 ± 0.0 |" in text  # round 80


def test_untimed_runs_have_no_time_summary() -> None:
    record = timed("uniform", 0, 1.0, RAMP)
    untimed = RunRecord(**{**record.__dict__, "eval_clock": None})
    with pytest.raises(ValueError, match="simulated clock"):
        time_summaries([untimed])
