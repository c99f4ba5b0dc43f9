"""Where a seed-round's CPU goes: sampled by part, with the FLOPs computed and achieved per product.

Used by ``adcs bench sim`` (``benchmarks/bench_sim.py``). The parts are the rows of the
simulator's cost table (minibatch indices, the gather, the forward product, …). Attribution is
by sampling, so it costs the simulator nothing but the samples themselves: every
:data:`SAMPLE_SECONDS` of *process CPU time* (``SIGPROF``, so other work on a loaded machine
does not count) the Python stack is read and given to the part of the first frame that a rule
names, innermost first; a frame of the evaluation, or of a scheduler's select and probe, claims
the sample whatever it calls. A NumPy or BLAS call is charged to the Python frame that made it.

The FLOPs of the logistic model's products are counted by wrapping its methods for the
measured run (a multiply-add is 2 FLOPs); the minimum is what the rounds could not avoid: the
forward pass of every sample a run uses, the backward pass of every update it computed or
aggregated, and DivFL's Gram (half of it, symmetric).
"""

from __future__ import annotations

import contextlib
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from adcs.sim import model as model_module

SAMPLE_SECONDS = 0.001
"""The sampling period asked for (kernels with a 250 Hz tick deliver one every 4 ms)."""

SAMPLED_REPEATS = 3
"""Times the sampled simulation is repeated, for enough samples (the shares' error ~ 1/√count)."""

PARTS = (
    "minibatch indices (hash + rejection)",
    "gather x, y (uint8 -> float32)",
    "forward product",
    "softmax / cross-entropy",
    "per-client probe updates (block products)",
    "aggregated backward (weighted product)",
    "aggregation rest (products over probed updates, step)",
    "DivFL select",
    "other schedulers' select and probe",
    "evaluation",
    "engine bookkeeping",
    "outside the simulator (the benchmark's own frames)",
)
(MINIBATCH, GATHER, FORWARD, SOFTMAX, PROBE_UPDATES, BACKWARD, AGG_REST, DIVFL, SELECT, EVAL,
 ENGINE, OUTSIDE) = PARTS  # fmt: skip

# Frames that claim a sample whatever they call (checked over the whole stack, outermost last).
_CLAIMS: dict[tuple[str, str], str] = {
    ("adcs/sim/evaluate.py", "*"): EVAL,
    ("adcs/schedulers/divfl.py", "*"): DIVFL,
    ("adcs/schedulers/*", "probe"): SELECT,
    ("adcs/schedulers/*", "select"): SELECT,
    ("adcs/schedulers/*", "observe"): SELECT,
}
# Innermost named frame decides otherwise.
_RULES: dict[tuple[str, str], str] = {
    ("adcs/streams.py", "*"): MINIBATCH,
    ("adcs/sim/data.py", "train_rows"): MINIBATCH,
    ("adcs/sim/context.py", "minibatch"): MINIBATCH,
    ("adcs/sim/data.py", "gather_train"): GATHER,
    ("adcs/sim/data.py", "train_batch"): GATHER,
    ("adcs/sim/data.py", "to_unit_float"): GATHER,
    ("adcs/sim/model.py", "_logits_shared"): FORWARD,
    ("adcs/sim/model.py", "_softmax_xent"): SOFTMAX,
    ("adcs/sim/model.py", "shared_forward"): FORWARD,
    ("adcs/sim/lot.py", "_shared_forward"): SOFTMAX,
    ("adcs/sim/model.py", "block_grads"): PROBE_UPDATES,
    ("adcs/sim/model.py", "weighted_grads"): BACKWARD,
    ("adcs/sim/model.py", "loss_and_grad"): PROBE_UPDATES,
    ("adcs/sim/lot.py", "aggregate"): AGG_REST,
    ("adcs/sim/lot.py", "_reuse"): AGG_REST,
    ("adcs/sim/lot.py", "step_models"): AGG_REST,
    ("adcs/sim/lot.py", "_weighted"): AGG_REST,
    ("adcs/sim/lot.py", "_observed"): AGG_REST,
    ("adcs/*", "*"): ENGINE,
}


def _lookup(table: dict[tuple[str, str], str], path: str, name: str) -> str | None:
    for (suffix, func), part in table.items():
        if func not in ("*", name):
            continue
        if suffix.endswith("/*"):
            if f"/{suffix[:-1]}" in path:
                return part
        elif path.endswith(suffix):
            return part
    return None


