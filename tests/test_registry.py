"""Your own scheduler without a fork: by import path in Python, TOML and ``--set``; entry points."""

from __future__ import annotations

import csv
import json
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

import numpy as np
import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.experiments.config import ConfigError, config_from_dict
from adcs.registry import Registry, check_annotation, import_path
from adcs.schedulers import SCHEDULERS, Uniform
from tests.plugins.my_selection import Greedy, LowestIndex, Typed
from tests.test_cli import TINY, one_error, write_config

runner = CliRunner()
PLUGIN = "tests.plugins.my_selection"


def test_built_in_names_import_paths_and_their_refusals() -> None:
    assert SCHEDULERS.resolve("uniform") is Uniform
    assert SCHEDULERS[f"{PLUGIN}:LowestIndex"] is LowestIndex
    assert import_path("adcs.schedulers:SCHEDULERS.resolve") == SCHEDULERS.resolve
    assert f"{PLUGIN}:LowestIndex" not in SCHEDULERS  # the table's own rows stay the built-ins
    assert SCHEDULERS.get("nothing") is None
    with pytest.raises(ValueError, match=r"unknown scheduler 'nothing': use one of \['adcs'"):
        SCHEDULERS.resolve("nothing")
    with pytest.raises(ValueError, match=r"cannot import 'no_such_pkg\.mod'"):
        SCHEDULERS.resolve("no_such_pkg.mod:X")
    with pytest.raises(ValueError, match=f"module '{PLUGIN}' has no 'Missing'"):
        SCHEDULERS.resolve(f"{PLUGIN}:Missing")
    with pytest.raises(ValueError, match="lacks init, probe, select, observe"):
        SCHEDULERS.resolve(f"{PLUGIN}:NotAScheduler")
    with pytest.raises(ValueError, match="not an import path"):
        import_path("pkg.mod:")


CWD_RULE = """
from dataclasses import dataclass

import numpy as np

from adcs.schedulers import BasicState, SchedulerBase, Selection


@dataclass(frozen=True)
class FirstAvailable(SchedulerBase[BasicState]):
    def init(self, n_clients, data_sizes=None):
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(self, state, round_idx, stats, rng):
        return Selection(np.flatnonzero(stats.available)[: self.m]), state
"""


