"""Real ``adcs run`` processes killed and resumed: SIGKILL at a checkpoint boundary and between two
resumes to byte-identical results files; SIGTERM stops the workers (checked by PID) and says how to
resume; no worker outlives its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPRODUCIBLE = ("metrics.csv", "runs.csv", "selections.npz", "summary.json", "client_acc.npz")
CONFIG = """
name = "killed"
m = 3
seeds = [0, 1]
outputs = ["curves"]
[data]
partition = "paper_groups"
n_groups = 3
clients_per_group = 2
train_per_client = 40
test_per_client = 10
[sim]
rounds = {rounds}
eval_every = 20
batch_size = 4
local_lr = 0.05
dropout = 0.1
[[methods]]
name = "uniform"
[[methods]]
name = "ocs"
unbiased = true
[[methods]]
name = "adcs"
refresh_every = 7
"""

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="forked workers and /proc are Linux's"
)


def adcs(*args: str, kill: list[str] = (), timeout: float = 120) -> subprocess.CompletedProcess:  # type: ignore[assignment]
    """``adcs ARGS`` in a child process (offline), optionally killing itself (see adcs_child)."""
    command = [sys.executable, "-m", "tests.adcs_child", *kill, "--", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def files(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in REPRODUCIBLE}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("config") / "killed.toml"
    path.write_text(CONFIG.format(rounds=120))
    return path


@pytest.fixture(scope="module")
def reference(config: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "out"
    done = adcs("run", str(config), "--out", str(out), "--workers", "2", "--checkpoint-every", "0")
    assert done.returncode == 0, done.stderr
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def test_sigkill_at_a_checkpoint_boundary_then_resume_gives_identical_files(
    config: Path, reference: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ("run", str(config), "--out", str(out), "--workers", "2", "--checkpoint-every", "40")
    killed = adcs(*args, kill=["--kill-after-checkpoint", "2"])
    assert killed.returncode == -signal.SIGKILL
    assert not out.exists() and (tmp_path / ".out.partial" / "checkpoint").is_dir()
    refused = adcs(*args)  # the stale folder is named; nothing starts without --resume/--force
    assert refused.returncode == 2
    assert "checkpoint: round 80 of 120" in refused.stderr and "--resume" in refused.stderr
    resumed = adcs(*args, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == files(reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_sigkill_between_checkpoints_kills_the_workers_and_resumes_to_identical_files(
    config: Path, reference: Path, tmp_path: Path
) -> None:
    out, pids = tmp_path / "out", tmp_path / "pids"
    args = ("run", str(config), "--out", str(out), "--workers", "2", "--checkpoint-every", "40")
    # workers report every 50 rounds: the parent dies at round 50, its checkpoint at round 40
    killed = adcs(*args, kill=["--kill-at-round", "50", "--pids", str(pids)])
    assert killed.returncode == -signal.SIGKILL
    workers = [int(p) for p in pids.read_text().split()]  # every worker seen, per segment
    assert len(workers) >= 2  # two workers per segment between checkpoints
    assert wait_gone(workers) == []  # the parent-death signal took them
    resumed = adcs(*args, "--resume", "--workers", "1")  # any number of workers
    assert resumed.returncode == 0, resumed.stderr
    assert files(out) == files(reference)


def children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_sigterm_stops_the_workers_and_says_how_to_resume(tmp_path: Path) -> None:
    config = tmp_path / "long.toml"
    config.write_text(CONFIG.format(rounds=1_000_000))
    out = tmp_path / "out"
    command = [sys.executable, "-m", "tests.adcs_child", "--", "run", str(config), "--out",
               str(out), "--workers", "2", "--checkpoint-every", "100"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            seen.update(children(proc.pid))
            ready = (tmp_path / ".out.partial" / "checkpoint" / "info.json").is_file()
            if ready and len(seen) >= 2 and children(proc.pid):
                break
            time.sleep(0.05)
        assert ready and len(seen) >= 2, "the run never got going"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143
    error = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "Traceback" not in stderr
    assert error[0].startswith("error: terminated (SIGTERM): the checkpoint (round ")
    assert f"continue with: adcs run {config} --out {out}" in error[0]
    assert error[0].endswith("--resume")
    assert wait_gone(sorted(seen)) == []  # every worker it ever had is gone
    assert (tmp_path / ".out.partial" / "checkpoint" / "state.pkl").is_file()
    assert not (tmp_path / ".out.lock").exists()
