"""``[sim] server_optimizer`` and ``prox_mu`` in the configuration: TOML, ``--set``, objects."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from adcs.experiments.config import (
    SERVER_OPTIMIZER_TABLE,
    ConfigError,
    config_from_dict,
    config_to_dict,
)
from adcs.experiments.config.overrides import with_sets
from adcs.optimizers import FedAdam, FedAvg, FedAvgM, FedYogi, NoState

BASE: dict[str, Any] = {
    "name": "t",
    "m": 2,
    "seeds": [0],
    "data": {"partition": "iid", "n_clients": 4, "train_per_client": 30},
    "sim": {"rounds": 4, "eval_every": 2},
    "methods": [{"name": "uniform"}],
}


@dataclass(frozen=True)
class Halved:
    """A user's server optimizer (found by import path): half the aggregate."""

    def init(self, params: np.ndarray) -> NoState:
        return NoState()

    def update(self, aggregate: np.ndarray, state: Any, stepped: Any = None) -> Any:
        return aggregate * np.float32(0.5), state


def with_sim(**sim: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    doc["sim"].update(sim)
    return doc


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"kind": "fedadam", "eta": 0.01, "beta_2": 0.999}, FedAdam(eta=0.01, beta_2=0.999)),
        ("fedyogi", FedYogi()),
        ({"eta": 0.5}, FedAvg(eta=0.5)),  # no kind: plain FedAvg
        ({"kind": f"{__name__}:Halved"}, Halved()),
        (FedAvgM(momentum=0.5), FedAvgM(momentum=0.5)),  # an object, as adcs.run takes it
    ],
)
def test_the_table_builds_the_optimizer_and_writes_it_back(value: Any, expected: Any) -> None:
    config = config_from_dict(with_sim(server_optimizer=value))
    assert config.sim.server_optimizer == expected
    doc = config_to_dict(config)
    assert doc["sim"]["server_optimizer"]["kind"] in {
        "fedadam", "fedyogi", "fedavg", "fedavgm", f"{__name__}:Halved",
    }  # fmt: skip
    assert config_from_dict(doc) == config  # the manifest's table reads back the same


def test_the_defaults_write_nothing_new_so_earlier_manifests_still_compare_equal() -> None:
    doc = config_to_dict(config_from_dict(BASE))
    assert "server_optimizer" not in doc["sim"] and "prox_mu" not in doc["sim"]
    prox = config_to_dict(config_from_dict(with_sim(prox_mu=0.01, local_steps=2)))
    assert prox["sim"]["prox_mu"] == 0.01


def test_set_edits_the_optimizer_like_the_file() -> None:
    config = config_from_dict(BASE)
    edited = with_sets(config, ['sim.server_optimizer={kind="fedadam", eta=0.02}'])
    assert edited.sim.server_optimizer == FedAdam(eta=0.02)
    edited = with_sets(edited, ["sim.server_optimizer.tau=0.01", "sim.prox_mu=0.1"])
    assert edited.sim.server_optimizer == FedAdam(eta=0.02, tau=0.01)
    assert edited.sim.prox_mu == 0.1
    assert with_sets(config, ["sim.server_optimizer=fedavgm"]).sim.server_optimizer == FedAvgM()
    kind = with_sets(config, ["sim.server_optimizer.kind=fedyogi"])  # from the default: none
    assert kind.sim.server_optimizer == FedYogi()


@pytest.mark.parametrize(
    ("sim", "message"),
    [
        ({"server_optimizer": "adam"}, "sim.server_optimizer.kind must be one of ['fedadagrad',"),
        ({"server_optimizer": {"kind": "fedadam", "eta": 0}}, "sim.server_optimizer.eta must be"),
        (
            {"server_optimizer": {"kind": "fedadam", "momentum": 0.9}},
            "sim.server_optimizer.momentum is only for kind = 'fedavgm', not 'fedadam'",
        ),
        ({"server_optimizer": 3}, "sim.server_optimizer must have init(params)"),
        (
            {"server_optimizer": "fedadam", "server_lr": 0.5},
            "sim.server_lr=0.5 is plain FedAvg's server rate",
        ),
        ({"prox_mu": -0.1}, "sim.prox_mu must be a finite number >= 0"),
    ],
)
def test_a_bad_value_is_one_error_naming_its_key(sim: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_dict(with_sim(**sim))
    assert str(caught.value).startswith(message) or message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_adcs_run_takes_the_optimizer_as_an_object(tmp_path: Any) -> None:
    from adcs import run

    results = run(BASE, tmp_path / "out", progress=False, sim__server_optimizer=FedAdam(eta=0.05))
    plain = run(BASE, tmp_path / "plain", progress=False)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["sim"]["server_optimizer"] == SERVER_OPTIMIZER_TABLE.to_dict(
        FedAdam(eta=0.05)
    )
    final = results.metrics.groupby("run_id")["test_loss"].last()
    assert not np.allclose(final, plain.metrics.groupby("run_id")["test_loss"].last())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("sim.server_optimizer.kind=adam", "sim.server_optimizer.kind must be one of"),
        ("sim.server_optimizer={kind='fedyogi', eta=-1}", "sim.server_optimizer.eta must be"),
        ("sim.prox_mu=-1", "sim.prox_mu must be a finite number >= 0"),
    ],
)
def test_the_command_line_refuses_a_bad_optimizer_in_one_error_line(
    tmp_path: Any, override: str, message: str
) -> None:
    from typer.testing import CliRunner

    from adcs import cli
    from tests.test_cli import TINY, one_error, write_config

    path = write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')
    args = ["run", str(path), "--out", str(tmp_path / "out"), "--set", override]
    assert message in one_error(CliRunner().invoke(cli.app, args))
