"""Per-round cost of adcs's scheduled Flower strategies against Flower's own, on the same app.

In Flower's Simulation Runtime: ScheduledFedAvg against FedAvg, Scheduled(FedAdam) against FedAdam.

The app is ``examples/flower-pytorch``: its ClientApp unchanged (a CNN on IID Fashion-MNIST
partitions, Flower's PyTorch quickstart shape), the ServerApp's body with one strategy or another.
One ``run_simulation`` (N SuperNodes, Ray) runs, after one untimed warm-up round, each strategy for
the same rounds, with the same m = round(fraction-train · N) clients training per round and the
same federated evaluation (``fraction-evaluate``) after each:

* ``fedavg`` — ``FedAvg(fraction_train=m/N, min_train_nodes=m, ...)``;
* ``scheduled-uniform`` — ``ScheduledFedAvg(Uniform(m))``: the same client work as FedAvg, so
  the difference is the strategy's own overhead (bookkeeping, reply checks, flattening);
* ``scheduled-adcs`` — the example's ``ScheduledFedAvg(ADCS(m, θ = 0.8, R = 5))``: its first round
  is a refresh that trains every client (N updates, not m), the others are blind;
* ``fedadam`` — ``FedAdam(fraction_train=m/N, min_train_nodes=m, ...)`` (Flower's defaults: η 0.1,
  β₁ 0.9, β₂ 0.99, τ 1e-3);
* ``scheduled-fedadam`` — ``Scheduled(FedAdam(...), Uniform(m))``: the same FedAdam with adcs
  choosing the m nodes, so against ``fedadam`` the difference is the wrapper's overhead.

The strategies take turns (``--repeats``), so a change in the machine's load hits them alike.
Printed per strategy, over rounds 2..T (round 1 apart: ADCS's refresh trains every client): the
median wall time of a round (from the end of one round's evaluation to the end of the next) and
the mean CPU time of the ServerApp's thread per round (the strategy's own work: sampling or
scheduling, messages, reply checks, aggregation; the ClientApps run in Ray's processes), each
with its difference to FedAvg's.

Run: ``python benchmarks/bench_flower_dropin.py [--rounds 5] [--repeats 2] [--clients 10]
[--data DIR]``.
Timings are of this machine as it was: on a machine shared with other work they are noisy upper
bounds, not properties of the code.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
APP_DIR = REPO / "examples" / "flower-pytorch"


def app_config(overrides: dict[str, Any]) -> dict[str, Any]:
    """The example's run config (pyproject.toml) with ``overrides``."""
    text = (APP_DIR / "pyproject.toml").read_text(encoding="utf-8")
    config: dict[str, Any] = tomllib.loads(text)["tool"]["flwr"]["app"]["config"]
    return {**config, **overrides}


TWIN = {
    "fedavg": "fedavg",
    "scheduled-uniform": "fedavg",
    "scheduled-adcs": "fedavg",
    "fedadam": "fedadam",
    "scheduled-fedadam": "fedadam",
}
"""Each strategy's Flower twin, the one it is compared with."""


