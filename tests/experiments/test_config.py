"""Configuration loading: the shipped configs, and refusal of bad ones before any work."""

from __future__ import annotations

import copy
import dataclasses
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from adcs.experiments.config import (
    PAPER_CONFIGS,
    ConfigError,
    ExperimentConfig,
    config_from_dict,
    config_to_dict,
    load_config,
    merge_configs,
    packaged_config,
    packaged_config_path,
    sim_for_clients,
)
from adcs.experiments.config.overrides import with_overrides
from adcs.experiments.paper import PAPER_METHODS
from adcs.schedulers import ADCS, SCHEDULERS, Quality

BASE: dict[str, Any] = {
    "name": "t",
    "m": 3,
    "seeds": [0, 1],
    "data": {"partition": "paper_groups", "n_groups": 2, "clients_per_group": 3},
    "sim": {"rounds": 10, "eval_every": 5},
    "methods": [{"name": "uniform"}, {"name": "adcs", "sweep": {"theta": [0.2, 0.8]}}],
}


def _with(path: str, value: Any) -> dict[str, Any]:
    """BASE with one dotted key set (``methods.1.theta`` style for lists)."""
    doc = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    node[last] = value
    return doc


def test_base_config_builds_and_expands_the_sweep() -> None:
    config = config_from_dict(BASE)
    assert config.data.total_clients == 6
    adcs = config.methods[1]
    assert [p["theta"] for p in adcs.grid()] == [0.2, 0.8]
    built = adcs.build(config.m, adcs.grid()[0])
    assert isinstance(built, ADCS) and built.theta == 0.2 and built.m == 3


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_shipped_configs_load_with_the_paper_settings(name: str) -> None:
    config = packaged_config(name)
    assert config.m == 18
    assert config.data.total_clients == 30
    assert (config.sim.local_steps, config.sim.batch_size) == (1, 16)
    assert (config.sim.local_lr, config.sim.server_lr) == (0.001, 1.0)
    for method in config.methods:
        assert method.name in SCHEDULERS
    if name != "quick":
        assert config.sim.rounds == 20_000
        assert config.seeds == (0, 1, 2, 3, 4)


def test_shipped_grids_are_the_papers() -> None:
    fig1 = packaged_config("fig1")
    assert {m.name for m in fig1.methods} == set(PAPER_METHODS)  # the paper's six methods
    fig2 = [p for m in packaged_config("fig2").methods if m.name == "adcs" for p in m.grid()]
    assert sorted(p["theta"] for p in fig2) == [0.2, 0.4, 0.6, 0.8, 1.0]
    assert {p["refresh_every"] for p in fig2} == {20}
    fig3 = [p for m in packaged_config("fig3").methods for p in m.grid()]
    assert sorted(p["refresh_every"] for p in fig3) == [1, 5, 20, 100, 500]
    assert {p["theta"] for p in fig3} == {0.8}


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("colour", "red", "colour"),
        ("sim.round", 10, "sim.round"),
        ("data.alpha", 0.5, "data.alpha"),  # not a key of the paper_groups partition
        ("methods.1.thta", 0.5, "methods[1].thta"),
        ("methods.0.m", 4, "methods[0].m"),
        ("methods.1.sweep.refresh", [1, 2], "sweep.refresh"),
    ],
)
def test_unknown_keys_are_refused_by_name(path: str, value: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        config_from_dict(_with(path, value))


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        ("sim.rounds", 0, "sim.rounds"),
        ("sim.local_lr", -1.0, "sim.local_lr"),
        ("sim.batch_size", 2.5, "sim.batch_size"),
        ("sim.weighting", "mean", "sim.weighting"),
        ("data.dominance", 1.5, "data.dominance"),
        ("data.partition", "pathological", "data.partition"),
        ("m", 7, "exceeds the number of clients"),
        ("m", True, "m must be an integer"),
        ("seeds", [0, 0], "distinct"),
        ("seeds", [], "at least one seed"),
        ("seeds", 5, "seeds must be an array"),
        ("methods.0.name", "random", "methods[0].name"),
        ("methods.1.sweep.theta", [0.5, 1.5], "theta"),
        ("methods.1.sweep.theta", [], "non-empty"),
        ("methods.1.sweep.theta", 0.5, "must be an array"),
        ("methods.1.refresh_every", 0, "refresh_every"),
        ("methods.1.quality", "accuracy", "quality"),
        ("outputs", ["fig9"], "outputs"),
    ],
)
def test_impossible_values_are_refused_by_name(path: str, value: Any, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        config_from_dict(_with(path, value))


def test_fixed_and_swept_at_once_is_refused() -> None:
    with pytest.raises(ConfigError, match="both fixed and swept"):
        config_from_dict(_with("methods.1.theta", 0.5))


def test_enum_hyperparameters_are_given_by_value() -> None:
    config = config_from_dict(_with("methods.1.quality", "grad_norm"))
    scheduler = config.methods[1].build(config.m, config.methods[1].grid()[0])
    assert scheduler.quality is Quality.GRAD_NORM  # type: ignore[attr-defined]


def test_dirichlet_needs_its_client_count() -> None:
    doc = copy.deepcopy(BASE)
    doc["data"] = {"partition": "dirichlet", "alpha": 0.3}
    with pytest.raises(ConfigError, match=r"data\.n_clients is required"):
        config_from_dict(doc)
    doc["data"]["n_clients"] = 8
    assert config_from_dict(doc).data.total_clients == 8


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nm = [\n')
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(tmp_path / "missing.toml")
    wrong = tmp_path / "wrong.toml"
    wrong.write_text(
        packaged_config_path("fig1").read_text().replace("rounds = 20000", "rounds = -5")
    )
    with pytest.raises(ConfigError, match=r"wrong\.toml: sim\.rounds must be an integer >= 1"):
        load_config(wrong)


def test_relative_data_path_is_resolved_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "fm").mkdir()
    text = packaged_config_path("quick").read_text()
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        text.replace('partition = "paper_groups"', 'partition = "paper_groups"\npath = "fm"')
    )
    assert load_config(cfg).data.path == str(tmp_path / "fm")
    cfg.write_text(
        text.replace('partition = "paper_groups"', 'partition = "paper_groups"\npath = "nope"')
    )
    with pytest.raises(ConfigError, match=r"data\.path 'nope' is not a folder"):
        load_config(cfg)


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_to_dict_round_trips(name: str) -> None:
    config = packaged_config(name)
    again = config_from_dict(config_to_dict(config))
    assert again == config


