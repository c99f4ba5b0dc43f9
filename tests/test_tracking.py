"""Tracking: evaluations written to TensorBoard and MLflow, read back with their own readers."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.tracking import ExportError, export, make_tracker
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
    with pytest.raises(ExportError, match="already holds run"):  # was: every run twice
        export(results, "mlflow", tmp_path / "mlruns")
    assert len(client.search_runs([experiment.experiment_id])) == len(want)


def test_bad_targets_are_one_line(results: Path, tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["export", str(tmp_path), "--to", "mlflow"])
    assert result.exit_code == 2 and "manifest.json is missing" in one_error(result)
    broken = tmp_path / "broken"
    shutil.copytree(results, broken)
    (broken / "manifest.json").write_text("{")  # were: a JSONDecodeError's traceback
    result = runner.invoke(cli.app, ["export", str(broken), "--to", "tensorboard"])
    assert result.exit_code == 2 and "manifest.json cannot be read as JSON" in one_error(result)
    shutil.copy(results / "manifest.json", broken / "manifest.json")
    (broken / "runs.csv").write_text("x,y\n1,2\n")  # were: a KeyError's traceback
    result = runner.invoke(cli.app, ["export", str(broken), "--to", "tensorboard"])
    assert result.exit_code == 2
    assert "runs.csv lacks the column(s) run_id, method, seed" in one_error(result)
    assert not (broken / "tensorboard").exists()
    with pytest.raises(ValueError, match="unknown tracking backend 'wandb'"):
        make_tracker("wandb", tmp_path, "x")


def test_an_export_is_not_written_twice(results: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    args = ["export", str(results), "--to", "tensorboard", "--dest", str(tmp_path / "tb")]
    assert runner.invoke(cli.app, args).exit_code == 0
    files = sorted((tmp_path / "tb").glob("*/events.out.tfevents.*"))
    result = runner.invoke(cli.app, args)  # was: a second event file per run, every step twice
    assert result.exit_code == 2 and "already holds run" in one_error(result)
    assert sorted((tmp_path / "tb").glob("*/events.out.tfevents.*")) == files


def test_a_sweep_exports_every_point(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')
    out = tmp_path / "sweep"
    result = runner.invoke(cli.app, ["run", str(config), "--sweep", "m=1,2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli.app, ["export", str(out), "--to", "tensorboard"])
    assert result.exit_code == 0, result.output  # was: runs.csv is missing
    for point in ("00-m=1", "01-m=2"):
        for run_id, points in expected(out / point).items():
            events = EventAccumulator(str(out / "tensorboard" / point / run_id))
            events.Reload()
            got = [(e.step, e.value) for e in events.Scalars("worst_acc")]
            assert got == [(r, pytest.approx(v, rel=1e-6)) for r, v in points]


# ------------------------------------------------------------------- live, while the run goes


def test_the_simulator_hands_over_each_evaluation_as_its_results_hold_it() -> None:
    from adcs.schedulers import ADCS, Uniform
    from adcs.sim import RunSpec, SimConfig, simulate
    from tests.sim.conftest import make_data

    data = make_data()
    config = SimConfig(rounds=6, batch_size=4, local_lr=0.3, eval_every=2)
    specs = [
        RunSpec(s(m=3), seed, f"{s.__name__}-{seed}") for s in (Uniform, ADCS) for seed in (0, 1)
    ]
    for workers in (1, 2):  # in this process, and forked workers sending them through a pipe
        seen: list = []
        results = simulate(specs, data, config, workers=workers, on_eval=seen.extend)
        plain = simulate(specs, data, config, workers=workers)
        for res, again in zip(results, plain, strict=True):
            assert np.array_equal(res.client_acc, again.client_acc)  # on_eval changes nothing
            mine = sorted((e for e in seen if e.run_id == res.spec.run_id), key=lambda e: e.round)
            assert [e.round for e in mine] == res.eval_rounds.tolist()
            assert [e.accuracy.tolist() for e in mine] == res.client_acc.tolist()
            assert [e.worst_acc for e in mine] == res.worst_acc.tolist()
            assert [e.avg_acc for e in mine] == res.avg_acc.tolist()
            assert [e.p10_acc for e in mine] == res.p10_acc.tolist()
            assert [e.test_loss for e in mine] == res.test_loss.tolist()


def test_track_logs_while_running_and_leaves_the_results_as_they_are(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = write_config(
        tmp_path, TINY.replace("seeds = [0]", "seeds = [0, 1]") + '[[methods]]\nname = "uniform"\n'
    )
    outs = {}
    for track in (None, "tensorboard", "mlflow"):
        out = tmp_path / f"out-{track}"
        # untracked in this process, tracked from forked workers: results depend on neither
        args = ["run", str(config), "--out", str(out), "--workers", "1" if track is None else "2"]
        if track is not None:
            args += ["--track", track, "--track-to", str(tmp_path / f"log-{track}")]
        result = runner.invoke(cli.app, args)
        assert result.exit_code == 0, result.output
        if track is None:  # the progress line's last report shows the last evaluation
            assert "round 4: worst" in " ".join(result.output.split()), result.output
        outs[track] = out
    for name in ("metrics.csv", "runs.csv", "selections.npz", "client_acc.npz", "summary.json"):
        plain = (outs[None] / name).read_bytes()
        assert (outs["tensorboard"] / name).read_bytes() == plain, name
        if name != "summary.json":
            assert (outs["mlflow"] / name).read_bytes() == plain, name
    want = expected(outs[None])
    for run_id, points in want.items():
        events = EventAccumulator(str(tmp_path / "log-tensorboard" / run_id))
        events.Reload()
        got = [(e.step, e.value) for e in events.Scalars("worst_acc")]
        assert [s for s, _ in got] == [s for s, _ in points]
        assert [v for _, v in got] == pytest.approx([v for _, v in points], rel=1e-6)
    client = MlflowClient(tracking_uri=(tmp_path / "log-mlflow").resolve().as_uri())
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == sorted(want)
    history = client.get_metric_history(runs["uniform-seed=1"].info.run_id, "avg_acc")
    assert sorted(m.step for m in history) == [s for s, _ in want["uniform-seed=1"]]
    assert runs["uniform-seed=1"].data.params["seed"] == "1"


def _steps(logdir: Path, tag: str) -> list[int]:
    """The steps TensorBoard shows for ``tag`` in one run's folder."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logdir))
    events.Reload()
    return [e.step for e in events.Scalars(tag)]


