"""Bad input and faults at the command line: each gives one clear ``error:`` line or a sensible
outcome, never a traceback, a hang or a silently wrong result (the cases of issue 22, Part B)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.data import fashion_mnist as fm
from adcs.experiments.config import ConfigError, packaged_config_path
from adcs.experiments.run import bounds
from adcs.experiments.run.folder import os_error

REPO = Path(__file__).resolve().parents[1]
runner = CliRunner()

TINY = """name = "tiny"
m = 3
seeds = [0]
[data]
dataset = "synthetic"
n_clients = 6
[sim]
rounds = 4
eval_every = 2
{sim}
[[methods]]
name = "uniform"
"""


def tiny(tmp_path: Path, sim: str = "", name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(TINY.format(sim=sim), encoding="utf-8")
    return path


def one_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, output
    assert "Traceback" not in output and "╭" not in output, output
    return errors[0]


# --------------------------------------------------------------------------------------------
# reading the data is a data failure, named per file


def subset_copy(folder: Path) -> Path:
    folder.mkdir()
    for name in fm.FILES:
        shutil.copy(fm.SUBSET_DIR / name, folder / name)
    return folder


@pytest.mark.parametrize("case", ["empty", "fifo", "folder", "gunzipped"])
def test_a_data_folder_that_cannot_be_read_is_a_data_failure_naming_the_file(
    tmp_path: Path, case: str
) -> None:
    data = tmp_path / "data"
    if case == "empty":
        data.mkdir()
    else:
        subset_copy(data)
        (data / fm.TEST_LABELS).unlink()
        {"fifo": os.mkfifo, "folder": os.mkdir}.get(case, lambda p: None)(data / fm.TEST_LABELS)
        if case == "gunzipped":
            (data / fm.TEST_LABELS).with_suffix("").write_bytes(b"\0\0\x08\x01")
    args = ["run", str(packaged_config_path("quick")), "--rounds", "2", "--data", str(data)]
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "out")])
    error = one_error(result.output)
    assert result.exit_code == 1
    assert error.startswith("error: data:") and "cannot write" not in error
    said = {"empty": "it is empty", "fifo": f"{fm.TEST_LABELS} is a named pipe",
            "folder": f"{fm.TEST_LABELS} is a folder, not a file",
            "gunzipped": "there only decompressed"}[case]  # fmt: skip
    assert said in error


def test_a_data_file_the_system_will_not_read_is_a_data_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = subset_copy(tmp_path / "data")

    def refuse(path: Path, *args: object) -> tuple[bytes, str]:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(fm, "_verified_content", refuse)
    args = ["run", str(packaged_config_path("quick")), "--rounds", "2", "--data", str(data)]
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    error = one_error(result.output)
    assert error.startswith("error: data: cannot read") and "Permission denied" in error
    assert str(data) in error


def test_a_wrong_data_dir_variable_is_refused_like_a_wrong_data_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(fm.ENV_VAR, str(tmp_path / "nowhere"))
    args = ["run", str(packaged_config_path("quick")), "--rounds", "2"]
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2  # as a --data that is no folder; before: exit 0 on the subset
    error = one_error(result.output)
    assert f"${fm.ENV_VAR} '{tmp_path / 'nowhere'}' is not a folder" in error
    assert not (tmp_path / "out").exists()
    (tmp_path / "empty").mkdir()  # a folder without the files: a data failure, as with --data
    monkeypatch.setenv(fm.ENV_VAR, str(tmp_path / "empty"))
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"${fm.ENV_VAR} {tmp_path / 'empty'}: it is empty" in one_error(result.output)


def test_a_data_path_in_the_file_is_not_checked_when_data_overrides_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    arrays = {"x_train": rng.random((40, 3)), "y_train": np.arange(40) % 2,
              "x_test": rng.random((20, 3)), "y_test": np.arange(20) % 2}  # fmt: skip
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "good.npz", **arrays)
    config = tmp_path / "c.toml"
    config.write_text(
        'name = "arr"\nm = 2\nseeds = [0]\n[data]\ndataset = "arrays"\npath = "gone.npz"\n'
        '[data.partition]\nkind = "iid"\nn_clients = 4\n[sim]\nrounds = 2\neval_every = 1\n'
        '[[methods]]\nname = "uniform"\n'
    )
    args = ["run", str(config), "--data", str(tmp_path / "data" / "good.npz")]
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["data"]["path"] == str((tmp_path / "data" / "good.npz").resolve())
    shown = " ".join(
        w for w in runner.invoke(cli.app, ["run", "--help"]).output.split() if w != "│"
    )
    assert "folder (or file), in place of data.path" in shown  # it said: Fashion-MNIST folder


def test_arrays_beside_the_configuration_leave_the_folder_free_for_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the how-to's layout: my_data.npz next to the TOML, adcs run from that folder
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "my_data.npz", x_train=rng.random((40, 3)), y_train=np.arange(40) % 2,
             x_test=rng.random((20, 3)), y_test=np.arange(20) % 2)  # fmt: skip
    (tmp_path / "my.toml").write_text(
        'name = "arr"\nm = 2\nseeds = [0]\n[data]\ndataset = "arrays"\npath = "my_data.npz"\n'
        '[data.partition]\nkind = "iid"\nn_clients = 4\n[sim]\nrounds = 2\neval_every = 1\n'
        '[[methods]]\nname = "uniform"\n'
    )
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(cli.app, ["run", "my.toml", "--out", "results/mine"])
    assert result.exit_code == 0, result.output  # was: is inside the data folder
    assert (tmp_path / "results" / "mine" / "manifest.json").is_file()
    result = runner.invoke(cli.app, ["run", "my.toml", "--out", "my_data.npz"])
    assert result.exit_code == 2
    assert "--out my_data.npz is the data file" in one_error(result.output)


# --------------------------------------------------------------------------------------------
# the results folder


def test_a_symlinked_out_puts_the_results_where_it_points(tmp_path: Path) -> None:
    target, link = tmp_path / "target", tmp_path / "link"
    target.mkdir()
    link.symlink_to(target)
    config = tiny(tmp_path)
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(link)])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and (target / "manifest.json").is_file()
    first = (target / "manifest.json").read_text()
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(link), "--force"])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and (target / "manifest.json").read_text() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target", "tiny.toml"]


def test_a_symlink_loop_as_out_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    result = runner.invoke(cli.app, ["run", str(tiny(tmp_path)), "--out", str(tmp_path / "a")])
    assert result.exit_code == 2
    assert "symbolic link that cannot be followed" in one_error(result.output)


def test_an_empty_out_is_named_as_empty(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["run", str(tiny(tmp_path)), "--out", ""])
    assert result.exit_code == 2
    assert "--out is empty" in one_error(result.output)


def test_force_on_a_folder_with_a_foreign_manifest_says_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text('{"mine": true}')
    result = runner.invoke(cli.app, ["run", str(tiny(tmp_path)), "--out", str(out), "--force"])
    assert result.exit_code == 2
    error = one_error(result.output)
    assert "manifest.json is not one adcs wrote" in error and "no manifest.json" not in error
    assert json.loads((out / "manifest.json").read_text()) == {"mine": True}


def test_a_write_failure_without_a_file_names_the_folder() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")  # a write() names no file
    message = str(os_error("cannot write the results", full, Path("/r/.out.partial")))
    assert message == "cannot write the results: /r/.out.partial: No space left on device"


# --------------------------------------------------------------------------------------------
# counts bounded before any work


@pytest.mark.parametrize(
    "args, named",
    [(["--rounds", "10000000000000"], "--rounds 10000000000000"),
     (["--seeds", "1000000000"], "--seeds 1000000000")],
)  # fmt: skip
def test_huge_counts_are_refused_at_once_naming_the_option(
    tmp_path: Path, args: list[str], named: str
) -> None:
    start = time.monotonic()
    result = runner.invoke(
        cli.app, ["run", str(tiny(tmp_path)), *args, "--out", str(tmp_path / "o")]
    )
    assert time.monotonic() - start < 10
    assert result.exit_code == 2
    error = one_error(result.output)
    assert error.startswith(f"error: {named}:") and "at most" in error and "memory" in error
    assert not (tmp_path / "o").exists()


def test_a_huge_count_in_the_file_names_its_key(tmp_path: Path) -> None:
    config = tiny(tmp_path, "eval_clients = 6")
    config.write_text(config.read_text().replace("rounds = 4", "rounds = 900000000000"))
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "sim.rounds = 900000000000" in one_error(result.output)


def test_the_bound_is_the_largest_count_that_fits() -> None:
    counts = bounds.Counts(runs_per_seed=6, seeds=1, rounds=10**12, m=18, eval_every=50,
                           n_clients=30)  # fmt: skip
    limit = 1 << 30
    with pytest.raises(ConfigError, match=r"at most ([\d,]+) fit") as info:
        bounds.check_fit(counts, {"rounds": "--rounds"}, "c.toml", limit)
    best = int(str(info.value).split("at most ")[1].split(" ")[0].replace(",", ""))
    fits = [bounds.record_bytes(bounds.Counts(6, 1, t, 18, 50, 30)) for t in (best, best + 1)]
    assert fits[0] <= limit < fits[1]


def test_eval_clients_above_n_is_refused(tmp_path: Path) -> None:
    config = tiny(tmp_path, "eval_clients = 100")
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "sim.eval_clients = 100 exceeds the number of clients N = 6" in one_error(result.output)


def test_a_hyperparameter_that_does_not_fit_the_real_n_is_refused(tmp_path: Path) -> None:
    config = tiny(tmp_path)
    config.write_text(config.read_text().replace('"uniform"', '"powerofchoice"\ncandidates = 7'))
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    error = one_error(result.output)
    assert error.endswith("run powerofchoice-candidates=7-seed=0: candidates=7 exceeds n_clients=6")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


def test_a_client_count_beyond_int32_is_a_config_error(tmp_path: Path) -> None:
    config = tiny(tmp_path)
    config.write_text(config.read_text().replace("n_clients = 6", "n_clients = 10000000000000"))
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "data.n_clients must be at most 2,147,483,647" in one_error(result.output)


# --------------------------------------------------------------------------------------------
# settings and messages


def test_an_empty_workload_list_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["leaderboard", "--workloads", " , ", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "names no workload" in one_error(result.output)


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--entries", "", "--entries '' names no entry"),  # was: run as if absent
        ("--rank-by", " ", "--rank-by ' ' names no column"),
        ("--workloads", "paper,,cnn", "item 2 of 3 is empty"),  # was: dropped silently
        ("--entries", "uniform,", "item 2 of 2 is empty"),
    ],
)
def test_an_empty_name_in_a_list_option_is_refused(
    tmp_path: Path, option: str, value: str, said: str
) -> None:
    result = runner.invoke(cli.app, ["leaderboard", option, value, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and said in one_error(result.output)
    assert not (tmp_path / "o").exists()


def test_the_dropout_range_is_said_as_it_is_checked(tmp_path: Path) -> None:
    for value in ("1.5", "1.0"):
        config = tiny(tmp_path, f"dropout = {value}")
        result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o")])
        assert result.exit_code == 2
        assert f"sim.dropout must be a number in [0, 1), got {value}" in one_error(result.output)


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    config = tiny(tmp_path)
    config.write_bytes(b"\xef\xbb\xbf" + config.read_bytes())
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output


def test_a_bad_option_value_is_one_error_line(tmp_path: Path) -> None:
    for args in (["run", str(tiny(tmp_path)), "--rounds", "abc"], ["runn"], ["run"]):
        result = runner.invoke(cli.app, args)
        assert result.exit_code == 2
        error = one_error(result.output)
        assert "--help" in error and len(result.output.strip().splitlines()) == 1


def test_the_summary_table_is_whole_in_a_log(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["run", str(tiny(tmp_path)), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    header = next(line for line in lines if line.startswith("┏"))
    assert header.endswith("┓") and any("client updates ┃" in line for line in lines)
    assert "accuracy in %" in result.output


def test_the_attack_suite_names_the_command_that_runs_it() -> None:
    result = runner.invoke(cli.app, ["run", str(REPO / "experiments" / "attacks.toml")])
    assert result.exit_code == 2
    assert "adcs bench attacks --config" in one_error(result.output)


def test_bench_torch_help_works_without_pytorch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    monkeypatch.delitem(sys.modules, "adcs.sim.torch", raising=False)
    result = runner.invoke(cli.app, ["bench", "torch", "--help"])
    assert result.exit_code == 0, result.output
    assert "usage: adcs bench torch" in result.output


def test_the_readme_lists_the_metrics_columns_written(tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["run", str(tiny(tmp_path)), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0
    header = (tmp_path / "o" / "metrics.csv").read_text().splitlines()[0].split(",")
    readme = (REPO / "docs" / "guide.md").read_text()  # the README's user guide
    bullet = readme[readme.index("- `metrics.csv`:") :].split("\n- ")[0]
    for column in header:
        shown = "acc_g0…" if column.startswith("acc_g") else column
        assert f"`{shown}`" in bullet, column


# --------------------------------------------------------------------------------------------
# an address where something other than Ray listens


@pytest.fixture
def not_ray() -> Iterator[str]:
    """A plain TCP listener on 127.0.0.1 that accepts and says nothing."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


