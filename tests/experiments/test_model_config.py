"""The ``[model]`` table: parsing and refusals, the model it builds, and errors before any round."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.data import FashionMNIST
from adcs.experiments.config import (
    ConfigError,
    build_model,
    config_from_dict,
    config_to_dict,
    load_config,
)
from adcs.experiments.paper import PAPER_METHODS
from adcs.experiments.run import execute, runner
from adcs.sim import LogisticRegression
from adcs.sim.models import LeNet5, Logistic, TorchLogistic

REPO = Path(__file__).resolve().parents[2]

BASE: dict[str, Any] = {
    "name": "t",
    "m": 2,
    "seeds": [0],
    "data": {
        "partition": "paper_groups", "n_groups": 2, "clients_per_group": 2,
        "train_per_client": 10, "test_per_client": 5,
    },
    "sim": {"rounds": 3, "eval_every": 3, "batch_size": 4},
    "methods": [{"name": "uniform"}],
}  # fmt: skip


def with_model(table: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["model"] = table
    return doc


@pytest.fixture(scope="module")
def dataset() -> FashionMNIST:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10, dtype=np.uint8), 40)
    images = rng.integers(0, 255, size=(labels.size, 784), dtype=np.uint8)
    return FashionMNIST(images, labels, images, labels, source="synthetic", is_subset=False)


def test_the_default_model_is_the_papers_numpy_logistic_regression() -> None:
    config = config_from_dict(BASE)
    assert config.model == Logistic() and config.model.kind == "logistic"
    model = build_model(config, (784,), 10)
    assert isinstance(model, LogisticRegression) and model.dim == 785 * 10
    assert config.model.describe() == "multinomial logistic regression"


@pytest.mark.parametrize(
    "table",
    [
        {"kind": "logistic-torch"},
        {"kind": "cnn", "device": "cuda:1"},
        {"kind": "torch", "factory": "my_nets:make", "device": "mps"},
    ],
)
def test_model_tables_round_trip(table: dict[str, Any]) -> None:
    config = config_from_dict(with_model(table))
    doc = config_to_dict(config)
    assert {k: v for k, v in doc["model"].items() if k in table} == table
    assert config_from_dict(doc) == config


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"kind": "resnet"}, "model.kind must be one of"),
        ({"kind": "torch"}, "model.factory = 'package.module:function' is required"),
        ({"kind": "torch", "factory": "no_colon"}, "model.factory = 'package.module:function'"),
        ({"kind": "cnn", "factory": "a:b"}, "model.factory is only for kind = 'torch'"),
        ({"kind": "cnn", "device": "gpu"}, "model.device must be"),
        ({"kind": "logistic", "device": "cuda"}, "runs in NumPy on the CPU"),
        ({"kind": "cnn", "layers": 3}, "unknown key(s) model.layers"),
    ],
)
def test_bad_model_tables_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(with_model(table))
    assert message in str(err.value)


def test_a_torch_kind_without_pytorch_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "adcs.sim.torch", None)  # the import fails
    config = config_from_dict(with_model({"kind": "cnn"}))
    with pytest.raises(ConfigError, match=r"model\.kind = 'cnn' needs PyTorch: pip install"):
        build_model(config, (784,), 10)


def test_the_cnn_experiment_is_the_papers_partition_with_lenet5() -> None:
    config = load_config(REPO / "experiments" / "cnn.toml")
    assert config.model.kind == "cnn" and config.model.device == "cpu"
    data = config.data
    assert (data.partition, data.value("n_groups"), data.value("clients_per_group")) == (
        "paper_groups",
        10,
        3,
    )
    assert data.value("dominance") == 1.0
    assert config.m == 18 and len(config.seeds) == 3
    assert {m.name for m in config.methods} == set(PAPER_METHODS)
    assert (config.sim.local_steps, config.sim.batch_size) == (1, 16)


# ------------------------------------------------------------------ with PyTorch


def test_the_torch_kinds_build_checked_models() -> None:
    pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")
    assert LeNet5().build((784,), 10).dim == 61_706
    assert TorchLogistic().build((784,), 10).dim == 785 * 10
    cnn = config_from_dict(with_model({"kind": "cnn"}))
    with pytest.raises(ConfigError, match=r"model: kind 'cnn' is LeNet-5 for 28×28×1 inputs"):
        build_model(cnn, (12,), 10)


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        ("adcs_no_such_module:make", "cannot import module 'adcs_no_such_module'"),
        ("bad_nets:missing", "has no attribute 'missing'"),
        ("bad_nets:three_outputs", "output has shape (2, 3) for a batch of 2 inputs"),
        ("bad_nets:with_batchnorm", "use GroupNorm or LayerNorm instead"),
    ],
)
def test_a_bad_factory_stops_the_run_before_any_round(
    factory: str,
    message: str,
    dataset: FashionMNIST,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")
    (tmp_path / "bad_nets.py").write_text(
        "from torch import nn\n\n"
        "def three_outputs():\n    return nn.Linear(784, 3)\n\n"
        "def with_batchnorm():\n    return nn.Sequential(nn.Linear(784, 10), nn.BatchNorm1d(10))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "bad_nets", raising=False)

    def no_rounds(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a round ran")

    monkeypatch.setattr(execute, "simulate", no_rounds)
    config = config_from_dict(with_model({"kind": "torch", "factory": factory}))
    out = tmp_path / "results" / "t"
    with pytest.raises(ConfigError) as err:
        runner.run_experiment(config, out, dataset=dataset)
    assert str(err.value).startswith("<dict>: model: ")
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()
