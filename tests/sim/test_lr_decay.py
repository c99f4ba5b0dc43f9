"""The step schedule of the local rate (``SimConfig.lr_decay``): each path of the engine (the
shared product of E = 1 logistic regression, independent local SGD jobs, probed updates) trains at
``lr_at(t)``, the milestones fall on the rounds named, and bad schedules are refused."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.experiments.config import ConfigError, config_from_dict, config_to_dict
from adcs.schedulers import OCS, Uniform
from adcs.sim import FederatedData, RunSpec, SimConfig, simulate


def _final(data: FederatedData, steps: int, **config: object) -> list[np.ndarray]:
    n = data.n_clients
    specs = [RunSpec(Uniform(m=n), 3, "blind"), RunSpec(OCS(m=n), 3, "probed")]
    cfg = SimConfig(local_steps=steps, batch_size=4, eval_every=10, **config)  # type: ignore[arg-type]
    return [r.final_params for r in simulate(specs, data, cfg)]


@pytest.mark.parametrize("steps", [1, 3])
def test_a_factor_from_round_zero_is_a_smaller_rate(data: FederatedData, steps: int) -> None:
    halved = _final(data, steps, rounds=3, local_lr=0.6, lr_decay=((0, 0.5),))
    constant = _final(data, steps, rounds=3, local_lr=0.3)
    for a, b in zip(halved, constant, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("steps", [1, 3])
def test_training_stops_at_the_milestone_round(data: FederatedData, steps: int) -> None:
    # from round 2 on (counting from 0) the rate is ~0, so 5 rounds end where 2 rounds end
    frozen = _final(data, steps, rounds=5, local_lr=0.4, lr_decay=((2, 1e-12),))
    two = _final(data, steps, rounds=2, local_lr=0.4)
    three = _final(data, steps, rounds=3, local_lr=0.4)
    for a, b, c in zip(frozen, two, three, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
        assert not np.allclose(a, c, rtol=1e-3, atol=1e-5)


def test_lr_at_and_validation() -> None:
    config = SimConfig(rounds=10, local_lr=0.2, lr_decay=[[3, 0.5], [6, 0.25]])  # type: ignore[arg-type]
    assert config.lr_decay == ((3, 0.5), (6, 0.25))
    assert [config.lr_at(t) for t in (0, 2, 3, 5, 6, 9)] == [0.2, 0.2, 0.1, 0.1, 0.05, 0.05]
    for bad, message in (
        (((3, 0.5), (3, 0.2)), "increase"),
        (((3, 0.0),), "factor"),
        (((-1, 0.5),), "round"),
        ((3, 0.5), "pairs"),
        ("fast", "sequence"),
    ):
        with pytest.raises(ValueError, match=message):
            SimConfig(rounds=10, lr_decay=bad)  # type: ignore[arg-type]
    doc = {"name": "t", "m": 1, "seeds": [0], "methods": [{"name": "uniform"}]}
    table = {"rounds": 400, "lr_decay": [[149, 0.5], [299, 0.25]]}
    config = config_from_dict({**doc, "sim": table})
    assert config.sim.lr_decay == ((149, 0.5), (299, 0.25))  # the [sim] table is a SimConfig
    assert config_to_dict(config)["sim"]["lr_decay"] == [[149, 0.5], [299, 0.25]]
    assert "lr_decay" not in config_to_dict(config_from_dict(doc))["sim"]
    with pytest.raises(ConfigError, match=r"sim\.lr_decay rounds must increase"):
        config_from_dict({**doc, "sim": {"lr_decay": [[5, 0.5], [2, 0.5]]}})
