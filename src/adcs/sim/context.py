"""What every minibatch stream of one [`simulate`][adcs.sim.simulate] call shares.

`_Context` holds the data, the configuration and the model, and computes the client work a
round asks for — availability masks, dropouts, minibatch rows, local updates and losses of
independent (run, client) jobs in memory-bounded calls — from counter-based streams
(`adcs.streams`), so nothing depends on which other jobs are computed with them.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any

import numpy as np

from adcs.registry import PluginError, raised_in
from adcs.round.machine import Available
from adcs.schedulers.base import ClientStats
from adcs.sim.availability import AlwaysAvailable, BernoulliAvailability, TraceAvailability
from adcs.sim.data import ClientData
from adcs.sim.model import LogisticRegression, Model, SharedInputs, dropout_widths, local_update
from adcs.sim.spec import BoolArray, F32Array, F64Array, IntArray, SimConfig
from adcs.sim.system import ClientTimes, client_times
from adcs.sketch import UpdateSketch
from adcs.streams import Domain, _draw, _draw_rounds, counter_uniform, dropout_keep

_FULL_LOSS_ROWS = 8192

_JOB_ROWS = 16_384
"""Samples per batched ``loss_and_grad`` call of independent jobs (bounds memory)."""

_SHARED_ROWS = 65_536
"""Largest union (clients × B samples) computed in one shared forward product; larger rounds
(a probe of tens of thousands of clients) run as memory-bounded independent jobs instead."""

_AHEAD_CLIENTS = 1024
"""Populations up to this size draw every client's minibatch rows for many rounds at once when a
round asks for at least a quarter of them (a sparse round draws only its own clients)."""

_AHEAD_ROUNDS = 64
_AHEAD_ROWS = 1 << 18
"""Rows drawn ahead per stream at most (2 MB of indices)."""

_GATHER_BUDGET_BYTES = 1 << 30
"""Most inputs (float32) one round may gather at once; larger batch sizes are refused."""


class _Context:
    """What every stream of one [`simulate`][adcs.sim.simulate] call shares (read-only during the
    loop)."""

    def __init__(self, data: ClientData, config: SimConfig, model: Model) -> None:
        self.data = data
        self.config = config
        self.model = model
        self.shared: SharedInputs | None = (
            model
            if isinstance(model, SharedInputs)
            and config.local_steps == 1
            and not config.weight_decay  # the shared products give −η_ℓ ∇ℓ alone
            else None
        )
        self.dropout_widths = dropout_widths(model)
        self.sizes = data.data_sizes
        self.base_weights: F64Array | None = (
            data.data_sizes.astype(np.float64) if config.weighting == "data_size" else None
        )
        self.always = isinstance(config.availability, AlwaysAvailable)
        everyone = np.ones(data.n_clients, dtype=bool)
        everyone.setflags(write=False)
        clients = np.arange(data.n_clients, dtype=np.intp)
        self._always = Available(everyone, clients, ClientStats.blind(everyone, clients))
        self.no_clients = np.empty(0, dtype=np.intp)
        self.system = config.system
        self._times: dict[int, ClientTimes] = {}
        self._sketches: dict[int, UpdateSketch] = {}
        self._ahead: dict[int, tuple[int, IntArray]] = {}  # stream key → (first round, rows)

    def client_times(self, seed: int) -> ClientTimes:
        """How long each client's work takes in runs of ``seed`` (its devices, drawn once)."""
        assert self.system is not None
        if seed not in self._times:
            cfg = self.config
            self._times[seed] = client_times(
                self.system.draw(seed, self.data.groups),
                dim=self.model.dim,
                local_samples=cfg.local_steps * cfg.batch_size,
                batch_size=cfg.batch_size,
                data_sizes=self.sizes,
                forward_cost=self.system.forward_cost,
            )
        return self._times[seed]

    def sketch(self, seed_key: int, stats: ClientStats) -> ClientStats:
        """What the schedulers see of ``stats``: its updates sketched (``SimConfig.sketch_dim``)."""
        k = self.config.sketch_dim
        if k is None or stats.updates is None:
            return stats
        return dataclasses.replace(stats, updates=self.sketch_rows(seed_key, stats.updates))

    def sketch_rows(self, seed_key: int, updates: F32Array) -> F32Array:
        """Updates (n, dim) as the schedulers see them (unchanged without ``sketch_dim``)."""
        k = self.config.sketch_dim
        if k is None:
            return updates
        if seed_key not in self._sketches:  # one projection per seed, built on first use
            self._sketches[seed_key] = UpdateSketch(self.model.dim, k, seed_key)
        return self._sketches[seed_key].apply(updates)

    def availability(self, seed_key: int, t: int) -> Available:
        if self.always:
            return self._always
        model = self.config.availability
        if isinstance(model, BernoulliAvailability):  # drawn as indices: cost follows p·N
            clients = model.available_clients(seed_key, t, self.data.n_clients)
            mask = np.zeros(self.data.n_clients, dtype=bool)
            mask[clients] = True
        else:
            mask = _mask(model, seed_key, t, self.data.groups)
            clients = np.flatnonzero(mask)
        mask.setflags(write=False)
        return Available(mask, clients, ClientStats.blind(mask, clients))

    def returned(self, seed_key: int, t: int, clients: IntArray) -> BoolArray:
        """Which of the selected clients deliver their update (the rest drop out)."""
        if self.config.dropout == 0.0 or clients.size == 0:
            return np.ones(clients.size, dtype=bool)
        draw = counter_uniform(seed_key, Domain.DROPOUT, t, clients)
        return np.asarray(draw >= self.config.dropout)

    def minibatch(self, key: int, t: int, clients: IntArray) -> IntArray:
        """Global training rows of the clients' E·B local samples at round t, shape (n, E·B)."""
        cfg = self.config
        per = cfg.local_steps * cfg.batch_size
        n = self.data.n_clients
        ahead = self._ahead.get(key)
        if ahead is not None and ahead[0] <= t < ahead[0] + ahead[1].shape[1]:
            return ahead[1][clients, t - ahead[0]]
        if n <= _AHEAD_CLIENTS and 4 * clients.size >= n:  # most clients: draw everyone's ahead
            ahead = self._ahead[key] = (t, self._rows_ahead(key, t, per))
            return ahead[1][clients, t - ahead[0]]
        local = _draw(key, clients, t, self.sizes[clients], per)
        return self.data.train_rows(clients, local)

    def _rows_ahead(self, key: int, t: int, per: int) -> IntArray:
        """Every client's rows at rounds t, t + 1, …: shape (n_clients, n_rounds, per).

        The draws are those of one round at a time (`adcs.streams._draw_rounds`), hashed
        for many rounds in one pass.
        """
        n = self.data.n_clients
        n_rounds = max(1, min(_AHEAD_ROUNDS, self.config.rounds - t, _AHEAD_ROWS // (n * per)))
        everyone = np.arange(n, dtype=np.int64)
        local = _draw_rounds(key, everyone, t, n_rounds, self.sizes.astype(np.int64), per)
        return self.data.train_rows(everyone.astype(np.intp), local.transpose(1, 0, 2))

    def full_losses(self, params: F32Array, clients: IntArray) -> F64Array:
        """Mean loss of each listed client over its whole training set at ``params`` (dim,)."""
        data = self.data
        sizes = data.data_sizes[clients]
        owner = np.repeat(np.arange(clients.size), sizes)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        rows = data.train_rows(clients[owner], np.arange(owner.size) - starts[owner])
        total = np.zeros(clients.size)
        for start in range(0, rows.size, _FULL_LOSS_ROWS):
            part = rows[start : start + _FULL_LOSS_ROWS]
            loss, _ = self.model.evaluate(params[None], *data.train_batch(part))
            total += np.bincount(
                owner[start : start + _FULL_LOSS_ROWS], weights=loss[0], minlength=clients.size
            )
        return total / data.data_sizes[clients]

    def local_updates(
        self,
        params: F32Array,
        run_index: IntArray,
        rows: IntArray,
        t: int,
        clients: IntArray,
        key: int,
    ) -> tuple[F32Array, F32Array]:
        """E local SGD steps of independent (run, client) jobs, in memory-bounded calls.

        ``params`` (k, dim) of the stream; ``run_index`` (J,) the job's run; ``rows`` (J, E·B) its
        training rows; ``t`` the round (its η_ℓ, ``SimConfig.lr_at``); ``clients`` (J,) the jobs'
        clients and ``key`` the stream's key (a model's dropout masks, `_masks`). Returns the
        updates (J, dim) and the first-minibatch losses (J,).
        """
        cfg = self.config
        n_jobs = run_index.size
        per_call = max(1, _JOB_ROWS // (cfg.local_steps * cfg.batch_size))
        if 0 < n_jobs <= per_call:  # one call: its arrays as they are, no copy
            x, y = self.data.train_batch(rows.reshape(-1, cfg.local_steps, cfg.batch_size))
            update, loss = local_update(
                self.model,
                params[run_index],
                x,
                y,
                cfg.lr_at(t),
                cfg.prox_mu,
                cfg.weight_decay,
                self._masks(key, t, clients),
            )
            return update.astype(np.float32, copy=False), loss.astype(np.float32, copy=False)
        updates = np.empty((n_jobs, self.model.dim), dtype=np.float32)
        losses = np.empty(n_jobs, dtype=np.float32)
        for start in range(0, n_jobs, per_call):
            part = slice(start, start + per_call)
            job_rows = rows[part].reshape(-1, cfg.local_steps, cfg.batch_size)
            x, y = self.data.train_batch(job_rows)
            updates[part], losses[part] = local_update(
                self.model,
                params[run_index[part]],
                x,
                y,
                cfg.lr_at(t),
                cfg.prox_mu,
                cfg.weight_decay,
                self._masks(key, t, clients[part]),
            )
        return updates, losses

    def _masks(
        self, key: int, t: int, clients: IntArray
    ) -> Callable[[int], tuple[BoolArray, ...]] | None:
        """The keep masks of the model's dropout layers at each local step of the listed
        clients at round t (`adcs.streams.dropout_keep`), or None for a model without dropout."""
        widths = self.dropout_widths
        if not widths:
            return None
        p = float(getattr(self.model, "dropout", 0.0))
        batch = self.config.batch_size

        def at_step(step: int) -> tuple[BoolArray, ...]:
            return tuple(
                dropout_keep(key, t, clients, step, batch, layer, width, p)
                for layer, width in enumerate(widths)
            )

        return at_step

    def first_losses(self, params: F32Array, run_index: IntArray, rows: IntArray) -> F32Array:
        """Loss at w⁽ᵗ⁾ on each job's first minibatch (loss probes without the shared path)."""
        batch = self.config.batch_size
        out = np.empty(run_index.size, dtype=np.float32)
        per_call = max(1, _JOB_ROWS // batch)
        # a model that can give losses without gradients says so (TorchModel.minibatch_loss)
        loss_only = getattr(self.model, "minibatch_loss", None)
        for start in range(0, run_index.size, per_call):
            part = slice(start, start + per_call)
            batch_xy = self.data.train_batch(rows[part, :batch])
            if loss_only is not None:
                out[part] = loss_only(params[run_index[part]], *batch_xy)
            else:
                out[part] = self.model.loss_and_grad(params[run_index[part]], *batch_xy)[0]
        return out


def _check_gather_memory(ctx: _Context) -> None:
    """Refuse a batch size whose round would hold more memory at once than allowed.

    A round draws E·B local indices for each active client (index arrays, ~24 bytes per sample
    with the draw's temporaries) and gathers inputs for at most max(E·B, the job and shared-product
    bounds) samples at a time (float32). A client holding fewer samples than E·B trains on whole
    shuffles of its data back to back, so a batch far beyond every client's data buys only memory.
    """
    cfg, data = ctx.config, ctx.data
    values = int(np.prod(data.input_shape))
    steps = cfg.local_steps * cfg.batch_size
    shared = min(data.n_clients * cfg.batch_size, _SHARED_ROWS) if ctx.shared is not None else 0
    rows = max(steps, _JOB_ROWS, shared)
    need = rows * values * 4 + data.n_clients * steps * 24
    if need > _GATHER_BUDGET_BYTES:
        sizes = data.data_sizes
        raise ValueError(
            f"batch_size={cfg.batch_size} (local_steps={cfg.local_steps}) needs about "
            f"{need / 2**30:.1f} GiB at once for {data.n_clients} clients of {values}-value "
            f"samples, more than the {_GATHER_BUDGET_BYTES / 2**30:.0f} GiB allowed; the clients "
            f"hold {int(sizes.min())}–{int(sizes.max())} training samples each, and a batch "
            "larger than a client's data only repeats its samples"
        )


def _mask(model: Any, key: int, t: int, groups: IntArray) -> BoolArray:
    """``model.mask(key, t, groups)``; an error of the model's own (not a ValueError: a trace
    that does not fit refuses so) named as the plug-in's, with the round."""
    try:
        mask: BoolArray = model.mask(key, t, groups)
    except (ValueError, PluginError, MemoryError):
        raise
    except Exception as exc:
        raise raised_in("availability", model, f"mask, round {t}", exc) from exc
    return mask


def _check_mask(mask: Any, n_clients: int, model: Any) -> None:
    """Refuse an availability model whose ``mask`` is no bool array of shape (n_clients,)."""
    if isinstance(mask, np.ndarray) and mask.dtype == np.bool_ and mask.shape == (n_clients,):
        return
    got = (
        f"a {mask.dtype} array of shape {mask.shape}"
        if isinstance(mask, np.ndarray)
        else f"{type(mask).__name__}: {reprlib.repr(mask)}"
    )
    raise ValueError(
        f"availability: {type(model).__name__}.mask(key, round, groups) must return a bool "
        f"array of shape ({n_clients},), got {got}"
    )


def _context(data: ClientData, config: SimConfig, model: Model | None) -> _Context:
    if model is None:
        model = LogisticRegression(int(np.prod(data.input_shape)), data.n_classes)
    if not isinstance(model, Model):
        raise ValueError(f"model must follow the Model protocol, got {type(model).__name__}")
    if not config.complete:
        raise ValueError(
            "config holds a setting read per population (a trace or device file): simulate "
            "config.for_clients(data.n_clients)"
        )
    availability = config.availability
    if not isinstance(availability, BernoulliAvailability):  # Bernoulli draws indices
        mask = _mask(availability, 0, 0, data.groups)  # a trace of another population refuses
        if not isinstance(availability, TraceAvailability):  # one's own model: the contract
            _check_mask(mask, data.n_clients, availability)
    ctx = _Context(data, config, model)
    _check_gather_memory(ctx)
    return ctx
