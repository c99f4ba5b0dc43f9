"""A ClientApp mod that makes the adcs protocol's replies private on the client (docs/concepts/privacy.md).

`PrivateProbesMod` follows Flower's mod convention (``mod(message, context, call_next)``,
like ``flwr.clientapp.mod.LocalDpMod``) and wraps the replies of `adcs.flower.client`:

* a loss (``query.adcs_loss``, and the ``loss`` metric of a ``train`` reply) is clipped to
  ``loss_range`` [a, b] and sent with N(0, (z_p (b − a))²) noise;
* a ``train`` reply's update Δ is clipped to norm ``update_clip`` C and sent with N(0, (z_u 2C)² I)
  noise on every coordinate (local DP: the server never holds a clear update, which adcs's
  strategy reads per client as an update probe).

So the server never receives a clear probe value. Each node keeps its own ledger in
``context.state`` (releases of each kind) and adds its ε so far (``epsilon``, at ``delta``, by
``dp-accounting``'s RDP accountant) to every reply it privatises; with a budget ``epsilon``, a node
whose next release would exceed it answers with an error instead (the strategy treats it as a
failed reply: not probed, not aggregated).

Secure aggregation: Flower 1.42's SecAgg+ runs on the workflow path only
(``flwr.server.workflow.SecAggPlusWorkflow`` with ``DefaultWorkflow`` and
``flwr.client.mod.secaggplus_mod``); the Message-API strategies' ``start()``, which adcs's
strategies use, does not run it — and a scheduler that reads per-client updates could not use a
sum alone. Training privacy therefore comes from the local noise above, or, for the aggregate only,
from Flower's ``DifferentialPrivacy{Client,Server}Side*Clipping`` wrappers (whose server still
sees each client's update).

Noise: by default from the operating system's entropy on every reply. With ``seed`` the noise is
the simulator's counter-based draw of (seed, round, partition id) — for comparing a Flower run with
a simulation, never for deployment (whoever knows the seed can subtract it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Error, Message, MetricRecord
from flwr.clientapp import ClientApp
from numpy.typing import NDArray

from adcs._validate import check_int, check_number
from adcs.flower.client import (
    ARRAYS_KEY,
    CONFIG_KEY,
    LOSS,
    LOSS_PROBE,
    METRICS_KEY,
    PARTITION_ID,
    SERVER_ROUND,
)
from adcs.privacy import accounting
from adcs.streams import Domain, counter_normal, stream_key

__all__ = ["EPSILON", "LEDGER", "PrivateProbesMod", "with_mods"]

LEDGER = "adcs-privacy"
"""The ``context.state`` ConfigRecord holding the node's releases (``probes``, ``updates``)."""
EPSILON = "epsilon"
"""The reply metric: the node's ε at δ over its releases so far."""
BUDGET_SPENT = 6  # flwr.common.constant.ErrorCode.MOD_FAILED_PRECONDITION

_LOSS, _UPDATE = 1, 2  # the simulator's salts (adcs.privacy.channel)

ClientAppCallable = Callable[[Message, Context], Message]


