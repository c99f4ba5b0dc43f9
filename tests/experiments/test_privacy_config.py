"""``[sim.privacy]``: the private probe channel of every method (adcs.experiments.config.privacy)."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.experiments.config import ConfigError, config_from_dict, config_to_dict
from adcs.experiments.run.runner import expand_runs, run_experiment
from adcs.privacy import DPFedAvg, Private, calibrate, client_epsilons

BASE: dict[str, Any] = {
    "name": "t",
    "m": 3,
    "seeds": [0],
    "data": {
        "partition": "paper_groups", "n_groups": 3, "clients_per_group": 3,
        "train_per_client": 30, "test_per_client": 10,
    },
    "sim": {"rounds": 12, "eval_every": 6, "batch_size": 4, "local_lr": 0.05},
    "methods": [{"name": "uniform"}, {"name": "powerofchoice"}, {"name": "ocs"}],
}  # fmt: skip
PRIVACY = {"epsilon": 2.0, "planned_probes": 12, "planned_updates": 4, "sketch_dim": 8}


def doc_with(privacy: dict[str, Any] | None) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    if privacy is not None:
        doc["sim"]["privacy"] = privacy
    return doc


def test_the_table_wraps_every_run_and_round_trips():
    config = config_from_dict(doc_with({**PRIVACY, "loss_range": [0.0, 3.0]}))
    assert config.privacy is not None and config.privacy.loss_range == (0.0, 3.0)
    for spec in expand_runs(config):
        assert isinstance(spec.scheduler, Private) and isinstance(spec.aggregator, DPFedAvg)
        assert spec.scheduler.delta == pytest.approx(9**-1.1)  # the default 1/N^1.1
    again = config_from_dict(config_to_dict(config))
    assert again.privacy == config.privacy
    plain = config_from_dict(doc_with(None))
    assert plain.privacy is None and "privacy" not in config_to_dict(plain)["sim"]


@pytest.mark.parametrize(
    ("privacy", "message"),
    [
        ({**PRIVACY, "epsilon": -1.0}, "sim.privacy.epsilon must be"),
        ({**PRIVACY, "noise": 1.0}, "unknown key(s) sim.privacy.noise"),
        ({"epsilon": 2.0}, "give both probe_noise and update_noise"),
        ({**PRIVACY, "probe_noise": 1.0}, "noise multipliers or a plan"),
        ({**PRIVACY, "loss_range": [2.0, 1.0]}, "loss_range must have low < high"),
        ({**PRIVACY, "private_updates": False}, "give neither update_noise nor planned_updates"),
        ({**PRIVACY, "probe_share": 0.0}, "sim.privacy.probe_share 0.0 leaves no budget for the"),
    ],
)
def test_bad_tables_are_refused_naming_the_key(privacy, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config_from_dict(doc_with(privacy))


def test_an_epsilon_the_accountant_cannot_calibrate_is_refused_before_any_round():
    config = config_from_dict(doc_with({**PRIVACY, "epsilon": 1e9}))
    with pytest.raises(ConfigError, match=r"sim\.privacy: epsilon 1000000000\.0 at delta"):
        expand_runs(config)


def test_a_sketch_longer_than_the_model_is_refused_before_any_round(tmp_path: Path, synthetic):
    config = config_from_dict(doc_with({**PRIVACY, "sketch_dim": 10_000}))
    with pytest.raises(
        ConfigError, match=r"sim\.privacy\.sketch_dim 10000 is larger than the model"
    ):
        run_experiment(config, tmp_path / "out", dataset=synthetic)


def test_a_sketch_longer_than_the_simulators_sketch_is_refused(tmp_path: Path, synthetic):
    doc = doc_with({**PRIVACY, "sketch_dim": 40})
    doc["sim"]["sketch_dim"] = 20
    with pytest.raises(
        ConfigError, match=r"sim\.privacy\.sketch_dim 40 is larger than sim\.sketch_dim"
    ):
        run_experiment(config_from_dict(doc), tmp_path / "out", dataset=synthetic)


def test_a_private_experiment_reports_each_clients_epsilon(tmp_path: Path, synthetic):
    config = config_from_dict(doc_with(PRIVACY))
    outcome = run_experiment(config, tmp_path / "out", dataset=synthetic)
    manifest = json.loads((outcome.folder / "manifest.json").read_text())
    assert manifest["config"]["sim"]["privacy"]["epsilon"] == 2.0
    with (outcome.folder / "runs.csv").open() as fh:
        rows = {r["run_id"]: r for r in csv.DictReader(fh)}
    with np.load(outcome.folder / "selections.npz") as arrays:
        for spec in expand_runs(config):
            eps = arrays[f"client_epsilon/{spec.run_id}"]
            assert eps.shape == (9,) and eps.max() <= 2.0
            assert float(rows[spec.run_id]["epsilon"]) == eps.max()
            assert float(rows[spec.run_id]["delta"]) == spec.scheduler.delta
            noted = manifest["privacy"][spec.run_id]
            assert noted["epsilon"] == eps.max() and noted["delta"] == spec.scheduler.delta
            assert (noted["probe_noise"], noted["update_noise"]) == spec.scheduler.noise
            # each client's ε is the accountant's over what it released: its updates are its
            # selections (every selected client had budget: it is in the selections file)
            selected = arrays[f"selected/{spec.run_id}"]
            updates = np.bincount(selected[selected >= 0], minlength=9)
            z_probe, z_update = spec.scheduler.noise
            if spec.run_id.startswith("uniform"):  # no probes: ε of the updates alone
                assert eps == pytest.approx(
                    client_epsilons(
                        np.zeros(9, int), updates, z_probe, z_update, spec.scheduler.delta
                    )
                )
    report = (outcome.folder / "report.md").read_text()
    largest = {r["run_id"]: float(r["epsilon"]) for r in rows.values()}
    assert "Privacy ([sim.privacy]" in report
    assert all(f"{run} {eps:.3g}" in report for run, eps in largest.items())
    plain = run_experiment(config_from_dict(doc_with(None)), tmp_path / "plain", dataset=synthetic)
    assert "privacy" not in json.loads((plain.folder / "manifest.json").read_text())
    with (plain.folder / "runs.csv").open() as fh:
        assert "epsilon" not in next(csv.reader(fh))  # no column without [sim.privacy]


def test_probes_only_privacy_keeps_the_updates_in_the_clear():
    config = config_from_dict(
        doc_with({"epsilon": 2.0, "planned_probes": 12, "private_updates": False, "sketch_dim": 8})
    )
    for spec in expand_runs(config):
        assert isinstance(spec.scheduler, Private) and spec.aggregator is None
        assert spec.scheduler.noise[1] == np.inf


BY_METHOD = {
    "epsilon": 2.0, "private_updates": False, "sketch_dim": 8,
    "by_method": {
        "uniform": {"planned_probes": 0},
        "powerofchoice": {"planned_probes": 12},
        "ocs": {"planned_probes": 24, "updates_as": "norm"},
    },
}  # fmt: skip


def test_by_method_calibrates_each_method_to_its_own_plan_and_round_trips():
    config = config_from_dict(doc_with(BY_METHOD))
    runs = {spec.meta["method"]: spec.scheduler for spec in expand_runs(config)}
    delta = 9**-1.1
    for name, planned in (("powerofchoice", 12), ("ocs", 24)):
        expected = calibrate(2.0, delta, planned, 0, 1.0)[0]
        assert runs[name].noise[0] == expected  # the same calibration, so the same float
    assert runs["ocs"].probes.updates_as == "norm"
    assert runs["powerofchoice"].probes.updates_as == "direction"
    assert runs["uniform"].noise[0] == np.inf  # nothing planned: no probe answered
    assert config_from_dict(config_to_dict(config)).privacy == config.privacy


@pytest.mark.parametrize(
    ("by_method", "message"),
    [
        ({"ocs": {"epsilon": 1.0}}, r"by_method\['ocs'\] sets \['epsilon'\]"),
        ({"ocs": {"noise": 1.0}}, r"by_method\['ocs'\] sets \['noise'\]"),
        ({"ocs": 3}, "by_method must map method names to tables of settings"),
        (
            {
                "uniform": {"planned_probes": 0},
                "powerofchoice": {"planned_probes": 1},
                "ocs": {"planned_probes": -1},
            },
            "planned_probes must be an integer >= 0",
        ),
        ({"ocs": {"planned_probes": 4}}, "gives the method 'uniform' no planned_probes"),
    ],
)
def test_bad_by_method_settings_are_refused_naming_them(by_method, message):
    doc = doc_with({"epsilon": 2.0, "private_updates": False, "by_method": by_method})
    with pytest.raises(ConfigError, match=message):
        expand_runs(config_from_dict(doc))


def test_a_methods_own_sketch_longer_than_the_model_is_refused_before_any_round(
    tmp_path: Path, synthetic
):
    by_method = {**BY_METHOD["by_method"], "powerofchoice": {"planned_probes": 12}}
    by_method["ocs"] = {"planned_probes": 24, "sketch_dim": 10_000}
    config = config_from_dict(doc_with({**BY_METHOD, "by_method": by_method}))
    with pytest.raises(
        ConfigError,
        match=r"sim\.privacy\.by_method\.ocs\.sketch_dim 10000 is larger than the model",
    ):
        run_experiment(config, tmp_path / "out", dataset=synthetic)
