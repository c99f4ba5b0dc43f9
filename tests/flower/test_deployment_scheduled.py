"""examples/flower-pytorch (ScheduledFedAvg, a quickstart-shaped app) on Flower's Deployment Runtime.

A real SuperLink and 6 SuperNodes (:class:`adcs.flower.testbed.LocalFederation`, as in
``test_deployment.py``), the example submitted with ``flwr run`` on a few of the shipped
Fashion-MNIST subset's images per client. ADCS (m = 3, R = 5) probes every client's update in
round 1; one SuperNode, made slow by its own node config, is killed while it trains in that round.
The run must complete: the killed client is excluded from round 1 with its reason, and the
following rounds train the scheduler's 3 picks among the 5 left, the same 3 (ADCS keeps its
choice between refreshes), by the SuperNodes' own logs.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")
pytest.importorskip("torch", reason="the torch extra is not installed")

from adcs.flower.testbed import LocalFederation

from .test_deployment import federation_env, stopped_cleanly  # noqa: F401 (fixtures)

pytestmark = pytest.mark.deployment

REPO = Path(__file__).resolve().parents[2]
APP_DIR = REPO / "examples" / "flower-pytorch"
SUBSET = REPO / "src" / "adcs" / "data" / "subset"
ROUND = re.compile(
    r"adcs round (\d+): (\d+) nodes available, probed \(\w+\) \[(.*?)\], selected \[(.*?)\], "
    r"aggregated \[(.*?)\], failed (\{.*\})"
)
TRAINED = re.compile(r"partition (\d+): train, server round (\d+)")


def _ints(text: str) -> list[int]:
    """The node ids of a list of the selection line, ``node 123 (partition 4), node 77``."""
    return [int(x) for x in re.findall(r"node (\d+)", text)]


def test_scheduled_fedavg_on_six_supernodes_one_killed_mid_round(
    tmp_path: Path,
    federation_env: dict[str, str],  # noqa: F811
    stopped_cleanly: list[LocalFederation],  # noqa: F811
) -> None:
    victim = 5
    env = {
        **federation_env,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    node_config: dict[str, Any] = {"num-partitions": 6, "data-dir": str(SUBSET)}
    federation = LocalFederation.start(tmp_path / "federation", 0, env=env)
    stopped_cleanly.append(federation)
    for pid in range(5):
        federation.start_node(pid, **node_config)
    # the victim trains on its whole partition for many epochs: time to kill it mid-round
    doomed = federation.start_node(
        victim, **node_config, **{"examples-per-client": 0, "local-epochs": 50}
    )
    run_config = {
        "num-clients": 6,
        "fraction-train": 0.5,
        "fraction-evaluate": 0.0,
        "num-server-rounds": 3,
        "examples-per-client": 64,
    }
    run_id = federation.submit(APP_DIR, run_config)
    deadline = time.monotonic() + 180
    while "train, server round 1" not in doomed.log():
        assert time.monotonic() < deadline, "the victim never got round 1's train request"
        time.sleep(0.05)
    federation.kill_node(victim)
    assert federation.wait(run_id, timeout_s=400) == "finished:completed"

    log = federation.log(run_id)
    rounds = {int(m.group(1)): m.groups() for m in ROUND.finditer(log)}
    assert sorted(rounds) == [1, 2, 3], log[-3000:]
    _, available, probed, selected, aggregated, failed = rounds[1]
    assert int(available) == 6 and len(_ints(probed)) == 6
    assert failed.count("train: ") == 1  # the killed node, with why
    assert _ints(selected) == _ints(aggregated) and len(_ints(selected)) == 3
    picks = [_ints(rounds[r][3]) for r in (2, 3)]
    assert picks[0] == picks[1] == _ints(selected)  # ADCS keeps S between refreshes
    assert all(int(rounds[r][1]) == 5 for r in (2, 3))  # the killed node is gone

    trained: dict[int, set[int]] = {1: set(), 2: set(), 3: set()}
    for path in (federation.folder / "logs").glob("supernode-*.log"):
        for pid, rnd in TRAINED.findall(path.read_text(errors="replace")):
            trained[int(rnd)].add(int(pid))
    assert trained[1] == set(range(6))  # round 1's probe trained every client, the victim too
    assert len(trained[2]) == 3 and trained[2] == trained[3]
    assert victim not in trained[2]
    print(f"\nrounds: { {r: (g[3], g[5]) for r, g in rounds.items()} }")
