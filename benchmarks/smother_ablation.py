"""Which of the bounds lets the smother lock a group out (or, ``--family none``, which costs the
honest clients where nobody attacks): each bound left out in turn.

The smother (``[suite.families] smother`` of ``experiments/attacks_recommended.toml``, k = 2, its
adaptive form) against the ``[suite.bound]`` defences, and against them without one defence at a
time, beside the no-attack run with the same defences (all in one minibatch stream). Per run: the
honest clients' worst accuracy, and the target group's (clients 0–2 at seed 0: the group of
highest loss) selection shares over the fair share and final accuracies.

    python benchmarks/smother_ablation.py --methods divfl,adcs --rounds 1000 --seed 0
    python benchmarks/smother_ablation.py --config experiments/attacks_costs/dirichlet.toml \
        --family none --methods powerofchoice,adcs,adcs2 --rounds 1000 --seed 0
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adcs.adversary import honest_accuracy, selection_rates
from adcs.experiments.config.adversary import adversarial_run
from adcs.experiments.run.plan import expand_runs
from adcs.experiments.run.workload import load_data
from adcs.sim import RunSpec, simulate
from benchmarks import bench_attacks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="experiments/attacks_recommended.toml")
    parser.add_argument("--methods", default="divfl,adcs")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--group", default="0,1,2", help="the target group's clients")
    parser.add_argument("--family", default="smother", help="the attack (none: no attack)")
    args = parser.parse_args(argv)
    config, suite = bench_attacks.load_suite(args.config)
    config = bench_attacks._with_rounds(config, args.rounds, [args.seed])
    attack = (
        None if args.family == "none" else suite.crafted(dict(suite.families)[args.family], 2, True)
    )
    bound = suite.bound
    variants = {
        "the bounds": bound,
        "without corroborate": dataclasses.replace(bound, corroborate=False, peer_history=False),
        "without the cap": dataclasses.replace(bound, cap=0.0, any_interval=False),
        "without novelty": dataclasses.replace(bound, novelty=0.0),
        "without plausibility": dataclasses.replace(bound, plausibility=0.0),
        "without received": dataclasses.replace(bound, received=False),
    }
    n = config.data.total_clients
    methods = args.methods.split(",")
    specs, labels = [], []
    for run in (r for r in expand_runs(config) if r.meta["method"] in methods):
        for name, defence in variants.items():
            for att in (attack, None) if attack is not None else (None,):
                scheduler, hook = adversarial_run(run.scheduler, args.seed, n, att, defence)
                run_id = f"{run.meta['method']}/{name}/{args.family if att else 'none'}"
                specs.append(RunSpec(scheduler, args.seed, run_id, {}, hook))
                labels.append((run.meta["method"], name, args.family if att else "none"))
    data = bench_attacks._one_partition(load_data(config.data), config)
    model = config.model.build(data.input_shape, data.n_classes)
    results = simulate(specs, data, config.sim.for_clients(n), model=model, workers=1)
    malicious = [] if attack is None else list(attack.malicious(args.seed, n))
    group = [int(c) for c in args.group.split(",")]
    who = "smotherers" if args.family == "smother" else "attackers"
    print(f"Seed {args.seed}, T = {args.rounds}, {who} {malicious}, target group {group}.\n")
    print(
        "| method | defences | attack | honest worst (%) | group's shares | group's accuracy (%) |"
    )
    print("|---|---|---|---|---|---|")
    for (method, name, att), result in zip(labels, results, strict=True):
        honest = honest_accuracy(result.client_acc, malicious)
        fair = float((result.selected >= 0).sum()) / result.selected.shape[0] / n
        shares = selection_rates(result.selected, n)[group] / fair
        accuracy = 100 * np.asarray(result.client_acc[-1])[group]
        print(
            f"| {method} | {name} | {att} | {100 * honest.worst:.1f} | "
            + ", ".join(f"{s:.2f}" for s in shares)
            + " | "
            + ", ".join(f"{a:.0f}" for a in accuracy)
            + " |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