@dataclass(frozen=True)
class PrivateProbesMod:
    """Clip and noise the adcs protocol's probe and training replies on the client.

    Parameters
    ----------
    probe_noise, update_noise : float
        Noise multipliers z_p of a loss and z_u of an update (σ = z · Δ, Δ the replace-one
        sensitivity: b − a, 2C).
    delta : float
        δ of the reported ε, in (0, 1).
    loss_range : tuple of (float, float)
        [a, b].
    update_clip : float
        C > 0.
    epsilon : float or None
        The node's budget over the run; None: accounted, never refused.
    seed : int or None
        Counter-based noise of this seed (comparisons with the simulator only); None: fresh
        entropy.
    """

    probe_noise: float
    update_noise: float
    delta: float
    loss_range: tuple[float, float] = (0.0, 5.0)
    update_clip: float = 1.0
    epsilon: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        check_number("probe_noise", self.probe_noise, 0.0, low_open=True)
        check_number("update_noise", self.update_noise, 0.0, low_open=True)
        check_number("delta", self.delta, 0.0, 1.0, low_open=True, high_open=True)
        low, high = (check_number("loss_range", v) for v in self.loss_range)
        if not low < high:
            raise ValueError(f"loss_range must have low < high, got {self.loss_range!r}")
        object.__setattr__(self, "loss_range", (low, high))
        check_number("update_clip", self.update_clip, 0.0, low_open=True)
        if self.epsilon is not None:
            check_number("epsilon", self.epsilon, 0.0, low_open=True)
        if self.seed is not None:
            check_int("seed", self.seed, minimum=0)

    def __call__(self, message: Message, context: Context, call_next: ClientAppCallable) -> Message:
        kind = message.metadata.message_type
        training = kind == "train"
        if not training and kind != LOSS_PROBE:
            return call_next(message, context)
        probes, updates = self._ledger(context)
        probes, updates = probes + 1, updates + int(training)
        if not self._affords(probes, updates):
            reason = f"privacy budget spent: ε = {self.epsilon} at δ = {self.delta} (adcs)"
            return Message(Error(BUDGET_SPENT, reason), reply_to=message)
        reply = call_next(message, context)
        if reply.has_error():
            return reply
        metrics: Mapping[str, Any] = reply.content.metric_records[METRICS_KEY]
        config: Mapping[str, Any] = message.content.config_records.get(CONFIG_KEY, {})
        t = int(config.get(SERVER_ROUND, 1)) - 1  # the simulator's round
        pid = int(metrics[PARTITION_ID])
        low, high = self.loss_range
        noise = float(self._noise(t, pid, 1, _LOSS)[0])
        loss = (
            float(np.clip(float(metrics[LOSS]), low, high))
            + self.probe_noise * (high - low) * noise
        )
        if training:
            record = reply.content.array_records[ARRAYS_KEY]
            key = next(iter(record.keys()))
            update = np.asarray(record[key].numpy(), dtype=np.float64)
            private = self._update(update, t, pid).astype(record[key].numpy().dtype)
            reply.content[ARRAYS_KEY] = ArrayRecord({key: Array(np.ascontiguousarray(private))})
        context.state[LEDGER] = ConfigRecord({"probes": probes, "updates": updates})
        eps = accounting.epsilon(self._releases(probes, updates), self.delta)
        reply.content[METRICS_KEY] = MetricRecord({**dict(metrics), LOSS: loss, EPSILON: eps})
        return reply

    def _ledger(self, context: Context) -> tuple[int, int]:
        ledger: Mapping[str, Any] | None = context.state.config_records.get(LEDGER)
        if ledger is None:
            return 0, 0
        return int(ledger["probes"]), int(ledger["updates"])

    def _releases(self, probes: int, updates: int) -> dict[float, int]:
        releases: dict[float, int] = {}
        for z, n in ((self.probe_noise, probes), (self.update_noise, updates)):
            releases[z] = releases.get(z, 0) + n
        return releases

    def _affords(self, probes: int, updates: int) -> bool:
        """Whether these releases stay within the budget (Σ n_k / z_k² ≤ the accountant's)."""
        if self.epsilon is None:
            return True
        spent = probes / self.probe_noise**2 + updates / self.update_noise**2
        return spent <= accounting.budget(self.epsilon, self.delta)

    def _noise(self, t: int, pid: int, width: int, salt: int) -> NDArray[np.float64]:
        if self.seed is None:
            return np.random.default_rng().standard_normal(width)
        key = stream_key(self.seed)
        rows = np.array([pid], dtype=np.int64)
        return counter_normal(key, Domain.PRIVACY, t, rows, width, salt=salt)[0].astype(np.float64)

    def _update(self, update: NDArray[np.float64], t: int, pid: int) -> NDArray[np.float64]:
        """Δ clipped to norm C, plus N(0, (z_u 2C)² I)."""
        flat = update.reshape(-1)
        norm = float(np.linalg.norm(flat))
        if math.isfinite(norm) and norm > self.update_clip:
            flat = flat * (self.update_clip / norm)
        sigma = self.update_noise * 2.0 * self.update_clip
        noisy = flat + sigma * self._noise(t, pid, flat.size, _UPDATE)
        return noisy.reshape(update.shape)


def with_mods(
    app: ClientApp, mods: list[Callable[[Message, Context, ClientAppCallable], Message]]
) -> ClientApp:
    """``app`` (e.g. `adcs.flower.make_client_app`'s) behind Flower mods: a ClientApp with
    ``mods`` whose handlers of the adcs protocol's four message types hand on to ``app``.

    Example::

        app = with_mods(make_client_app(load_data), [PrivateProbesMod(2.0, 4.0, delta=1e-3)])
    """
    out = ClientApp(mods=list(mods))

    def forward(message: Message, context: Context) -> Message:
        return app(message, context)

    out.query("adcs_hello")(forward)
    out.query("adcs_loss")(forward)
    out.train()(forward)
    out.evaluate()(forward)
    return out
