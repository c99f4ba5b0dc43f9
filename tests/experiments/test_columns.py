"""The table of result columns: one declaration reaches every file and the reader."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.columns import COLUMNS, Column, EvalView, eval_values
from adcs.data import FashionMNIST
from adcs.experiments.config import config_from_dict
from adcs.experiments.run.results import load_records
from adcs.experiments.run.runner import run_experiment

TINY: dict[str, Any] = {
    "name": "columns",
    "m": 2,
    "seeds": [0],
    "outputs": [],
    "data": {
        "partition": "paper_groups", "n_groups": 2, "clients_per_group": 2,
        "train_per_client": 20, "test_per_client": 10,
    },
    "sim": {"rounds": 4, "eval_every": 2, "batch_size": 4, "local_lr": 0.05},
    "methods": [{"name": "uniform"}, {"name": "adcs", "refresh_every": 2}],
}  # fmt: skip


def _median(e: EvalView) -> float:
    return float(np.median(e.accuracy))


@pytest.fixture
def median_column() -> Iterator[Column]:
    """One more per-evaluation and one more per-run column, declared for the test only."""
    column = COLUMNS.add(Column("median_acc", "eval", of_eval=_median, final=True))
    COLUMNS.add(Column("rounds_run", "run", lambda v: int(v.result.selected.shape[0]), parse=int))
    try:
        yield column
    finally:
        COLUMNS.remove("median_acc")
        COLUMNS.remove("rounds_run")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_one_declaration_reaches_every_file_and_the_reader(
    median_column: Column, synthetic: FashionMNIST, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run_experiment(config_from_dict(TINY), out, dataset=synthetic)
    acc = np.load(out / "client_acc.npz")
    metrics = _rows(out / "metrics.csv")
    assert list(metrics[0])[-1] == "median_acc"  # a declared column comes after the built-in
    for row in metrics:  # each evaluation's median over the clients' accuracies
        i = [int(r["round"]) for r in metrics if r["run_id"] == row["run_id"]].index(
            int(row["round"])
        )
        assert float(row["median_acc"]) == float(np.median(acc[row["run_id"]][i]))
    runs = _rows(out / "runs.csv")
    assert {"final_median_acc", "last_median_acc", "rounds_run"} <= set(runs[0])
    assert all(r["rounds_run"] == "4" for r in runs)
    summary = json.loads((out / "summary.json").read_text())["runs"]
    assert all(s["rounds_run"] == 4 and "final_median_acc" in s for s in summary)
    records = load_records(out)
    for record in records:
        curve = record.extra["median_acc"]
        expected = np.median(acc[record.run_id], axis=1)
        np.testing.assert_array_equal(curve, expected)
        assert record.extra["rounds_run"] == 4
        assert record.final("median_acc") == float(np.mean(expected[record.tail]))


def test_a_declared_column_is_among_a_runtimes_evaluation_values(median_column: Column) -> None:
    values = eval_values(np.array([0.2, np.nan, 0.6, 0.9]))  # NaN: a client that did not report
    assert values["median_acc"] == pytest.approx(0.6)
    assert values["worst_acc"] == pytest.approx(0.2)
    assert values["avg_acc"] == pytest.approx(np.mean([0.2, 0.6, 0.9]))
    assert "test_loss" not in values  # needs the test samples, not only the accuracies


def test_param_columns_are_the_schedulers_named_parameters(
    synthetic: FashionMNIST, tmp_path: Path
) -> None:
    uniform_only = {**TINY, "methods": [{"name": "uniform"}]}
    run_experiment(config_from_dict(uniform_only), tmp_path / "u", dataset=synthetic)
    assert list(_rows(tmp_path / "u" / "metrics.csv")[0])[:4] == [
        "run_id", "method", "seed", "round",
    ]  # fmt: skip
    run_experiment(config_from_dict(TINY), tmp_path / "a", dataset=synthetic)
    header = list(_rows(tmp_path / "a" / "metrics.csv")[0])
    assert header[3:6] == ["theta", "refresh_every", "round"]  # ADCS's named_params


def test_a_bad_declaration_is_refused() -> None:
    with pytest.raises(ValueError, match="already declared"):
        COLUMNS.add(Column("worst_acc", "eval", of_eval=_median))
    with pytest.raises(ValueError, match="of_eval is for per-evaluation"):
        Column("x", "run", of_eval=_median)
    with pytest.raises(ValueError, match="of_run or of_eval"):
        Column("x", "eval")
