"""Experiments cut into shards (the runs of one seed) and run by an executor: the same files as a
local run, resumed shard by shard, failures and interrupts named. An in-process executor stands in
for a cluster here; ``test_ray.py`` runs the same on a real local Ray cluster."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from adcs.data import FashionMNIST
from adcs.experiments.config import config_from_dict
from adcs.experiments.run.distributed import ExecutorError, node_info, simulate_shard
from adcs.experiments.run.folder import RunError
from adcs.experiments.run.runner import RunInterrupted, run_experiment, submit_shards
from adcs.sim.engine import RunResult, RunSpec, SimConfig
from adcs.sim.model import Model

from .test_durable import DOC, files


class InProcess:
    """A :class:`~adcs.experiments.run.distributed.ShardExecutor` that runs each shard here, lazily
    (when :meth:`completed` asks for it), and can be told to fail or to be interrupted."""

    def __init__(self, *, interrupt_after: int | None = None, fail: str | None = None) -> None:
        self.submitted: list[str] = []
        self.pending: dict[str, tuple[Any, ...]] = {}
        self.cancelled: list[str] = []
        self.interrupt_after = interrupt_after
        self.fail = fail
        self.done = 0

    def submit(
        self, key: str, runs: Sequence[RunSpec], data: Any, config: SimConfig, model: Model
    ) -> None:
        if key in self.pending:
            return
        self.submitted.append(key)
        self.pending[key] = (list(runs), data, config, model)

    def completed(self, keys: Sequence[str]) -> Iterator[tuple[str, list[RunResult]]]:
        for key in reversed(keys):  # another order than submitted: as a cluster may finish them
            if self.interrupt_after is not None and self.done >= self.interrupt_after:
                raise KeyboardInterrupt
            if self.fail is not None and key.endswith(self.fail):
                raise ExecutorError(f"shard {key} failed on the test executor: boom")
            runs, data, config, model = self.pending.pop(key)
            results, _ = simulate_shard(runs, data, config, model, node_info()["versions"])
            self.done += 1
            yield key, results

    def cancel(self, keys: Sequence[str]) -> None:
        self.cancelled.extend(keys)
        for key in keys:
            self.pending.pop(key, None)

    def describe(self, keys: Sequence[str] | None = None) -> dict[str, Any]:
        return {"kind": "in-process", "shards": sorted(keys or [])}


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, synthetic: FashionMNIST) -> Path:
    out = tmp_path_factory.mktemp("local") / "out"
    run_experiment(config_from_dict(DOC), out, dataset=synthetic)
    return out


def test_shards_give_the_files_of_a_local_run(
    tmp_path: Path, synthetic: FashionMNIST, local: Path
) -> None:
    executor = InProcess()
    out = run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic,
                         executor=executor).folder  # fmt: skip
    assert files(out) == files(local)
    assert len(executor.submitted) == len(DOC["seeds"])  # one shard per seed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["executor"] == {"kind": "in-process", "shards": sorted(executor.submitted)}
    assert manifest["sessions"][0]["executor"] == "shards"


def test_shards_submitted_ahead_are_run_once(tmp_path: Path, synthetic: FashionMNIST) -> None:
    executor = InProcess()
    config = config_from_dict(DOC)
    assert submit_shards(config, tmp_path / "out", executor, dataset=synthetic) == 2
    run_experiment(config, tmp_path / "out", dataset=synthetic, executor=executor)
    assert len(executor.submitted) == 2 and not executor.pending


@pytest.mark.parametrize("then", ["local", "shards"])
def test_an_interrupted_sharded_run_resumes_with_the_shards_not_done(
    tmp_path: Path, synthetic: FashionMNIST, local: Path, then: str
) -> None:
    config = config_from_dict(DOC)
    first = InProcess(interrupt_after=1)
    with pytest.raises(RunInterrupted, match="--resume") as info:
        run_experiment(config, tmp_path / "out", dataset=synthetic, executor=first)
    assert info.value.resumable and "1 shard(s) of one seed done" in info.value.progress
    assert len(first.cancelled) == 1  # the shard that had not come back
    second = InProcess() if then == "shards" else None
    out = run_experiment(config, tmp_path / "out", dataset=synthetic, resume=True,
                         executor=second).folder  # fmt: skip
    assert files(out) == files(local)
    if second is not None:
        assert len(second.submitted) == 1  # only the shard not yet done


def test_a_local_run_interrupted_part_way_resumes_on_shards(
    tmp_path: Path, synthetic: FashionMNIST, local: Path
) -> None:
    config = config_from_dict(DOC)

    def stop(done: int, total: int) -> None:
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted):
        run_experiment(config, tmp_path / "out", dataset=synthetic, progress=stop,
                       checkpoint_every=1)  # fmt: skip
    out = run_experiment(config, tmp_path / "out", dataset=synthetic, resume=True,
                         executor=InProcess()).folder  # fmt: skip
    assert files(out) == files(local)


def test_a_failed_shard_is_one_error_and_the_others_are_cancelled(
    tmp_path: Path, synthetic: FashionMNIST
) -> None:
    executor = InProcess(fail="seed-1")
    with pytest.raises(RunError, match=r"shard .*seed-1 failed on the test executor: boom"):
        run_experiment(config_from_dict(DOC), tmp_path / "out", dataset=synthetic,
                       executor=executor)  # fmt: skip
    assert executor.cancelled  # what had not come back is stopped
    assert not (tmp_path / "out").exists()


def test_a_shard_refuses_other_versions_than_the_drivers(synthetic: FashionMNIST) -> None:
    versions = {**node_info()["versions"], "numpy": "0.0.1"}
    with pytest.raises(ExecutorError, match=r"other versions \(numpy 0\.0\.1 on the driver"):
        simulate_shard([], synthetic, SimConfig(rounds=1), None, versions)  # type: ignore[arg-type]
