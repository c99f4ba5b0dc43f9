"""A ServerApp that resumes: `ServerCheckpoint`, written atomically (docs/design.md §7).

`adcs.flower.Scheduled` saves one every k rounds (and after the last) to the path
the app configures; a ServerApp started again with the same path loads it and continues with the
next round. It holds everything the next round depends on — the model's arrays, the scheduler's
state, the wrapped strategy's state (a server optimizer's moments, a clipping norm), the
scheduler's random stream, which node is which client, the round — so, given the same client replies, the resumed run ends with the same arrays as one
that never stopped.

The file is a pickle: load checkpoints only from a path the server itself wrote.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["FORMAT", "ServerCheckpoint", "load_checkpoint", "save_checkpoint"]

FORMAT = 1
"""Version of the checkpoint's layout; a file of another version is refused."""


@dataclass(frozen=True, eq=False)
class ServerCheckpoint:
    """The server's state after ``server_round`` rounds.

    Attributes
    ----------
    server_round : int
        Rounds done (≥ 1); the resumed run starts with ``server_round + 1``.
    identity : dict of str to Any
        What must match for a resume (the scheduler, N, the seed, the run id).
    arrays : dict of str to ndarray
        The global model's arrays, in the ArrayRecord's key order.
    scheduler_state : Any
        The scheduler's state after the round.
    rng_states : dict of str to dict
        ``bit_generator.state`` of each random stream, by name.
    nodes : list of int
        Node ids in client-index order (`adcs.flower.nodes.NodeIndex`).
    metrics : dict of str to dict of int to dict
        The Result's metrics so far (``train``, ``evaluate``, ``server``): round → metrics.
    history : list
        The strategy's round records so far.
    evaluations : tuple
        The strategy's evaluation records so far (empty in a file written before they were
        kept).
    n_clients : int or None
        N, given or inferred from the connected nodes.
    strategy_state : dict of str to Any
        The wrapped strategy's attributes that changed since its construction, by attribute
        path (``"m_t"``, ``"strategy.m_t"`` inside a wrapper).
    """

    server_round: int
    identity: dict[str, Any]
    arrays: dict[str, NDArray[Any]]
    scheduler_state: Any
    rng_states: dict[str, dict[str, Any]]
    nodes: list[int]
    metrics: dict[str, dict[int, dict[str, Any]]]
    history: list[Any]
    evaluations: tuple[Any, ...] = ()
    n_clients: int | None = None
    strategy_state: dict[str, Any] = field(default_factory=dict)


def save_checkpoint(path: Path, checkpoint: ServerCheckpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically: a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = pickle.dumps({"format": FORMAT, "checkpoint": checkpoint}, protocol=5)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: Path, identity: dict[str, Any]) -> ServerCheckpoint | None:
    """The checkpoint at ``path`` (None when there is none), checked against ``identity``.

    Raises
    ------
    ValueError
        When the file is not a checkpoint of this format, or was written by another run (a
        different scheduler, N, seed or run id): resuming it would not continue this run.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        payload = pickle.loads(path.read_bytes())
        fmt, checkpoint = payload["format"], payload["checkpoint"]
    except Exception as err:  # any unreadable file is refused with its path
        raise ValueError(f"checkpoint {path} cannot be read: {err}") from err
    if fmt != FORMAT or not isinstance(checkpoint, ServerCheckpoint):
        raise ValueError(f"checkpoint {path} has format {fmt!r}, expected {FORMAT}")
    if checkpoint.identity != identity:
        differ = sorted(
            k
            for k in set(identity) | set(checkpoint.identity)
            if identity.get(k) != checkpoint.identity.get(k)
        )
        raise ValueError(
            f"checkpoint {path} belongs to another run ({', '.join(differ)} differ: "
            f"{ {k: checkpoint.identity.get(k) for k in differ} } there, "
            f"{ {k: identity.get(k) for k in differ} } here); remove it or use another path"
        )
    return checkpoint


def restore_rng(rng: np.random.Generator, state: dict[str, Any]) -> None:
    """Set ``rng``'s bit generator to a saved ``bit_generator.state``."""
    rng.bit_generator.state = state
