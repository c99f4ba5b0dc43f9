"""One path for a configuration: every override kind gives the same stored configuration (and
the same numbers) from the command line and from `adcs.run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import adcs
from adcs import cli
from adcs.experiments.config import ConfigError, config_from_dict
from adcs.experiments.config.overrides import Edit, check_edits, with_sets
from adcs.experiments.config.sweep import parse_sweep
from adcs.experiments.run.configure import configure, sweep_points
from adcs.optimizers import FedAdam
from tests.test_cli import TINY, one_error, write_config

runner = CliRunner()

CONFIG = TINY + '[[methods]]\nname = "uniform"\n'


def _cli_manifest(tmp_path: Path, config: Path, *args: str) -> dict[str, Any]:
    out = tmp_path / "cli"
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    return dict(json.loads((out / "manifest.json").read_text()))


def _notebook_manifest(tmp_path: Path, config: Path, **kwargs: Any) -> dict[str, Any]:
    res = adcs.run(config, tmp_path / "nb", progress=False, **kwargs)
    return dict(res.manifest)


def test_a_shorter_run_is_evaluated_alike_from_both_entry_points(tmp_path: Path) -> None:
    """The fault: ``--set sim.rounds=1`` capped eval_every at 1 on the command line, while
    ``adcs.run(..., sim__rounds=1)`` kept the file's 2 (and never evaluated at round 1)."""
    config = write_config(tmp_path, CONFIG)
    by_cli = _cli_manifest(tmp_path, config, "--set", "sim.rounds=1")
    by_run = _notebook_manifest(tmp_path, config, sim__rounds=1)
    assert by_cli["config"]["sim"]["eval_every"] == 1
    assert by_run["config"] == by_cli["config"]
    # the same numbers: the same metrics file, byte for byte
    assert (tmp_path / "nb" / "metrics.csv").read_bytes() == (
        tmp_path / "cli" / "metrics.csv"
    ).read_bytes()


# each override kind: the command line's arguments, and adcs.run's keywords
KINDS: list[tuple[list[str], dict[str, Any]]] = [
    (["--set", "m=3"], {"m": 3}),
    (["--set", "sim.eval_every=1", "--seeds", "1"], {"sim__eval_every": 1, "seeds": [0]}),
    (["--rounds", "3"], {"sim__rounds": 3}),
    (["--seeds", "2"], {"seeds": [0, 1]}),
    (["--set", 'sim.availability={kind="bernoulli", p=0.5}'],
     {"sim__availability": {"kind": "bernoulli", "p": 0.5}}),
    (["--set", "data.dominance=0.5"], {"data__dominance": 0.5}),
    (["--set", "data.partition.seed=4", "--rounds", "2"],
     {"data__partition__seed": 4, "sim__rounds": 2}),
]  # fmt: skip


def _cli_config(config: Path, args: list[str], data: Path | None = None) -> Any:
    """The configuration ``adcs run CONFIG ARGS`` runs, by the functions its command calls."""
    from adcs.experiments.config.sweep import load_with_sweep

    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    options = {a[2:]: int(args[i + 1]) for i, a in enumerate(args) if a in ("--rounds", "--seeds")}
    base, axes = load_with_sweep(config, data_path=None if data is None else str(data))
    axes += [parse_sweep(args[i + 1]) for i, a in enumerate(args) if a == "--sweep"]
    cfg = cli._configured(
        base, seeds=options.get("seeds"), rounds=options.get("rounds"), data=data, sets=sets,
        axes=axes,
    )  # fmt: skip
    return cfg, axes


@pytest.mark.parametrize(("args", "keywords"), KINDS)
def test_every_override_kind_stores_the_same_configuration(
    tmp_path: Path, args: list[str], keywords: dict[str, Any]
) -> None:
    from adcs.notebook import _configured

    config = write_config(tmp_path, CONFIG)
    by_cli, _ = _cli_config(config, args)
    by_run, _ = _configured(config, None, None, keywords)
    assert by_cli.document == by_run.document
    assert by_cli.document != _doc(config)  # the override took effect


