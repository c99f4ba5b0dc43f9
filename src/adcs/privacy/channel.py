"""The private probe channel: any scheduler fed clipped, noised, accounted probe replies.

docs/design.md §9 puts privacy on the selection signal's path (clients → private probe channel
→ defences → scheduler); docs/concepts/privacy.md is the threat model. `Private` wraps any
scheduler (the Scheduler protocol unchanged): every probe reply is privatised where the client
would privatise it, from the client's own counter-based noise stream
(`adcs.streams.Domain` PRIVACY, keyed by the seed, the client and the round), and accounted
per client; `DPFedAvg` is the matching aggregation hook (DP-FedAvg, McMahan et al. 2018:
each update clipped, Gaussian noise on the aggregate). A noise multiplier z means σ = z·Δ with Δ
the replace-one sensitivity of the release:

* a loss: clipped to [a, b], Δ = b − a; or, with ``loss_window = h``, to [c_t − h, c_t + h]
  around a public centre c_t (an average of the losses already released: post-processing), Δ = 2h;
* an update's norm (``updates_as = "norm"``): min(‖Δ_n‖, C), Δ = C; the scheduler sees rows of
  shape (n, 1);
* an update's direction (``updates_as = "direction"``): adcs's seeded sketch of length k
  (`adcs.sketch.UpdateSketch`), clipped to norm C, Δ = 2C; rows of shape (n, k);
* a training update: clipped to norm C_u, the aggregate Σ c_i Δ_i noised with Δ = 2 C_u max_i c_i.

An update probe releases the loss and the update (two probe releases). A client answers a probe,
and is selectable for training, only while the release keeps it within the budget; a client
selected to fill a selection beyond those with budget declines (sends nothing).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adcs._validate import check_bool, check_choice, check_int, check_number
from adcs.aggregation import F32Array, weighted_sum
from adcs.dpp import row_norms
from adcs.privacy import accounting
from adcs.schedulers.base import (
    BoolArray,
    ClientStats,
    FloatArray,
    IntArray,
    Probe,
    ProbeKind,
    Scheduler,
    Selection,
)
from adcs.sketch import UpdateSketch
from adcs.streams import Domain, counter_normal, counter_uniform, stream_key

__all__ = ["DPFedAvg", "Private", "PrivateProbes", "PrivateState", "default_delta", "private_run"]

_LOSS, _UPDATE, _FILL, _AGGREGATE, _SEEN_LOSS, _SEEN_UPDATE = 1, 2, 3, 4, 5, 6
"""Salts of the channel's counter-based draws (`adcs.streams.Domain` PRIVACY)."""

UPDATES_AS = ("direction", "norm")
CENTRE_RATE = 0.01
"""The rate of the loss window's centre: c ← c + rate · (this round's mean released loss − c), a
memory of about 1 / rate = 100 rounds (the losses' common level moves slower than that)."""


def default_delta(n_clients: int) -> float:
    """δ = 1 / N^1.1: below 1/N, so that no client's data is released with noticeable chance."""
    return float(check_int("n_clients", n_clients)) ** -1.1


