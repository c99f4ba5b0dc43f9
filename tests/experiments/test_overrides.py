"""``--set KEY=VALUE``: parsing, editing the document, validation like the file, the CLI end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.experiments.config import ConfigError, config_from_dict, config_to_dict, packaged_config
from adcs.experiments.config.overrides import apply_assignments, parse_assignment, with_sets
from adcs.sim.availability import BernoulliAvailability
from tests.test_cli import TINY, one_error, write_config

runner = CliRunner()


@pytest.mark.parametrize(
    ("text", "parts", "value"),
    [
        ("data.partition.alpha=0.1", ("data", "partition", "alpha"), 0.1),
        ("m=6", ("m",), 6),
        ("seeds=[0, 1, 2]", ("seeds",), [0, 1, 2]),
        ("data.dataset=digits", ("data", "dataset"), "digits"),
        ('data.dataset="digits"', ("data", "dataset"), "digits"),
        ("methods.adcs.fresh_quality=true", ("methods", "adcs", "fresh_quality"), True),
        (
            'sim.availability={kind="bernoulli", p=0.5}',
            ("sim", "availability"),
            {"kind": "bernoulli", "p": 0.5},
        ),
        (" sim.rounds = 40 ", ("sim", "rounds"), 40),
        ('methods."pkg.mod:Mine".k=2', ("methods", "pkg.mod:Mine", "k"), 2),
        ("data.label='a=b'", ("data", "label"), "a=b"),
        ("data.path=/data/fl/x.npz", ("data", "path"), "/data/fl/x.npz"),
        ("data.path=../x.npz", ("data", "path"), "../x.npz"),
        ("data.path=./d/x.npz", ("data", "path"), "./d/x.npz"),
        ("data.path=~/x.npz", ("data", "path"), "~/x.npz"),
    ],
)
def test_a_value_is_toml_or_a_bare_word(text: str, parts: tuple[str, ...], value: Any) -> None:
    assert parse_assignment(text) == (parts, value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("m", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("sim..rounds=3", "expected KEY=VALUE"),
        ("m=", "the value is missing"),
        ("description=two words", "is not a TOML value"),
        ("sim.rounds=[1,", "is not a TOML value"),
        ("data.path=.../x", "is not a TOML value"),
    ],
)
def test_a_malformed_override_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_assignment(text)


def test_methods_are_addressed_by_name_or_position() -> None:
    doc = {"m": 2, "methods": [{"name": "adcs"}, {"name": "uniform"}, {"name": "adcs"}]}
    out = apply_assignments(doc, [parse_assignment("methods.adcs.theta=0.9")])
    assert [t.get("theta") for t in out["methods"]] == [0.9, None, 0.9]
    out = apply_assignments(out, [parse_assignment("methods.2.theta=0.6")])
    assert [t.get("theta") for t in out["methods"]] == [0.9, None, 0.6]
    assert doc["methods"][0] == {"name": "adcs"}  # the input is not modified
    with pytest.raises(ConfigError, match="no method named 'oort'"):
        apply_assignments(doc, [parse_assignment("methods.oort.alpha=1")])
    with pytest.raises(ConfigError, match="there are 3 methods"):
        apply_assignments(doc, [parse_assignment("methods.3.theta=1")])
    with pytest.raises(ConfigError, match="is a value, not a table"):
        apply_assignments(doc, [parse_assignment("m.x=1")])


def test_an_override_is_checked_like_the_file_and_the_later_one_wins() -> None:
    config = packaged_config("quick")
    edited = with_sets(
        config,
        ["m=10", 'sim.availability={kind="bernoulli", p=0.5}', "methods.adcs.theta=0.6", "m=12"],
    )
    assert edited.m == 12
    assert config_to_dict(edited)["sim"]["availability"] == {"kind": "bernoulli", "p": 0.5}
    assert edited.sim.availability == BernoulliAvailability(0.5)  # the library's object
    adcs = next(mc for mc in edited.methods if mc.name == "adcs")
    assert dict(adcs.params)["theta"] == 0.6
    untouched = config_to_dict(config)
    assert config_to_dict(edited)["data"] == untouched["data"]
    assert with_sets(config, []) is config
    with pytest.raises(ConfigError, match=r"\(--set sim.availability\).*p must be a number"):
        with_sets(config, ['sim.availability={kind="bernoulli", p=1.5}'])
    with pytest.raises(ConfigError, match="unknown key"):
        with_sets(config, ["sim.rounds_per_epoch=3"])


def test_the_cli_applies_records_and_resumes_with_the_same_overrides(tmp_path: Path) -> None:
    config = write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')
    out = tmp_path / "out"
    args = ["run", str(config), "--out", str(out), "--set", "sim.rounds=6", "--set", "m=3"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sim"]["rounds"] == 6 and manifest["config"]["m"] == 3
    rows = (out / "metrics.csv").read_text().splitlines()
    assert rows[-1].split(",")[rows[0].split(",").index("round")] == "6"

    result = runner.invoke(cli.app, ["run", str(config), "--set", "sim.bogus=1", "--out", "x"])
    assert result.exit_code == 2
    assert "(--set sim.bogus): unknown key(s) sim.bogus" in one_error(result)
    assert not (tmp_path / "x").exists()


def test_the_leaderboard_checks_overrides_on_every_workload(tmp_path: Path) -> None:
    args = ["leaderboard", "--workloads", "paper,m6", "--set", "sim.bogus=1"]
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "lb")])
    assert result.exit_code == 2
    assert "(--set sim.bogus): unknown key(s) sim.bogus" in one_error(result)
    assert not (tmp_path / "lb").exists()


def test_keys_of_the_flat_data_form_reach_the_partition_table() -> None:
    config = packaged_config("quick")  # written in the flat form: data.dominance, ...
    edited = with_sets(config, ["data.dominance=0.6", "data.partition_seed=3"])
    assert edited.data.value("dominance") == 0.6 and edited.data.partition_seed == 3
    fresh = with_sets(config, ["data.partition=dirichlet", "data.n_clients=20", "data.alpha=0.3"])
    assert fresh.data.partition == "dirichlet" and fresh.data.total_clients == 20
    synthetic = config_from_dict(
        {**config_to_dict(config), "data": {"dataset": "synthetic", "n_clients": 30}}
    )
    assert dict(with_sets(synthetic, ["data.alpha=0.5"]).data.options)["alpha"] == 0.5  # its own
