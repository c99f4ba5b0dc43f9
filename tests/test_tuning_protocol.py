"""scripts/tuning_protocol.py: equal budgets by construction, and the choice on synthetic dev runs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from adcs.experiments.analysis import stats
from scripts.tuning_protocol import (
    DEV_SEEDS,
    PAIRS,
    POINTS,
    SWEPT,
    TEST_SEEDS,
    ProtocolError,
    choose_all,
    compare_tuned,
    d_grid,
    dev_config,
    main,
    read_eval,
    report,
    sweeps,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@pytest.mark.parametrize(("m", "n"), [(18, 30), (6, 30), (10, 30), (20, 100)])
def test_every_method_gets_the_same_number_of_points(m, n):
    for method, sweep in sweeps(m, n).items():
        assert math.prod(len(v) for v in sweep.values()) == POINTS, method
        assert tuple(sweep) == SWEPT[method]
    d = d_grid(m, n)
    assert d[0] == m and d[-1] == n and len(set(d)) == POINTS


def test_the_development_config_is_the_workload_on_the_dev_seeds_with_the_sweeps():
    doc = tomllib.loads(dev_config("m6"))
    source = Path(__file__).parents[1] / "experiments" / "leaderboard" / "m6.toml"
    board = tomllib.loads(source.read_text(encoding="utf-8"))
    assert doc["seeds"] == list(DEV_SEEDS) and not set(DEV_SEEDS) & set(TEST_SEEDS)
    assert doc["sim"] == board["sim"] and doc["data"] == board["data"] and doc["m"] == board["m"]
    assert {t["name"]: t["sweep"] for t in doc["methods"]} == sweeps(6, 30)


def _dev_folder(folder: Path, best: dict[str, int]) -> None:
    """runs.csv of every point of every method on the dev seeds; point ``best[method]`` (an index
    in sweep order) is 5 points ahead of the rest on average, though not on every seed."""
    folder.mkdir(parents=True)
    lines = ["run_id,method,seed,variant,params,final_worst_acc"]
    grid = sweeps(6, 30)
    for method, sweep in grid.items():
        keys = list(sweep)
        combos = [dict(zip(keys, (a, b), strict=False)) for a in sweep[keys[0]]
                  for b in (sweep[keys[1]] if len(keys) > 1 else [None])]  # fmt: skip
        for i, point in enumerate(combos):
            point = {k: v for k, v in point.items() if v is not None}
            for j, seed in enumerate(DEV_SEEDS):
                value = 0.40 + (0.05 if i == best[method] else 0.0) + (0.04 if j == 0 else 0.0)
                if i == best[method] and j == 1:
                    value -= 0.02  # below another point's first seed: the choice is on means
                params = json.dumps({**point, "extra": 1}).replace('"', '""')
                lines.append(f'{method}-{i}-{seed},{method},{seed},{method}-{i},"{params}",{value}')
    (folder / "runs.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_choice_is_the_best_mean_on_the_dev_seeds_and_the_eval_config_uses_it(tmp_path):
    _dev_folder(tmp_path / "dev" / "m6", {"powerofchoice": 3, "adcs": 5, "adcs2": 6})
    table = choose_all(tmp_path / "dev", tmp_path / "out", ["m6"])
    chosen = [line for line in table.splitlines() if line.endswith("| yes |")]
    assert len(chosen) == 3
    doc = tomllib.loads((tmp_path / "out" / "eval" / "m6.toml").read_text(encoding="utf-8"))
    assert doc["seeds"] == list(TEST_SEEDS)
    points = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in doc["methods"]}
    grid = sweeps(6, 30)
    assert points["powerofchoice"] == {"candidates": grid["powerofchoice"]["candidates"][3]}
    # ADCS's product θ × R in sweep order: index 5 is θ = 0.9 (third θ), R = 20 (second R)
    assert points["adcs"] == {"theta": 0.9, "refresh_every": 20}
    assert points["adcs2"] == {"theta": grid["adcs2"]["theta"][6]}


def test_a_point_without_every_dev_seed_is_refused_in_one_line(tmp_path, capsys):
    _dev_folder(tmp_path / "dev" / "m6", {"powerofchoice": 0, "adcs": 0, "adcs2": 0})
    path = tmp_path / "dev" / "m6" / "runs.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")  # adcs2's last point, one seed
    with pytest.raises(ProtocolError, match="not the development seeds"):
        choose_all(tmp_path / "dev", tmp_path / "out", ["m6"])
    assert main(["choose", str(tmp_path / "dev"), str(tmp_path / "out"), "--workloads", "m6"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: m6: adcs2") and err.count("\n") == 1


def _eval_folder(folder: Path, worst: dict[str, list[float]]) -> None:
    folder.mkdir(parents=True)
    lines = ["run_id,method,seed,variant,params,final_worst_acc"]
    for method, values in worst.items():
        for seed, v in zip(TEST_SEEDS, values, strict=True):
            lines.append(f'{method}-{seed},{method},{seed},{method}-chosen,"{{}}",{v!r}')
    (folder / "runs.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_report_pairs_the_tuned_methods_and_holm_adjusts_three(tmp_path):
    base = [0.40, 0.45, 0.43, 0.41, 0.44]
    noise = [0.003, -0.002, 0.001, -0.004, 0.002]
    _eval_folder(tmp_path / "m6", {
        "powerofchoice": base,
        "adcs": [v + 0.001 * (-1) ** i for i, v in enumerate(base)],  # tied with PowerOfChoice
        "adcs2": [v + 0.05 + e for v, e in zip(base, noise, strict=True)],  # 5 points ahead
    })  # fmt: skip
    rows = {(a, b): (d, q) for a, b, d, _, _, q in compare_tuned(read_eval(tmp_path / "m6"))}
    np.testing.assert_allclose(rows[("adcs2", "powerofchoice")][0], 0.05, atol=1e-12)
    assert rows[("adcs2", "powerofchoice")][1] < 0.05 and rows[("adcs", "powerofchoice")][1] > 0.05
    text = report(tmp_path, ["m6"])
    verdicts = [line.rsplit("|", 2)[1].strip() for line in text.splitlines()[2:]]
    assert verdicts == ["ahead", "ahead", "tied"]
    raw = [stats.paired_p_value(read_eval(tmp_path / "m6")[a], read_eval(tmp_path / "m6")[b])
           for a, b in PAIRS]  # fmt: skip
    assert [q for *_, q in compare_tuned(read_eval(tmp_path / "m6"))] == stats.holm(raw)


def test_an_evaluation_with_two_points_of_a_method_is_refused(tmp_path):
    _eval_folder(tmp_path / "m6", {m: [0.4] * 5 for m in SWEPT})
    path = tmp_path / "m6" / "runs.csv"
    path.write_text(path.read_text(encoding="utf-8").replace("adcs2-chosen", "adcs2-other", 1))
    with pytest.raises(ProtocolError, match="adcs2 has 2 points"):
        read_eval(tmp_path / "m6")