@pytest.fixture
def in_a_folder_off_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A current folder holding ``cwd_rule.py`` that is not on the module path (as for the
    ``adcs`` command, whose path starts with its script's folder, not the current one)."""
    (tmp_path / "cwd_rule.py").write_text(CWD_RULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "cwd_rule", raising=False)
    return tmp_path


def test_a_module_in_the_current_folder_is_found_by_import_path(
    in_a_folder_off_the_path: Path,
) -> None:
    path_before = list(sys.path)
    cls = SCHEDULERS.resolve("cwd_rule:FirstAvailable")
    assert cls.__module__ == "cwd_rule" and cls(m=2).m == 2
    assert sys.path == path_before  # the current folder was on the path for the import only
    result = runner.invoke(
        cli.app,
        ["run", str(write_config(in_a_folder_off_the_path, TINY + METHOD)), "--out", "out"],
    )
    assert result.exit_code == 0, result.output
    with (in_a_folder_off_the_path / "out" / "runs.csv").open() as f:
        assert [row["method"] for row in csv.DictReader(f)] == ["cwd_rule:FirstAvailable"]


METHOD = '[[methods]]\nname = "cwd_rule:FirstAvailable"\n'


def test_a_module_that_fails_to_import_or_a_constructor_that_raises_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "typo_sel.py").write_text("def select(:\n")
    (tmp_path / "raising_sel.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"cannot import 'typo_sel' .*: SyntaxError: "):
        SCHEDULERS.resolve("typo_sel:Mine")
    with pytest.raises(ValueError, match=r"'raising_sel:Mine'\): RuntimeError: no GPU here"):
        SCHEDULERS.resolve("raising_sel:Mine")
    with pytest.raises(
        ConfigError, match=r"methods\[0\] \(.*:Explodes, \{\}\): RuntimeError: no lic"
    ):
        config_from_dict(_doc(f"{PLUGIN}:Explodes"))


def test_an_entry_point_resolves_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    point = metadata.EntryPoint("lowest", f"{PLUGIN}:LowestIndex", "adcs.schedulers")
    other = metadata.EntryPoint("lowest", f"{PLUGIN}:Greedy", "adcs.other")

    def entry_points(group: str) -> list[metadata.EntryPoint]:
        return [p for p in (point, other) if p.group == group]

    monkeypatch.setattr(metadata, "entry_points", entry_points)
    assert SCHEDULERS.resolve("lowest") is LowestIndex
    assert SCHEDULERS.entry_points() == {"lowest": f"{PLUGIN}:LowestIndex"}
    table: Registry[Any] = Registry("thing", "adcs.other", {})
    assert table.resolve("lowest") is Greedy


def _doc(name: str, **params: Any) -> dict[str, Any]:
    return {
        "name": "plug",
        "m": 2,
        "seeds": [0],
        "data": {"partition": "iid", "n_clients": 4, "train_per_client": 30},
        "sim": {"rounds": 2},
        "methods": [{"name": name, **params}],
    }


def test_a_configuration_checks_a_user_scheduler_like_a_built_in() -> None:
    config = config_from_dict(_doc(f"{PLUGIN}:LowestIndex", offset=1))
    method = config.methods[0]
    assert method.build(2, dict(method.params)) == LowestIndex(m=2, offset=1)
    with pytest.raises(ConfigError, match=r"unknown key methods\[0\].speed"):
        config_from_dict(_doc(f"{PLUGIN}:LowestIndex", speed=1))
    with pytest.raises(ConfigError, match=r"methods\[0\].name: cannot import 'nowhere'"):
        config_from_dict(_doc("nowhere:X"))


class PlainScheduler:
    """The protocol in a plain class (no dataclass): LowestIndex's rule, ``shift`` its offset."""

    observes_updates = False

    def __init__(self, m: int, shift: int = 0) -> None:
        self.m, self.rule = m, LowestIndex(m=m, offset=shift)

    def init(self, n_clients: int, data_sizes: Any = None) -> Any:
        return self.rule.init(n_clients, data_sizes)

    def probe(self, *args: Any) -> Any:
        return self.rule.probe(*args)

    def select(self, *args: Any) -> Any:
        return self.rule.select(*args)

    def observe(self, *args: Any) -> Any:
        return self.rule.observe(*args)


def test_two_points_of_a_scheduler_that_is_no_dataclass_are_refused_not_merged() -> None:
    from adcs.experiments.run.plan import expand_runs

    name = "tests.test_registry:PlainScheduler"
    doc = _doc(name, shift=0)
    doc["methods"].append({"name": name, "shift": 1})
    # both points resolved to no hyperparameters, one identity: the second never ran
    with pytest.raises(
        ConfigError,
        match=r"methods\[1\] \(tests.test_registry:PlainScheduler\): "
        r'the hyperparameters \{"shift": 1\} and \{"shift": 0\} would be one run',
    ):
        expand_runs(config_from_dict(doc))
    assert len(expand_runs(config_from_dict(_doc(name, shift=1)))) == 1


def test_the_cli_runs_a_user_scheduler_and_names_one_that_breaks_the_contract(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:LowestIndex"\n')
    out = tmp_path / "out"
    result = runner.invoke(
        cli.app, ["run", str(path), "--out", str(out), "--set", "methods.0.offset=1"]
    )
    assert result.exit_code == 0, result.output
    runs = json.loads((out / "summary.json").read_text())["runs"]
    assert [r["method"] for r in runs] == [f"{PLUGIN}:LowestIndex"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["methods"] == [{"name": f"{PLUGIN}:LowestIndex", "offset": 1}]

    bad = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:Greedy"\n')
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(tmp_path / "bad")])
    assert result.exit_code == 1
    error = one_error(result)
    assert error.startswith("error: scheduler: ") and "Greedy" in error
    assert "must select 2 distinct available clients" in error and "got array([0, 1, 2])" in error


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("BeyondTheLast", "in [0, 4) (min(m=2, 4 available)), got array([4, 5])"),
        ("BareArray", "must return (Selection, state) from select, got (ndarray, state)"),
    ],
)
def test_a_selection_out_of_range_or_of_another_type_is_named_not_a_traceback(
    tmp_path: Path, name: str, said: str
) -> None:
    bad = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:{name}"\n')
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(tmp_path / "bad")])
    assert result.exit_code == 1
    error = one_error(result)
    assert (
        error.startswith(f"error: scheduler: {PLUGIN}:{name}-seed=0 at round 0 ") and said in error
    )
    assert not (tmp_path / "bad").exists()


