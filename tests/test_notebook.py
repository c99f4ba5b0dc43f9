"""The notebook API: ``adcs.run`` and ``adcs.load_results`` as tidy pandas DataFrames."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import adcs
from adcs.experiments.config import ConfigError
from tests.test_cli import TINY

pd = pytest.importorskip("pandas")
REPO = Path(__file__).resolve().parents[1]

DOC = {
    "name": "tiny",
    "m": 2,
    "seeds": [0, 1],
    "outputs": ["curves"],
    "data": {
        "partition": "paper_groups",
        "n_groups": 2,
        "clients_per_group": 2,
        "train_per_client": 30,
        "test_per_client": 10,
    },
    "sim": {"rounds": 4, "eval_every": 2},
    "methods": [{"name": "uniform"}, {"name": "adcs", "theta": 0.8, "refresh_every": 2}],
}


def test_run_twice_in_fresh_folders_and_read_tidy_tables() -> None:
    first = adcs.run(DOC, progress=False, methods__adcs__theta=0.6, sim__rounds=6)
    again = adcs.run(DOC, progress=False, methods__adcs__theta=0.6, sim__rounds=6)
    assert first.folder != again.folder and first.folder.is_dir()
    runs, metrics = first.runs, first.metrics
    assert sorted(runs["run_id"]) == sorted(pd.read_csv(first.folder / "runs.csv")["run_id"])
    assert len(runs) == 4  # two methods × two seeds
    assert "params" not in runs.columns
    assert set(runs.loc[runs.method == "adcs", "theta"]) == {0.6}  # a column, not JSON
    assert runs.loc[runs.method == "uniform", "theta"].isna().all()
    # one row per run and evaluation (rounds 0, 2, 4, 6), with the run's identity beside it
    assert len(metrics) == 4 * 4 and set(metrics["round"]) == {0, 2, 4, 6}
    assert {"variant", "theta", "worst_acc", "avg_acc"} <= set(metrics.columns)
    pd.testing.assert_frame_equal(metrics, again.metrics)  # the same runs, the same numbers
    manifest = json.loads((first.folder / "manifest.json").read_text())
    assert first.manifest == manifest


@pytest.fixture(scope="module")
def res() -> adcs.Results:
    return adcs.run(DOC, progress=False)


def test_selections_are_one_row_per_selected_client_and_round(res: adcs.Results) -> None:
    sel = res.selections
    with np.load(res.folder / "selections.npz") as npz:
        for run_id in res.runs["run_id"]:
            rows = sel[sel.run_id == run_id]
            selected = npz[f"selected/{run_id}"]
            assert len(rows) == int((selected >= 0).sum())
            first = rows[rows["round"] == 0]["client"].tolist()
            assert first == [c for c in selected[0].tolist() if c >= 0]
    assert sel["returned"].dtype == bool and sel["returned"].all()  # no dropout configured


def test_plot_draws_one_line_per_variant(res: adcs.Results) -> None:
    ax = res.plot("avg_acc")
    assert {line.get_label() for line in ax.get_lines()} == set(res.runs["variant"])
    curve = ax.get_lines()[0].get_ydata()
    variant = ax.get_lines()[0].get_label()
    want = res.metrics[res.metrics.variant == variant].groupby("round").avg_acc.mean()
    np.testing.assert_allclose(curve, want.to_numpy())
    with pytest.raises(ValueError, match="no metric 'accuracy'"):
        res.plot("accuracy")
    with pytest.raises(ValueError, match="no column 'nope' to draw one line per"):
        res.plot(by="nope")


def test_a_bad_override_names_its_key_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sim.bogus"):
        adcs.run(DOC, tmp_path / "out", progress=False, sim__bogus=1)
    assert not (tmp_path / "out").exists()
    sweep = {"sim.rounds": [2, 3]}  # it would replace the keyword's value, silently
    with pytest.raises(
        ConfigError, match=r"sim__rounds and sweep sim\.rounds both set sim\.rounds"
    ):
        adcs.run(DOC, tmp_path / "out", progress=False, sweep=sweep, sim__rounds=5)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("config", "kwargs", "error", "message"),
    [
        (42, {}, TypeError, "config must be a path, a shipped configuration's name"),
        (DOC, {"out": 3}, TypeError, "out must be a path; got int 3"),
        (DOC, {"data": ["x"]}, TypeError, "data must be a path; got list"),
        (DOC, {"sweep": {"m": "12"}}, TypeError, "sweep must map a dotted key to a list"),
        (DOC, {"sweep": {"m": 3}}, TypeError, "sweep must map a dotted key to a list"),
        (DOC, {"sweep": [("m", [1, 2])]}, TypeError, "sweep must be a mapping"),
        (DOC, {"overwrite": "yes"}, ValueError, "overwrite must be true or false, got 'yes'"),
        (DOC, {"progress": "no"}, ValueError, "progress must be true or false, got 'no'"),
    ],
)
def test_a_bad_argument_is_named_before_anything_runs(
    config: object, kwargs: dict, error: type[Exception], message: str, tmp_path: Path
) -> None:
    kwargs = {"out": tmp_path / "out", "progress": False, **kwargs}
    with pytest.raises(error, match=message):
        adcs.run(config, **kwargs)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()
    with pytest.raises(TypeError, match="folder must be a path; got NoneType"):
        adcs.load_results(None)  # type: ignore[arg-type]


def test_a_toml_path_and_an_explicit_folder(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(TINY + '[[methods]]\nname = "uniform"\n')
    res = adcs.run(path, tmp_path / "out", progress=False)
    assert res.folder == tmp_path / "out" and len(res.runs) == 1


def test_the_committed_leaderboard_reads_as_one_table_per_kind() -> None:
    res = adcs.load_results(REPO / "results" / "leaderboard")
    assert res.leaderboard is not None
    workloads = set(res.leaderboard["workload"])
    assert set(res.runs["workload"]) == workloads == set(res.metrics["workload"])
    per_workload = res.runs.groupby("workload").size()
    entries = res.leaderboard.groupby("workload").size()
    assert entries.min() >= 18  # every entry of the name table, ADCS-2 included
    seeds = res.runs.groupby("workload")["seed"].nunique()
    assert per_workload.equals(entries * seeds)  # each entry at the same seeds of its workload
    assert set(seeds) == {3, 5}  # five on the data workloads, three under other optimisers
    fresh = res.runs[(res.runs.method == "adcs") & (res.runs.fresh_quality == True)]  # noqa: E712
    assert len(fresh) == seeds.sum()


def test_a_folder_that_is_no_results_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no manifest\.json"):
        adcs.load_results(tmp_path)
    (tmp_path / "manifest.json").write_text('{"versions": {"adcs": "0.1.0"}}')
    with pytest.raises(FileNotFoundError, match=r"runs\.csv is missing"):
        adcs.load_results(tmp_path)


def test_a_path_that_does_not_exist_is_named_as_missing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nowhere: no such folder"):
        adcs.load_results(tmp_path / "nowhere")
