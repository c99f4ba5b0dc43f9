"""A tiny Flower app in the shape of Flower's PyTorch quickstart, knowing nothing of adcs.

The ClientApp trains a small torch module (a linear layer and a batch norm, so its state dict
holds float and int64 arrays) on its partition of a deterministic synthetic task, and replies
with ``ArrayRecord(model.state_dict())`` and a ``MetricRecord`` of ``train_loss`` and
``num-examples`` (``eval_loss``, ``eval_acc`` and ``num-examples`` for ``evaluate``), as the
quickstart does. Every request is appended as one JSON line to a log file, with what the
client computed, so a test can check the server against the clients' own record.
"""

from __future__ import annotations

import json
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

N_FEATURES = 4
N_CLASSES = 3


class TinyNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(N_FEATURES, N_CLASSES)
        self.bn = nn.BatchNorm1d(N_CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


def initial_model(seed: int = 0) -> TinyNet:
    torch.manual_seed(seed)
    return TinyNet()


def load_data(partition_id: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Partition ``partition_id``'s train or test data: sizes and label skew differ by partition."""
    g = torch.Generator().manual_seed(1000 * partition_id + (split == "test"))
    n = 6 + 3 * partition_id if split == "train" else 8
    y = torch.where(
        torch.rand(n, generator=g) < 0.7,
        torch.full((n,), partition_id % N_CLASSES),
        torch.randint(0, N_CLASSES, (n,), generator=g),
    )
    x = torch.randn(n, N_FEATURES, generator=g) + 0.8 * nn.functional.one_hot(y, N_FEATURES)
    return x, y


def _log(path: str, entry: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def make_app(log_path: str) -> ClientApp:
    """The ClientApp; every request it serves is logged to ``log_path``."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        model = TinyNet()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        config = msg.content["config"]
        x, y = load_data(pid, "train")
        optimizer = torch.optim.SGD(model.parameters(), lr=float(config["lr"]))
        model.train()
        losses = []
        for _ in range(2):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        train_loss = sum(losses) / len(losses)
        state = model.state_dict()
        _log(
            log_path,
            {
                "kind": "train",
                "phase": config["phase"],
                "round": config["server-round"],
                "node": context.node_id,
                "pid": pid,
                "proximal-mu": config.get("proximal-mu"),
                "train_loss": train_loss,
                "num-examples": len(y),
                "arrays": {k: v.tolist() for k, v in state.items()},
            },
        )
        metrics = MetricRecord({"train_loss": train_loss, "num-examples": len(y)})
        content = RecordDict({"arrays": ArrayRecord(state), "metrics": metrics})
        return Message(content=content, reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        model = TinyNet()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        model.eval()
        x, y = load_data(pid, "test")
        with torch.no_grad():
            out = model(x)
            loss = float(nn.functional.cross_entropy(out, y))
            acc = float((out.argmax(1) == y).float().mean())
        config = msg.content["config"]
        _log(
            log_path,
            {
                "kind": "evaluate",
                "phase": config["phase"],
                "round": config["server-round"],
                "node": context.node_id,
                "pid": pid,
                "eval_loss": loss,
            },
        )
        metrics = MetricRecord({"eval_loss": loss, "eval_acc": acc, "num-examples": len(y)})
        return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)

    return app
