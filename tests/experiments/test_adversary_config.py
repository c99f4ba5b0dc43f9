"""``[sim.attack]`` and ``[sim.defence]``: parsing, refusal, the runs they make, the results."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.adversary import (
    Crafted,
    Crafting,
    Defence,
    Defended,
    Direction,
    Liars,
    Lie,
    Lying,
    Poison,
    Poisoned,
    Sending,
    malicious_clients,
    rates_of,
)
from adcs.aggregation import Robust, RobustAggregation
from adcs.experiments.config import ConfigError, config_from_dict, config_to_dict
from adcs.experiments.run.runner import expand_runs, load_records, run_experiment

BASE: dict[str, Any] = {
    "name": "t",
    "m": 3,
    "seeds": [0, 1],
    "data": {
        "partition": "paper_groups", "n_groups": 3, "clients_per_group": 3,
        "train_per_client": 30, "test_per_client": 10,
    },
    "sim": {"rounds": 8, "eval_every": 4, "batch_size": 4, "local_lr": 0.05},
    "methods": [{"name": "uniform"}, {"name": "powerofchoice"}],
}  # fmt: skip


def doc_with(attack: dict[str, Any] | None = None, defence: dict[str, Any] | None = None):
    doc = copy.deepcopy(BASE)
    if attack is not None:
        doc["sim"]["attack"] = attack
    if defence is not None:
        doc["sim"]["defence"] = defence
    return doc


def test_attack_and_defence_tables_build_and_round_trip():
    config = config_from_dict(
        doc_with(
            {"n_malicious": 2, "lie": ["loss", "direction"], "direction": 0.35, "poison": "scaled"},
            {"received": True, "corroborate": True, "plausibility": 0.9, "aggregation": "median"},
        )
    )
    attack = config.attack.build(1, 9)
    assert isinstance(config.attack, Liars)  # the library's object is the configuration
    assert attack.clients == malicious_clients(1, 9, 2)
    assert attack.lie == (Lie.LOSS, Lie.DIRECTION)
    assert attack.direction is Direction.COSINE and attack.cosine == 0.35
    assert attack.poison is Poison.SCALED and attack.seed == 1
    defence = config.defence
    assert isinstance(defence, Defence) and defence.build(1, 9) is defence
    assert defence.received and defence.corroborate and defence.aggregation is Robust.MEDIAN
    again = config_from_dict(config_to_dict(config))
    assert (again.attack, again.defence) == (config.attack, config.defence)


@pytest.mark.parametrize(
    ("attack", "defence", "message"),
    [
        ({"clients": [1], "n_malicious": 1}, None, "exactly one of"),
        ({}, None, "exactly one of"),
        ({"clients": [9]}, None, r"\[0, 9\)"),
        ({"n_malicious": 10}, None, "exceeds N=9"),
        ({"clients": [1], "lie": ["lose"]}, None, "sim.attack.lie"),
        ({"clients": [1], "poison": "acid"}, None, "sim.attack.poison"),
        ({"clients": [1], "direction": 1.5}, None, "cosine"),
        ({"clients": [1], "direction": "sideways"}, None, "sim.attack.direction"),
        ({"clients": [1], "lie": []}, None, "needs a lie or a poison"),
        ({"clients": [1], "speed": 3}, None, "unknown key"),
        (None, {"aggregation": "mode"}, "sim.defence.aggregation"),
        (None, {"uniform_mix": 1.0}, "sim.defence.uniform_mix"),
        (None, {"peers": 0}, "sim.defence.peers"),
        (None, {"shield": True}, "unknown key"),
    ],
)
def test_bad_tables_are_refused_naming_the_key(attack, defence, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(doc_with(attack, defence))


def test_runs_are_wrapped_per_seed_with_the_seeds_malicious_clients():
    config = config_from_dict(
        doc_with(
            {"n_malicious": 1, "poison": "sign_flip"},
            {"corroborate": True, "aggregation": "norm_clip"},
        )
    )
    runs = expand_runs(config)
    assert len(runs) == 4
    for run in runs:
        assert isinstance(run.scheduler, Lying) and isinstance(run.scheduler.scheduler, Defended)
        assert run.meta["malicious"] == list(malicious_clients(run.seed, 9, 1))
        assert list(run.scheduler.attack.clients) == run.meta["malicious"]
        assert isinstance(run.aggregator, Poisoned)
        assert run.aggregator.rule == RobustAggregation(Robust.NORM_CLIP)
    assert {r.run_id for r in runs} == {r.run_id for r in expand_runs(config_from_dict(BASE))}


def test_a_liars_selection_rate_is_read_from_selections_npz(tmp_path: Path, synthetic):
    config = config_from_dict(doc_with({"clients": [4], "lie": ["loss"], "factor": 100.0}))
    outcome = run_experiment(config, tmp_path / "out", dataset=synthetic)
    manifest = json.loads((outcome.folder / "manifest.json").read_text())
    assert manifest["malicious"] == {r.run_id: [4] for r in expand_runs(config)}
    assert manifest["config"]["sim"]["attack"]["clients"] == [4]
    with np.load(outcome.folder / "selections.npz") as selections:
        for seed in (0, 1):
            believer = rates_of(selections, f"powerofchoice-seed={seed}", 9)
            uniform = rates_of(selections, f"uniform-seed={seed}", 9)
            assert believer[4] == 1.0  # a 100x loss is top of every round's loss ranking
            assert uniform[4] < 1.0
            assert believer.sum() == pytest.approx(3.0)  # m selections a round
        with pytest.raises(KeyError, match="no 'selected/nope'"):
            rates_of(selections, "nope", 9)
    # metrics.csv: the honest clients' worst / p10 / average, client 4 left out
    with (outcome.folder / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    with np.load(outcome.folder / "client_acc.npz") as acc:
        for row in rows:
            evals = acc[row["run_id"]]
            i = [int(r["round"]) for r in rows if r["run_id"] == row["run_id"]].index(
                int(row["round"])
            )
            honest = np.delete(evals[i], 4)
            assert float(row["honest_worst_acc"]) == pytest.approx(honest.min())
            assert float(row["honest_p10_acc"]) == pytest.approx(np.percentile(honest, 10))
            assert float(row["honest_avg_acc"]) == pytest.approx(honest.mean())
            assert float(row["worst_acc"]) == pytest.approx(evals[i].min())
    assert all(r.honest_acc.shape == (3, 3) for r in load_records(outcome.folder))


def test_a_direction_poisoner_under_sketches_sends_a_model_space_update(tmp_path: Path, synthetic):
    """With ``sketch_dim`` the liar reports in sketch space; its poison must still be dim-long."""
    doc = doc_with({"clients": [4], "lie": ["direction"], "poison": "direction"})
    doc["sim"]["sketch_dim"] = 4
    doc["methods"] = [{"name": "adcs", "refresh_every": 1}]
    config = config_from_dict(doc)
    outcome = run_experiment(config, tmp_path / "out", dataset=synthetic)
    with np.load(outcome.folder / "selections.npz") as selections:
        rates = rates_of(selections, next(r.run_id for r in expand_runs(config)), 9)
    assert rates[4] > 0  # the poisoner was selected, so its poison was aggregated
    rows = (outcome.folder / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 3 and "nan" not in "".join(rows[1:]).lower()


def test_a_run_whose_every_client_is_malicious_has_no_honest_accuracy(tmp_path: Path, synthetic):
    # n_malicious = N is a valid attack; the run's results stopped it with a traceback
    doc = doc_with({"n_malicious": 9, "lie": ["loss"], "poison": "sign_flip"})
    doc["seeds"], doc["methods"] = [0], [{"name": "uniform"}]
    outcome = run_experiment(config_from_dict(doc), tmp_path / "out", dataset=synthetic)
    with (outcome.folder / "metrics.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 and all(float(r["worst_acc"]) >= 0 for r in rows)
    assert all(np.isnan(float(r[f"honest_{x}_acc"])) for r in rows for x in ("worst", "avg"))
    assert np.isnan(load_records(outcome.folder)[0].honest_acc).all()


def test_attacks_need_a_configuration_that_fixes_n(tmp_path: Path):
    """FEMNIST's writers decide N when loaded; the malicious set is drawn before."""
    (tmp_path / "femnist").mkdir()
    doc = doc_with({"n_malicious": 1})
    doc["data"] = {"dataset": "femnist", "path": str(tmp_path / "femnist"), "partition": "natural"}
    config = config_from_dict(doc)
    assert config.data.total_clients is None
    with pytest.raises(ConfigError, match="need a configuration that fixes N"):
        expand_runs(config)


