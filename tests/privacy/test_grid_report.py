"""The private-selection grid's report (scripts/privacy_grid_report.py) on synthetic folders."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from scripts import privacy_grid_report as report

SEEDS = (0, 1, 2)
NOISE = (-0.01, 0.0, 0.01)  # the same per seed for every method: paired differences are exact


def write(folder: Path, worst: dict[str, float]) -> None:
    """A runs.csv with each method's worst-client accuracy (plus the seed's noise)."""
    folder.mkdir(parents=True)
    with (folder / "runs.csv").open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["method", "seed", "final_worst_acc", "final_avg_acc", "epsilon"])
        for method, value in worst.items():
            for seed, noise in zip(SEEDS, NOISE, strict=True):
                out.writerow([method, seed, value + noise, 0.7, ""])


def grid(tmp_path: Path, gains: dict[float, float], workloads=("paper",)) -> Path:
    """PowerOfChoice's gain over Uniform (0.2) at each ε given (∞ included)."""
    for name in workloads:
        for eps, gain in gains.items():
            sub = "inf" if math.isinf(eps) else f"eps{eps:g}"
            worst = {"powerofchoice": 0.2 + gain}
            if math.isinf(eps):
                worst["uniform"] = 0.2
            write(tmp_path / name / sub, worst)
    return tmp_path


def test_the_threshold_is_the_largest_eps_at_which_it_does_not_beat_uniform(tmp_path):
    gains = {math.inf: 0.2, 16.0: 0.15, 8.0: 0.1, 4.0: 0.0, 2.0: 0.0}
    points = report.load(grid(tmp_path, gains))["paper"]
    text = report.thresholds(points)["powerofchoice"]
    assert text == "no longer beats Uniform at ε = 4; beats it at ε = 8, 16, ∞"
    assert report.thresholds(points)["ocs"] == "not run"
    assert report.stop_epsilon(points, "powerofchoice") == "4"
    assert report.stop_epsilon(points, "ocs") == "not run"


def test_kept_is_the_gain_at_eps_over_the_gain_without_privacy(tmp_path):
    points = report.load(grid(tmp_path, {math.inf: 0.2, 4.0: 0.1}))["paper"]
    assert report.kept(points, 4.0)["powerofchoice"] == pytest.approx(0.5, rel=1e-12)
    assert math.isnan(report.kept(points, 4.0)["adcs"])  # not run


def test_nothing_is_kept_where_there_was_no_significant_gain_without_privacy(tmp_path):
    folder = grid(tmp_path, {math.inf: 0.2, 4.0: 0.2})
    with (folder / "paper" / "inf" / "runs.csv").open("a", newline="") as fh:
        rows = csv.writer(fh)  # ADCS: +0.01, +0.0, −0.005 over Uniform: a t-test cannot tell
        for seed, value in zip(SEEDS, (0.2, 0.2, 0.205), strict=True):
            rows.writerow(["adcs", seed, value, 0.7, ""])
    with (folder / "paper" / "eps4" / "runs.csv").open("a", newline="") as fh:
        csv.writer(fh).writerows(["adcs", seed, 0.3, 0.7, ""] for seed in SEEDS)
    points = report.load(folder)["paper"]
    assert "adcs" in points[math.inf] and "adcs" in points[4.0]
    assert math.isnan(report.kept(points, 4.0)["adcs"])
    assert report.kept(points, 4.0)["powerofchoice"] == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize(("gain_at_4", "verdict"), [(0.17, "met"), (0.15, "not met")])
def test_the_goal_needs_80_percent_on_two_workloads(tmp_path, gain_at_4, verdict):
    folder = grid(tmp_path, {math.inf: 0.2, 4.0: gain_at_4}, ("paper", "dirichlet"))
    text = report.report(folder)
    assert f"**The goal is {verdict}**" in text
    assert "bernoulli at ε = ∞" in text.split("**Not run:**")[1].split("\n")[0]
