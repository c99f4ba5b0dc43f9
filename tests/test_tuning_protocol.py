"""scripts/tuning_protocol.py: equal budgets by construction, and the choice on synthetic dev runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import tomllib

from scripts.tuning_protocol import (
    DEV_SEEDS,
    POINTS,
    SWEPT,
    TEST_SEEDS,
    ProtocolError,
    choose_all,
    d_grid,
    dev_config,
    main,
    sweeps,
)


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
