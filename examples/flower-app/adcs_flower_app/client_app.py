"""The ClientApp: adcs's protocol (:func:`adcs.flower.make_client_app`) on this node's share.

The node's share comes from its disk cache (:class:`adcs_flower_app.task.NodeData`); E, B, η_ℓ
from the server's request. With ``reply-delay-s`` in the node config the node is a straggler: it
computes each ``train`` reply, then waits that long before sending it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from flwr.app import Context, Message
from flwr.clientapp import ClientApp

from adcs.flower import LocalData, TrainDefaults, make_client_app
from adcs_flower_app.logs import show_adcs_logs
from adcs_flower_app.task import DEFAULTS, load_client_data


def client_app(run: Mapping[str, Any] | None = None) -> ClientApp:
    """The ClientApp; ``run`` replaces the run config of Flower's context (for
    ``flwr.simulation.run_simulation``, whose runs have none)."""

    def load(partition_id: int, context: Context) -> LocalData:
        return load_client_data(context.run_config if run is None else run, context.node_config)

    adcs = make_client_app(
        load,
        defaults=TrainDefaults(
            local_steps=DEFAULTS["local-steps"],
            batch_size=DEFAULTS["batch-size"],
            local_lr=DEFAULTS["local-lr"],
        ),
    )
    out = ClientApp()

    @out.train()
    def train(message: Message, context: Context) -> Message:
        show_adcs_logs()
        reply = adcs(message, context)
        delay = float(context.node_config.get("reply-delay-s", 0.0))
        if delay > 0:
            time.sleep(delay)
        return reply

    @out.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        show_adcs_logs()
        return adcs(message, context)

    @out.query("adcs_hello")
    def hello(message: Message, context: Context) -> Message:
        show_adcs_logs()
        return adcs(message, context)

    @out.query("adcs_loss")
    def loss_probe(message: Message, context: Context) -> Message:
        show_adcs_logs()
        return adcs(message, context)

    return out


app = client_app()