def test_a_crafted_attack_and_the_bounds_build_and_round_trip():
    config = config_from_dict(
        doc_with(
            {"kind": "crafted", "n_malicious": 2, "cosine": 0.4, "shared": True, "start": 3},
            {"received": True, "novelty": 3.0, "cap": 1.5, "window": 10},
        )
    )
    attack = config.attack.build(1, 9)
    assert isinstance(attack, Crafted) and attack.clients == malicious_clients(1, 9, 2)
    assert attack.cosine == 0.4 and attack.shared and attack.start == 3 and attack.seed == 1
    defence = config.defence
    assert (defence.novelty, defence.cap, defence.window) == (3.0, 1.5, 10)
    run = expand_runs(config)[0]
    assert isinstance(run.scheduler, Crafting) and isinstance(run.aggregator, Sending)
    assert isinstance(run.scheduler.scheduler, Defended)
    assert config_from_dict(config_to_dict(config)) == config


@pytest.mark.parametrize(
    ("attack", "defence", "message"),
    [
        ({"kind": "forged", "n_malicious": 1}, None, "sim.attack.kind"),
        ({"kind": "crafted", "n_malicious": 1, "lie": ["loss"]}, None, "only for kind"),
        ({"kind": "crafted", "n_malicious": 1, "cosine": 2.0}, None, "sim.attack.cosine"),
        ({"kind": "crafted", "n_malicious": 1, "target": "x"}, None, "sim.attack.target"),
        (None, {"novelty": 0.5}, "sim.defence.novelty"),
        (None, {"cap": -1}, "sim.defence.cap"),
        (None, {"window": 0}, "sim.defence.window"),
    ],
)
def test_bad_crafted_tables_and_bounds_are_refused_naming_the_key(attack, defence, message):
    with pytest.raises(ConfigError, match=message):
        config_from_dict(doc_with(attack, defence))


