"""Run the ``adcs`` command line in this process as the console script does, offline, optionally
killing itself with SIGKILL at a chosen point — for the tests that kill and resume real runs.

::

    python -m tests.adcs_child [--kill-after-checkpoint K] [--kill-at-round R] [--pids FILE] \
        -- run CONFIG.toml --out DIR ...

``--kill-after-checkpoint K``: SIGKILL right after the K-th checkpoint is written (a checkpoint
boundary). ``--kill-at-round R``: SIGKILL when progress first reaches round R (between two
checkpoints, workers running); ``--pids FILE`` then first records the PIDs of every worker
process seen alive while the run went on.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
import urllib.error
from pathlib import Path
from typing import Any


def _offline(url: str) -> Any:
    raise urllib.error.URLError(f"network disabled in tests (asked for {url})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-after-checkpoint", type=int)
    parser.add_argument("--kill-at-round", type=int)
    parser.add_argument("--pids", type=Path)
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args

    from adcs import cli
    from adcs.data import fashion_mnist
    from adcs.experiments.run.folder import ResultsFolder

    fashion_mnist._default_opener = _offline  # type: ignore[assignment]
    if opts.kill_after_checkpoint is not None:
        save, count = ResultsFolder.save_checkpoint, [0]

        def save_then_die(self: ResultsFolder, state: Any, info: Any) -> None:
            save(self, state, info)
            count[0] += 1
            if count[0] == opts.kill_after_checkpoint:
                os.kill(os.getpid(), signal.SIGKILL)

        ResultsFolder.save_checkpoint = save_then_die  # type: ignore[method-assign]
    if opts.kill_at_round is not None:
        tracker = cli._Lines.tracker

        seen: dict[int, None] = {}  # every worker seen alive, in order: on a loaded machine one
        # may finish its shard before the progress reaches the round, and it must be counted too

        def dying_tracker(self: Any, description: str, unit: str) -> Any:
            update = tracker(self, description, unit)

            def progress(done: int, total: int) -> None:
                update(done, total)
                seen.update(dict.fromkeys(p.pid for p in multiprocessing.active_children()))
                if unit == "rounds" and done >= opts.kill_at_round:
                    if opts.pids is not None:
                        opts.pids.write_text(" ".join(map(str, seen)))
                    os.kill(os.getpid(), signal.SIGKILL)

            return progress

        cli._Lines.tracker = dying_tracker  # type: ignore[method-assign]
    sys.argv = ["adcs", *args]
    cli.app()


if __name__ == "__main__":
    main()
