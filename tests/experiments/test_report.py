"""The generic report: one meaning of "final", series by a method's own parameters, and a neutral
report that names no paper, no claims and no method-specific constants."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from adcs.experiments.analysis.report import (
    ReportContext,
    Series,
    curve_series,
    summarize,
    t_interval,
    tail_length,
    write_report,
)

from .records import ROUNDS, adcs, record


def test_t_interval_matches_hand_computation() -> None:
    mean, half = t_interval(np.array([[1.0], [2.0], [3.0]]))
    assert mean[0] == pytest.approx(2.0)
    assert half[0] == pytest.approx(4.302652729911275 / math.sqrt(3))  # t_{0.975, 2} · s/√n
    _, half1 = t_interval(np.array([[1.0]]))
    assert np.isnan(half1).all()


@pytest.mark.parametrize(("n", "k"), [(1, 1), (10, 1), (11, 2), (30, 3), (201, 21)])
def test_the_final_window_is_the_last_tenth_of_the_evaluations(n: int, k: int) -> None:
    assert tail_length(n) == k


def test_final_is_the_tail_mean_and_last_is_the_last_evaluation() -> None:
    run = record("uniform", 0.3, 0.7, wiggle=0.02)
    # the last two evaluations (rounds 900 and 1000) are 0.3 - 0.02 and 0.3 + 0.02
    assert run.final_rounds == (900, 1000)
    assert run.final("worst_acc") == pytest.approx(0.3)
    assert run.last("worst_acc") == pytest.approx(0.32)


def test_summary_averages_the_tail_then_the_seeds() -> None:
    runs = [record("uniform", 0.3, 0.7, seed=0), record("uniform", 0.5, 0.9, seed=1)]
    summ = summarize(runs, Series("Uniform", "uniform"))
    assert summ is not None
    assert summ.n_seeds == 2
    assert summ.worst == pytest.approx(0.4)
    assert summ.avg == pytest.approx(0.8)
    assert summ.last_worst == pytest.approx(0.4)
    assert summ.tail_rounds == (900, 1000)  # the last ceil(0.1 · 11) = 2 evaluations
    assert summarize(runs, Series("OCS", "ocs")) is None


def test_a_series_is_a_method_and_the_parameters_it_fixes() -> None:
    runs = [adcs(0.4, 0.8, theta=t, refresh_every=r) for t in (0.2, 0.8) for r in (1, 20)]
    assert summarize(runs, Series("x", "adcs", {"theta": 0.8, "refresh_every": 1})) is not None
    assert summarize(runs, Series("x", "adcs", {"theta": 0.5})) is None
    gamma = [record("adcs", 0.4, 0.8, params={"theta": 0.8, "gamma": g}) for g in (0.0, 0.5)]
    matched = summarize(gamma, Series("x", "adcs", {"gamma": 0.5}))
    assert matched is not None and matched.series.params == {"gamma": 0.5}


def test_curve_series_follow_every_swept_parameter() -> None:
    runs = [record("powerofchoice", 0.4, 0.8, params={"candidates": d}, seed=s)
            for d in (20, 25) for s in (0, 1)]  # fmt: skip
    runs += [record("uniform", 0.3, 0.7, seed=s) for s in (0, 1)]
    series = curve_series(runs)
    assert [s.label for s in series] == [
        "PowerOfChoice candidates=20",
        "PowerOfChoice candidates=25",
        "Uniform",
    ]
    for s in series:
        summ = summarize(runs, s)
        assert summ is not None and summ.n_seeds == 2


def test_shares_of_different_partitions_are_not_averaged() -> None:
    share = np.full(3, 1 / 3)
    same = [record("uniform", 0.3, 0.7, seed=s, share=share, group_clients=np.array([2, 2, 2]))
            for s in (0, 1)]  # fmt: skip
    differ = [record("uniform", 0.3, 0.7, seed=s, share=share, group_clients=np.array([1, 2, 3 + s]))
              for s in (0, 1)]  # fmt: skip
    a, b = (summarize(runs, Series("U", "uniform")) for runs in (same, differ))
    assert a is not None and np.allclose(a.group_share, 1 / 3)
    assert b is not None and np.isnan(b.group_share).all()
    assert b.tv == pytest.approx(0.0)  # each run's own TV still averages


def test_the_neutral_report_names_no_paper(tmp_path: Path) -> None:
    runs = [record("powerofchoice", 0.4, 0.8, params={"candidates": d}) for d in (20, 25)]
    runs.append(record("uniform", 0.3, 0.7))
    context = ReportContext(
        name="mine", rounds=int(ROUNDS[-1]), eval_every=100, m=5, n_clients=20, seeds=(0,),
        data_source="test data", is_subset=False, figures=("curves.png",),
    )  # fmt: skip
    rows = write_report(tmp_path / "report.md", runs, context)
    text = (tmp_path / "report.md").read_text()
    assert len(rows) == 3
    assert "candidates=20" in text and "candidates=25" in text
    assert "paper" not in text.lower() and "claim" not in text.lower() and "θ" not in text
    assert "final = mean over each run's last 10% of evaluations" in text.lower()
    assert "![curves.png](curves.png)" in text


def test_variant_labels_name_only_what_tells_a_methods_variants_apart() -> None:
    from adcs.experiments.analysis.report import RunRecord, variant_labels

    def record(variant: str, method: str, **params: object) -> RunRecord:
        empty = np.zeros(1)
        return RunRecord(
            run_id=f"{variant}/seed0", variant=variant, method=method, seed=0, params=params,
            eval_rounds=np.zeros(1, dtype=np.int64), worst_acc=empty, avg_acc=empty,
            test_loss=empty, group_share=np.ones(1), tv_to_uniform=0.0, client_updates=0,
            loss_evals=0,
        )  # fmt: skip

    records = [
        record("uniform", "uniform"),
        record("adcs-gamma=0", "adcs", theta=0.8, refresh_every=20, gamma=0.0),
        record("adcs-gamma=0.25", "adcs", theta=0.8, refresh_every=20, gamma=0.25),
    ]
    assert variant_labels(records) == {
        "uniform": "Uniform",
        "adcs-gamma=0": "ADCS gamma=0",
        "adcs-gamma=0.25": "ADCS gamma=0.25",
    }
    # several differing hyperparameters: named in one order whether the runs' params come in the
    # order the configuration gave them (as the runs end) or sorted (as runs.csv stores them)
    live = [
        record("adcs-a", "adcs", theta=0.6, refresh_every=20, fresh_quality=False),
        record("adcs-b", "adcs", theta=0.8, refresh_every=20, fresh_quality=True),
    ]
    stored = [record(r.variant, r.method, **dict(sorted(r.params.items()))) for r in live]
    assert variant_labels(live) == variant_labels(stored)
    assert variant_labels(live)["adcs-a"] == "ADCS fresh_quality=False, theta=0.6"
