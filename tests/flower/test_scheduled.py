"""ScheduledFedAvg in Flower's Simulation Runtime with a quickstart-shaped PyTorch app.

One ``run_simulation`` (5 SuperNodes, Ray, started once for the module) runs one strategy after
another: Uniform (no probe), PowerOfChoice (loss probes = ``evaluate``), DivFL (update probes =
``train`` to all), ADCS with a pool of candidates (update probes at its refreshes, blind rounds
between), and that ADCS run again, stopped after round 3 and restarted from its checkpoint. The
ClientApp (``quickstart_app``) imports nothing from adcs and logs every request it serves with
what it computed. From those logs alone the test replays each scheduler (same stream, the
statistics the clients reported) and checks that the nodes that trained are the scheduler's
picks (and its probe's), and that each round's model is FedAvg's over the picked nodes' replies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")
pytest.importorskip("torch", reason="the torch extra is not installed")

from flwr.app import Array, ArrayRecord, ConfigRecord, Context, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy.strategy_utils import aggregate_arrayrecords

from adcs.flower import ScheduledFedAvg
from adcs.schedulers import ADCS, DivFL, PowerOfChoice, Uniform
from adcs.schedulers.base import ClientStats, ProbeKind, Scheduler
from adcs.streams import scheduler_rng

from . import quickstart_app
from .conftest import TIMEOUT_S, simulate_flower

N, M, SEED = 5, 2, 3
PHASES: dict[str, tuple[Scheduler, int]] = {
    "uniform": (Uniform(m=M), 3),
    "powerofchoice": (PowerOfChoice(m=M), 2),
    "divfl": (DivFL(m=M), 2),
    "adcs": (ADCS(m=M, theta=0.8, refresh_every=3, candidates=4), 5),
}
CRASH_AFTER = 3


class Stop(Exception):
    """Raised by the test's evaluate_fn to stop a ServerApp mid-run."""


def initial_arrays() -> ArrayRecord:
    return ArrayRecord(quickstart_app.initial_model().state_dict())


def numpy_of(arrays: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: arrays[k].numpy().copy() for k in arrays.keys()}


