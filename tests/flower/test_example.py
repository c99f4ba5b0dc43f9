"""The example Flower app (examples/flower-app): its config, and two rounds on the paper's data.

The rounds run in-process (conftest.InProcessGrid) on the real Fashion-MNIST partition; the same
ServerApp and ClientApp under Flower's Simulation Engine are what ``python -m
adcs_flower_app.local`` and ``benchmarks/bench_flower.py`` run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.supercore.task_identity import TaskIdentity

from adcs.schedulers import ADCS, SCHEDULERS

from .conftest import InProcessGrid

REPO = Path(__file__).resolve().parents[2]
APP_DIR = REPO / "examples" / "flower-app"
DATA_DIR = REPO.parent / "shared" / "data" / "fashion-mnist"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.syspath_prepend(str(APP_DIR))
    import adcs_flower_app.task as task

    return task


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


def test_default_scheduler_is_the_papers_adcs(example: Any) -> None:
    scheduler = example.make_scheduler(example.DEFAULTS)
    assert scheduler == ADCS(m=18, theta=0.8, refresh_every=20)
    for name in SCHEDULERS:
        assert example.make_scheduler({**example.DEFAULTS, "scheduler": name}).m == 18
    with pytest.raises(ValueError, match="scheduler must be one of"):
        example.make_scheduler({**example.DEFAULTS, "scheduler": "fedavg"})
    with pytest.raises(ValueError, match="unknown run-config keys"):
        example.run_config({"rounds": 3})


@pytest.mark.skipif(not DATA_DIR.is_dir(), reason=f"Fashion-MNIST not found at {DATA_DIR}")
def test_example_apps_run_two_rounds_on_the_paper_partition(
    example: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADCS_DATA_DIR", str(DATA_DIR))
    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    from adcs_flower_app.client_app import app
    from adcs_flower_app.server_app import run

    n = example.N_CLIENTS
    grid = InProcessGrid({10_000 + k: (app, k) for k in range(n)}, n)
    config = example.run_config({"num-server-rounds": 2, "evaluate-every": 2})
    strategy = run(grid, config)

    first, second = strategy.history
    assert len(first.trained) == n and len(first.selected) == 18  # the ADCS refresh probes all
    np.testing.assert_array_equal(second.selected, first.selected)  # cached until the next refresh
    assert sorted(grid.trained(**{"server-round": 2})) == sorted(second.selected.tolist())
    assert sum(r.client_updates for r in strategy.history) == 30 + 18
    (evaluation,) = strategy.evaluations
    assert np.isfinite(evaluation.accuracy).all()
    sizes = {len(example.load_client_data(k).y_train) for k in range(n)}
    assert len(sizes) == 1 and sizes.pop() >= 1000  # equal shares of all of Fashion-MNIST