def test_overrides_cap_eval_every_and_replace_seeds() -> None:
    config = config_from_dict(BASE)
    short = with_overrides(config, rounds=3, seeds=[4])
    assert (short.sim.rounds, short.sim.eval_every, short.seeds) == (3, 3, (4,))
    with pytest.raises(ConfigError, match="rounds"):
        with_overrides(config, rounds=0)
    with pytest.raises(ConfigError, match="seeds"):
        with_overrides(config, seeds=[])


def test_merge_takes_the_union_and_refuses_different_settings() -> None:
    merged = merge_configs([packaged_config(n) for n in ("fig1", "fig2", "fig3")], name="all")
    assert set(merged.outputs) == {"fig1", "fig2", "fig3"}
    assert {m.name for m in merged.methods} == set(PAPER_METHODS)  # the paper's six methods
    other = dataclasses.replace(packaged_config("fig2"), sim=packaged_config("quick").sim)
    with pytest.raises(ConfigError, match="differ in sim"):
        merge_configs([packaged_config("fig1"), other], name="x")


def test_config_is_frozen() -> None:
    config: ExperimentConfig = config_from_dict(BASE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.m = 4  # type: ignore[misc]


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_package_data_holds_the_same_configs(name: str) -> None:
    """The installed package finds the configs as package data (adcs/experiments/configs/);
    they must be exactly the source-of-truth files under experiments/."""
    packaged = resources.files("adcs.experiments") / "configs" / f"{name}.toml"
    assert packaged.is_file(), "adcs/experiments/configs must hold (or link to) experiments/*.toml"
    assert packaged.read_text() == packaged_config_path(name).read_text()


def test_availability_and_dropout_build_the_simulator_config(tmp_path: Path) -> None:
    from adcs.sim import BernoulliAvailability, CyclicAvailability, TraceAvailability

    doc = _with("sim.availability", {"kind": "bernoulli", "p": 0.5})
    doc["sim"]["dropout"] = 0.1
    config = config_from_dict(doc)
    sim = sim_for_clients(config.sim, config.data.total_clients)
    assert sim.availability == BernoulliAvailability(0.5) and sim.dropout == 0.1
    assert config_from_dict(config_to_dict(config)) == config
    cyclic = config_from_dict(
        _with("sim.availability", {"kind": "cyclic", "period": 8, "duty": 0.5})
    )
    assert sim_for_clients(cyclic.sim, 6).availability == CyclicAvailability(8, 0.5, "group")
    import numpy as np

    np.savez(tmp_path / "trace.npz", available=np.ones((10, 6), dtype=bool))
    (tmp_path / "c.toml").write_text(
        'name = "t"\nm = 3\nseeds = [0]\n[data]\nn_groups = 2\n[sim]\nrounds = 10\n'
        '[sim.availability]\nkind = "trace"\npath = "trace.npz"\n[[methods]]\nname = "uniform"\n'
    )
    traced = load_config(tmp_path / "c.toml")
    assert isinstance(sim_for_clients(traced.sim, 6).availability, TraceAvailability)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"kind": "sometimes"}, "sim.availability.kind"),
        ({"kind": "bernoulli"}, "sim.availability.p is required"),
        ({"kind": "bernoulli", "p": 1.5}, "sim.availability.p"),
        ({"kind": "bernoulli", "p": 0.5, "period": 3}, "sim.availability.period"),
        ({"kind": "cyclic", "period": 0, "duty": 0.5}, "sim.availability.period"),
        ({"kind": "trace"}, "sim.availability.path is required"),
    ],
)
def test_bad_availability_tables_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(_with("sim.availability", table))


