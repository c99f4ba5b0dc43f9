"""The screens' false-positive rate on honest clients, and what a defence costs with no attack.

With no attack every client is honest, so every probed, available client-round that plausibility
or novelty leaves out, or whose loss or norm a ``fence`` clips (an uncorroborated claim, counted by
``cap_uncorroborated``), is a false positive. For each method and each defence (``key=value`` pairs
of `adcs.adversary.Defence`), this runs the workload without defence and defended, and prints
the share of client-rounds left out, the clients left out at least once, and the honest
worst-client accuracy of both runs (the last evaluation)::

    python benchmarks/screen_false_positives.py --rounds 300 --seeds 0 \\
        --methods adcs,powerofchoice,adcs2 \\
        --defence received=true,corroborate=true,plausibility=0.9 \\
        --defence received=true,corroborate=true,plausibility=0.9,stale_after=20

Short runs only: a measurement for the threat model's page, not a benchmark of accuracy.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adcs.adversary import Defence, Defended, screen
from adcs.experiments.run.plan import expand_runs
from adcs.experiments.run.workload import load_data
from adcs.schedulers import SCHEDULERS
from adcs.sim import RunSpec, simulate

try:
    from benchmarks.bench_attacks import DEFAULT_CONFIG, _one_partition, _with_rounds, load_suite
except ImportError:  # run from its folder
    from bench_attacks import (  # type: ignore[no-redef]
        DEFAULT_CONFIG,
        _one_partition,
        _with_rounds,
        load_suite,
    )


@dataclass(frozen=True, eq=False)
class Counting:
    """`Defended` that tallies the rows its screens leave out or clip (the Scheduler protocol)."""

    inner: Defended
    tally: list[int] = field(default_factory=lambda: [0, 0])
    ever: set[int] = field(default_factory=set)

    @property
    def m(self) -> int:
        return self.inner.m

    @property
    def observes_updates(self) -> bool:
        return self.inner.observes_updates

    def init(self, n_clients: int, data_sizes: Any = None) -> Any:
        return self.inner.init(n_clients, data_sizes)

    def probe(self, state: Any, round_idx: int, available: Any, rng: Any) -> Any:
        return self.inner.probe(state, round_idx, available, rng)

    def select(self, state: Any, round_idx: int, stats: Any, rng: Any) -> Any:
        defence = self.inner.defence
        history = None  # the corroborating peers `Defended.select` uses this round
        if state.affinity is not None:
            history = state.affinity.rolled(round_idx, defence.window).peers
        seen = screen(defence, state.received, stats, round_idx, history)
        here = np.asarray(stats.available)[stats.clients]
        out = seen.dropped | (seen.clipped if seen.clipped is not None else False)
        self.tally[0] += int((out & here).sum())
        self.tally[1] += int(here.sum())
        self.ever.update(stats.clients[out & here].tolist())
        return self.inner.select(state, round_idx, stats, rng)

    def observe(self, state: Any, *args: Any) -> Any:
        return self.inner.observe(state, *args)


def parse_defence(text: str) -> Defence:
    """``key=value,...`` → Defence (true/false, ints and floats as written)."""
    values: dict[str, Any] = {}
    for part in filter(None, text.split(",")):
        key, _, raw = part.partition("=")
        low = raw.strip().lower()
        if low in ("true", "false"):
            values[key.strip()] = low == "true"
        else:
            values[key.strip()] = int(raw) if raw.strip().lstrip("-").isdigit() else float(raw)
    return Defence(**values)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--methods", default="adcs,powerofchoice")
    parser.add_argument("--defence", action="append", default=[])
    parser.add_argument("--data", default=None, help="the dataset's folder (else the config's)")
    args = parser.parse_args(argv)
    try:
        config, _ = load_suite(args.config)
        if args.data:
            config = dataclasses.replace(
                config, data=dataclasses.replace(config.data, path=args.data)
            )
        seeds = [int(s) for s in args.seeds.split(",")]
        config = _with_rounds(config, args.rounds, seeds)
        defences = [parse_defence(d) for d in args.defence]
    except (ValueError, TypeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = args.methods.split(",")
    configured = {r.meta["method"]: r for r in expand_runs(config) if r.seed == seeds[0]}
    data = _one_partition(load_data(config.data), config)
    n, m = config.data.total_clients, config.m
    what = "left out or clipped" if any(d.fence > 0 for d in defences) else "left out"
    print(f"| method | defence | {what} (client-rounds) | clients ever {what} | "
          "honest worst off → on (%) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for name in names:
        base = configured[name].scheduler if name in configured else SCHEDULERS[name](m)
        for d_text, defence in zip(args.defence, defences, strict=True):
            specs, counters = [], []
            for seed in seeds:
                counting = Counting(Defended(base, defence, seed))
                counters.append(counting)
                specs += [RunSpec(base, seed, f"off/{seed}"), RunSpec(counting, seed, f"on/{seed}")]
            results = simulate(specs, data, config.sim.for_clients(n), model=config.model.build(
                data.input_shape, data.n_classes))  # fmt: skip
            worst = {r.spec.run_id: 100 * float(r.worst_acc[-1]) for r in results}
            off = np.mean([worst[f"off/{s}"] for s in seeds])
            on = np.mean([worst[f"on/{s}"] for s in seeds])
            out = sum(c.tally[0] for c in counters)
            judged = sum(c.tally[1] for c in counters)
            ever = np.mean([len(c.ever) for c in counters])
            print(
                f"| {name} | `{d_text}` | {out}/{judged} = {100 * out / max(judged, 1):.2f} % | "
                f"{ever:.1f} of {n} | {off:.1f} → {on:.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