def test_a_listener_that_is_not_ray_is_one_line_at_once(tmp_path: Path, not_ray: str) -> None:
    pytest.importorskip("ray")
    start = time.monotonic()
    args = ["run", str(tiny(tmp_path)), "--out", str(tmp_path / "o"), "--ray-address", not_ray]
    result = runner.invoke(cli.app, args)
    assert time.monotonic() - start < 10
    assert result.exit_code == 1
    assert "answers but is not a Ray cluster" in one_error(result.output)


def test_sigterm_while_asking_a_listener_exits_143_at_once(tmp_path: Path, not_ray: str) -> None:
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    args = ["run", str(tiny(tmp_path)), "--out", str(tmp_path / "o"), "--ray-address", not_ray]
    proc = subprocess.Popen(
        [sys.executable, "-m", "adcs", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()  # the first line: the run is about to reach the cluster
    proc.send_signal(15)
    start = time.monotonic()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143
    assert time.monotonic() - start < 3
    assert one_error(err).startswith("error: terminated (SIGTERM)")


# --------------------------------------------------------------------------------------------
# the sweep script


def test_the_sweep_classifies_a_few_cases() -> None:
    from scripts.bad_input_sweep import BAD, report, sweep

    names = ["rounds-huge", "out-empty", "config-bom", "config-dropout-1.0"]
    results, skipped = sweep(names, jobs=2)
    outcomes = {r.case.name: r.outcome for r in results}
    assert outcomes == {"rounds-huge": "clear error", "out-empty": "clear error",
                        "config-bom": "sensible", "config-dropout-1.0": "clear error"}  # fmt: skip
    assert not skipped and not any(r.outcome in BAD for r in results)
    assert "4 cases run, 0 skipped: 3 clear error, 1 sensible, 0 traceback" in report(results, [])


def test_the_sweep_calls_an_accepted_bad_input_silently_wrong(tmp_path: Path) -> None:
    from scripts.bad_input_sweep import Case, classify

    case = Case("x", ("run",), says="sim.rounds", code=2)
    assert classify(case, 0, "done", "", tmp_path)[0] == "silent wrong"
    assert classify(case, None, "", "", tmp_path)[0] == "hang"
    assert classify(case, 1, "", "Traceback (most recent call last):\n", tmp_path)[0] == "traceback"
    assert classify(case, 2, "", "error: something else\n", tmp_path)[0] == "misleading"
    assert classify(case, 2, "", "error: sim.rounds must be\n", tmp_path)[0] == "clear error"
