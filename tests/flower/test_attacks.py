"""The attacks and defences in the Flower strategy: a malicious ClientApp that inflates its loss.

In Flower the probed update is the one aggregated (the strategy reuses it), so the lie that is
left to a client without poisoning is the reported loss. A ClientApp that multiplies the loss it
reports captures PowerOfChoice; the same scheduler behind the defences (``Defended``, unchanged
in the strategy, which feeds its ``observe`` the updates it aggregates) is not captured.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from adcs.adversary import Defence, Defended
from adcs.flower import LocalData
from adcs.schedulers import PowerOfChoice

from .test_strategy import clients, plain_app, run_inprocess, task_identity

__all__ = ["clients", "task_identity"]  # fixtures shared with the strategy tests

LIAR, ROUNDS = 4, 40


def lying_app(inner: ClientApp, factor: float = 10.0) -> ClientApp:
    """``inner`` with the ``loss`` of every reply (loss queries and train) multiplied."""
    app = ClientApp()

    def handle(message: Message, context: Context) -> Message:
        reply = inner(message, context)
        if "metrics" not in reply.content.metric_records:
            return reply
        metrics: dict[str, Any] = dict(reply.content.metric_records["metrics"])
        if "loss" not in metrics:  # the hello reply
            return reply
        metrics["loss"] = float(metrics["loss"]) * factor
        content: dict[str, Any] = {"metrics": MetricRecord(metrics)}
        if "arrays" in reply.content.array_records:
            arrays: ArrayRecord = reply.content.array_records["arrays"]
            content["arrays"] = arrays
        return Message(RecordDict(content), reply_to=message)

    app.train()(handle)
    app.evaluate()(handle)
    app.query("adcs_hello")(handle)
    app.query("adcs_loss")(handle)
    return app


def times_selected(scheduler: Any, clients: list[LocalData], liar: int | None) -> int:
    def apps(k: int) -> ClientApp:
        app = plain_app(clients)
        return lying_app(app) if k == liar else app

    strategy, _, _ = run_inprocess(scheduler, clients, ROUNDS, apps=apps)
    return sum(int(LIAR in record.selected.tolist()) for record in strategy.history)


@pytest.mark.usefixtures("task_identity")
def test_a_loss_liar_captures_power_of_choice_unless_defended(clients: list[LocalData]) -> None:
    believer = PowerOfChoice(m=3)
    assert times_selected(believer, clients, LIAR) == ROUNDS  # honest: 2 of 40
    defended = Defended(believer, Defence(corroborate=True))
    lied = times_selected(defended, clients, LIAR)
    # 16 of 40 against 7 honest: not captured, but in this 10-client federation the neighbourhood
    # median still lets the liar lift its group (clients 1, 4, 7) to its peers' larger loss
    assert lied <= ROUNDS // 2
    assert times_selected(defended, clients, None) < lied  # what the lie still buys (7 → 16)
