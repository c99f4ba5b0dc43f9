"""Counts bounded by what a run can hold, checked before any work (docs/design.md §4).

A run keeps, for its whole length, the record of every round (who was selected and who returned:
``rounds × m``), every evaluation (``n_evals × n_eval_clients`` client accuracies), per seed the
availability counts, and O(N) bookkeeping per run; the runner holds every run's records at once
to write the results. `record_bytes` is a lower bound of those arrays' size (nothing else a
run allocates is counted), and `check_counts` refuses a configuration whose lower bound
already exceeds the memory this process may use, naming the count to lower and the largest value
that fits. It is called before any work: before the seeds are listed (``--seeds 1000000000``),
before the data are read and before any array is allocated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import resource
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adcs.experiments.config import ConfigError, ExperimentConfig

__all__ = ["Counts", "check_clients", "check_counts", "memory_limit", "record_bytes"]

_SELECTION_BYTES = 4 + 1
"""One selection slot of one round: the client (int32) and whether it returned (bool)."""
_RUN_OVERHEAD = 4096
"""Python objects of one run (its spec, scheduler, result): a modest lower bound."""
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


def memory_limit() -> int:
    """Bytes this process may use at most: physical memory, capped by a cgroup or ``ulimit -v``."""
    limits = []
    with contextlib.suppress(ValueError, OSError, AttributeError):
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for path in _CGROUP_LIMITS:
        with contextlib.suppress(OSError, ValueError):
            limits.append(int(path.read_text().strip()))  # "max" (no limit) is not a number
    with contextlib.suppress(ValueError, OSError):
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    return min((x for x in limits if x > 0), default=1 << 40)


@dataclass(frozen=True)
class Counts:
    """The counts a run's records grow with.

    Attributes
    ----------
    runs_per_seed, seeds : int
        Distinct runs of one seed, and the number of seeds.
    rounds, m, eval_every : int
        T, clients selected per round, rounds between evaluations.
    n_clients : int
        N (a lower bound where the data decide it).
    eval_clients : int or None
        Clients evaluated (None: all N).
    timed, availability : bool
        Whether rounds are timed (``[sim.system]``) and availability varies (masks are kept).
    """

    runs_per_seed: int
    seeds: int
    rounds: int
    m: int
    eval_every: int
    n_clients: int
    eval_clients: int | None = None
    timed: bool = False
    availability: bool = False


def record_bytes(c: Counts) -> int:
    """A lower bound of the bytes of the records a run of these counts holds at once.

    Exact integer arithmetic: no count is too large for it.
    """
    n_eval = c.n_clients if c.eval_clients is None else min(c.eval_clients, c.n_clients)
    n_evals = -(-c.rounds // c.eval_every) + 1
    per_run = (
        c.rounds * c.m * _SELECTION_BYTES
        + (16 * c.rounds if c.timed else 0)
        + n_evals * (8 * n_eval + 16)
        + 8 * c.n_clients
        + _RUN_OVERHEAD
    )
    per_seed = 4 * c.rounds + (c.rounds * (-(-c.n_clients // 8)) if c.availability else 0)
    return c.seeds * (c.runs_per_seed * per_run + per_seed)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:,.1f} {unit}" if unit != "B" else f"{n} B"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def _largest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The largest x in [low, high) with ``fits(x)`` (``fits`` true below a threshold)."""
    if not fits(low):
        return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def _smallest(fits: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest x in [low, high] with ``fits(x)`` (``fits`` true above a threshold)."""
    if not fits(high):
        return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if fits(mid) else (mid, high)
    return high if not fits(low) else low


_KNOBS: dict[str, tuple[str, bool]] = {
    "rounds": ("sim.rounds", True),
    "seeds": ("seeds", True),
    "m": ("m", True),
    "n_clients": ("the number of clients N", True),
    "eval_clients": ("sim.eval_clients", True),
    "eval_every": ("sim.eval_every", False),
}
"""Field of `Counts` → (its configuration key, whether fewer is smaller)."""


def check_fit(c: Counts, names: Mapping[str, str], source: str, limit: int | None = None) -> None:
    """Refuse counts whose records cannot fit in ``limit`` bytes (default `memory_limit`).

    Parameters
    ----------
    names : mapping of str to str
        How to name a count given on the command line (``{"rounds": "--rounds"}``); the others
        are named by their configuration keys.
    source : str
        The configuration's source, for messages naming a key.

    Raises
    ------
    ConfigError
        Naming the count furthest beyond what fits, its value, the memory the records would take,
        the limit and the largest (or, for ``eval_every``, smallest) value that fits.
    """
    limit = memory_limit() if limit is None else limit
    need = record_bytes(c)
    if need <= limit:
        return
    worst: tuple[float, str, int | None] | None = None
    for field, (_, upward) in _KNOBS.items():
        value = getattr(c, field)
        if value is None:
            continue

        def fits(x: int, field: str = field) -> bool:
            changes: dict[str, Any] = {field: x}
            return record_bytes(dataclasses.replace(c, **changes)) <= limit

        best = _largest(fits, 1, value) if upward else _smallest(fits, value, max(value, c.rounds))
        if best is None:
            continue
        excess = value / best if upward else best / value
        # a count given on the command line first, then the one furthest beyond what fits
        rank = (field in names, excess)
        if worst is None or rank > (worst[1] in names, worst[0]):
            worst = (excess, field, best)
    if worst is None:  # no single count can be lowered enough: name the first one given
        field = next(iter(names), "rounds")
        worst = (math.inf, field, None)
    _, field, best = worst
    option = names.get(field)
    value = getattr(c, field)
    shown = f"{option} {value}" if option else f"{source}: {_KNOBS[field][0]} = {value}"
    runs = c.runs_per_seed * c.seeds
    advice = (
        "no value of it fits with the other counts as they are"
        if best is None
        else f"at most {best:,} fit{'s' if best == 1 else ''}"
        if _KNOBS[field][1]
        else f"it must be at least {best:,}"
    )
    raise ConfigError(
        f"{shown}: the records of the {runs:,} run(s) ({c.rounds:,} rounds × m = {c.m:,} "
        f"selections each, plus evaluations) would take at least {_size(need)}, more than "
        f"the memory this process may use ({_size(limit)}); {advice}"
    )


def config_counts(
    config: ExperimentConfig,
    *,
    runs_per_seed: int,
    rounds: int | None = None,
    seeds: int | None = None,
    n_clients: int | None = None,
) -> Counts:
    """The counts of ``config`` with the given overrides (N: given, or what the config fixes);
    ``runs_per_seed`` its distinct runs of one seed (`adcs.experiments.run.plan.runs_per_seed`)."""
    sim = config.sim
    rounds = sim.rounds if rounds is None else rounds
    n = n_clients if n_clients is not None else config.data.total_clients
    return Counts(
        runs_per_seed=runs_per_seed,
        seeds=len(config.seeds) if seeds is None else seeds,
        rounds=rounds,
        m=config.m,
        eval_every=min(sim.eval_every, rounds),
        n_clients=max(n if n is not None else config.m, 1),
        eval_clients=sim.eval_clients,
        timed=sim.system is not None,
        availability=sim.availability.kind != "always",
    )


def check_counts(
    config: ExperimentConfig,
    *,
    runs_per_seed: int,
    rounds: int | None = None,
    seeds: int | None = None,
    labels: Mapping[str, str] | None = None,
) -> None:
    """Refuse, before any work, a configuration (with ``--rounds``/``--seeds``) too large to hold.

    ``labels`` name the counts an override set (``{"rounds": "sim__rounds"}``; default: the
    options, ``--rounds`` and ``--seeds``).

    Raises
    ------
    ConfigError
        See `check_fit`.
    """
    names = {k: f"--{k}" for k, v in (("rounds", rounds), ("seeds", seeds)) if v is not None}
    names.update(labels or {})
    counts = config_counts(config, runs_per_seed=runs_per_seed, rounds=rounds, seeds=seeds)
    check_fit(counts, names, config.source)


def check_clients(config: ExperimentConfig, n_clients: int, runs_per_seed: int) -> None:
    """Checks that need the real number of clients N (known once the data are read).

    Raises
    ------
    ConfigError
        ``sim.eval_clients`` exceeds N, or the records do not fit with the real N.
    """
    asked = config.sim.eval_clients
    if asked is not None and asked > n_clients:
        raise ConfigError(
            f"{config.source}: sim.eval_clients = {asked} exceeds the number of clients "
            f"N = {n_clients}; at most {n_clients} can be evaluated (omit it to evaluate all)"
        )
    counts = config_counts(config, runs_per_seed=runs_per_seed, n_clients=n_clients)
    check_fit(counts, {}, config.source)
