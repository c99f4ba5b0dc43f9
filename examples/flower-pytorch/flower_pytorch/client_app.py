"""The ClientApp, as in Flower's PyTorch quickstart: it knows nothing of adcs."""

from __future__ import annotations

import logging

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from flower_pytorch.task import Net, load_data
from flower_pytorch.task import test as test_fn
from flower_pytorch.task import train as train_fn

app = ClientApp()
log = logging.getLogger("flwr")
torch.set_num_threads(1)


def _config(context: Context) -> dict:
    """The run's config, where a node's own config (e.g. its ``data-dir``) wins."""
    return {**context.run_config, **context.node_config}


def _data(context: Context) -> tuple:
    cfg = _config(context)
    return load_data(
        int(cfg["partition-id"]),
        int(cfg["num-partitions"]),
        str(cfg["data-dir"]),
        int(cfg["batch-size"]),
        int(cfg["examples-per-client"]),
    )


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Train the received model on the local data; send it back with the training loss."""
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    trainloader, _ = _data(context)
    log.info(
        "partition %s: train, server round %s",
        context.node_config["partition-id"],
        msg.content["config"]["server-round"],
    )
    train_loss = train_fn(
        model, trainloader, int(_config(context)["local-epochs"]), msg.content["config"]["lr"]
    )
    metrics = MetricRecord({"train_loss": train_loss, "num-examples": len(trainloader.dataset)})
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Evaluate the received model on the local test data."""
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    _, testloader = _data(context)
    log.info(
        "partition %s: evaluate, server round %s",
        context.node_config["partition-id"],
        msg.content["config"]["server-round"],
    )
    eval_loss, eval_acc = test_fn(model, testloader)
    metrics = {
        "eval_loss": eval_loss,
        "eval_acc": eval_acc,
        "num-examples": len(testloader.dataset),
    }
    return Message(content=RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)