@dataclass(frozen=True)
class PrivateProbes:
    """How a run's probes and updates are made private (the ``[sim.privacy]`` table).

    Either both noise multipliers are given, or a target ``epsilon`` and a plan
    (``planned_probes``, ``planned_updates``) from which they are calibrated
    (`adcs.privacy.accounting.calibrate`).

    Parameters
    ----------
    epsilon : float or None
        The budget per client over the run (> 0): a client stops releasing before it would exceed
        it. None: no budget (the cost is still accounted), with both noise multipliers given.
    delta : float or None
        δ in (0, 1); None: `default_delta` of the population.
    probe_noise, update_noise : float or None
        Noise multipliers z of probe releases and of the training aggregate (> 0).
    loss_range : tuple of (float, float)
        [a, b]: a probed loss is clipped to it.
    loss_window : float or None
        h > 0: clip a loss to [c_t − h, c_t + h] instead (Δ = 2h, not b − a), c_t the channel's
        public centre: the midpoint of ``loss_range`` at first, then an exponential average
        (rate `CENTRE_RATE` per round) of each round's mean released loss. A narrow window spends
        the budget on where a client stands against the others, not on the losses' common level,
        which falls as the model trains. None (default): ``loss_range``.
    updates_as : {"direction", "norm"}
        What an update probe releases: the sketched direction, or the norm alone.
    sketch_dim : int
        k of the direction's sketch (at most the model's dim).
    direction_clip, norm_clip, update_clip : float
        C of the sketched direction, the norm and the training update (> 0).
    planned_probes, planned_updates : int or None
        Probe releases and training updates planned per client (with ``epsilon``, calibration).
    by_method : tuple of (str, tuple of (str, value) pairs) pairs, or None
        Settings of one scheduler (an experiment's method name → {key: value}) in place of the
        common ones, for an experiment whose methods probe differently: e.g. each its own
        ``planned_probes`` (its noise calibrated to its own rate of releases), OCS
        ``updates_as = "norm"`` (`for_method`). Not ``epsilon``, ``delta`` or
        ``private_updates``: every method of a run is held to the same guarantee.
    probe_share : float
        Share of the budget the plan gives the probes, in [0, 1].
    private_updates : bool
        True (default): training updates go through DP-FedAvg and are accounted. False: they are
        aggregated in the clear (secure aggregation without DP), and the accounted ε covers the
        probe channel only — the selection's own privacy cost; give no ``update_noise`` and no
        ``planned_updates`` then.
    """

    epsilon: float | None = None
    delta: float | None = None
    probe_noise: float | None = None
    update_noise: float | None = None
    loss_range: tuple[float, float] = (0.0, 5.0)
    loss_window: float | None = None
    updates_as: str = "direction"
    sketch_dim: int = 64
    direction_clip: float = 1.0
    norm_clip: float = 1.0
    update_clip: float = 1.0
    planned_probes: int | None = None
    planned_updates: int | None = None
    by_method: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] | None = None
    probe_share: float = 0.5
    private_updates: bool = True

    def __post_init__(self) -> None:
        if self.epsilon is not None:
            check_number("epsilon", self.epsilon, 0.0, low_open=True)
        if self.delta is not None:
            check_number("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        for name in ("probe_noise", "update_noise"):
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), 0.0, low_open=True)
        if not isinstance(self.loss_range, tuple | list) or len(self.loss_range) != 2:
            raise ValueError(f"loss_range must be a pair (low, high), got {self.loss_range!r}")
        low = check_number("loss_range low", self.loss_range[0])
        high = check_number("loss_range high", self.loss_range[1])
        if not low < high:
            raise ValueError(f"loss_range must have low < high, got {self.loss_range!r}")
        object.__setattr__(self, "loss_range", (low, high))
        if self.loss_window is not None:
            check_number("loss_window", self.loss_window, 0.0, low_open=True)
        check_choice("updates_as", self.updates_as, UPDATES_AS)
        check_int("sketch_dim", self.sketch_dim)
        for name in ("direction_clip", "norm_clip", "update_clip"):
            check_number(name, getattr(self, name), 0.0, low_open=True)
        check_number("probe_share", self.probe_share, 0.0, 1.0)
        check_bool("private_updates", self.private_updates)
        if not self.private_updates and (
            self.update_noise is not None or self.planned_updates is not None
        ):
            raise ValueError(
                "private_updates = false aggregates the updates in the clear: give neither "
                "update_noise nor planned_updates"
            )
        if self.by_method is not None:
            object.__setattr__(self, "by_method", _by_method(self.by_method))
        noises = (self.probe_noise is not None, self.update_noise is not None)
        planned = self.planned_probes is not None or any(
            key == "planned_probes" for _, pairs in self.by_method or () for key, _ in pairs
        )
        plan = (planned, self.planned_updates is not None)
        if not self.private_updates:  # nothing to give for the updates
            noises, plan = (noises[0], noises[0]), (plan[0], plan[0])
        if any(noises) and any(plan):
            raise ValueError("give noise multipliers or a plan (planned_probes/_updates), not both")
        if not all(noises) and not (self.epsilon is not None and all(plan)):
            raise ValueError(
                "give both probe_noise and update_noise, or epsilon with planned_probes and "
                "planned_updates (the noise is then calibrated)"
            )
        for name in ("planned_probes", "planned_updates"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=0)
        share = self.probe_share if self.private_updates else 1.0
        if (self.planned_probes and share == 0.0) or (self.planned_updates and share == 1.0):
            kind = "probes" if self.planned_probes and share == 0.0 else "updates"
            raise ValueError(f"probe_share {share} leaves no budget for the planned {kind}")

    def for_method(self, name: str) -> PrivateProbes:
        """The settings of the method ``name``: the common ones with its ``by_method`` entry.

        Raises
        ------
        ValueError
            The result is not a valid setting (e.g. no ``planned_probes`` for ``name`` while
            the noise is to be calibrated).
        """
        if self.by_method is None:
            return self
        own = dict(dict(self.by_method).get(name, ()))
        if self.probe_noise is None and own.get("planned_probes", self.planned_probes) is None:
            raise ValueError(
                f"by_method gives the method {name!r} no planned_probes and there is no common "
                f"one (it names {sorted(dict(self.by_method))})"
            )
        return dataclasses.replace(self, **own, by_method=None)

    def check_dim(self, dim: int) -> None:
        """Refuse a direction sketch longer than the model's updates (``dim``)."""
        if self.updates_as == "direction" and self.sketch_dim > dim:
            raise ValueError(
                f"sketch_dim {self.sketch_dim} is larger than the model's {dim} parameters: "
                "a sketch must compress the update"
            )

    def multipliers(self, delta: float) -> tuple[float, float]:
        """(z_probe, z_update): given, or calibrated to the plan (``inf``: none planned)."""
        if not self.private_updates:
            if self.probe_noise is not None:
                return float(self.probe_noise), math.inf
            assert self.epsilon is not None and self.planned_probes is not None
            return accounting.calibrate(self.epsilon, delta, self.planned_probes, 0, 1.0)
        if self.probe_noise is not None and self.update_noise is not None:
            return float(self.probe_noise), float(self.update_noise)
        assert self.epsilon is not None
        assert self.planned_probes is not None and self.planned_updates is not None
        return accounting.calibrate(
            self.epsilon, delta, self.planned_probes, self.planned_updates, self.probe_share
        )


