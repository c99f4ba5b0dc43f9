"""``Scheduled(strategy)`` around Flower's own strategies, in Flower's Simulation Runtime.

One ``run_simulation`` (5 SuperNodes, Ray, started once for the module) runs the quickstart-shaped
app (``quickstart_app``, which imports nothing from adcs; the ServerApp below imports only the
wrapper) under four wrapped strategies, each with another scheduler: ``FedAdam`` (PowerOfChoice:
loss probes), ``FedProx`` (Uniform), ``Krum`` (DivFL: update probes to every node) and
``DifferentialPrivacyServerSideFixedClipping(FedAvg(...))`` (ADCS: refreshes and blind rounds);
then ``FedAdam`` again, stopped after round 3 and restarted, with fresh objects as a restarted
ServerApp has, from its checkpoint of round 2. From the clients' own logs the test replays each
scheduler (the nodes that trained must be its picks) and feeds the picked nodes' logged replies to
a fresh copy of the wrapped strategy (the arrays after each round must equal what it computes).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")
pytest.importorskip("torch", reason="the torch extra is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyServerSideFixedClipping,
    FedAdam,
    FedAvg,
    FedProx,
    Krum,
    Strategy,
)
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from adcs.flower import Scheduled
from adcs.schedulers import ADCS, DivFL, PowerOfChoice, Uniform
from adcs.schedulers.base import ProbeKind, Scheduler

from . import quickstart_app
from .conftest import TIMEOUT_S, simulate_flower
from .test_scheduled import SEED, N, initial_arrays, numpy_of, replay

M = 3
ROUNDS = 4
CRASH_AFTER = 3
MU = 0.1
STRATEGIES: dict[str, tuple[Callable[[], Strategy], Callable[[], Scheduler]]] = {
    "fedadam": (lambda: FedAdam(fraction_evaluate=0.0), lambda: PowerOfChoice(m=M)),
    "fedprox": (lambda: FedProx(proximal_mu=MU, fraction_evaluate=0.0), lambda: Uniform(m=M)),
    "krum": (lambda: Krum(num_malicious_nodes=0, fraction_evaluate=0.0), lambda: DivFL(m=M)),
    "dp": (
        lambda: DifferentialPrivacyServerSideFixedClipping(
            FedAvg(fraction_evaluate=0.0),
            noise_multiplier=0.0,
            clipping_norm=0.05,
            num_sampled_clients=M,
        ),
        lambda: ADCS(m=M, theta=0.8, refresh_every=3, candidates=4),
    ),
}


class Stop(Exception):
    """Raised by the test's evaluate_fn to stop a ServerApp mid-run."""


@pytest.fixture(scope="module")
def simulation(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("wrapped")
    log_path = str(folder / "clients.jsonl")
    checkpoint = str(folder / "server.ckpt")
    out: dict[str, Any] = {"models": {}, "strategies": {}, "results": {}}
    server_app = ServerApp()

    def run(grid: Grid, phase: str, name: str, **settings: Any) -> None:
        make_strategy, make_scheduler = STRATEGIES[name]
        strategy = Scheduled(make_strategy(), make_scheduler(), seed=SEED, **settings)

        def keep(server_round: int, arrays: ArrayRecord) -> None:
            out["models"][phase, server_round] = numpy_of(arrays)
            if phase == "stopped" and server_round == CRASH_AFTER:
                raise Stop

        config = ConfigRecord({"lr": 0.3, "phase": phase})
        out["strategies"][phase] = strategy
        out["results"][phase] = strategy.start(
            grid, initial_arrays(), ROUNDS, TIMEOUT_S, config, config, keep
        )

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        # N is inferred from the nodes connected when a strategy's first round starts, which
        # begins once m are there: on a loaded machine the last SuperNode can still be starting
        deadline = time.monotonic() + TIMEOUT_S
        while len(list(grid.get_node_ids())) < N and time.monotonic() < deadline:
            time.sleep(0.1)
        for name in STRATEGIES:
            run(grid, name, name)
        resume = {"checkpoint_path": checkpoint, "checkpoint_every": 2}
        with pytest.raises(Stop):
            run(grid, "stopped", "fedadam", **resume)
        run(grid, "resumed", "fedadam", **resume)

    simulate_flower(server_app, quickstart_app.make_app(log_path), N)
    out["entries"] = [json.loads(line) for line in Path(log_path).read_text().splitlines()]
    return out


class ListedNodes:
    """Stands in for a Grid that only lists node ids (all configure_train asks of one)."""

    def __init__(self, nodes: list[int]) -> None:
        self.nodes = nodes

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)