def test_a_contract_broken_after_a_checkpoint_says_the_checkpoint_is_kept(tmp_path: Path) -> None:
    bad = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:BreaksLate"\nat = 5\n')
    out = tmp_path / "late"
    args = ["run", str(bad), "--out", str(out), "--set", "sim.rounds=8", "--checkpoint-every", "2"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 1
    error = one_error(result)
    assert error.startswith(f"error: scheduler: {PLUGIN}:BreaksLate-at=5-seed=0 at round 5 ")
    partial = tmp_path / ".late.partial"
    assert error.endswith(
        f"; the checkpoint (round 4 of 8) is kept in {partial}: --resume continues it, "
        "--force discards it"
    )
    assert (partial / "checkpoint").is_dir() and not out.exists()
    assert runner.invoke(cli.app, [*args, "--force", "--set", "methods.0.at=8"]).exit_code == 0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--checkpoint-every", "1"], "error: cannot checkpoint the runs' state (Can't pickle"),
        (["--seeds", "2", "--workers", "2", "--checkpoint-every", "0"],
         "error: simulation worker [01]: cannot send the runs' state back (Can't pickle"),
    ],
)  # fmt: skip
def test_a_state_that_does_not_pickle_is_named(tmp_path: Path, args: list[str], said: str) -> None:
    bad = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:PicklesNot"\n')
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 1
    error = one_error(result)
    # which of two workers fails first is a race: the pattern takes either
    assert re.match(re.escape(said).replace(re.escape("[01]"), "[01]"), error) and error.endswith(
        "a scheduler's state must pickle (checkpoints and workers)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def test_a_leaderboard_entry_that_is_no_scheduler_is_named_as_given(tmp_path: Path) -> None:
    workload = tmp_path / "tiny.toml"
    workload.write_text(TINY.replace('outputs = ["curves"]\n', ""))
    args = ["leaderboard", "--workloads", str(workload), "--out", str(tmp_path / "lb")]
    result = runner.invoke(cli.app, [*args, "--entries", f"uniform,{PLUGIN}:Missing"])
    assert result.exit_code == 2
    assert one_error(result) == (
        f"error: --entries {PLUGIN}:Missing: module '{PLUGIN}' has no 'Missing' "
        f"(from '{PLUGIN}:Missing')"
    )


def test_the_leaderboard_ranks_a_user_scheduler_beside_the_built_in_entries(
    tmp_path: Path,
) -> None:
    workload = tmp_path / "tiny.toml"
    workload.write_text(TINY.replace('outputs = ["curves"]\n', ""))
    out = tmp_path / "lb"
    name = f"{PLUGIN}:LowestIndex"
    args = ["leaderboard", "--workloads", str(workload), "--entries", f"{name},uniform"]
    key = f'methods."{name}".offset=1'  # a method by its name, quoted: it holds dots
    result = runner.invoke(cli.app, [*args, "--set", key, "--out", str(out)])
    assert result.exit_code == 0, result.output
    with (out / "leaderboard.csv").open() as f:
        entries = list(csv.DictReader(f))
    mine = [e for e in entries if e["method"] == name]
    assert len(mine) == 1 and mine[0]["entry"] == "LowestIndex"
    assert mine[0]["variant"] == f"{name}-offset=1"
    assert sum(e["method"] == "uniform" for e in entries) == 1  # a built-in is not repeated
    with (out / "ranks.csv").open() as f:
        assert any(
            r["metric"] == "worst" and r["entry"] == "LowestIndex" for r in csv.DictReader(f)
        )


ROWS = "tests.plugins.my_rows"
_ROWS_DOC = """
name = "rows"
m = 2
seeds = [0]
[data]
dataset = "tests.plugins.my_rows:BLOBS"
n_train = 80
[data.partition]
kind = "iid"
n_clients = 4
[sim]
rounds = 4
eval_every = 2
[sim.availability]
kind = "tests.plugins.my_rows:EveryOther"
shift = 1
[[methods]]
name = "uniform"
"""


@pytest.mark.parametrize(
    ("old", "new", "code", "said"),
    [
        ("EveryOther", "FractionalMask", 2, "sim.availability: FractionalMask.mask(key, round, "
         "groups) must return a bool array of shape (4,), got a float64 array of shape (4,)"),
        ('BLOBS"\nn_train = 80', 'NOT_DATA"', 1,
         f"data: dataset '{ROWS}:NOT_DATA': its loader returned dict, not a Dataset"),
        ("EveryOther", "Unlicensed", 2, "sim.availability: RuntimeError: no trace server"),
    ],
)  # fmt: skip
def test_a_user_row_that_breaks_its_contract_is_named(
    tmp_path: Path, old: str, new: str, code: int, said: str
) -> None:
    path = tmp_path / "rows.toml"
    path.write_text(_ROWS_DOC.replace(old, new))
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == code
    assert one_error(result).endswith(said)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.toml"]


def test_a_user_data_set_and_availability_model_are_rows_like_the_built_ins(
    tmp_path: Path,
) -> None:
    from adcs.experiments.config import config_to_dict, load_config
    from tests.plugins.my_rows import BLOBS, EveryOther

    path = tmp_path / "rows.toml"
    path.write_text(_ROWS_DOC)
    config = load_config(path)
    assert config.sim.availability == EveryOther(shift=1)  # the library object is the config
    doc = config_to_dict(config)
    assert doc["sim"]["availability"] == {"kind": f"{ROWS}:EveryOther", "shift": 1}
    assert config_from_dict(doc) == config
    bad = _ROWS_DOC.replace("shift = 1", "shift = -1")
    with pytest.raises(ConfigError, match=r"sim\.availability\.shift must be an integer >= 0"):
        config_from_dict(tomllib.loads(bad))
    with pytest.raises(ConfigError, match=r"sim\.availability\.p is only for kind = 'bernoulli'"):
        config_from_dict(tomllib.loads(_ROWS_DOC.replace("shift = 1", "p = 0.5")))
    with pytest.raises(ConfigError, match=r"data\.n_train must be an integer >= 40, got 3"):
        config_from_dict(tomllib.loads(_ROWS_DOC.replace("n_train = 80", "n_train = 3")))
    out = tmp_path / "out"
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Blobs" in (out / "report.md").read_text()
    selections = np.load(out / "selections.npz")
    chosen = selections["selected/uniform-seed=0"]  # shift 1: odd clients on even rounds
    assert [sorted(row) for row in chosen.tolist()] == [[1, 3], [0, 2], [1, 3], [0, 2]]
    assert BLOBS.data_folders(None) == []


def test_a_data_set_entry_point_resolves_and_a_wrong_row_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from adcs.data import DATASETS, PARTITIONS
    from tests.plugins.my_rows import BLOBS

    point = metadata.EntryPoint("blobs", f"{ROWS}:BLOBS", "adcs.datasets")
    monkeypatch.setattr(metadata, "entry_points", lambda group: [point] * (group == point.group))
    assert DATASETS.resolve("blobs") is BLOBS and "blobs" not in DATASETS
    with pytest.raises(ValueError, match="not a DatasetEntry"):
        DATASETS.resolve(f"{ROWS}:load_blobs")
    with pytest.raises(ValueError, match="not a PartitionKind"):
        PARTITIONS.resolve(f"{ROWS}:BLOBS")


def test_outputs_are_a_table_the_paper_registers_into() -> None:
    from adcs.experiments.analysis.outputs import output_names

    names = output_names()
    assert "curves" in names and {"fig1", "fig2", "fig3", "table1"} <= set(names)
    with pytest.raises(ConfigError, match=r"outputs\[\] must be one of \[.*'fig1'"):
        config_from_dict({**_doc("uniform"), "outputs": ["fig9"]})


def test_a_user_attack_kind_runs_and_one_that_builds_no_attack_is_one_error_line(
    tmp_path: Path,
) -> None:
    attack = '[sim.attack]\nkind = "tests.plugins.my_rows:LowLoss"\nliars = [1]\n'
    doc = _ROWS_DOC.replace("[[methods]]", attack + "[[methods]]")
    path = tmp_path / "attack.toml"
    path.write_text(doc)
    out = tmp_path / "out"
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sim"]["attack"] == {"kind": f"{ROWS}:LowLoss", "liars": [1]}
    path.write_text(doc.replace(":LowLoss", ":NotAnAttack"))
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2  # a configuration error
    assert result.output.strip() == (
        "error: sim.attack.kind: an attack must be an adcs.adversary Attack or Crafted, got object"
    )


@pytest.mark.parametrize(
    ("attack", "message"),
    [
        (
            {"kind": f"{ROWS}:OtherClients", "liars": [1], "clients": [9]},
            "the attack built for seed 0 names clients [9], not all in [0, 4)",
        ),
        (
            {"kind": f"{ROWS}:OtherClients", "liars": [1], "clients": [2]},
            "the attack built for seed 0 attacks with clients [2], but malicious() names [1]",
        ),
        (
            {"kind": f"{ROWS}:PerSeedCrafted"},
            "a crafted attack drawn per seed must be built for a run first",
        ),
    ],
)
def test_a_user_attack_kind_building_an_attack_the_run_cannot_use_is_one_error(
    attack: dict[str, Any], message: str
) -> None:
    from adcs.experiments.run.plan import expand_runs

    doc = {**_doc("uniform"), "sim": {"rounds": 2, "attack": attack}}
    with pytest.raises(ConfigError) as caught:
        expand_runs(config_from_dict(doc))
    assert str(caught.value) == f"sim.attack.kind: {message}"


def test_a_user_defence_kind_builds_each_runs_defence_and_writes_back_its_table() -> None:
    from adcs.aggregation import Robust, RobustAggregation
    from adcs.experiments.config import config_to_dict
    from adcs.experiments.run.plan import expand_runs

    doc = {
        **_doc("uniform"),
        "sim": {"rounds": 2, "defence": {"kind": f"{ROWS}:TrimmedOf", "trim": 0.3}},
    }
    config = config_from_dict(doc)
    run = expand_runs(config)[0]
    assert run.aggregator == RobustAggregation(Robust.TRIMMED_MEAN, 0.3)
    assert config_to_dict(config)["sim"]["defence"] == {"kind": f"{ROWS}:TrimmedOf", "trim": 0.3}
    doc["sim"]["defence"] = {"kind": f"{ROWS}:NotADefence"}
    with pytest.raises(ConfigError) as caught:
        expand_runs(config_from_dict(doc))
    assert str(caught.value) == (
        "sim.defence.kind: a defence must be an adcs.adversary Defence, got object"
    )
    doc["sim"]["defence"] = {"kind": f"{ROWS}:NoRule"}
    with pytest.raises(ConfigError) as caught:
        expand_runs(config_from_dict(doc))
    assert str(caught.value) == (
        "sim.defence.kind: a defence's aggregator() must give an adcs.aggregation Aggregator "
        "(with aggregate()) or None, got object"
    )
    doc["sim"]["defence"] = {"kind": f"{ROWS}:Missing"}
    with pytest.raises(ConfigError, match=r"sim\.defence\.kind: module .* has no 'Missing'"):
        config_from_dict(doc)


# ------------------------------------------------------------------- a plug-in that raises


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("BreaksAt", "BreaksAt raised ZeroDivisionError in select, run {run} at round 1: the "
         "quality table is empty"),
        ("InitFails", "InitFails raised KeyError in init, run {run}: 'cluster map'"),
    ],
)  # fmt: skip
def test_a_scheduler_that_raises_is_one_line_naming_it_the_run_and_the_round(
    tmp_path: Path, name: str, said: str
) -> None:
    path = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:{name}"\n')
    args = ["run", str(path), "--out", str(tmp_path / "o"), "--workers", "1"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 1 and "Traceback" not in result.output  # was: a bare traceback
    line = one_error(result)
    assert f"scheduler {PLUGIN}:" + said.format(run=f"{PLUGIN}:{name}-seed=0") in line
    assert "--debug" in line
    result = runner.invoke(cli.app, ["--debug", *args[:-1], "2"])  # from a worker process too
    assert result.exit_code == 1 and "Traceback (most recent call last)" in result.output
    raised = "ZeroDivisionError(" if name == "BreaksAt" else "KeyError("
    assert f"raise {raised}" in result.output  # the plug-in's own line


def test_a_partition_whose_split_raises_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "rows.toml"
    path.write_text(_ROWS_DOC.replace('kind = "iid"', f'kind = "{ROWS}:RAISING_PARTITION"'))
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert (
        f"partition {ROWS}:_split_raises raised IndexError in its split (partition = "
        f"'{ROWS}:RAISING_PARTITION'): label 9 has no samples" in one_error(result)
    )


def test_an_availability_model_whose_mask_raises_is_one_line_naming_the_round(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rows.toml"
    path.write_text(_ROWS_DOC.replace("EveryOther", "DownAt"))
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and "Traceback" not in result.output  # was: a traceback
    assert (
        f"availability {ROWS}:DownAt raised ConnectionError in mask, round 2: the trace server "
        "is down" in one_error(result)
    )


@pytest.mark.parametrize("weight", ["-1.0", "nan"])
def test_negative_or_non_finite_weights_are_refused_at_the_selection(
    tmp_path: Path, weight: str
) -> None:
    path = write_config(tmp_path, TINY + f'[[methods]]\nname = "{PLUGIN}:Weighted"\n')
    args = ["run", str(path), "--out", str(tmp_path / "o"), "--set", f"methods.0.weight={weight}"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 1  # was: accepted, the model stepped against the updates
    assert "must give 2 finite, non-negative selection weights" in one_error(result)
    assert "at round 0" in one_error(result)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("offset", "1.5", "offset must be int (its annotation), got 1.5"),
        ("offset", "true", "offset must be int (its annotation), got True"),
        ("rate", '"fast"', "rate must be float (its annotation), got 'fast'"),
        ("deep", "1", "deep must be bool (its annotation), got 1"),
        ("tag", "3", "tag must be str (its annotation), got 3"),
        ("pair", "[1, 2, 3]", "pair must be tuple[int, int] (its annotation), got (1, 2, 3)"),
        ("pair", '[1, "x"]', "pair must be tuple[int, int]"),
    ],
)
def test_a_plugin_parameter_must_fit_its_annotation(key: str, value: str, said: str) -> None:
    doc = _doc(f"{PLUGIN}:Typed", **{key: tomllib.loads(f"v = {value}")["v"]})
    with pytest.raises(ConfigError, match=re.escape(said)):  # was: accepted as given
        config_from_dict(doc)


def test_a_plugin_parameter_that_fits_its_annotation_is_accepted() -> None:
    config = config_from_dict(_doc(f"{PLUGIN}:Typed", offset=2, rate=1, deep=True, pair=[3, 4]))
    assert dict(config.methods[0].params) == {"offset": 2, "rate": 1, "deep": True, "pair": (3, 4)}
    for key, value in [("offset", np.int64(3)), ("rate", np.float32(0.5)), ("deep", np.True_)]:
        check_annotation(Typed, key, value)  # NumPy's numbers from Python (a notebook's sweep)


def test_two_distributions_declaring_one_entry_point_name_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def point(value: str, dist: str) -> Any:
        ep = metadata.EntryPoint("lowest", value, "adcs.schedulers")
        return type("Point", (), {"name": ep.name, "value": ep.value, "group": ep.group,
                                  "load": ep.load, "dist": type("D", (), {"name": dist})()})()  # fmt: skip

    both = [point(f"{PLUGIN}:LowestIndex", "pkg-a"), point(f"{PLUGIN}:Greedy", "pkg-b")]
    monkeypatch.setattr(metadata, "entry_points", lambda group: both * (group == "adcs.schedulers"))
    with pytest.raises(ValueError, match=r"'lowest' is declared by 2 distributions: pkg-a "):
        SCHEDULERS.resolve("lowest")  # was: the first one found, silently
    with pytest.raises(ValueError, match=r"pkg-b \(.*:Greedy\)"):
        SCHEDULERS.resolve("lowest")
    same = [point(f"{PLUGIN}:LowestIndex", "pkg-a")] * 2  # one distribution seen twice
    monkeypatch.setattr(metadata, "entry_points", lambda group: same * (group == "adcs.schedulers"))
    assert SCHEDULERS.resolve("lowest") is LowestIndex
