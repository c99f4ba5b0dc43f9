"""``--ray-address``: experiments and the leaderboard on a real Ray cluster, started here on
127.0.0.1 and stopped by its PID, give the files of a local run byte for byte.

The commands run as subprocesses (the command line a user types), so this test process never
connects to Ray itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray")

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
REPRODUCIBLE = ("metrics.csv", "runs.csv", "selections.npz", "summary.json", "client_acc.npz")
LEADERBOARD = ("leaderboard.csv", "ranks.csv", "summary.json", "report.md")

WORKLOAD = """\
name = "tiny"
description = "Synthetic(1, 1), 12 clients"
m = 3
seeds = [0, 1]
outputs = ["curves"]

[data]
dataset = "synthetic"
n_clients = 12
alpha = 1.0
beta = 1.0

[data.partition]
kind = "natural"
seed = 0

[sim]
rounds = 6
eval_every = 2
batch_size = 5
local_lr = 0.05
"""
METHODS = """
[[methods]]
name = "uniform"

[[methods]]
name = "powerofchoice"

[[methods]]
name = "adcs"
refresh_every = 2
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    # the checkout, so that the cluster's workers import a user's scheduler as the driver does
    # (tests.plugins.my_selection; a real user installs the package on every node)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (2 CPUs), stopped by its PID afterwards."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit 107 bytes
    log = Path(temp) / "start.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(BIN / "ray"), "start", "--head", "--block", f"--port={port}",
             "--node-ip-address=127.0.0.1", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats", f"--temp-dir={temp}"],
            stdout=out, stderr=subprocess.STDOUT, env=_env(), start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "will now block" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("the Ray cluster did not start:\n" + log.read_text()[-2000:])
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(temp, ignore_errors=True)


def adcs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "adcs"), *args], cwd=cwd, env=_env(), capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip


def test_a_run_on_the_cluster_gives_the_files_of_a_local_run(cluster: str, tmp_path: Path) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(WORKLOAD + METHODS, encoding="utf-8")
    here = adcs("run", str(config), "--out", "here", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    there = adcs("run", str(config), "--out", "there", "--ray-address", cluster, cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    assert "shards on the Ray cluster" in there.stdout
    for name in REPRODUCIBLE:
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes()
    manifest = json.loads((tmp_path / "there" / "manifest.json").read_text())
    shards = manifest["executor"]["shards"]
    assert manifest["executor"]["kind"] == "ray" and manifest["executor"]["address"] == cluster
    assert sorted(k.rsplit("/", 1)[1] for k in shards) == ["seed-0", "seed-1"]
    assert all(s["pid"] != manifest["sessions"][0]["pid"] for s in shards.values())


def test_a_user_scheduler_by_import_path_runs_on_the_cluster(cluster: str, tmp_path: Path) -> None:
    config = tmp_path / "mine.toml"
    mine = '\n[[methods]]\nname = "tests.plugins.my_selection:LowestIndex"\noffset = 1\n'
    config.write_text(WORKLOAD + mine, encoding="utf-8")
    here = adcs("run", str(config), "--out", "here", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    there = adcs("run", str(config), "--out", "there", "--ray-address", cluster, cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    for name in REPRODUCIBLE:
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes()
    runs = json.loads((tmp_path / "there" / "summary.json").read_text())["runs"]
    assert {r["method"] for r in runs} == {"tests.plugins.my_selection:LowestIndex"}


def test_a_leaderboard_on_the_cluster_gives_the_files_of_a_local_one(
    cluster: str, tmp_path: Path
) -> None:
    workload = tmp_path / "tiny.toml"
    workload.write_text(WORKLOAD, encoding="utf-8")
    args = ("leaderboard", "--workloads", str(workload))
    here = adcs(*args, "--out", "here", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    there = adcs(*args, "--out", "there", "--ray-address", cluster, cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    for name in LEADERBOARD:
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes()
    for name in REPRODUCIBLE:
        a, b = tmp_path / "here" / "tiny" / name, tmp_path / "there" / "tiny" / name
        assert a.read_bytes() == b.read_bytes(), name


def test_an_address_where_nothing_listens_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "tiny.toml"
    config.write_text(WORKLOAD + METHODS, encoding="utf-8")
    address = f"127.0.0.1:{_free_port()}"
    result = adcs("run", str(config), "--out", "x", "--ray-address", address, cwd=tmp_path)
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"error: cannot connect to the Ray cluster at {address}: nothing answers on {address} "
        "(connection refused); start one with `ray start --head` or check the address"
    ]
    assert not (tmp_path / "x").exists()


def test_a_sigterm_stops_a_sharded_run_resumably_and_resume_gives_the_local_files(
    cluster: str, tmp_path: Path
) -> None:
    """Ray's own SIGTERM handler would kill the driver untidily; adcs's is kept."""
    config = tmp_path / "long.toml"
    text = (WORKLOAD + METHODS).replace("seeds = [0, 1]", "seeds = [0, 1, 2]")
    config.write_text(text.replace("rounds = 6", "rounds = 3000").replace("eval_every = 2",
                                                                          "eval_every = 500"))  # fmt: skip
    here = adcs("run", str(config), "--out", "here", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    args = [str(BIN / "adcs"), "run", str(config), "--out", "there", "--ray-address", cluster]
    proc = subprocess.Popen(args, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    info = tmp_path / ".there.partial" / "checkpoint" / "info.json"
    deadline = time.monotonic() + 300
    while not (info.is_file() and "shard" in info.read_text(errors="replace")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "terminated (SIGTERM)" in err and "--resume" in err
    again = adcs("run", str(config), "--out", "there", "--resume", "--ray-address", cluster,
                 cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    for name in REPRODUCIBLE:
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes()