@dataclass(frozen=True, eq=False)
class PrivateState:
    """Per-run state of `Private`.

    Attributes
    ----------
    inner : object
        The wrapped scheduler's state.
    probes, updates : ndarray of shape (n_clients,), int64
        Probe releases and training updates of each client so far.
    declined : ndarray of shape (n_declined,), int
        This round's selected clients without budget for their update (they send nothing).
    centre : float or None
        c_t of the loss window (``loss_window``); None without one.
    """

    inner: Any
    probes: NDArray[np.int64]
    updates: NDArray[np.int64]
    declined: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.intp))
    centre: float | None = None


@functools.lru_cache(maxsize=8)
def _sketch(dim: int, k: int, key: int) -> UpdateSketch:
    return UpdateSketch(dim, k, key)


def _clip_rows(rows: NDArray[Any], bound: float) -> F32Array:
    """Each row scaled to norm ≤ ``bound``, float32 (non-finite rows stay non-finite)."""
    rows = np.asarray(rows, dtype=np.float32)
    norms = row_norms(rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > bound, bound / norms, 1.0)
    return np.asarray(rows * scale[:, None].astype(np.float32), dtype=np.float32)


@dataclass(frozen=True)
class Private:
    """Any scheduler behind the private probe channel (the Scheduler protocol).

    Parameters
    ----------
    scheduler : Scheduler
        The wrapped scheduler; it sees private values only.
    probes : PrivateProbes
    seed : int
        The run's seed: the clients' noise is counter-based on (seed, client, round), so every
        run of a seed draws the same noise for the same release.
    delta : float
        δ of the budget (``probes.delta`` or `default_delta`, resolved by
        `private_run`).
    """

    scheduler: Scheduler
    probes: PrivateProbes
    seed: int
    delta: float

    def __post_init__(self) -> None:
        if not isinstance(self.probes, PrivateProbes):
            raise ValueError(f"probes must be PrivateProbes, got {self.probes!r}")
        check_int("seed", self.seed, minimum=0)
        check_number("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)

    @functools.cached_property
    def noise(self) -> tuple[float, float]:
        """(z_probe, z_update)."""
        return self.probes.multipliers(self.delta)

    @functools.cached_property
    def budget(self) -> float:
        """The largest spending Σ n_k / z_k² within (ε, δ) (``inf`` without ε)."""
        eps = self.probes.epsilon
        return math.inf if eps is None else accounting.budget(eps, self.delta)

    @property
    def m(self) -> int:
        return int(self.scheduler.m)

    def around(self, scheduler: Scheduler) -> Private:
        """The same channel around ``scheduler`` (`adcs.round.adapt.SchedulerWrapper`)."""
        return dataclasses.replace(self, scheduler=scheduler)

    @property
    def observes_updates(self) -> bool:
        return bool(self.scheduler.observes_updates)

    def init(self, n_clients: int, data_sizes: FloatArray | None = None) -> PrivateState:
        zeros = np.zeros(n_clients, dtype=np.int64)
        centre = None if self.probes.loss_window is None else sum(self.probes.loss_range) / 2.0
        inner = self.scheduler.init(n_clients, data_sizes)
        return PrivateState(inner, zeros, zeros.copy(), centre=centre)

    def affords(self, state: PrivateState, probe_releases: int, updates: int) -> BoolArray:
        """Which clients may still make these releases within the budget, shape (n_clients,)."""
        z_probe, z_update = self.noise
        if (probe_releases and math.isinf(z_probe)) or (updates and math.isinf(z_update)):
            return np.zeros(state.probes.shape[0], dtype=bool)
        spent = (state.probes + probe_releases) / z_probe**2
        spent += (state.updates + updates) / z_update**2
        return np.asarray(spent <= self.budget)

    def probe(
        self, state: PrivateState, round_idx: int, available: BoolArray, rng: np.random.Generator
    ) -> Probe:
        """The wrapped scheduler's probe, less the clients without budget to answer it."""
        asked = self.scheduler.probe(state.inner, round_idx, available, rng)
        if asked.kind is ProbeKind.NONE:
            return asked
        able = self.affords(state, _releases(asked.kind), 0)
        targets = asked.targets(np.asarray(available, dtype=bool))
        if bool(able[targets].all()) and asked.clients is not None:
            return asked
        return Probe(asked.kind, targets[able[targets]], asked.loss_source)

    def private_stats(
        self, round_idx: int, stats: ClientStats, centre: float | None = None
    ) -> ClientStats:
        """What the scheduler sees of ``stats``: each reply clipped and noised (module docstring);
        ``centre``: c_t of the loss window."""
        key, clients = stream_key(self.seed), stats.clients
        losses, updates = stats.losses, stats.updates
        if losses is not None:
            losses = self._losses(key, round_idx, clients, losses, _LOSS, centre)
        if updates is not None:
            updates = self._updates(key, round_idx, clients, updates, _UPDATE)
        return ClientStats(stats.available, clients, losses, updates)

    def _losses(
        self, key: int, t: int, clients: IntArray, losses: FloatArray, salt: int,
        centre: float | None = None,
    ) -> FloatArray:  # fmt: skip
        low, high = self.probes.loss_range
        if self.probes.loss_window is not None:
            assert centre is not None
            low, high = centre - self.probes.loss_window, centre + self.probes.loss_window
        sigma = self.noise[0] * (high - low)
        noise = counter_normal(key, Domain.PRIVACY, t, clients, 1, salt=salt)[:, 0]
        return np.clip(np.asarray(losses, dtype=np.float64), low, high) + sigma * noise

    def _updates(
        self, key: int, t: int, clients: IntArray, updates: FloatArray, salt: int
    ) -> F32Array:
        probes, z = self.probes, self.noise[0]
        rows = np.asarray(updates, dtype=np.float32)
        if probes.updates_as == "norm":
            norms = np.minimum(row_norms(rows), probes.norm_clip)[:, None]
            sigma = z * probes.norm_clip
            noise = counter_normal(key, Domain.PRIVACY, t, clients, 1, salt=salt)
            return np.asarray(norms + sigma * noise, dtype=np.float32)
        probes.check_dim(rows.shape[1])
        sketched = _sketch(rows.shape[1], probes.sketch_dim, key).apply(rows)
        clipped = _clip_rows(sketched, probes.direction_clip)
        sigma = np.float32(z * 2.0 * probes.direction_clip)
        noise = counter_normal(key, Domain.PRIVACY, t, clients, probes.sketch_dim, salt=salt)
        return clipped + sigma * noise

    def select(
        self, state: PrivateState, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, PrivateState]:
        probes = state.probes
        if stats.n_probed:
            answered = stats.clients[stats.finite()]
            kind = ProbeKind.UPDATES if stats.updates is not None else ProbeKind.LOSSES
            probes = probes.copy()
            probes[answered] += _releases(kind)
        seen = self.private_stats(round_idx, stats, state.centre)
        centre = _moved(state.centre, seen)
        counted = PrivateState(state.inner, probes, state.updates, centre=centre)
        able = stats.available
        if self.probes.private_updates:
            able = self.affords(counted, 0, 1) & stats.available
        allowed = _filled(able, stats.available, self.m, stream_key(self.seed), round_idx)
        seen = ClientStats(allowed, seen.clients, seen.losses, seen.updates)
        selection, inner = self.scheduler.select(state.inner, round_idx, seen, rng)
        chosen = np.asarray(selection.clients, dtype=np.intp)
        sends = able[chosen]
        updates = state.updates
        if self.probes.private_updates:
            updates = updates.copy()
            updates[chosen[sends]] += 1
        declined = np.sort(chosen[~sends])
        return selection, PrivateState(inner, probes, updates, declined, centre)

    def observe(
        self,
        state: PrivateState,
        round_idx: int,
        clients: IntArray,
        updates: FloatArray,
        losses: FloatArray | None,
    ) -> PrivateState:
        """Show the wrapped scheduler the delivered updates as private releases (accounted)."""
        if not self.scheduler.observes_updates:
            return state
        clients = np.asarray(clients, dtype=np.intp)
        releases = 1 + (losses is not None)
        keep = ~np.isin(clients, state.declined) & self.affords(state, releases, 0)[clients]
        order = np.argsort(clients[keep], kind="stable")
        shown = clients[keep][order]
        key = stream_key(self.seed)
        rows = self._updates(key, round_idx, shown, np.asarray(updates)[keep][order], _SEEN_UPDATE)
        seen_losses = None
        if losses is not None:
            raw = np.asarray(losses)[keep][order]
            seen_losses = self._losses(key, round_idx, shown, raw, _SEEN_LOSS, state.centre)
        probes = state.probes.copy()
        probes[shown] += releases
        inner = self.scheduler.observe(state.inner, round_idx, shown, rows, seen_losses)
        return dataclasses.replace(state, inner=inner, probes=probes)

    def epsilons(self, state: PrivateState) -> NDArray[np.float64]:
        """Each client's ε at δ over its releases so far, shape (n_clients,)."""
        z_probe, z_update = self.noise
        return accounting.client_epsilons(
            state.probes, state.updates, z_probe, z_update, self.delta
        )


_NOT_BY_METHOD = ("epsilon", "delta", "private_updates", "by_method")


def _by_method(raw: Any) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """``by_method`` as sorted pairs (name, sorted (key, value) pairs); checked for its shape and
    keys (each method's values are checked when `PrivateProbes.for_method` applies them)."""
    items = raw.items() if isinstance(raw, dict) else raw
    try:
        pairs = [(name, dict(own.items() if isinstance(own, dict) else own)) for name, own in items]
    except (TypeError, ValueError):
        raise ValueError(
            f"by_method must map method names to tables of settings, got {raw!r}"
        ) from None
    known = {f.name for f in dataclasses.fields(PrivateProbes)} - set(_NOT_BY_METHOD)
    for name, own in pairs:
        if not isinstance(name, str) or not all(isinstance(k, str) for k in own):
            raise ValueError(f"by_method must map method names to tables of settings, got {raw!r}")
        unknown = sorted(set(own) - known)
        if unknown:
            raise ValueError(
                f"by_method[{name!r}] sets {unknown}: a method may set only {sorted(known)}"
            )
    return tuple(sorted((name, tuple(sorted(own.items()))) for name, own in pairs))


def _moved(centre: float | None, seen: ClientStats) -> float | None:
    """The loss window's centre after this round's released losses (None: no window)."""
    if centre is None or seen.losses is None or not seen.n_probed:
        return centre
    released = np.asarray(seen.losses, dtype=np.float64)[seen.finite()]
    if not released.size:
        return centre
    return centre + CENTRE_RATE * (float(released.mean()) - centre)


def _releases(kind: ProbeKind) -> int:
    """Probe releases of one reply: a loss; or an update's loss and direction (or norm)."""
    return 2 if kind is ProbeKind.UPDATES else 1


def _filled(able: BoolArray, available: BoolArray, m: int, key: int, t: int) -> BoolArray:
    """The clients with budget, filled up to min(m, available) by a counter-based draw among
    the available ones without (they will decline)."""
    need = min(m, int(np.count_nonzero(available))) - int(np.count_nonzero(able))
    if need <= 0:
        return able
    spent = np.flatnonzero(available & ~able)
    draws = counter_uniform(key, Domain.PRIVACY, t, spent, salt=_FILL)
    out = able.copy()
    out[spent[np.argsort(draws, kind="stable")[:need]]] = True
    return out


def _private_state(state: Any) -> PrivateState:
    while not isinstance(state, PrivateState):
        if not hasattr(state, "inner"):
            raise ValueError("DPFedAvg needs a run whose scheduler is wrapped in Private")
        state = state.inner
    return state


@dataclass(frozen=True)
class DPFedAvg:
    """DP-FedAvg's aggregation (an `adcs.aggregation.Aggregator`): every update clipped
    to norm ``clip``, the weighted mean over the clients that send (renormalised without the
    declined), plus N(0, σ² I) with σ = z · 2 · clip · max_i c_i.

    Parameters
    ----------
    clip : float
        C_u > 0.
    noise : float
        z_update > 0 (``inf``: no client ever sends).
    seed : int
        The aggregate's noise is counter-based on (seed, round).
    """

    clip: float
    noise: float
    seed: int

    def aggregate(
        self,
        state: Any,
        round_idx: int,
        clients: IntArray,
        updates: F32Array,
        coefs: FloatArray,
        probed: ClientStats,
    ) -> tuple[F32Array, F32Array]:
        declined = _private_state(state).declined
        c = np.where(np.isin(clients, declined), 0.0, np.asarray(coefs, dtype=np.float64))
        received = _clip_rows(updates, self.clip)
        received[c == 0.0] = 0.0
        total = float(c.sum())
        dim = received.shape[1]
        if total <= 0.0:
            return received, np.zeros(dim, dtype=np.float32)
        c /= total
        step = weighted_sum(received, c)
        sigma = np.float32(self.noise * 2.0 * self.clip * float(c.max()))
        noise = counter_normal(
            stream_key(self.seed), Domain.PRIVACY, round_idx, np.zeros(1, np.int64), dim,
            salt=_AGGREGATE,
        )[0]  # fmt: skip
        return received, np.asarray(step + sigma * noise, dtype=np.float32)


def private_run(
    scheduler: Scheduler,
    probes: PrivateProbes,
    seed: int,
    n_clients: int,
    dim: int | None = None,
) -> tuple[Private, DPFedAvg | None]:
    """One run's private scheduler and DP-FedAvg aggregation hook (None with
    ``private_updates = false``: the runtime's weighted mean).

    Raises
    ------
    ValueError
        A setting that makes no sense for the run (a sketch longer than the model's ``dim``).
    """
    if dim is not None:
        probes.check_dim(dim)
    delta = default_delta(n_clients) if probes.delta is None else probes.delta
    private = Private(scheduler, probes, seed, delta)
    if not probes.private_updates:
        return private, None
    return private, DPFedAvg(probes.update_clip, private.noise[1], seed)