def _raw_steps(logdir: Path, tag: str) -> list[int]:
    """The steps the event files hold for ``tag``, every copy (no purging)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    return [
        event.step
        for path in sorted(logdir.glob("events.out.tfevents.*"))
        for event in EventFileLoader(str(path)).Load()
        if any(v.tag == tag for v in event.summary.value)
    ]


def test_a_tracked_run_run_again_shows_each_step_once(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    config = write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')
    logs = tmp_path / "log"
    for again in (False, True):
        args = ["run", str(config), "--out", str(tmp_path / "out"), "--track", "tensorboard"]
        args += ["--track-to", str(logs)] + (["--force"] if again else [])
        result = runner.invoke(cli.app, args)
        assert result.exit_code == 0, result.output
    want = expected(tmp_path / "out")
    assert want
    for run_id, points in want.items():
        rounds = [s for s, _ in points]
        assert _raw_steps(logs / run_id, "worst_acc") == rounds  # the first run's are replaced
        assert _raw_steps(logs / run_id, "params") == [0]


def test_a_resumed_run_keeps_its_earlier_steps_and_shows_each_once(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    first = make_tracker("tensorboard", tmp_path, "x")
    first.start("r", {"seed": 0})
    for step in range(5):  # interrupted after round 4; its checkpoint holds round 2
        first.log("r", step, {"worst_acc": float(step)})
    first.close()
    resumed = make_tracker("tensorboard", tmp_path, "x", resume=True)
    resumed.start("r", {"seed": 0})
    for step in range(2, 7):
        resumed.log("r", step, {"worst_acc": 10.0 + step})
    resumed.close()
    assert _steps(tmp_path / "r", "worst_acc") == list(range(7))
    assert _raw_steps(tmp_path / "r", "params") == [0]  # the parameters once
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "r"))
    events.Reload()
    values = [e.value for e in events.Scalars("worst_acc")]
    assert values == [0.0, 1.0, 12.0, 13.0, 14.0, 15.0, 16.0]  # the resumed session's from 2 on


# ------------------------------------------------------------------- export's faults


def test_the_how_tos_sqlite_uri_is_a_store(results: Path, tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    pytest.importorskip("sqlalchemy")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = runner.invoke(cli.app, ["export", str(results), "--to", "mlflow", "--dest", uri])
    assert result.exit_code == 0, result.output  # was: KeyError: 'sqlite' without SQLAlchemy
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    assert len(client.search_runs([experiment.experiment_id])) == len(expected(results))


def test_a_database_store_without_sqlalchemy_is_one_line(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow")
    import adcs.tracking as tracking

    real = tracking.importlib.util.find_spec
    monkeypatch.setattr(
        tracking.importlib.util, "find_spec", lambda n, *a: None if n == "sqlalchemy" else real(n)
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = runner.invoke(cli.app, ["export", str(results), "--to", "mlflow", "--dest", uri])
    assert result.exit_code == 1
    assert "needs SQLAlchemy and Alembic" in one_error(result) and "adcs[mlflow]" in result.output


def test_an_unreachable_server_fails_at_once_in_one_line(results: Path) -> None:
    pytest.importorskip("mlflow")
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    uri = f"http://127.0.0.1:{port}"
    result = runner.invoke(cli.app, ["export", str(results), "--to", "mlflow", "--dest", uri])
    assert result.exit_code == 1  # was: minutes of retries, then a 100-line traceback
    assert f"the MLflow tracking server {uri} cannot be reached" in one_error(result)
    assert time.monotonic() - start < 10


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, cls: type, calls: int) -> None:
    real = cls.log
    count = iter(range(calls))

    def log(self: object, *args: object) -> None:
        if next(count, None) is None:
            raise KeyboardInterrupt
        real(self, *args)

    monkeypatch.setattr(cls, "log", log)


@pytest.mark.parametrize("to", ["tensorboard", "mlflow"])
def test_an_interrupted_export_leaves_whole_runs_and_resumes(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, to: str
) -> None:
    pytest.importorskip(to)
    import adcs.tracking as tracking

    want = expected(results)
    per_run = len(next(iter(want.values())))
    cls = tracking.TensorBoardTracker if to == "tensorboard" else tracking.MLflowTracker
    _interrupt_after(monkeypatch, cls, per_run + 1)  # inside the second run
    dest = tmp_path / "dest"
    args = ["export", str(results), "--to", to, "--dest", str(dest)]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 130
    line = one_error(result)  # was: "nothing was kept", with every run marked FINISHED
    assert f"1 of {len(want)} runs are exported whole" in line and "--resume" in line
    assert _held(to, dest) == {next(iter(want)): "FINISHED"}
    monkeypatch.undo()
    assert runner.invoke(cli.app, args).exit_code == 2  # refused: it would double a run
    result = runner.invoke(cli.app, [*args, "--resume"])
    assert result.exit_code == 0, result.output
    assert _held(to, dest) == dict.fromkeys(want, "FINISHED")


def _held(to: str, dest: Path) -> dict[str, str]:
    """The runs ``dest`` holds, and their status."""
    if to == "tensorboard":
        files = dest.glob("**/events.out.tfevents.*")
        return {str(p.parent.relative_to(dest)): "FINISHED" for p in files}
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=dest.resolve().as_uri())
    experiment = client.get_experiment_by_name("tiny")
    assert experiment is not None
    return {r.info.run_name: r.info.status for r in client.search_runs([experiment.experiment_id])}


def test_a_full_disk_is_one_line_naming_the_file(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("tensorboard")
    import errno

    from tensorboard.summary.writer.record_writer import RecordWriter

    def full(self: object, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RecordWriter, "write", full)
    dest = tmp_path / "tb"
    result = runner.invoke(
        cli.app, ["export", str(results), "--to", "tensorboard", "--dest", str(dest)]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output  # was: a thread's
    line = one_error(result)
    assert f"{dest / '.partial'}" in line and "No space left on device" in line
    assert "0 of" in line and "--resume" in line
    assert not dest.exists() or not any(dest.glob("**/events.out.tfevents.*"))


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ([], "--track-to tb does nothing without --track"),  # was: ignored
        (["--sweep", "m=1,2"], "--track-to: a sweep is not tracked live yet"),
    ],
)
def test_a_track_destination_without_tracking_is_refused(
    tmp_path: Path, extra: list[str], said: str
) -> None:
    config = write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')
    args = ["run", str(config), "--out", str(tmp_path / "o"), "--track-to", "tb", *extra]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2 and said in one_error(result)
    assert not (tmp_path / "o").exists() and not (tmp_path / "tb").exists()


def test_a_server_that_never_answers_fails_in_one_line(results: Path) -> None:
    pytest.importorskip("mlflow")
    import socket

    with socket.socket() as silent:  # accepts connections (the kernel's backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        result = runner.invoke(cli.app, ["export", str(results), "--to", "mlflow", "--dest", uri])
    assert result.exit_code == 1  # was: minutes of MLflow's retries, then a traceback
    assert f"the MLflow tracking server {uri} does not answer within 5 s" in one_error(result)


def _median(view: Any) -> float:
    return float(np.median(view.accuracy))


def test_a_declared_column_reaches_live_tracking_and_the_dataframe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column declared in the table alone is in the live event file and the DataFrame."""
    pytest.importorskip("tensorboard")
    pytest.importorskip("pandas")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    import adcs
    from adcs.columns import COLUMNS, Column, ColumnTable

    table = ColumnTable([*COLUMNS, Column("median_acc", "eval", of_eval=_median)])
    monkeypatch.setattr(COLUMNS, "_columns", list(table))  # the one table every module reads
    config = write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')
    out, logs = tmp_path / "out", tmp_path / "log"
    args = ["run", str(config), "--out", str(out), "--track", "tensorboard", "--track-to"]
    result = runner.invoke(cli.app, [*args, str(logs)])
    assert result.exit_code == 0, result.output
    with (out / "metrics.csv").open() as f:
        rows = list(csv.DictReader(f))
    frame = adcs.load_results(out).metrics
    for run_id in {r["run_id"] for r in rows}:
        want = [(int(r["round"]), float(r["median_acc"])) for r in rows if r["run_id"] == run_id]
        assert len(want) == 3 and all(0 <= v <= 1 for _, v in want)
        events = EventAccumulator(str(logs / run_id))
        events.Reload()
        got = [(e.step, e.value) for e in events.Scalars("median_acc")]
        assert [s for s, _ in got] == [s for s, _ in want]
        # TensorBoard keeps float32: within its unit roundoff
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=2.0**-24)
        mine = frame[frame["run_id"] == run_id].sort_values("round")
        assert mine["median_acc"].tolist() == [v for _, v in want]
