"""The example Flower app (examples/flower-app): its configuration, its data, two rounds in-process.

The rounds run in-process (conftest.InProcessGrid) on the paper's partition; the same ServerApp and
ClientApp under Flower's runtimes are what ``test_deployment.py``, ``python -m
adcs_flower_app.local`` and ``benchmarks/bench_flower.py`` run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.supercore.task_identity import TaskIdentity

from adcs.data import load_subset
from adcs.experiments.run.runner import make_partition
from adcs.schedulers import ADCS, OCS, SCHEDULERS, PowerOfChoice, Quality
from adcs.schedulers.base import LossSource
from adcs.sim import FederatedData
from tests.paths import full_data_dir
from tests.plugins.my_selection import LowestIndex

from .conftest import InProcessGrid

REPO = Path(__file__).resolve().parents[2]
APP_DIR = REPO / "examples" / "flower-app"
DATA_DIR = full_data_dir()


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    monkeypatch.syspath_prepend(str(APP_DIR))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ADCS_DATA_DIR", raising=False)
    import adcs_flower_app.task as task

    task._dataset.cache_clear()  # the lookup depends on the environment set above
    return task


@pytest.fixture
def server_app(example: Any) -> Any:
    import adcs_flower_app.server_app as server

    return server


def test_pyproject_run_config_equals_the_code_defaults(example: Any) -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    with open(APP_DIR / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    assert project["tool"]["flwr"]["app"]["config"] == example.DEFAULTS
    components = project["tool"]["flwr"]["app"]["components"]
    assert components == {
        "serverapp": "adcs_flower_app.server_app:app",
        "clientapp": "adcs_flower_app.client_app:app",
    }
    assert "federations" not in project["tool"]["flwr"]  # Flower 1.42 keeps them in FLWR_HOME


def test_any_scheduler_by_name_with_its_hyperparameters(example: Any, server_app: Any) -> None:
    defaults, make_scheduler = example.DEFAULTS, server_app.make_scheduler
    assert make_scheduler(defaults) == ADCS(m=18, theta=0.8, refresh_every=20)
    for name in SCHEDULERS:
        assert make_scheduler({**defaults, "scheduler": name, "scheduler-params": ""}).m == 18
    chosen = [
        ("adcs", "theta = 0.5, quality = 'grad_norm'", ADCS(m=18, theta=0.5, quality=Quality.GRAD_NORM)),
        ("ocs", "unbiased = true", OCS(m=18, unbiased=True)),
        ("powerofchoice", "loss_source = 'full'", PowerOfChoice(m=18, loss_source=LossSource.FULL)),
    ]  # fmt: skip
    for name, params, expected in chosen:
        built = make_scheduler({**defaults, "scheduler": name, "scheduler-params": params})
        assert built == expected
    with pytest.raises(ValueError, match="unknown scheduler 'fedavg'"):
        make_scheduler({**defaults, "scheduler": "fedavg"})
    own = {"scheduler": "tests.plugins.my_selection:LowestIndex", "scheduler-params": "offset = 2"}
    assert make_scheduler({**defaults, **own}) == LowestIndex(m=18, offset=2)
    with pytest.raises(ValueError, match="TOML inline table"):
        make_scheduler({**defaults, "scheduler-params": "theta 0.5"})
    with pytest.raises(ValueError, match="do not fit 'uniform'"):
        make_scheduler({**defaults, "scheduler": "uniform"})  # ADCS's θ, R
    with pytest.raises(ValueError, match="theta"):
        make_scheduler({**defaults, "scheduler-params": "theta = 2.0"})


def test_run_config_is_checked(example: Any) -> None:
    with pytest.raises(ValueError, match="unknown run-config keys"):
        example.run_config({"rounds": 3})
    with pytest.raises(ValueError, match="'m' must be a int"):
        example.run_config({"m": 2.5})
    with pytest.raises(ValueError, match="'data-download' must be a bool"):
        example.run_config({"data-download": 1})
    assert example.run_config({"reply-timeout-s": 30})["reply-timeout-s"] == 30
    with pytest.raises(ValueError, match="multiple of clients-per-group"):
        example.data_config(example.run_config({"num-partitions": 7}))
    iid = example.data_config(example.run_config({"num-partitions": 7, "partition": "iid"}))
    assert iid.total_clients == 7


def test_node_data_is_checked_against_the_run(example: Any) -> None:
    run = example.run_config({"num-partitions": 6})
    with pytest.raises(ValueError, match="partition-id must be an integer in"):
        example.NodeData.of(run, {"partition-id": 6})
    with pytest.raises(ValueError, match="num-partitions=30, the run has 6"):
        example.NodeData.of(run, {"partition-id": 1, "num-partitions": 30})
    node = example.NodeData.of(run, {"partition-id": 1, "data-dir": "/elsewhere"})
    assert node.data_dir == "/elsewhere"  # the node's own data location wins over the run's


def test_a_node_keeps_only_its_share_on_disk_and_reads_it_from_there(
    example: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = {"num-partitions": 6, "data-download": False}
    node = {"partition-id": 4, "cache-dir": str(tmp_path / "node-4")}
    first = example.load_client_data(run, node)
    (cached,) = (tmp_path / "node-4").iterdir()
    assert cached.name.startswith("client-4-of-6-") and cached.stat().st_size < 2_000_000

    import adcs.data

    def no_dataset(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the data set was read again")

    monkeypatch.setattr(adcs.data, "load_fashion_mnist", no_dataset)
    example._dataset.cache_clear()  # as in a fresh ClientApp process
    again = example.load_client_data(run, node)
    np.testing.assert_array_equal(again.x_train, first.x_train)
    np.testing.assert_array_equal(again.y_test, first.y_test)
    other_seed = example.NodeData.of(example.run_config({**run, "partition-seed": 1}), node)
    assert other_seed.cache_file() != cached  # another partition, another file

    # the share is the simulator's client 4, bit for bit (same partition, same pixel scaling)
    dataset = load_subset()  # what the lookup falls back to without data and downloads
    config = example.data_config(example.run_config(run))
    partition = make_partition(dataset, config, np.random.default_rng(config.partition_seed))
    data = FederatedData.from_partition(dataset, partition)
    np.testing.assert_array_equal(first.x_train, data.gather_train(data.train_indices[4]))
    np.testing.assert_array_equal(first.y_train, data.train_labels[data.train_indices[4]])


@pytest.mark.skipif(not DATA_DIR.is_dir(), reason=f"Fashion-MNIST not found at {DATA_DIR}")
def test_example_apps_run_two_rounds_on_the_paper_partition(
    example: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADCS_DATA_DIR", str(DATA_DIR))
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    from adcs_flower_app.client_app import client_app
    from adcs_flower_app.server_app import run

    config = example.run_config({"num-server-rounds": 2, "evaluate-every": 2})
    app = client_app(config)
    n = config["num-partitions"]
    grid = InProcessGrid({10_000 + k: (app, k) for k in range(n)}, n)
    strategy = run(grid, config)

    first, second = strategy.history
    assert len(first.trained) == n and len(first.selected) == 18  # the ADCS refresh probes all
    np.testing.assert_array_equal(second.selected, first.selected)  # cached until the next refresh
    assert sorted(grid.trained(**{"server-round": 2})) == sorted(second.selected.tolist())
    assert sum(r.client_updates for r in strategy.history) == 30 + 18
    (evaluation,) = strategy.evaluations
    assert np.isfinite(evaluation.accuracy).all()
    sizes = {len(example.load_client_data(config, {"partition-id": k}).y_train) for k in range(n)}
    assert len(sizes) == 1 and sizes.pop() >= 1000  # equal shares of all of Fashion-MNIST
