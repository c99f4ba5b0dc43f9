"""The command line end to end (typer's CliRunner), and its refusals of bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.experiments.config import packaged_config_path
from tests.paths import full_data_dir

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = full_data_dir()

runner = CliRunner()


def data_args() -> list[str]:
    """The full data set when this workplace has it; otherwise the lookup (offline: the subset)."""
    return ["--data", str(SHARED_DATA)] if SHARED_DATA.is_dir() else []


def test_reproduce_fig1_quick_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "fig1"
    args = ["reproduce", "fig1", "--quick", "--rounds", "20", "--seeds", "1", "--out", str(out)]
    result = runner.invoke(cli.app, args + data_args())
    assert result.exit_code == 0, result.output
    for name in ("fig1.png", "report.md", "summary.json", "manifest.json", "metrics.csv"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(r["method"] for r in summary["runs"]) == sorted(
        ["uniform", "powerofchoice", "ocs", "divfl", "staticdpp", "adcs"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["quick"] is True
    assert manifest["config"]["sim"]["rounds"] == 20
    assert manifest["seeds"] == [0]
    assert "not tested by this run" in (out / "report.md").read_text()  # 20 rounds, 1 seed
    assert str(out / "report.md") in result.output.replace("\n", "")
    assert "rounds/s" in result.output


def test_run_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mine.toml"
    text = packaged_config_path("quick").read_text()
    head = text[: text.index("[[methods]]")].replace('name = "quick"', 'name = "mine"')
    head = head.replace('outputs = ["fig1", "table1"]', 'outputs = ["curves"]')
    config.write_text(head + '[[methods]]\nname = "uniform"\n\n[[methods]]\nname = "adcs"\n')
    out = tmp_path / "out"
    args = ["run", str(config), "--rounds", "10", "--seeds", "1", "--out", str(out)]
    result = runner.invoke(cli.app, args + data_args())
    assert result.exit_code == 0, result.output
    assert (out / "curves.png").is_file()
    runs = json.loads((out / "summary.json").read_text())["runs"]
    assert [r["method"] for r in runs] == ["uniform", "adcs"]
    assert runs[1]["theta"] == 0.8 and runs[1]["refresh_every"] == 20


def test_run_refuses_a_bad_config_before_writing_anything(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        packaged_config_path("quick").read_text().replace("eval_every = 50", "eval_evry = 50")
    )
    out = tmp_path / "results" / "x"
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(out)])
    assert result.exit_code == 2
    assert "sim.eval_evry" in result.output
    assert not (tmp_path / "results").exists()


def test_errors_naming_a_table_print_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        packaged_config_path("quick").read_text()
        + '\n[[methods]]\nname = "adcs"\ncomm_score = "speed"\n'
    )
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "add a [sim.system] table" in " ".join(result.output.split())


@pytest.mark.parametrize(
    "args",
    [
        ["reproduce", "fig9"],
        ["reproduce", "fig1", "--seeds", "0"],
        ["reproduce", "fig1", "--rounds", "-3"],
        ["run", "does-not-exist.toml"],
        ["bench", "gpu"],
        ["leaderboard", "--workloads", "nope"],
        ["leaderboard", "--workloads", "does-not-exist.toml"],
        ["leaderboard", "--workloads", "paper,paper"],
    ],
)
def test_bad_arguments_exit_non_zero(args: list[str], tmp_path: Path) -> None:
    """Each refused with exit status 2 and nothing written."""
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "o").exists()


def test_a_foreign_out_folder_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    for force in ([], ["--force"]):
        result = runner.invoke(cli.app, ["reproduce", "fig1", "--quick", "--out", str(out), *force])
        assert result.exit_code == 2
        assert "adcs did not write" in one_error(result)
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_reproduce_theory_quick_writes_a_manifest(tmp_path: Path) -> None:
    out = tmp_path / "theory"
    result = runner.invoke(cli.app, ["reproduce", "theory", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report.md").is_file()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["experiment"] == "theory" and manifest["quick"] is True
    assert "Fashion-MNIST" in manifest["real_updates"] and "adcs" in manifest["versions"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["theory"]


# ------------------------------------------------------------------ every failure: one line


TINY = """
name = "tiny"
m = 2
seeds = [0]
outputs = ["curves"]
[data]
partition = "paper_groups"
n_groups = 2
clients_per_group = 2
train_per_client = 30
test_per_client = 10
[sim]
rounds = 4
eval_every = 2
"""


def one_error(result: Any) -> str:
    """The one ``error:`` line of a refused command (and no traceback)."""
    output = result.output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert "Traceback" not in output and not isinstance(result.exception, AssertionError)
    return errors[0]


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe binary",
            "not a text configuration: byte 10 is not UTF-8",
        ),
        ('name = "café"\n'.encode("latin-1"), "is not UTF-8 (a binary file?)"),
        (b"name = 1\x00\n", "it holds NUL bytes"),
        (b"name = [\n", "not valid TOML"),
    ],
)
def test_a_config_that_is_not_toml_text_is_one_line(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert message in one_error(result)
    assert not (tmp_path / "o").exists()


def test_a_folder_or_a_missing_file_is_no_configuration(tmp_path: Path) -> None:
    (tmp_path / "folder.toml").mkdir()
    result = runner.invoke(cli.app, ["run", str(tmp_path / "folder.toml")])
    assert result.exit_code == 2
    assert "is a folder, not a configuration file" in one_error(result)
    result = runner.invoke(cli.app, ["run", str(tmp_path / "none.toml")])
    assert result.exit_code == 2
    assert "no such configuration file" in one_error(result)


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        (("rounds = 4", "rounds = 4\nbatch_size = 1000000"), "sim.batch_size=1000000 (local_steps=1) needs about"),
        (("train_per_client = 30", "train_per_client = 5000"), "data.train_per_client=5000 needs"),
        (("test_per_client = 10", "test_per_client = 1000"), "data.test_per_client=1000 needs"),
        (
            ('partition = "paper_groups"\nn_groups = 2\nclients_per_group = 2\ntrain_per_client = 30\ntest_per_client = 10',
             'partition = "iid"\nn_clients = 100000'),
            "data.n_clients = 100000: the split holds",
        ),
        (("clients_per_group = 2\ntrain_per_client = 30\ntest_per_client = 10",
          "clients_per_group = 20000"),
         "data.n_groups × data.clients_per_group = 40000: the split"),
    ],
)  # fmt: skip
def test_a_config_the_data_cannot_satisfy_names_its_key(
    tmp_path: Path, replace: tuple[str, str], message: str
) -> None:
    text = TINY.replace(*replace)
    assert text != TINY
    path = write_config(tmp_path, text + '[[methods]]\nname = "uniform"\n')
    result = runner.invoke(cli.app, ["run", str(path), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    error = one_error(result)
    assert message in error
    assert "train_per_client" not in error or "train_per_client" in replace[1]  # no unset key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml"]


def config_file(tmp_path: Path) -> Path:
    return write_config(tmp_path, TINY + '[[methods]]\nname = "uniform"\n')


def test_an_out_holding_an_input_of_the_run_is_refused_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert (
        runner.invoke(cli.app, ["run", str(config_file(tmp_path)), "--out", str(out)]).exit_code
        == 0
    )
    mine = out / "mine.toml"  # the user keeps the configuration beside its results
    mine.write_text(config_file(tmp_path).read_text())
    for extra in ([], ["--sweep", "m=1,2"]):
        result = runner.invoke(cli.app, ["run", str(mine), "--out", str(out), "--force", *extra])
        assert result.exit_code == 2
        assert (
            one_error(result) == f"error: --out {out} holds {mine}, an input of this run: "
            "choose another --out"
        )
        assert mine.is_file()
    trace = out / "trace.npz"  # a file the simulator reads, kept there too
    np.savez(trace, available=np.ones((4, 4), dtype=bool))
    sets = ["--set", f'sim.availability={{kind="trace", path="{trace}"}}']
    result = runner.invoke(cli.app, ["run", str(config_file(tmp_path)), "--out", str(out), *sets])
    assert result.exit_code == 2 and f"holds {trace}, an input" in one_error(result)
    assert trace.is_file()


def test_a_path_holding_an_emoji_code_is_printed_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "o:thumbs_up:x"
    result = runner.invoke(cli.app, ["run", str(config_file(tmp_path)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    printed = "".join(result.output.splitlines())  # unwrapped
    assert f"{out}/report.md" in printed and "\N{THUMBS UP SIGN}" not in printed
    result = runner.invoke(cli.app, ["run", str(tmp_path / "c:smile:.toml")])
    assert result.exit_code == 2 and "c:smile:.toml" in one_error(result)


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (lambda tmp: ".", "is the current folder"),
        (lambda tmp: "..", "contains the current folder"),
        (lambda tmp: str(tmp / "c.toml"), "exists and is not a folder"),
        (lambda tmp: str(tmp / "c.toml" / "sub"), "c.toml is not a folder"),
        (lambda tmp: "/proc/sys/adcs-test", "is not writable"),
    ],
)
def test_an_unusable_out_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: Any, message: str
) -> None:
    config = config_file(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    result = runner.invoke(cli.app, ["run", str(config), "--out", out(tmp_path), "--force"])
    assert result.exit_code == 2
    assert message in one_error(result)
    assert "rounds" not in result.output.replace("rounds × ", "")  # no simulation started
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "work"]
    assert list(work.iterdir()) == []


def test_an_os_failure_is_one_line(tmp_path: Path) -> None:
    result = runner.invoke(
        cli.app, ["run", str(config_file(tmp_path)), "--out", "/sys/kernel/adcs-test/o"]
    )
    assert result.exit_code == 1
    assert one_error(result).startswith("error: cannot create --out /sys/kernel/adcs-test/o:")


def test_a_read_only_parent_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("permissions do not bind root (the /proc case covers a read-only place)")
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = runner.invoke(
            cli.app, ["run", str(config_file(tmp_path)), "--out", str(locked / "o")]
        )
    finally:
        locked.chmod(0o700)
    assert result.exit_code == 2
    assert "is not writable" in one_error(result)


def test_earlier_results_are_replaced_only_with_force(tmp_path: Path) -> None:
    config, out = config_file(tmp_path), tmp_path / "out"
    assert runner.invoke(cli.app, ["run", str(config), "--out", str(out)]).exit_code == 0
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out)])
    assert result.exit_code == 2 and "pass --force to replace them" in one_error(result)
    first = (out / "manifest.json").read_text()
    assert runner.invoke(cli.app, ["run", str(config), "--out", str(out), "--force"]).exit_code == 0
    assert (out / "manifest.json").read_text() != first  # a new session, a new manifest


def test_a_second_run_on_the_same_out_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    from adcs.experiments.run.folder import ResultsFolder

    first = ResultsFolder(tmp_path / "out")
    first.acquire("adcs run first.toml --out out")
    try:
        result = runner.invoke(
            cli.app, ["run", str(config_file(tmp_path)), "--out", str(tmp_path / "out")]
        )
    finally:
        first.release()
    assert result.exit_code == 1  # the run cannot go on now; the input is fine (README: exit 1)
    error = one_error(result)
    assert "being written by another adcs run" in error and "adcs run first.toml" in error


def test_a_stale_partial_folder_is_named_and_cleaned_with_force(tmp_path: Path) -> None:
    config, out = config_file(tmp_path), tmp_path / "out"
    stale = tmp_path / ".out.partial"
    stale.mkdir()
    (stale / "writer.json").write_text(json.dumps({"pid": 999999, "started_at": "yesterday"}))
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out)])
    assert result.exit_code == 2
    assert ".out.partial (pid 999999, started yesterday; no checkpoint)" in one_error(result)
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.toml", "out"]


def test_resume_is_refused_when_there_is_nothing_to_resume(tmp_path: Path) -> None:
    config = config_file(tmp_path)
    result = runner.invoke(cli.app, ["run", str(config), "--resume"])
    assert result.exit_code == 2 and "--resume needs --out" in one_error(result)
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o"), "--resume"])
    assert result.exit_code == 2 and "no interrupted run to resume" in one_error(result)


def test_resume_with_another_configuration_names_the_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adcs.experiments.run.runner import RunInterrupted

    config, out = config_file(tmp_path), tmp_path / "out"

    def stop(done: int, total: int) -> None:
        if done >= 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli._Lines, "tracker", lambda self, d, u: stop)
    result = runner.invoke(
        cli.app, ["run", str(config), "--out", str(out), "--checkpoint-every", "1"]
    )
    assert result.exit_code == 130
    error = one_error(result)
    assert error.startswith("error: interrupted (Ctrl-C): the checkpoint (round 1 of 4)")
    assert error.endswith("--resume")
    assert isinstance(result.exception, SystemExit) and not isinstance(
        result.exception, RunInterrupted
    )
    result = runner.invoke(
        cli.app, ["run", str(config), "--out", str(out), "--rounds", "6", "--resume"]
    )
    assert result.exit_code == 2
    error = one_error(result)
    assert "sim.rounds (interrupted run: 4, now: 6); the checkpoint is kept in " in error
    assert error.endswith(".out.partial: --resume continues it, --force discards it")
    monkeypatch.undo()
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out), "--resume"])
    assert result.exit_code == 0, result.output
    assert "(resumed)" in result.output


# ------------------------------------------------------------------ warnings, progress, workers


def test_each_warning_is_shown_once(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    cli._configure_logging(verbose=False)
    log = logging.getLogger("adcs.data.fashion_mnist")
    for _ in range(3):
        log.warning("Fashion-MNIST not found; using the shipped subset")
    log.warning("another warning")
    err = capsys.readouterr().err
    assert err.count("Fashion-MNIST not found") == 1 and err.count("another warning") == 1


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = cli._Lines(every=3600.0)
    update = lines.tracker("fig1", "rounds")
    for done in (0, 50, 100, 150, 200):
        update(done, 200)
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("fig1: 0/200 rounds (0%)")
    assert len(err) == 2 and err[1].startswith("fig1: 200/200 rounds (100%), ")
    assert "rounds/s" in err[1] and "ETA 0:00:00" in err[1]


def test_the_default_workers_are_polite() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert 1 <= cli.default_workers() <= min(4, max(1, (cpus or 1) // 2))


def test_bench_delegates_to_the_script_and_passes_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "bench_map.py"
    record = tmp_path / "argv.json"
    script.write_text(
        "from __future__ import annotations\n"
        "import json\n"
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\n"  # needs its module in sys.modules while loading
        "class Row:\n"
        "    n: int\n"
        "def main(argv):\n"
        f"    open({str(record)!r}, 'w').write(json.dumps(list(argv)))\n"
        "    return 3\n"
    )
    monkeypatch.setattr(cli, "_bench_candidates", lambda name: [tmp_path / f"bench_{name}.py"])
    result = runner.invoke(cli.app, ["bench", "map", "--sizes", "30,100", "-q"])
    assert result.exit_code == 3, result.output
    assert json.loads(record.read_text()) == ["--sizes", "30,100", "-q"]


def test_bench_without_its_script_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_bench_candidates", lambda name: [tmp_path / f"bench_{name}.py"])
    result = runner.invoke(cli.app, ["bench", "flower"])
    assert result.exit_code == 1
    assert "bench_flower.py not found" in result.output
    assert str(tmp_path) in result.output.replace("\n", "")


def test_bench_map_runs_its_measurements_through_the_cli():
    # the real script, loaded by path: its measuring child processes must work from there too
    result = runner.invoke(cli.app, ["bench", "map", "--sizes", "200", "--ms", "5", "--ks", "8"])
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output
    assert result.output.count("200 │") >= 3  # features, dense and naive rows were measured


def test_bench_scale_runs_through_the_cli(tmp_path):
    # loaded by path like every bench script: its forked measurements must work from there
    figure = tmp_path / "scale.png"
    argv = ["bench", "scale", "--quick", "--sizes", "1000", "--methods", "uniform",
            "--map-n", "2000", "--sketch-rounds", "0", "--figure", str(figure)]  # fmt: skip
    result = runner.invoke(cli.app, argv)
    assert result.exit_code == 0, result.output
    assert "uniform        1,000" in result.output and figure.is_file()
    assert "target: MAP on 2,000 candidates" in result.output


def test_the_leaderboard_refuses_a_workload_with_methods_in_one_line(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(packaged_config_path("quick").read_text())  # it lists [[methods]]
    result = runner.invoke(cli.app, ["leaderboard", "--workloads", str(mine), "--out",
                                     str(tmp_path / "o")])  # fmt: skip
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "lists no [[methods]]" in lines[0]
    assert not (tmp_path / "o").exists()


def test_an_unknown_workload_names_the_known_ones(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["leaderboard", "--workloads", "m7"])
    assert result.exit_code == 2
    assert "no leaderboard workload 'm7'; known: [" in result.output
    for name in ("paper", "m6", "bernoulli", "cnn"):
        assert f"'{name}'" in result.output


def test_a_shipped_name_runs_from_any_folder_as_adcs_run_resolves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pd = pytest.importorskip("pandas")
    import adcs

    monkeypatch.chdir(tmp_path)  # no experiments/ folder here: only the shipped configurations
    out = tmp_path / "cli"
    args = ["run", "quick", "--rounds", "2", "--seeds", "1", "--out", str(out), *data_args()]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    data = {} if not SHARED_DATA.is_dir() else {"data": SHARED_DATA}
    python = adcs.run("quick", tmp_path / "py", progress=False, sim__rounds=2, seeds=[0], **data)
    pd.testing.assert_frame_equal(adcs.load_results(out).metrics, python.metrics)


@pytest.mark.parametrize("how", ["cli", "python"])
def test_an_unknown_name_is_refused_naming_the_shipped_ones(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import adcs
    from adcs.experiments.config import ConfigError

    monkeypatch.chdir(tmp_path)
    if how == "cli":
        result = runner.invoke(cli.app, ["run", "fig9"])
        assert result.exit_code != 0 and "Traceback" not in result.output
        message = result.output
    else:
        with pytest.raises(ConfigError) as info:
            adcs.run("fig9", progress=False)
        message = str(info.value)
    flat = " ".join(message.split())
    assert "fig9: no such configuration file, nor a shipped configuration's name" in flat
    assert "fig1" in flat and "successor/paper" in flat
