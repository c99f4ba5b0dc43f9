"""Sweeps over any key: parsing, the points, one folder with a column per swept key, resume-safe."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import adcs
from adcs import cli
from adcs.experiments.config import ConfigError, packaged_config
from adcs.experiments.config.overrides import check_edits, option_edits, set_edits
from adcs.experiments.config.sweep import SweepAxis, parse_sweep, point_edits, sweep_axes
from adcs.experiments.run.configure import sweep_points
from adcs.leaderboard import sweep as sweep_mod
from tests.test_cli import TINY, one_error, write_config

runner = CliRunner()
CONFIG = TINY + '[[methods]]\nname = "uniform"\n[[methods]]\nname = "powerofchoice"\n'


def test_values_are_a_comma_list_or_a_toml_array() -> None:
    assert parse_sweep("data.partition.alpha=0.1, 0.3,1") == SweepAxis(
        ("data", "partition", "alpha"), (0.1, 0.3, 1)
    )
    avail = parse_sweep('sim.availability=[{kind="always"}, {kind="bernoulli", p=0.5}]')
    assert avail.values == ({"kind": "always"}, {"kind": "bernoulli", "p": 0.5})
    assert parse_sweep("data.dataset=digits,fashion-mnist").values == ("digits", "fashion-mnist")
    assert parse_sweep('description="a,b", "c"').values == ("a,b", "c")  # a comma in a string
    tables = parse_sweep('sim.availability={kind="always"}, {kind="bernoulli", p=0.5}')
    assert tables.values == avail.values
    assert sweep_axes({"m": [2, 3]}) == [SweepAxis(("m",), (2, 3))]
    nested = {"data": {"partition": {"alpha": [0.1, 1.0]}}, "methods.adcs.theta": [0.6]}
    assert sweep_axes(nested) == [
        SweepAxis(("data", "partition", "alpha"), (0.1, 1.0)),
        SweepAxis(("methods", "adcs", "theta"), (0.6,)),
    ]
    quoted = parse_sweep('methods."pkg.mod:Mine".k=1,2')
    assert quoted.key == ("methods", "pkg.mod:Mine", "k") and quoted.values == (1, 2)
    for text, message in [
        ("m", "expected KEY=V1,V2"),
        ("m=2,2", "repeats a value"),
        ("m=[]", "at least one value"),
        ("a..b=1,2", "expected KEY=V1,V2"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_sweep(text)
    with pytest.raises(ConfigError, match="must be an array"):
        sweep_axes({"m": 3})


def test_every_point_is_a_checked_configuration_named_by_its_values() -> None:
    config = packaged_config("quick")
    axes = [parse_sweep("m=6,12"), parse_sweep("methods.adcs.theta=0.6,0.9")]
    points = sweep_points(config, axes)
    assert [c.name for _, c in points] == [
        "00-m=6-theta=0.6", "01-m=6-theta=0.9", "02-m=12-theta=0.6", "03-m=12-theta=0.9"
    ]  # fmt: skip
    point, last = points[-1]
    assert point == {"m": 12, "methods.adcs.theta": 0.9} and last.m == 12
    assert dict(next(mc for mc in last.methods if mc.name == "adcs").params)["theta"] == 0.9
    with pytest.raises(ConfigError, match=r"sweep m=0.*m"):
        sweep_points(config, [parse_sweep("m=6,0")])  # refused before anything runs
    with pytest.raises(ConfigError, match=r"sim.local_lr=1 and sim.local_lr=1.0 are one config"):
        sweep_points(config, [parse_sweep("sim.local_lr=1,1.0")])
    with pytest.raises(ConfigError, match="sweep name: a point is named after its values"):
        sweep_points(config, [parse_sweep("name=a,b")])
    with pytest.raises(ConfigError, match="sweep m and sweep m both set m"):
        sweep_points(config, [parse_sweep("m=6"), parse_sweep("m=12")])


def test_a_value_set_twice_by_a_sweep_or_an_option_is_refused(tmp_path: Path) -> None:
    config = packaged_config("quick")  # methods 0-5: uniform, ..., adcs
    for axes, shared in [
        (["data.dominance=0.6,0.8", "data.partition.dominance=0.5,1"], "data.partition.dominance"),
        (['data.partition=[{kind="iid", n_clients=30}]', "data.partition.n_clients=2,4"],
         "data.partition"),
        (["methods.5.theta=0.5,0.6", "methods.adcs.theta=0.7,0.8"], "methods.5.theta"),
    ]:  # fmt: skip
        with pytest.raises(ConfigError, match=f"sweep .* both set {shared}: keep one"):
            sweep_points(config, [parse_sweep(a) for a in axes])
    path = write_config(tmp_path, CONFIG)
    for args, said in [
        (["--rounds", "3", "--sweep", "sim.rounds=2,4"], "--rounds and sweep sim.rounds"),
        (["--seeds", "2", "--sweep", "seeds=[[0], [5]]"], "--seeds and sweep seeds"),
        (["--set", "m=3", "--sweep", "m=2,3"], "--set m and sweep m both set m"),
        (["--set", "sim.rounds=3", "--sweep", "sim=[{rounds=2}]"], "both set sim: keep one"),
    ]:
        result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "o"), *args])
        assert result.exit_code == 2 and said in one_error(result)
    # a key of a table set before the sweep is no conflict: the sweep changes that key alone
    avail = set_edits(['sim.availability={kind="bernoulli", p=0.5}'])
    check_edits(
        config.document, [*avail, *point_edits([parse_sweep("sim.availability.p=0.2,0.6")], [0.2])]
    )
    # nor is a dedicated option set beside a --set of another key; of the same key it is
    check_edits(
        config.document, [*set_edits(["sim.eval_every=2", "seeds=[4]"]), *option_edits(rounds=3)]
    )
    for sets, options, said in [
        (["sim.rounds=3"], {"rounds": 5}, "--set sim.rounds and --rounds both set sim.rounds"),
        (["seeds=[5]"], {"seeds": 3}, "--set seeds and --seeds both set seeds"),
        (["data.path=/d/x.npz"], {"data": "/d/y.npz"}, "--set data.path and --data both set"),
    ]:
        with pytest.raises(ConfigError, match=said):
            check_edits(config.document, [*set_edits(sets), *option_edits(**options)])


@pytest.mark.parametrize(
    ("first", "then", "said"),
    [
        (["--sweep", "m=2,3"], [], "holds an interrupted sweep or leaderboard, not a run"),
        ([], ["--sweep", "m=2,3"], "holds an interrupted run, not a sweep or leaderboard"),
    ],
)
def test_resuming_a_sweep_as_a_run_or_a_run_as_a_sweep_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    first: list[str],
    then: list[str],
    said: str,
) -> None:
    args = ["run", str(write_config(tmp_path, CONFIG)), "--out", str(tmp_path / "o")]
    _stop_at(monkeypatch, 2)
    result = runner.invoke(cli.app, [*args, "--checkpoint-every", "1", *first])
    assert result.exit_code == 130, result.output
    monkeypatch.undo()
    result = runner.invoke(cli.app, [*args, "--resume", *then])
    assert result.exit_code == 2 and said in one_error(result)


def test_a_sweep_is_one_folder_whose_points_equal_plain_runs(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG)
    out = tmp_path / "sweep"
    args = ["run", str(config), "--out", str(out), "--sweep", "m=2,3", "--sweep",
            "sim.local_lr=0.01,0.5"]  # fmt: skip
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    with (out / "sweep.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 * 2  # 4 points × 2 methods × 1 seed
    assert {(r["m"], r["sim.local_lr"]) for r in rows} == {
        ("2", "0.01"), ("2", "0.5"), ("3", "0.01"), ("3", "0.5")
    }  # fmt: skip
    assert (out / "sweep.png").is_file() and "# Sweep" in (out / "report.md").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "sweep"
    assert manifest["sweep"]["points"]["03-m=3-local_lr=0.5"] == {"m": 3, "sim.local_lr": 0.5}
    # a point is exactly the run the same values give with --set
    plain = tmp_path / "plain"
    args = ["run", str(config), "--out", str(plain), "--set", "m=3", "--set", "sim.local_lr=0.5"]
    assert runner.invoke(cli.app, args).exit_code == 0
    point = out / "03-m=3-local_lr=0.5"
    for name in ("metrics.csv", "selections.npz", "client_acc.npz"):
        assert (point / name).read_bytes() == (plain / name).read_bytes(), name


def test_a_sweep_table_in_the_file_and_bad_values_named(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG + "[sweep]\nm = [2, 3]\n")
    out = tmp_path / "table"
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["00-m=2", "01-m=3"]
    # Python reads the file as the command line does: the same points
    pytest.importorskip("pandas")
    res = adcs.run(config, tmp_path / "python", progress=False)
    assert sorted(set(res.runs["workload"])) == ["00-m=2", "01-m=3"]
    bad = write_config(tmp_path, CONFIG + "[sweep]\nm = [2, 99]\n")
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(tmp_path / "bad")])
    assert result.exit_code == 2
    assert "m=99 exceeds the number of clients" in one_error(result)
    assert not (tmp_path / "bad").exists()


def test_a_point_too_large_to_hold_is_refused_before_the_first_point_runs(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, CONFIG)
    out = tmp_path / "big"
    args = ["run", str(config), "--out", str(out), "--sweep", "sim.rounds=2,10000000000000"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2
    assert "(sweep sim.rounds=10000000000000): sim.rounds = 10000000000000" in one_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]  # no folder, no .big.partial


ARRAYS = """name = "arr"
m = 2
seeds = [0]
[data]
dataset = "arrays"
path = "d/good.npz"
[data.partition]
kind = "iid"
n_clients = 4
[sim]
rounds = 2
[[methods]]
name = "uniform"
"""


def test_a_point_that_fails_after_others_ran_says_what_is_kept(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    (tmp_path / "d").mkdir()
    np.savez(tmp_path / "d" / "good.npz", x_train=rng.random((40, 3)), y_train=np.arange(40) % 2,
             x_test=rng.random((20, 3)), y_test=np.arange(20) % 2)  # fmt: skip
    (tmp_path / "d" / "bad.npz").write_bytes(b"not an archive")
    config = tmp_path / "arr.toml"
    config.write_text(ARRAYS)
    sweep = f'data.path="{tmp_path}/d/good.npz","{tmp_path}/d/bad.npz"'
    args = ["run", str(config), "--out", str(tmp_path / "o"), "--sweep", sweep]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 1, result.output
    error = one_error(result)
    assert error.startswith("error: data: ") and "bad.npz is not a .npz archive" in error
    partial = tmp_path / ".o.partial"
    assert error.endswith(
        f"; what the sweep has done (1 of 2 points finished) is kept in {partial}: --resume "
        "continues it, --force "
        "discards it"
    )
    assert len(list(partial.glob("00-path=*/manifest.json"))) == 1


def test_the_notebook_api_sweeps_and_reads_the_swept_keys_as_columns() -> None:
    pytest.importorskip("pandas")
    doc = {
        "name": "nb", "m": 2, "seeds": [0], "methods": [{"name": "uniform"}],
        "data": {"partition": "paper_groups", "n_groups": 2, "clients_per_group": 2,
                 "train_per_client": 30, "test_per_client": 10},
        "sim": {"rounds": 4, "eval_every": 2},
    }  # fmt: skip
    res = adcs.run(doc, progress=False, sweep={"m": [2, 3]})
    assert sorted(res.runs["m"]) == [2, 3]
    assert set(res.metrics.groupby("m").size()) == {3}  # rounds 0, 2, 4 at each point
    assert set(res.runs["workload"]) == {"00-m=2", "01-m=3"}


def test_a_sweep_report_says_what_ran_and_warns_where_the_schedulers_had_no_choice(
    tmp_path: Path,
) -> None:
    adcs_entries = (
        '[[methods]]\nname = "adcs"\ntheta = 0.8\n'
        '[[methods]]\nname = "adcs"\ntheta = 0.8\nquality = "grad_norm"\n'
    )
    config = write_config(tmp_path, CONFIG + adcs_entries)
    out = tmp_path / "sweep"
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out), "--sweep", "m=2,4"])
    assert result.exit_code == 0, result.output
    report = (out / "report.md").read_text()
    # ADCS ran at θ = 0.8 alone: no other θ, no "best θ" of one value, no name table
    assert "0.95" not in report and "0.6" not in report and "fresh q" not in report
    assert "θ on each workload" not in report and "tuned per workload" not in report
    assert "name table" not in report
    # two entries of ADCS, told apart by what differs, in the sweep's table and the ranks
    for name in ("ADCS θ=0.8, quality=loss", "ADCS θ=0.8, quality=grad_norm"):
        assert f"| {name} |" in report
    with (out / "ranks.csv").open() as f:
        entries = [r["entry"] for r in csv.DictReader(f) if r["metric"] == "worst"]
    assert len(entries) == len(set(entries)) == 4
    # m = 4 of 4 clients: every scheduler selects everyone (m = 2 leaves a choice)
    said = "every entry selected the same clients in every round of every seed"
    assert f"**The schedulers had little to choose at 01-m=4:** {said}" in report
    assert "00-m=2:" not in report and said in " ".join(result.output.split())


@pytest.mark.parametrize("text", ["m=4,,6", "m=4,6,", "m=,4", "m= , "])
def test_an_empty_value_is_refused_not_dropped(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--sweep m .*(is empty|names no value)"):
        parse_sweep(text)  # was: "m=4,,6" ran 2 points
    assert parse_sweep('m="4,,6",5').values == ("4,,6", 5)  # commas inside a value are kept


def test_the_points_are_checked_once_each_with_progress() -> None:
    config = packaged_config("quick")
    axes = [parse_sweep("sim.local_lr=0.01,0.02,0.03"), parse_sweep("seeds=[[0],[1]]")]
    seen: list[tuple[int, int]] = []
    points = sweep_points(config, axes, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 6) for i in range(1, 7)] and len(points) == 6
    same = [parse_sweep("sim.local_lr=1,1.0"), parse_sweep("seeds=[[0],[1]]")]
    with pytest.raises(
        ConfigError, match=r"=1, seeds=\[0\] and .*=1.0, seeds=\[0\] are one config"
    ):
        sweep_points(config, same)


def test_the_duplicate_check_compares_no_pair_of_points(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear: each point's configuration is hashed once; none is compared with every earlier
    one (22 500 points took 100 s before anything ran)."""
    import adcs.experiments.run.configure as sweep

    compared = []
    real = sweep._frozen

    def frozen(value: object) -> object:
        compared.append(1)
        return real(value)

    config = packaged_config("quick")
    monkeypatch.setattr(sweep, "_frozen", frozen)
    n = len(
        sweep_points(
            config, [parse_sweep("sim.local_lr=" + ",".join(f"0.0{i}" for i in range(1, 10)))]
        )
    )
    calls_per_point = len(compared) / n
    compared.clear()
    axes = [parse_sweep("sim.local_lr=" + ",".join(f"0.0{i}" for i in range(1, 10))),
            parse_sweep("seeds=[[0],[1],[2],[3]]")]  # fmt: skip
    m = len(sweep_points(config, axes))
    assert m == 4 * n and len(compared) == pytest.approx(calls_per_point * m)