@dataclass
class PartSampler:
    """Process-CPU-time samples of the calling thread, attributed to :data:`PARTS`."""

    counts: Counter[str] = field(default_factory=Counter)
    _cache: dict[Any, tuple[str | None, str | None]] = field(default_factory=dict)

    def _classify(self, code: Any) -> tuple[str | None, str | None]:
        if code not in self._cache:
            path = code.co_filename.replace("\\", "/")
            self._cache[code] = (
                _lookup(_CLAIMS, path, code.co_name),
                _lookup(_RULES, path, code.co_name),
            )
        return self._cache[code]

    def _sample(self, signum: int, frame: FrameType | None) -> None:
        inner: str | None = None
        while frame is not None:
            claim, rule = self._classify(frame.f_code)
            if claim is not None:
                self.counts[claim] += 1
                return
            if inner is None:
                inner = rule
            frame = frame.f_back
        self.counts[inner or OUTSIDE] += 1

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        previous = signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, SAMPLE_SECONDS, SAMPLE_SECONDS)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0.0, 0.0)
            signal.signal(signal.SIGPROF, previous)

    def shares(self) -> dict[str, float]:
        total = sum(self.counts.values()) or 1
        return {part: self.counts[part] / total for part in PARTS}


@dataclass
class FlopCounter:
    """FLOPs of the logistic model's products, by product, counted while installed."""

    flops: Counter[str] = field(default_factory=Counter)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        cls = model_module.LogisticRegression
        saved = {name: getattr(cls, name) for name in _COUNTED}
        for name, (label, cost) in _COUNTED.items():
            setattr(cls, name, _counting(saved[name], label, cost, self.flops))
        try:
            yield
        finally:
            for name, method in saved.items():
                setattr(cls, name, method)


def _counting(
    method: Callable[..., Any], label: str, cost: Callable[..., int], flops: Counter[str]
) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any) -> Any:
        flops[label] += cost(self, *args)
        return method(self, *args)

    return wrapper


def _features(model: Any) -> int:
    return int(model.n_features) * int(model.n_classes)


_COUNTED: dict[str, tuple[str, Callable[..., int]]] = {
    "_logits_shared": (FORWARD, lambda m, w, x: 2 * w.shape[0] * x.shape[0] * _features(m)),
    "block_grads": (
        PROBE_UPDATES,
        lambda m, fwd, run, blocks, size, scale: 2 * len(blocks) * size * _features(m),
    ),
    "weighted_grads": (
        BACKWARD,
        lambda m, fwd, runs, weights: 2 * len(runs) * fwd.x.shape[0] * _features(m),
    ),
    "loss_and_grad": (
        PROBE_UPDATES,
        lambda m, params, x, y: 4 * x.shape[0] * x.shape[1] * _features(m),
    ),
}


def minimum_flops(results: list[Any], n_features: int, n_classes: int, batch: int,
                  divfl_gram: int) -> int:  # fmt: skip
    """FLOPs the rounds could not avoid: each run's computed updates (forward and backward) and
    loss evaluations (forward), and DivFL's Gram products (``divfl_gram`` multiply-adds)."""
    per_sample = 2 * n_features * n_classes
    total = 0
    for r in results:
        total += (2 * r.client_updates + r.loss_evals) * batch * per_sample
    return total + 2 * divfl_gram


def breakdown_table(
    shares: dict[str, float], cpu_ms: float, flops: Counter[str], seed_rounds: int
) -> list[str]:
    """Rows 'part | ms per seed-round | share | MFLOP per seed-round | GFLOP/s'."""
    lines = [
        f"{'part':<56} {'ms/seed-round':>13} {'share':>6} {'MFLOP/s-r':>10} {'GFLOP/s':>8}",
    ]
    for part in PARTS:
        ms = shares[part] * cpu_ms
        mflop = flops.get(part, 0) / seed_rounds / 1e6
        rate = f"{mflop / ms:8.1f}" if mflop and ms > 0 else f"{'':>8}"
        lines.append(
            f"{part:<56} {ms:13.3f} {shares[part]:6.1%} "
            + (f"{mflop:10.2f}" if mflop else f"{'':>10}")
            + f" {rate}"
        )
    lines.append(f"{'total':<56} {cpu_ms:13.3f}")
    return lines
