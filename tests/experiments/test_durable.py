"""Durable runs: checkpoints and resume to identical files, locks, stale partial folders, and
output paths refused before any work."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.data import FashionMNIST
from adcs.experiments.config import ConfigError, config_from_dict
from adcs.experiments.run import folder as folder_module
from adcs.experiments.run import plan
from adcs.experiments.run import provenance as provenance_module
from adcs.experiments.run.folder import ResultsFolder, RunError, write_npz
from adcs.experiments.run.runner import RunInterrupted, load_records, run_experiment

from .test_runner import TINY

REPRODUCIBLE = (
    "metrics.csv", "runs.csv", "selections.npz", "summary.json", "client_acc.npz",
    "group_share.csv",
)  # fmt: skip
DOC: dict[str, Any] = {
    **TINY,
    "outputs": ["curves"],
    "sim": {**TINY["sim"], "rounds": 9, "dropout": 0.2,
            "availability": {"kind": "bernoulli", "p": 0.8}},
}  # fmt: skip


def files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in REPRODUCIBLE}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, synthetic: FashionMNIST) -> Path:
    out = tmp_path_factory.mktemp("plain") / "out"
    run_experiment(config_from_dict(DOC), out, dataset=synthetic, workers=2)
    return out


def interrupt_at(round_: int) -> Any:
    def progress(done: int, total: int) -> None:
        if done >= round_:
            raise KeyboardInterrupt

    return progress


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_interrupted_between_checkpoints_resumes_to_identical_files(
    tmp_path: Path,
    synthetic: FashionMNIST,
    uninterrupted: Path,
    workers: int,
) -> None:
    out = tmp_path / "out"
    config = config_from_dict(DOC)
    with pytest.raises(RunInterrupted) as info:
        # checkpoints at rounds 2, 4, 6, 8; stopped at round 4 before its checkpoint was taken
        run_experiment(config, out, dataset=synthetic, workers=workers, checkpoint_every=2,
                       progress=interrupt_at(4))  # fmt: skip
    assert info.value.resumable and info.value.progress == "round 2 of 9"
    assert not out.exists() and (tmp_path / ".out.partial" / "checkpoint").is_dir()
    assert not (tmp_path / ".out.lock").exists()
    outcome = run_experiment(config, out, dataset=synthetic, resume=True, checkpoint_every=2)
    assert outcome.resumed
    assert files(out) == files(uninterrupted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [s["from"] for s in manifest["sessions"]] == ["round 0 of 9", "round 2 of 9"]
    assert manifest["sessions"][1]["workers"] == workers  # the interrupted run's, by default


def test_a_run_stopped_right_after_a_checkpoint_resumes_to_identical_files(
    tmp_path: Path,
    synthetic: FashionMNIST,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saved = ResultsFolder.save_checkpoint
    count = [0]

    def save_then_stop(self: ResultsFolder, state: Any, info: Any) -> None:
        saved(self, state, info)
        count[0] += 1
        if count[0] == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(plan, "MEMORY_BUDGET_BYTES", 1)  # one run per batch: 10 batches
    config = config_from_dict(DOC)
    split = tmp_path / "split"  # batches share no products: the numbers differ in the last bits
    run_experiment(config, split, dataset=synthetic, checkpoint_every=0)
    monkeypatch.setattr(ResultsFolder, "save_checkpoint", save_then_stop)
    out = tmp_path / "out"
    with pytest.raises(RunInterrupted) as info:
        run_experiment(config, out, dataset=synthetic, checkpoint_every=5)
    # batch 1: a checkpoint at round 5, then its end; batch 2: round 5
    assert info.value.progress == "round 5 of 9 in batch 2 of 10"
    monkeypatch.setattr(ResultsFolder, "save_checkpoint", saved)
    run_experiment(config, out, dataset=synthetic, resume=True)
    assert files(out) == files(split)


def test_resuming_with_another_configuration_is_refused_with_the_keys_named(
    tmp_path: Path,
    synthetic: FashionMNIST,
) -> None:
    out = tmp_path / "out"
    with pytest.raises(RunInterrupted):
        run_experiment(config_from_dict(DOC), out, dataset=synthetic, checkpoint_every=2,
                       progress=interrupt_at(4))  # fmt: skip
    other = {**DOC, "seeds": [0], "sim": {**DOC["sim"], "local_lr": 0.1}}
    with pytest.raises(ConfigError) as info:
        run_experiment(config_from_dict(other), out, dataset=synthetic, resume=True)
    message = str(info.value)
    assert "sim.local_lr (interrupted run: 0.05, now: 0.1)" in message
    assert "seeds (interrupted run: [0, 1], now: [0])" in message
    assert (tmp_path / ".out.partial" / "checkpoint" / "state.pkl").is_file()  # still there


def test_without_checkpoints_an_interrupt_leaves_nothing(
    tmp_path: Path,
    synthetic: FashionMNIST,
) -> None:
    with pytest.raises(RunInterrupted) as info:
        run_experiment(config_from_dict(DOC), tmp_path / "a" / "out", dataset=synthetic,
                       checkpoint_every=0, progress=interrupt_at(1))  # fmt: skip
    assert not info.value.resumable
    assert list(tmp_path.iterdir()) == []


def test_a_stale_partial_folder_is_named_and_removed_only_with_force(
    tmp_path: Path,
    synthetic: FashionMNIST,
) -> None:
    out = tmp_path / "out"
    config = config_from_dict(DOC)
    with pytest.raises(RunInterrupted):
        run_experiment(config, out, dataset=synthetic, checkpoint_every=2,
                       progress=interrupt_at(4))  # fmt: skip
    old_style = tmp_path / ".out.partial-k2j3h4"  # left by an earlier adcs, no lock, no record
    old_style.mkdir()
    with pytest.raises(RunError) as info:
        run_experiment(config, out, dataset=synthetic)
    message = str(info.value)
    assert ".out.partial (pid" in message and "checkpoint: round 2 of 9" in message
    assert ".out.partial-k2j3h4 (no checkpoint)" in message and "--resume" in message
    run_experiment(config, out, dataset=synthetic, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_resume_without_a_checkpoint_is_refused(
    tmp_path: Path,
    synthetic: FashionMNIST,
) -> None:
    with pytest.raises(RunError, match="no interrupted run to resume"):
        run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic, resume=True)
    run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic)
    with pytest.raises(RunError, match="is complete; nothing to resume"):
        run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic, resume=True)


def test_a_second_run_on_a_locked_folder_is_refused(
    tmp_path: Path,
    synthetic: FashionMNIST,
) -> None:
    holder = ResultsFolder(tmp_path / "out")
    holder.acquire("adcs run first.toml")
    try:
        with pytest.raises(RunError) as info:
            run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic)
        assert f"being written by another adcs run (pid {os.getpid()}" in str(info.value)
        assert "adcs run first.toml" in str(info.value)
    finally:
        holder.release()
    assert not (tmp_path / ".out.lock").exists()
    run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic)  # free again


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (lambda tmp: tmp, "is the current folder"),
        (lambda tmp: tmp.parent, "contains the current folder"),
        (lambda tmp: Path.home(), "is your home folder"),
        (lambda tmp: tmp / "data" / "out", "is inside the data folder"),
        (lambda tmp: tmp / "data", "is the data folder"),
        (lambda tmp: tmp / "file.txt", "exists and is not a folder"),
        (lambda tmp: tmp / "file.txt" / "out", "file.txt is not a folder"),
        (lambda tmp: Path("/proc/sys/adcs-out"), "is not writable"),
    ],
)
def test_unusable_output_paths_are_refused_before_any_work(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    target: Any,
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "file.txt").write_text("x")
    folder = ResultsFolder(target(tmp_path), data=[tmp_path / "data"])
    with pytest.raises(RunError, match=message):
        folder.check()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "file.txt"]


def test_an_os_failure_is_one_line(tmp_path: Path) -> None:
    folder = ResultsFolder("/sys/kernel/adcs-test/out")
    with pytest.raises(RunError) as info:
        folder.acquire()
    assert "\n" not in str(info.value) and str(info.value).startswith("cannot create --out")


def test_npz_files_are_byte_reproducible(tmp_path: Path) -> None:
    arrays = {"a/b": np.arange(5), "c": np.ones((2, 3), dtype=bool)}
    write_npz(tmp_path / "1.npz", arrays)
    write_npz(tmp_path / "2.npz", arrays)
    assert (tmp_path / "1.npz").read_bytes() == (tmp_path / "2.npz").read_bytes()
    loaded = np.load(tmp_path / "1.npz")
    np.testing.assert_array_equal(loaded["a/b"], arrays["a/b"])
    assert loaded["c"].dtype == bool


def test_swept_hyperparameters_get_their_own_columns(
    tmp_path: Path,
    synthetic: FashionMNIST,
) -> None:
    doc = {**DOC, "methods": [{"name": "powerofchoice", "sweep": {"candidates": [4, 5]}},
                              {"name": "divfl", "sweep": {"stochastic_epsilon": [0.1, 0.5]}}]}  # fmt: skip
    run_experiment(config_from_dict(doc), tmp_path / "out", dataset=synthetic)
    header = (tmp_path / "out" / "metrics.csv").read_text().splitlines()[0].split(",")
    # no scheduler here names a hyperparameter (named_params): only the swept ones are columns
    assert header[:6] == ["run_id", "method", "seed", "candidates", "stochastic_epsilon", "round"]
    records = load_records(tmp_path / "out")
    assert {r.params["candidates"] for r in records if r.method == "powerofchoice"} == {4, 5}
    report = (tmp_path / "out" / "report.md").read_text()
    assert "candidates=4" in report and "stochastic_epsilon=0.5" in report


def test_folder_module_has_no_paper_knowledge() -> None:
    text = Path(folder_module.__file__).read_text()
    assert "paper" not in text.lower()


def test_a_run_on_the_simulated_clock_resumes_to_identical_files(
    tmp_path: Path, synthetic: FashionMNIST
) -> None:
    doc = {**DOC, "sim": {**DOC["sim"], "system": {"compute_median": 5.0, "compute_sigma": 1.0}}}
    config = config_from_dict(doc)
    run_experiment(config, tmp_path / "plain", dataset=synthetic, checkpoint_every=0)
    with pytest.raises(RunInterrupted):
        run_experiment(config, tmp_path / "out", dataset=synthetic, checkpoint_every=3,
                       progress=interrupt_at(5))  # fmt: skip
    run_experiment(config, tmp_path / "out", dataset=synthetic, resume=True)
    names = (*REPRODUCIBLE, "clock.npz", "system.csv")
    assert {n: (tmp_path / "out" / n).read_bytes() for n in names} == {
        n: (tmp_path / "plain" / n).read_bytes() for n in names
    }


def test_the_manifest_records_the_commit_the_run_started_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = {"rev-parse": "a" * 40, "status": ""}
    monkeypatch.setattr(provenance_module, "_git", lambda command, *_: head[command])
    provenance_module.git_info.cache_clear()
    try:
        ResultsFolder(tmp_path / "out").check()  # a run's start
        head["rev-parse"], head["status"] = "b" * 40, " M src/adcs/dpp.py"  # a commit meanwhile
        assert provenance_module.provenance()["git"] == {"commit": "a" * 40, "dirty": False}
    finally:
        provenance_module.git_info.cache_clear()
