"""scripts/ablation_report.py on synthetic results folders whose answers are known by construction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from adcs.experiments.analysis import stats
from scripts.ablation_report import (
    SWITCHES,
    AblationError,
    compare,
    main,
    read_runs,
    report,
)

FULL = {"theta": 0.7, "quality_scale": "zscore", "refresh_every": None, "select_every": 1,
        "standardise_quality": True, "observe_directions": True, "group_cosine": None}  # fmt: skip
OFF = {
    "select_every": {"select_every": 20},
    "standardise_quality": {"standardise_quality": False},
    "observe_directions": {"observe_directions": False, "refresh_every": 20},
    "group_cosine": {"group_cosine": 0.5},
}
SEEDS = range(5)


def _write(folder: Path, worst: dict[str | None, list[float]], curves: bool = True) -> None:
    """runs.csv (and metrics.csv: a worst-accuracy curve rising linearly to the final value at
    rounds 0, 50, 100) for the full ADCS-2 (key None) and each switch's variant."""
    folder.mkdir(parents=True)
    runs = ["run_id,method,seed,variant,params,final_worst_acc,final_avg_acc"]
    metrics = ["run_id,method,seed,round,worst_acc,avg_acc"]
    for key, values in worst.items():
        params = {**FULL, **(OFF[key] if key else {})}
        name = "adcs2" if key is None else f"adcs2-{key}"
        for seed, v in zip(SEEDS, values, strict=True):
            run_id = f"{name}-seed={seed}"
            quoted = json.dumps(params).replace('"', '""')
            runs.append(f'{run_id},adcs2,{seed},{name},"{quoted}",{v!r},{v + 0.3!r}')
            for t in (0, 50, 100):
                metrics.append(f"{run_id},adcs2,{seed},{t},{v * t / 100!r},0.5")
    (folder / "runs.csv").write_text("\n".join(runs) + "\n", encoding="utf-8")
    if curves:
        (folder / "metrics.csv").write_text("\n".join(metrics) + "\n", encoding="utf-8")


FULL_WORST = [0.40, 0.42, 0.41, 0.43, 0.44]
NOISE = [0.004, -0.003, 0.001, -0.002, 0.0]


def _workload(tmp_path: Path) -> Path:
    # change 1 off: 10 points lower on every seed (±noise); 2 off: the same as full; 3 off: 5
    # points higher; 4 off: 1 point lower with noise as large as the effect
    _write(tmp_path / "w", {
        None: FULL_WORST,
        "select_every": [v - 0.10 + e for v, e in zip(FULL_WORST, NOISE, strict=True)],
        "standardise_quality": list(FULL_WORST),
        "observe_directions": [v + 0.05 + e for v, e in zip(FULL_WORST, NOISE, strict=True)],
        "group_cosine": [v - 0.01 + 5 * e for v, e in zip(FULL_WORST, NOISE, strict=True)],
    })  # fmt: skip
    return tmp_path / "w"


def test_each_change_is_paired_with_the_full_adcs2_and_holm_adjusted_over_four(tmp_path):
    values = read_runs(_workload(tmp_path))
    rows = {c.change: c for c in compare(values, "worst")}
    one, two, three, four = (rows[label] for _, label in SWITCHES.values())
    assert one.verdict == "carries gain" and three.verdict == "off is better"
    assert two.verdict == "no detectable effect" and two.diff == 0.0 and two.p == 1.0
    assert four.verdict == "no detectable effect"
    np.testing.assert_allclose(one.diff, -0.10, atol=1e-12)  # the noise sums to zero
    np.testing.assert_allclose(three.diff, 0.05, atol=1e-12)
    # the adjustment is Holm's over exactly these four raw p-values, recomputed independently
    full = dict(enumerate(FULL_WORST))
    raw = [stats.paired_p_value(values[label]["worst"], full) for _, label in SWITCHES.values()]
    assert [one.p, two.p, three.p, four.p] == raw
    assert [one.holm_p, two.holm_p, three.holm_p, four.holm_p] == stats.holm(raw)
    assert four.p < four.holm_p  # adjusted upwards


def test_the_area_comes_from_metrics_csv_and_is_absent_without_it(tmp_path):
    values = read_runs(_workload(tmp_path))
    # a linear rise from 0 to v over rounds 0..100 has mean v / 2
    np.testing.assert_allclose(values[None]["worst_auc"][0], FULL_WORST[0] / 2, rtol=1e-12)
    _write(tmp_path / "bare", {None: FULL_WORST, "select_every": FULL_WORST}, curves=False)
    bare = compare(read_runs(tmp_path / "bare"), "worst_auc")
    assert [c.verdict for c in bare] == ["not measured"]


def test_the_report_names_the_change_that_carries_the_gain(tmp_path):
    _workload(tmp_path)
    text = report(tmp_path, ["w"])
    summary = next(line for line in text.splitlines() if line.startswith("| w |"))
    assert "1. fresh selection every round (-10.00)" in summary
    assert "3. directions refreshed on observe (+5.00)" in summary
    assert "2. standardised" not in summary and "4. several" not in summary


@pytest.mark.parametrize(
    ("worst", "params_edit", "message"),
    [
        ({"select_every": FULL_WORST}, {}, "no run of the full ADCS-2"),
        ({None: FULL_WORST, "select_every": FULL_WORST}, {"theta": 0.5}, "differs from the full"),
    ],
)
def test_results_that_are_not_an_ablation_are_refused_in_one_line(
    tmp_path, capsys, worst, params_edit, message
):
    _write(tmp_path / "w", worst)
    if params_edit:  # the variant also changes θ: not one switch apart
        path = tmp_path / "w" / "runs.csv"
        text = path.read_text(encoding="utf-8").splitlines()
        text[1:] = [
            line.replace('""theta"": 0.7', '""theta"": 0.5')
            if line.startswith("adcs2-select_every")
            else line
            for line in text[1:]
        ]
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
    assert main([str(tmp_path), "--workloads", "w"]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    with pytest.raises(AblationError):
        report(tmp_path, ["w"])


def test_a_variant_on_other_seeds_is_refused(tmp_path):
    _write(tmp_path / "w", {None: FULL_WORST, "group_cosine": FULL_WORST})
    path = tmp_path / "w" / "runs.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # one seed of it missing
    with pytest.raises(AblationError, match="same seeds"):
        compare(read_runs(tmp_path / "w"), "worst")