def test_data_and_a_sweep_store_the_same_configurations(tmp_path: Path) -> None:
    from adcs.notebook import _configured

    config = write_config(tmp_path, CONFIG + "[sweep]\nm = [2, 3]\n")
    folder = tmp_path / "fmnist"
    folder.mkdir()
    by_cli, cli_axes = _cli_config(config, ["--sweep", "sim.rounds=2,3"], data=folder)
    by_run, run_axes = _configured(config, folder, {"sim.rounds": [2, 3]}, {})
    assert by_cli.document == by_run.document
    assert by_cli.data.path == str(folder.resolve())
    cli_points = [c.document for _, c in sweep_points(by_cli, cli_axes)]
    run_points = [c.document for _, c in sweep_points(by_run, run_axes)]
    assert cli_points == run_points and len(cli_points) == 4
    # a point's shorter run is capped like any other override
    assert [(p["sim"]["rounds"], p["sim"]["eval_every"]) for p in cli_points[:2]] == [
        (2, 2),
        (3, 2),
    ]


def test_a_sweep_runs_the_same_from_both_entry_points(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG)
    out = tmp_path / "cli"
    result = runner.invoke(
        cli.app, ["run", str(config), "--out", str(out), "--sweep", "sim.rounds=1,2"]
    )
    assert result.exit_code == 0, result.output
    adcs.run(config, tmp_path / "nb", progress=False, sweep={"sim.rounds": [1, 2]})
    for point in ("00-rounds=1", "01-rounds=2"):
        cli_manifest = json.loads((out / point / "manifest.json").read_text())
        nb_manifest = json.loads((tmp_path / "nb" / point / "manifest.json").read_text())
        assert cli_manifest["config"] == nb_manifest["config"]
        assert (out / point / "metrics.csv").read_bytes() == (
            tmp_path / "nb" / point / "metrics.csv"
        ).read_bytes()


def test_overlapping_overrides_are_refused_once_from_both_entry_points(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG)
    result = runner.invoke(
        cli.app, ["run", str(config), "--out", str(tmp_path / "o"), "--set", "m=3",
                  "--sweep", "m=2,3"],
    )  # fmt: skip
    assert result.exit_code == 2 and "--set m and sweep m both set m" in one_error(result)
    with pytest.raises(ConfigError, match="m and sweep m both set m: keep one"):
        adcs.run(config, tmp_path / "nb", progress=False, m=3, sweep={"m": [2, 3]})
    with pytest.raises(ConfigError, match=r"data__path and data both set data\.path"):
        adcs.run(config, tmp_path / "nb", progress=False, data=tmp_path, data__path="x")
    doc = config_from_dict(json.loads(json.dumps(_doc(config)))).document
    preset = Edit("--quick", ("sim",), {"rounds": 3}, "preset")
    check_edits(doc, [preset, Edit("--rounds", ("sim", "rounds"), 2, "option")])  # replaceable


def _doc(config: Path) -> dict[str, Any]:
    from adcs.experiments.config import load_config

    return load_config(config).document


def test_the_plan_check_runs_on_both_entry_points(tmp_path: Path) -> None:
    """Records too large to hold are refused before anything runs, by `adcs.run` too."""
    config = write_config(tmp_path, CONFIG)
    huge = 10**12
    result = runner.invoke(
        cli.app, ["run", str(config), "--out", str(tmp_path / "o"), "--rounds", str(huge)]
    )
    assert result.exit_code == 2 and f"--rounds {huge}" in one_error(result)
    with pytest.raises(ConfigError, match="would take at least"):
        adcs.run(config, tmp_path / "nb", progress=False, sim__rounds=huge)
    assert not (tmp_path / "nb").exists()


def test_switching_a_tables_kind_starts_it_afresh() -> None:
    config = config_from_dict(
        {**_base_doc(), "sim": {"rounds": 4, "server_optimizer": {"kind": "fedavgm",
                                                                   "momentum": 0.5}}}
    )  # fmt: skip
    switched = with_sets(config, ["sim.server_optimizer.kind=fedadam"])
    assert switched.sim.server_optimizer == FedAdam()
    tuned = with_sets(config, ["sim.server_optimizer.kind=fedadam", "sim.server_optimizer.eta=0.5"])
    assert tuned.sim.server_optimizer == FedAdam(eta=0.5)
    same = with_sets(config, ["sim.server_optimizer.kind=fedavgm"])  # the same kind: kept
    assert same.sim.server_optimizer == config.sim.server_optimizer
    key = ("sim", "server_optimizer", "kind")
    by_keyword = configure(config, [Edit("sim__server_optimizer__kind", key, "fedadam")])
    assert by_keyword.document == switched.document  # adcs.run's keyword: the same table


def _base_doc() -> dict[str, Any]:
    return {
        "name": "t", "m": 2, "seeds": [0], "methods": [{"name": "uniform"}],
        "data": {"dataset": "synthetic", "n_clients": 4},
    }  # fmt: skip
