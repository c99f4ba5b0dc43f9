"""Tracking: evaluations written to TensorBoard and MLflow, read back with their own readers."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.tracking import export, make_tracker
from tests.test_cli import TINY, one_error, write_config

runner = CliRunner()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("tracked")
    config = write_config(
        tmp, TINY + '[[methods]]\nname = "uniform"\n[[methods]]\nname = "adcs"\ntheta = 0.6\n'
    )
    out = tmp / "out"
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def expected(results: Path) -> dict[str, list[tuple[int, float]]]:
    """worst_acc by run from metrics.csv, as (round, value)."""
    out: dict[str, list[tuple[int, float]]] = {}
    with (results / "metrics.csv").open() as f:
        for row in csv.DictReader(f):
            out.setdefault(row["run_id"], []).append((int(row["round"]), float(row["worst_acc"])))
    return out


def test_tensorboard_event_files_hold_every_evaluation(results: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result = runner.invoke(
        cli.app, ["export", str(results), "--to", "tensorboard", "--dest", str(tmp_path / "tb")]
    )
    assert result.exit_code == 0, result.output
    want = expected(results)
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == sorted(want)
    for run_id, points in want.items():
        events = EventAccumulator(str(tmp_path / "tb" / run_id))
        events.Reload()
        assert {"worst_acc", "avg_acc", "test_loss"} <= set(events.Tags()["scalars"])
        assert "theta" not in events.Tags()["scalars"]  # a parameter, not a metric
        got = [(e.step, e.value) for e in events.Scalars("worst_acc")]
        assert [s for s, _ in got] == [s for s, _ in points]
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6)


def test_mlflow_holds_a_run_per_adcs_run_with_params_and_metrics(
    results: Path, tmp_path: Path
) -> None:
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    uri = str(export(results, "mlflow", tmp_path / "mlruns"))
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    want = expected(results)
    assert sorted(runs) == sorted(want)
    for run_id, points in want.items():
        history = client.get_metric_history(runs[run_id].info.run_id, "worst_acc")
        got = sorted((m.step, m.value) for m in history)
        assert [s for s, _ in got] == [s for s, _ in points]
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-12)
    adcs_run = next(r for name, r in runs.items() if name.startswith("adcs"))
    assert adcs_run.data.params["theta"] == "0.6" and adcs_run.data.params["method"] == "adcs"
    assert adcs_run.info.status == "FINISHED"


def test_bad_targets_are_one_line(results: Path, tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["export", str(tmp_path), "--to", "mlflow"])
    assert result.exit_code == 2 and "runs.csv is missing" in one_error(result)
    with pytest.raises(ValueError, match="unknown tracking backend 'wandb'"):
        make_tracker("wandb", tmp_path, "x")
