"""The local federation's process bookkeeping: what counts as a process it left running."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from adcs.flower.testbed import _running, _start_time


def test_a_live_process_runs_and_a_reused_pid_is_another_process():
    me = os.getpid()
    started = _start_time(me)
    assert started is not None
    assert _running(me, started)
    assert not _running(me, str(int(started) + 1))  # same pid, another start: not ours


def test_a_reaped_or_zombie_process_does_not_run():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = _start_time(child.pid)
    deadline = time.monotonic() + 60
    while _stat_state(child.pid) != "Z" and time.monotonic() < deadline:
        time.sleep(0.01)  # it exits; not reaped yet, it is a zombie awaiting its parent
    assert _stat_state(child.pid) == "Z"
    assert not _running(child.pid, started)
    child.wait()
    assert not _running(child.pid, started)


def _stat_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2]
