"""The options several commands share (``--seeds``, ``--out``, ``--force``, ``--set``, ...):
each an ``Annotated`` type that a command's signature names, so its flag and help are one."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "CheckpointEvery",
    "DataDir",
    "Force",
    "Out",
    "RayAddress",
    "Resume",
    "Rounds",
    "Seeds",
    "Sets",
    "Track",
    "TrackDest",
    "TrackTo",
    "Workers",
]


class TrackTo(str, enum.Enum):
    """The tracking backends (``--track``, ``adcs export --to``)."""

    tensorboard = "tensorboard"
    mlflow = "mlflow"


Seeds = Annotated[
    int | None,
    typer.Option(
        "--seeds", metavar="N", min=1, help="Use seeds 0..N-1 (default: the configuration's)."
    ),
]
Rounds = Annotated[
    int | None,
    typer.Option(
        "--rounds", metavar="T", min=1, help="Rounds T per run (default: the configuration's)."
    ),
]
Out = Annotated[
    str | None,
    typer.Option(
        "--out",
        metavar="DIR",
        help="Results folder (default results/NAME-TIME). Must be new, empty, or an earlier "
        "adcs results folder with --force; never the current folder, a parent of it, or inside "
        "the data.",
    ),
]
DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data",
        metavar="DIR",
        help="The data's folder (or file), in place of data.path (Fashion-MNIST's default: "
        "$ADCS_DATA_DIR, then the lookup; see Data).",
    ),
]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace an earlier adcs results folder at --out (one with a manifest.json; never "
        "any other folder) and remove stale partial folders of dead runs on it.",
    ),
]
Resume = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the interrupted run at --out from its checkpoint (same configuration and "
        "overrides); the results files are byte-identical to an uninterrupted run's.",
    ),
]
CheckpointEvery = Annotated[
    int | None,
    typer.Option(
        "--checkpoint-every",
        min=0,
        metavar="ROUNDS",
        help="Checkpoint every ROUNDS rounds (default: about every 30 s of simulation; 0: never).",
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers",
        metavar="N",
        min=1,
        help="Processes advancing different seeds at once; results do not depend on it "
        "(default: half the CPUs this process may use, at most 4; on --resume, the interrupted "
        "run's).",
    ),
]


RayAddress = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        metavar="ADDR",
        help="Run the shards (the runs of one seed) as tasks on the existing Ray cluster at ADDR "
        "(ray.init's address: HOST:PORT from a node of the cluster, ray://HOST:10001 from "
        "elsewhere) and gather them here; the results files are byte-identical to a local "
        "run's. Needs Ray (the ray extra) and the same adcs on every node; --workers then does "
        "not apply.",
    ),
]

Track = Annotated[
    TrackTo | None,
    typer.Option(
        "--track",
        help="Log each evaluation while the run goes: TensorBoard event files (runs/NAME/) or an "
        "MLflow store (mlruns/), each in its extra; the results files do not change.",
    ),
]
TrackDest = Annotated[
    str | None,
    typer.Option(
        "--track-to",
        metavar="DIR|URI",
        help="Where --track writes: a log folder, or an MLflow tracking URI.",
    ),
]
Sets = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Change one key of the configuration (repeatable; a later one wins): a dotted key "
        'and a TOML value, e.g. data.partition.alpha=0.1, \'sim.availability={kind="bernoulli", '
        "p=0.5}', methods.adcs.theta=0.9 (a method by scheduler name or position). Checked like "
        "the file; recorded in manifest.json and compared by --resume.",
    ),
]