def _stop_at(monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    def stop(done: int, total: int) -> None:
        if done >= at:
            raise KeyboardInterrupt

    monkeypatch.setattr(  # in the rounds (the sweep's points are checked first)
        cli._Lines, "tracker", lambda self, d, u: stop if u == "rounds" else lambda *a: None
    )


def test_a_sweep_interrupted_before_any_checkpoint_says_nothing_was_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stop_at(monkeypatch, 1)
    args = ["run", str(write_config(tmp_path, CONFIG)), "--out", str(tmp_path / "o")]
    result = runner.invoke(cli.app, [*args, "--sweep", "m=1,2", "--checkpoint-every", "1000"])
    assert result.exit_code == 130
    error = one_error(result)  # was: "the checkpoint () is kept in …"
    assert "()" not in error and error.endswith("nothing was kept")
    assert not (tmp_path / ".o.partial").exists()


def test_a_sweep_interrupted_in_a_point_says_what_is_kept_and_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stop_at(monkeypatch, 2)
    args = ["run", str(write_config(tmp_path, CONFIG)), "--out", str(tmp_path / "o")]
    result = runner.invoke(cli.app, [*args, "--sweep", "m=1,2", "--checkpoint-every", "1"])
    assert result.exit_code == 130
    error = one_error(result)
    assert error.startswith(
        "error: interrupted (Ctrl-C): what the sweep has done (0 of 2 points finished, point "
        f"00-m=1's checkpoint: round 1 of 4) is kept in {tmp_path / '.o.partial'}; continue with:"
    )
    assert error.endswith("--resume")
    monkeypatch.undo()
    result = runner.invoke(cli.app, [*args, "--sweep", "m=1,2", "--resume"])
    assert result.exit_code == 0, result.output


def test_a_full_disk_in_a_sweep_names_the_folder_and_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    import adcs.leaderboard.sweep as sweep

    def full(*args: object) -> None:  # a write to an open file: its error names no file
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sweep, "_figure", full)
    args = ["run", str(write_config(tmp_path, CONFIG)), "--out", str(tmp_path / "o")]
    result = runner.invoke(cli.app, [*args, "--sweep", "m=1,2"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    partial = tmp_path / ".o.partial"
    assert one_error(result) == (  # was: "operating system: No space left on device"
        f"error: cannot write the sweep's summary: {partial}: No space left on device; what the "
        f"sweep has done (2 of 2 points finished) is kept in {partial}: --resume continues it, "
        "--force discards it"
    )


def test_a_checkpoint_after_the_last_round_says_so() -> None:
    from adcs.experiments.run.execute import ExperimentProgress

    progress = ExperimentProgress(identity={"batches": 2}, finished=2)  # was: "simulation complete"
    assert progress.describe(40) == "all 40 rounds simulated, the results not yet written"


def test_a_sweep_names_each_entrys_best_point_and_whether_it_is_at_the_grids_edge() -> None:
    points = [({"eta": eta, "tau": tau}, f"eta={eta}-tau={tau}")
              for eta in (0.01, 0.03, 0.1) for tau in (1e-4, 1e-3)]  # fmt: skip
    worst = {"eta=0.03-tau=0.0001": 0.4995, "eta=0.1-tau=0.001": 0.499, "eta=0.01-tau=0.001": 0.2}
    table = {"Uniform": {n: {"worst": worst.get(n, 0.1), "avg": 0.8} for _, n in points},
             "Edge": {n: {"worst": 0.5 if n == "eta=0.1-tau=0.0001" else 0.1, "avg": 0.8}
                      for _, n in points}}  # fmt: skip
    uniform, edge = sweep_mod.best_points(table, points)
    assert uniform.startswith(
        "**Uniform: highest mean final worst accuracy at eta=0.03-tau=0.0001** (49.95%; the "
        "next, eta=0.1-tau=0.001, 49.90%). At the edge of the grid in `tau` (the smallest value "
        "swept): a point beyond it may do better; inside the grid in `eta`."
    )
    assert "in `eta` (the largest value swept), `tau` (the smallest value swept)" in edge
    assert "inside" not in edge
    # an axis of labels (not numbers) has no edge
    labelled = [({"partition": "iid"}, "iid"), ({"partition": "skew"}, "skew")]
    only = {"U": {"iid": {"worst": 0.3, "avg": 0.5}, "skew": {"worst": 0.2, "avg": 0.5}}}
    assert sweep_mod.best_points(only, labelled) == [
        "**U: highest mean final worst accuracy at iid** (30.00%; the next, skew, 20.00%)."
    ]