def test_dropout_must_be_below_one() -> None:
    with pytest.raises(ConfigError, match=r"sim\.dropout"):
        config_from_dict(_with("sim.dropout", 1.0))


def test_a_system_table_builds_the_simulated_clock(tmp_path: Path) -> None:
    from adcs.sim.system import SystemConfig

    table = {"compute_median": 20.0, "compute_sigma": 1.13, "deadline": 30, "overcommit": 0.3}
    config = config_from_dict(_with("sim.system", table))
    sim = sim_for_clients(config.sim, config.data.total_clients)
    assert sim.system == SystemConfig(
        compute_median=20.0, compute_sigma=1.13, deadline=30.0, overcommit=0.3
    )
    assert config_from_dict(config_to_dict(config)) == config
    assert "system" not in config_to_dict(config_from_dict(BASE))["sim"]  # absent stays absent
    assert sim_for_clients(config_from_dict(BASE).sim, 6).system is None
    (tmp_path / "devices.csv").write_text(
        "client,compute,upload,download\n" + "".join(f"{c},{c + 1},1e6,1e6\n" for c in range(6))
    )
    (tmp_path / "c.toml").write_text(
        'name = "t"\nm = 3\nseeds = [0]\n[data]\nn_groups = 2\n[sim]\nrounds = 10\n'
        '[sim.system]\nkind = "csv"\npath = "devices.csv"\n[[methods]]\nname = "uniform"\n'
    )
    measured = sim_for_clients(load_config(tmp_path / "c.toml").sim, 6).system
    assert measured is not None and measured.profile is not None
    assert measured.profile.compute.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"kind": "trace"}, r"sim\.system\.kind must be one of"),
        ({"compute_median": 0}, r"sim\.system\.compute_median must be a finite number > 0"),
        ({"upload_sigma": -1.0}, r"sim\.system\.upload_sigma"),
        ({"download_median": "fast"}, r"sim\.system\.download_median"),
        ({"group_correlation": 2.0}, r"sim\.system\.group_correlation"),
        ({"deadline": 0.0}, r"sim\.system\.deadline"),
        ({"overcommit": -0.5}, r"sim\.system\.overcommit"),
        ({"forward_cost": 1.5}, r"sim\.system\.forward_cost"),
        ({"speed": 3.0}, r"unknown key\(s\) sim\.system\.speed"),
        ({"kind": "csv"}, r"sim\.system\.path is required"),
        ({"kind": "csv", "path": "x.csv", "compute_median": 3.0}, r"sim\.system\.compute_median"),
        ({"kind": "csv", "path": "missing.csv"}, r"sim\.system: system profile .* does not exist"),
    ],
)
def test_bad_system_tables_name_the_key(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        sim_for_clients(config_from_dict(_with("sim.system", table)).sim, 6)
    assert "\n" not in str(caught.value)  # one line


def test_adcs_speed_needs_a_system_table() -> None:
    method = {"name": "adcs", "comm_score": "speed", "sweep": {"gamma": [0.0, 0.5]}}
    doc = {**copy.deepcopy(BASE), "methods": [method]}
    with pytest.raises(ConfigError, match=r"methods\[0\] .* add a \[sim\.system\] table"):
        config_from_dict(doc)
    doc["sim"]["system"] = {}
    config = config_from_dict(doc)
    assert [p["gamma"] for p in config.methods[0].grid()] == [0.0, 0.5]
    with pytest.raises(ConfigError, match="comm_score must be per-client numbers or 'speed'"):
        config_from_dict({**doc, "methods": [{"name": "adcs", "comm_score": "fast"}]})


def test_every_configuration_of_the_checkout_ships_as_package_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fnmatch

    from adcs.experiments.config import resolve_config, shipped_configs

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    repo = Path(__file__).resolve().parents[2]
    files = sorted(
        p.relative_to(repo / "experiments") for p in (repo / "experiments").rglob("*.toml")
    )
    # the same names (their order: shipped_configs sorts names, rglob paths with their suffix)
    assert sorted(shipped_configs()) == sorted(p.with_suffix("").as_posix() for p in files)
    patterns = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["adcs.experiments"]
    # setuptools' globs: ** is any depth (none included), * stays within one folder
    unshipped = [
        p.as_posix()
        for p in files
        if not any(
            fnmatch.fnmatch(f"configs/{p.as_posix()}", pat.replace("**/", "*"))
            and (("**" in pat) or p.parent == Path("."))
            for pat in patterns
        )
    ]
    assert unshipped == []
    monkeypatch.chdir(tmp_path)  # a name, not the checkout's file
    assert resolve_config("successor/paper") == resolve_config("experiments/successor/paper.toml")
    assert (
        resolve_config("successor/paper").read_text()
        == (repo / "experiments" / "successor" / "paper.toml").read_text()
    )