def test_the_tables_are_written_back_as_earlier_manifests_have_them():
    """The library objects write the same tables, key order included, as the settings classes
    they replaced (no ``kind`` for the default kinds; the attack and defence after ``lr_decay``)."""
    doc = doc_with(
        {"kind": "lie", "clients": [4, 1], "lie": [], "poison": "sign_flip", "factor": 10},
        {"aggregation": "trimmed_mean", "trim": 0, "novelty": 3},
    )
    doc["sim"]["lr_decay"] = [[2, 0.5]]
    sim = config_to_dict(config_from_dict(doc))["sim"]
    assert list(sim)[-3:] == ["lr_decay", "attack", "defence"]
    assert list(sim["attack"].items()) == [
        ("clients", [4, 1]), ("lie", []), ("factor", 10), ("direction", "orthogonal"),
        ("poison", "sign_flip"), ("adaptive", False),
    ]  # fmt: skip
    assert list(sim["defence"].items()) == [
        ("received", False), ("consistency", 1.0), ("corroborate", False), ("peers", 2),
        ("plausibility", 0.0), ("uniform_mix", 0.0), ("aggregation", "trimmed_mean"), ("trim", 0),
        ("novelty", 3), ("cap", 0.0), ("window", 100),
    ]  # fmt: skip
    crafted = config_from_dict(doc_with({"kind": "crafted", "clients": [5, 1], "target": "worst"}))
    assert list(config_to_dict(crafted)["sim"]["attack"].items()) == [
        ("kind", "crafted"), ("clients", [1, 5]), ("cosine", 0.5), ("target", "worst"),
        ("shared", False), ("scale", 1.0), ("factor", 1.0), ("start", 0), ("adaptive", False),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("table", "key", "setting"),
    [
        ("defence", {"window": 50}, "a cap (cap > 0)"),  # was: accepted, no cap ever applied
        ("defence", {"trim": 0.3}, "aggregation = 'trimmed_mean'"),  # was: the plain mean
        ("defence", {"trim": 0.3, "aggregation": "median"}, "aggregation = 'trimmed_mean'"),
        ("defence", {"consistency": 0.5}, "received = true"),
        ("defence", {"peers": 4}, "corroborate = true"),
        ("attack", {"n_malicious": 1, "lie": ["direction"], "factor": 3.0}, "a loss or norm lie"),
        ("attack", {"n_malicious": 1, "direction": "random"}, "a direction lie"),
    ],
)
def test_a_key_that_does_nothing_without_another_is_refused(
    table: str, key: dict[str, Any], setting: str
) -> None:
    doc = doc_with(**{table: key})
    name = next(k for k in key if k not in ("n_malicious", "lie", "aggregation"))
    with pytest.raises(ConfigError, match=rf"sim\.{table}\.{name} = .* does nothing without"):
        config_from_dict(doc)
    with pytest.raises(ConfigError) as info:
        config_from_dict(doc)
    assert setting in str(info.value)


def test_a_key_beside_its_setting_or_at_its_default_is_accepted() -> None:
    config = config_from_dict(
        doc_with(
            {"n_malicious": 1, "lie": ["direction"], "direction": "random", "factor": 10.0},
            {"cap": 1.5, "window": 50, "aggregation": "trimmed_mean", "trim": 0.3, "peers": 2},
        )
    )
    assert config.defence.window == 50 and config.defence.trim == 0.3
    again = config_from_dict(config_to_dict(config))  # the table written back holds every key
    assert config_to_dict(again) == config_to_dict(config)