def reply_of(entry: dict[str, Any]) -> Message:
    """A train reply rebuilt from the client's log: its arrays and metrics, as it sent them."""
    arrays = {k: Array(np.asarray(v, dtype=np.float32)) for k, v in entry["arrays"].items()}
    if "bn.num_batches_tracked" in entry["arrays"]:
        arrays["bn.num_batches_tracked"] = Array(
            np.asarray(entry["arrays"]["bn.num_batches_tracked"], dtype=np.int64)
        )
    metrics = MetricRecord(
        {"train_loss": entry["train_loss"], "num-examples": entry["num-examples"]}
    )
    content = RecordDict({"arrays": ArrayRecord(arrays), "metrics": metrics})
    return Message(content, entry["node"], "train")


def as_sent(reference: dict[str, np.ndarray], like: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference's arrays in the dtypes the server sends (its integer arrays rounded)."""
    return {
        k: (np.rint(v) if like[k].dtype.kind in "iub" else v).astype(like[k].dtype)
        for k, v in reference.items()
    }


@pytest.mark.parametrize("name", list(STRATEGIES))
@pytest.mark.usefixtures("task_identity")
def test_nodes_that_trained_are_the_picks_and_arrays_are_the_wrapped_strategys(
    simulation: dict[str, Any], name: str
) -> None:
    make_strategy, make_scheduler = STRATEGIES[name]
    strategy: Scheduled = simulation["strategies"][name]
    node_of = strategy.node_of
    assert strategy.n_clients == N  # inferred: the app gave no n_clients
    expected = replay(make_scheduler(), ROUNDS, name, simulation, node_of)
    entries = [e for e in simulation["entries"] if e["phase"] == name]
    reference = make_strategy()
    nodes = sorted(node_of.values())
    kinds = set()
    for r, want in enumerate(expected, start=1):
        kinds.add(want["kind"])
        trained = {e["node"]: e for e in entries if (e["kind"], e["round"]) == ("train", r)}
        picked = [node_of[int(c)] for c in want["selected"]]
        probed = {node_of[int(c)] for c in want["probed"]}
        if want["kind"] is ProbeKind.UPDATES:
            assert set(trained) == probed | set(picked)
        else:
            assert set(trained) == set(picked)
        np.testing.assert_array_equal(strategy.history[r - 1].selected, want["selected"])
        if name == "fedprox":
            assert {e["proximal-mu"] for e in trained.values()} == {MU}
        sent = (
            initial_arrays()
            if r == 1
            else ArrayRecord({k: Array(v) for k, v in simulation["models"][name, r - 1].items()})
        )
        list(reference.configure_train(r, sent, ConfigRecord(), ListedNodes(nodes)))  # type: ignore[arg-type]
        arrays, _ = reference.aggregate_train(r, [reply_of(trained[n]) for n in picked])
        assert arrays is not None
        if name == "dp" and r == 1:  # the clipping bites: FedAvg of the raw replies differs
            raw = aggregate_arrayrecords(
                [reply_of(trained[n]).content for n in picked], "num-examples"
            )
            assert not np.allclose(raw["fc.weight"].numpy(), arrays["fc.weight"].numpy())
        model = simulation["models"][name, r]
        # the same arithmetic on the same float32 inputs in the same order: equal to the bit
        for key, value in as_sent(numpy_of(arrays), model).items():
            np.testing.assert_array_equal(model[key], value, err_msg=f"{name} round {r} {key}")
    assert ProbeKind.NONE in kinds or name != "dp"  # ADCS's blind rounds between refreshes
    metrics = simulation["results"][name].train_metrics_clientapp[ROUNDS]
    assert metrics["results"] == M and "train_loss" in metrics


def test_a_restarted_server_continues_the_wrapped_strategys_state(
    simulation: dict[str, Any],
) -> None:
    models, entries = simulation["models"], simulation["entries"]
    assert max(e["round"] for e in entries if e["phase"] == "stopped") == CRASH_AFTER
    assert min(e["round"] for e in entries if e["phase"] == "resumed") == 3  # after round 2
    resumed: Scheduled = simulation["strategies"]["resumed"]
    uninterrupted: Scheduled = simulation["strategies"]["fedadam"]
    for a, b in zip(resumed.history, uninterrupted.history, strict=True):
        np.testing.assert_array_equal(a.selected, b.selected)
    final = numpy_of(simulation["results"]["resumed"].arrays)
    for key, value in models["fedadam", ROUNDS].items():
        np.testing.assert_array_equal(final[key], value)
    # FedAdam's moments came back from the checkpoint: a fresh FedAdam would step otherwise
    inner = resumed.strategy
    assert isinstance(inner, FedAdam)
    for key, value in copy.deepcopy(uninterrupted.strategy.m_t).items():  # type: ignore[attr-defined]
        np.testing.assert_array_equal(inner.m_t[key], value)
