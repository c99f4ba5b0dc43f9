"""The built-in MLP (kind "mlp"): PowerOfChoice's 784-64-30-10 network, its fixed input
standardisation, per-client updates equal to torch.optim.SGD, and its ``[model]`` keys."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="PyTorch (the extra adcs[torch]) is not installed")

import torch

from adcs.experiments.config import ConfigError, config_from_dict, config_to_dict
from adcs.sim import local_update
from adcs.sim.models import MLP
from adcs.sim.torch import TorchModel, mlp, model_for

from .test_torch import jobs, sgd_updates


def test_default_is_the_power_of_choice_network() -> None:
    model = model_for("mlp", (28, 28), 10)
    assert model.dim == 784 * 64 + 64 + 64 * 30 + 30 + 30 * 10 + 10 == 52_500
    shapes = [tuple(p.shape) for p in mlp().parameters()]
    assert shapes == [(64, 784), (64,), (30, 64), (30,), (10, 30), (10,)]
    assert model_for("mlp", (784,), 10, hidden=()).dim == 7850  # logistic regression's size
    assert model_for("mlp", (12,), 4, hidden=(5, 6, 7)).dim == 13 * 5 + 6 * 6 + 7 * 7 + 8 * 4


def test_input_norm_standardises_before_the_first_layer() -> None:
    torch.manual_seed(0)
    plain = mlp(12, 4, (8,))
    normed = mlp(12, 4, (8,), input_norm=(0.25, 0.5))
    with torch.no_grad():  # same layers; the norm has no parameters
        for p, q in zip(normed.parameters(), plain.parameters(), strict=True):
            p.copy_(q)
    x = torch.rand(5, 12)
    with torch.no_grad():
        torch.testing.assert_close(normed(x), plain((x - 0.25) / 0.5))
    assert sum(p.numel() for p in normed.parameters()) == sum(p.numel() for p in plain.parameters())


def test_vmap_updates_equal_a_per_client_sgd_loop() -> None:
    def factory() -> torch.nn.Module:
        return mlp(12, 4, (6, 5), input_norm=(0.5, 0.3))

    model = TorchModel(factory, input_shape=(12,), n_classes=4)
    params, x, y = jobs(model, n_jobs=5, steps=3, batch=4, shape=(12,))
    update, first = local_update(model, params, x, y, local_lr=0.1)
    expected, expected_first = sgd_updates(factory, params, x, y, lr=0.1, steps=3)
    np.testing.assert_allclose(update, expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(first, expected_first, rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"hidden": (0,)}, "hidden"), ({"input_norm": (0.0, 0.0)}, "input_norm")],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        model_for("mlp", (12,), 4, **kwargs)  # type: ignore[arg-type]


def test_model_table_keys() -> None:
    base: dict[str, Any] = {
        "name": "t", "m": 2, "seeds": [0], "methods": [{"name": "uniform"}],
        "data": {"partition": "paper_groups", "n_groups": 2, "clients_per_group": 2},
    }  # fmt: skip

    def model(table: dict[str, Any]) -> Any:
        return config_from_dict({**base, "model": table})

    config = model({"kind": "mlp", "hidden": [64, 30], "input_norm": [0.1307, 0.3081]})
    assert isinstance(config.model, MLP)
    assert config.model.hidden == (64, 30) and config.model.input_norm == (0.1307, 0.3081)
    assert config_to_dict(config)["model"] == {
        "kind": "mlp",
        "device": "cpu",
        "hidden": [64, 30],
        "input_norm": [0.1307, 0.3081],
    }  # fmt: skip  (written back as the TOML arrays it was read from)
    assert config.model.build((784,), 10).dim == 52_500
    assert MLP().hidden == (64, 30)
    assert MLP(hidden=()).build((784,), 10).dim == 7850
    for bad, message in (
        ({"kind": "cnn", "hidden": [4]}, r"model\.hidden"),
        ({"kind": "logistic", "input_norm": [0, 1]}, r"model\.input_norm"),
        ({"kind": "mlp", "hidden": 64}, r"model\.hidden"),
        ({"kind": "mlp", "hidden": [64, 0]}, r"model\.hidden"),
        ({"kind": "mlp", "input_norm": [0.1]}, r"model\.input_norm"),
        ({"kind": "mlp", "input_norm": [0.1, -1.0]}, r"model\.input_norm"),
    ):
        with pytest.raises(ConfigError, match=message):
            model(bad)