def strategies(config: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    from flwr.serverapp.strategy import FedAdam, FedAvg

    from adcs.flower import Scheduled, ScheduledFedAvg
    from adcs.schedulers import ADCS, Uniform

    n = int(config["num-clients"])
    m = max(1, round(float(config["fraction-train"]) * n))
    fe = float(config["fraction-evaluate"])
    return {
        "fedavg": lambda: FedAvg(fraction_train=m / n, fraction_evaluate=fe, min_train_nodes=m),
        "scheduled-uniform": lambda: ScheduledFedAvg(Uniform(m=m), n, fraction_evaluate=fe),
        "scheduled-adcs": lambda: ScheduledFedAvg(
            ADCS(m=m, theta=0.8, refresh_every=5), n, fraction_evaluate=fe
        ),
        "fedadam": lambda: FedAdam(fraction_train=m / n, fraction_evaluate=fe, min_train_nodes=m),
        "scheduled-fedadam": lambda: Scheduled(FedAdam(fraction_evaluate=fe), Uniform(m=m)),
    }


def measure(
    config: dict[str, Any], rounds: int, repeats: int, num_cpus: int, only: Sequence[str]
) -> dict[str, list[tuple[float, float]]]:
    """Each strategy's rounds: (wall s, the ServerApp thread's CPU s), all in one Simulation
    Runtime; the strategies take turns ``repeats`` times, so load changes hit them alike."""
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, Context
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    sys.path.insert(0, str(APP_DIR))
    from flower_pytorch.client_app import app as example_client
    from flower_pytorch.task import Net

    client = ClientApp()

    @client.train()
    @client.evaluate()
    def handle(msg: Any, context: Context) -> Any:  # run_simulation passes no run config
        with_config = Context(
            context.run_id, context.node_id, context.node_config, context.state, dict(config)
        )
        return example_client(msg, with_config)

    times: dict[str, list[tuple[float, float]]] = {}
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        made = strategies(config)
        runs = [("warm-up", 1)] + [(name, rounds) for _ in range(repeats) for name in only]
        for name, count in runs:
            torch.manual_seed(0)
            stamps = [(time.perf_counter(), time.thread_time())]

            def stamp(server_round: int, arrays: Any, stamps: list[Any] = stamps) -> None:
                if server_round:
                    stamps.append((time.perf_counter(), time.thread_time()))

            strategy = made["fedavg" if name == "warm-up" else name]()
            strategy.start(
                grid=grid,
                initial_arrays=ArrayRecord(Net().state_dict()),
                num_rounds=count,
                train_config=ConfigRecord({"lr": float(config["lr"])}),
                evaluate_fn=stamp,
            )
            steady = list(itertools.pairwise(stamps))[1:]  # round 1 apart: ADCS's refresh
            times.setdefault(name, []).extend((b[0] - a[0], b[1] - a[1]) for a, b in steady)

    backend = {"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": num_cpus}}
    run_simulation(server, client, int(config["num-clients"]), backend_config=backend)
    times.pop("warm-up", None)
    return times


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2, help="turns each strategy takes")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs for Ray (one per actor)")
    parser.add_argument(
        "--only",
        default=",".join(TWIN),
        help=f"comma-separated strategies to run (with their twins), of {list(TWIN)}",
    )
    parser.add_argument(
        "--data", default=os.environ.get("ADCS_DATA_DIR", ""), help="Fashion-MNIST folder"
    )
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.clients < 2 or args.repeats < 1:
        parser.error("--rounds and --clients must be at least 2, --repeats at least 1")
    asked = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in asked if name not in TWIN]
    if unknown or not asked:
        parser.error(f"--only: unknown strategy {unknown[0] if unknown else ''!r}; of {list(TWIN)}")
    only = [name for name in TWIN if name in asked or name in {TWIN[a] for a in asked}]
    if not (Path(args.data) / "train-images-idx3-ubyte.gz").is_file():
        parser.error(f"no Fashion-MNIST files in {args.data!r}: pass --data")
    config = app_config({"num-clients": args.clients, "data-dir": args.data})
    times = measure(config, args.rounds, args.repeats, args.num_cpus, only)
    m = max(1, round(float(config["fraction-train"]) * args.clients))
    print(
        f"N = {args.clients}, m = {m}, rounds 2..{args.rounds} of {args.repeats} turns each, "
        f"fraction-evaluate {config['fraction-evaluate']}, "
        f"{config['examples-per-client']} examples per client"
    )
    for name, values in times.items():
        twin = times[TWIN[name]]
        wall, cpu = statistics.median(w for w, _ in values), statistics.mean(c for _, c in values)
        base_wall = statistics.median(w for w, _ in twin)
        base_cpu = statistics.mean(c for _, c in twin)
        print(
            f"{name:18s} wall {wall:6.3f} s/round (median of {len(values)}, "
            f"{wall - base_wall:+.3f} vs {TWIN[name]})   ServerApp CPU {1000 * cpu:6.1f} ms/round "
            f"({1000 * (cpu - base_cpu):+.1f}, {cpu / base_cpu:.2f}x vs {TWIN[name]})"
        )


if __name__ == "__main__":
    main()