@pytest.fixture(scope="module")
def simulation(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("scheduled")
    log_path = str(folder / "clients.jsonl")
    checkpoint = str(folder / "server.ckpt")
    out: dict[str, Any] = {"models": {}, "strategies": {}, "log": log_path}
    server_app = ServerApp()

    def run(grid: Grid, phase: str, scheduler: Scheduler, rounds: int, **kw: Any) -> Any:
        strategy = ScheduledFedAvg(
            scheduler, N, seed=SEED, fraction_evaluate=0.0, connect_timeout_s=TIMEOUT_S, **kw
        )

        def keep(server_round: int, arrays: ArrayRecord) -> None:
            out["models"][phase, server_round] = numpy_of(arrays)
            if phase == "stopped" and server_round == CRASH_AFTER:
                raise Stop

        config = ConfigRecord({"lr": 0.3, "phase": phase})
        result = strategy.start(grid, initial_arrays(), rounds, TIMEOUT_S, config, config, keep)
        out["strategies"][phase] = strategy
        return result

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        for phase, (scheduler, rounds) in PHASES.items():
            run(grid, phase, scheduler, rounds)
        scheduler, rounds = PHASES["adcs"]
        with pytest.raises(Stop):
            run(grid, "stopped", scheduler, rounds, checkpoint_path=checkpoint, checkpoint_every=2)
        out["resumed"] = run(
            grid, "resumed", scheduler, rounds, checkpoint_path=checkpoint, checkpoint_every=2
        )

    simulate_flower(server_app, quickstart_app.make_app(log_path), N)
    out["entries"] = [json.loads(line) for line in Path(log_path).read_text().splitlines()]
    return out


def flat(arrays: dict[str, Any], keys: list[str]) -> np.ndarray:
    return np.concatenate([np.asarray(arrays[k], dtype=np.float32).ravel() for k in keys])


def replay(
    scheduler: Scheduler, rounds: int, phase: str, sim: dict[str, Any], node_of: dict[int, int]
) -> list[dict[str, Any]]:
    """Each round's probe targets and selection, recomputed from the clients' logs alone."""
    entries = [e for e in sim["entries"] if e["phase"] == phase]
    client_of = {node: c for c, node in node_of.items()}
    keys = list(initial_arrays().keys())
    rng = scheduler_rng(SEED, "flower")
    state = scheduler.init(N, None)
    available = np.ones(N, dtype=bool)
    out = []
    for r in range(1, rounds + 1):
        sent = numpy_of(initial_arrays()) if r == 1 else sim["models"][phase, r - 1]
        got = {
            (e["kind"], client_of[e["node"]]): e for e in entries if e["round"] == r
        }  # one request of a kind per client and round
        probe = scheduler.probe(state, r - 1, available, rng)
        targets = probe.targets(available)
        if probe.kind is ProbeKind.NONE:
            stats = ClientStats.blind(available)
        elif probe.kind is ProbeKind.LOSSES:
            losses = [got["evaluate", int(c)]["eval_loss"] for c in targets]
            stats = ClientStats(available, targets, np.asarray(losses))
        else:
            rows = [got["train", int(c)] for c in targets]
            updates = np.stack([flat(e["arrays"], keys) - flat(sent, keys) for e in rows])
            losses = np.asarray([e["train_loss"] for e in rows])
            stats = ClientStats(available, targets, losses, updates)
        selection, state = scheduler.select(state, r - 1, stats, rng)
        out.append({"kind": probe.kind, "probed": targets, "selected": selection.clients})
    return out


def fedavg(replies: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Flower's FedAvg aggregate of the given clients' logged train replies."""
    contents = [
        RecordDict(
            {
                "arrays": ArrayRecord(
                    {k: Array(np.asarray(v, dtype=np.float32)) for k, v in e["arrays"].items()}
                ),
                "metrics": MetricRecord({"num-examples": e["num-examples"]}),
            }
        )
        for e in replies
    ]
    return numpy_of(aggregate_arrayrecords(contents, "num-examples"))


@pytest.mark.parametrize("phase", list(PHASES))
def test_trained_nodes_are_the_schedulers_picks_and_the_model_is_fedavg(
    simulation: dict[str, Any], phase: str
) -> None:
    scheduler, rounds = PHASES[phase]
    strategy: ScheduledFedAvg = simulation["strategies"][phase]
    node_of = strategy.node_of
    assert sorted(node_of) == list(range(N))
    assert [node_of[c] for c in range(N)] == sorted(node_of.values())  # order of appearance
    expected = replay(scheduler, rounds, phase, simulation, node_of)
    entries = [e for e in simulation["entries"] if e["phase"] == phase]
    kinds = set()
    for r, want in enumerate(expected, start=1):
        kinds.add(want["kind"])
        trains = [e for e in entries if (e["kind"], e["round"]) == ("train", r)]
        trained = {e["node"]: e for e in trains}
        assert len(trains) == len(trained)  # a probed node that is picked trains once
        evaluated = {e["node"] for e in entries if (e["kind"], e["round"]) == ("evaluate", r)}
        picked = [node_of[int(c)] for c in want["selected"]]
        probed = {node_of[int(c)] for c in want["probed"]}
        if want["kind"] is ProbeKind.UPDATES:
            assert set(trained) == probed | set(picked)
            assert len(trained) > M  # the probe trained more nodes than the scheduler picked
        else:
            assert set(trained) == set(picked)
        assert evaluated == (probed if want["kind"] is ProbeKind.LOSSES else set())
        np.testing.assert_array_equal(strategy.history[r - 1].selected, want["selected"])
        model = simulation["models"][phase, r]
        reference = fedavg([trained[n] for n in picked])
        for key, value in model.items():
            if value.dtype.kind == "f":
                np.testing.assert_allclose(value, reference[key], rtol=1e-6, atol=1e-7)
            else:  # num_batches_tracked: FedAvg's mean, rounded back to int64
                np.testing.assert_array_equal(value, np.rint(reference[key]).astype(value.dtype))
    if phase == "adcs":
        assert kinds == {ProbeKind.UPDATES, ProbeKind.NONE}  # refreshes and blind rounds
    pid = {e["node"]: e["pid"] for e in simulation["entries"]}
    picks = [(w["kind"].value, [pid[node_of[int(c)]] for c in w["selected"]]) for w in expected]
    print(f"\n{phase}: (probe, partitions selected) per round: {picks}")


def test_resumed_server_ends_with_the_uninterrupted_runs_arrays(
    simulation: dict[str, Any],
) -> None:
    _, rounds = PHASES["adcs"]
    models = simulation["models"]
    stopped = [e for e in simulation["entries"] if e["phase"] == "stopped"]
    resumed = [e for e in simulation["entries"] if e["phase"] == "resumed"]
    assert max(e["round"] for e in stopped) == CRASH_AFTER
    # the checkpoint was after round 2: the restarted server's first round is 3
    assert min(e["round"] for e in resumed) == 3
    strategy: ScheduledFedAvg = simulation["strategies"]["resumed"]
    assert [r.server_round for r in strategy.history] == list(range(1, rounds + 1))
    uninterrupted = simulation["strategies"]["adcs"]
    for a, b in zip(strategy.history, uninterrupted.history, strict=True):
        np.testing.assert_array_equal(a.selected, b.selected)
    final = numpy_of(simulation["resumed"].arrays)
    for key, value in models["adcs", rounds].items():
        np.testing.assert_array_equal(final[key], value)
    assert sorted(simulation["resumed"].train_metrics_clientapp) == list(range(1, rounds + 1))
