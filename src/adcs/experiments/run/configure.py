"""The one path of a configuration and its overrides (docs/design.md §6): `configure` refuses
the overrides' overlaps once, makes them as edits of the document, parses it once and checks the
plan, for the command line and `adcs.run` alike; `sweep_points` does the same for each point of a
sweep.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence, Sized
from typing import Any

from adcs.experiments.config import ConfigError, ExperimentConfig
from adcs.experiments.config.overrides import Edit, check_edits, edited
from adcs.experiments.config.sweep import SweepAxis, point_edits, value_label
from adcs.experiments.run.bounds import check_counts
from adcs.experiments.run.plan import runs_per_seed

__all__ = ["check_plan", "configure", "sweep_points"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.=,+-]+")


def _frozen(value: Any) -> Any:
    """A configuration document as a hashable value that is equal exactly where the document
    is (``1`` and ``1.0`` of a float key hash and compare alike, as in the document)."""
    if isinstance(value, Mapping):
        return frozenset((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def check_plan(config: ExperimentConfig, edits: Sequence[Edit] = ()) -> None:
    """The plan check of a configuration about to run, the same from every entry point: its
    records must fit in memory (`check_counts`).

    With the ``edits`` about to be made to ``config``, the counts they ask for (``--rounds``,
    ``--seeds``, ``sim__rounds``) are checked before the edits are parsed, so a huge ``--seeds``
    is refused before its seeds are even listed, and named by its label (``--seeds 1000000000``).
    """
    asked: dict[str, int] = {}
    labels: dict[str, str] = {}
    for e in edits:
        if e.key == ("sim", "rounds") and isinstance(e.value, int):
            asked["rounds"], labels["rounds"] = e.value, e.label
        elif e.key == ("seeds",) and isinstance(e.value, Sized):
            asked["seeds"], labels["seeds"] = len(e.value), e.label
    check_counts(config, runs_per_seed=runs_per_seed(config), labels=labels, **asked)


def configure(
    config: ExperimentConfig, edits: Sequence[Edit] = (), axes: Sequence[SweepAxis] = ()
) -> ExperimentConfig:
    """The configuration a run (or each point of a sweep over ``axes``) starts from: the one
    path of a configuration and its overrides, for the command line and `adcs.run` alike.

    The edits' overlaps, the sweep's keys among them, are refused once (`check_edits`); the
    edits are made to ``config``'s document and parsed once (`edited`); the plan is checked
    (`check_plan`). Each point of a sweep is then `sweep_points` of the result.

    Raises
    ------
    ConfigError
        Naming the override or key at fault.
    """
    if "name" in [a.name for a in axes]:  # it would be replaced by each point's own, silently
        raise ConfigError("sweep name: a point is named after its values; sweep another key")
    check_edits(config.document, [*edits, *point_edits(axes, [a.values[0] for a in axes])])
    check_plan(config, edits)  # the counts asked for, before they are listed
    out = edited(config, edits)
    check_plan(out)
    return out


def sweep_points(
    config: ExperimentConfig,
    axes: Sequence[SweepAxis],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[tuple[dict[str, Any], ExperimentConfig]]:
    """Every point of the sweep: its values by dotted key, and the configuration it runs.

    Each point's configuration is ``config``'s document with the point's edits, parsed once,
    named after the point (``03-alpha=0.3-p=0.5``) and checked like the file (`check_plan`), so
    a value the configuration refuses is named with its key before anything runs. Two points
    that are one configuration are refused (found by hashing each point's checked document:
    linear in the number of points). ``progress(done, total)`` is called after each point.
    """
    if "name" in [a.name for a in axes]:  # it would be replaced by each point's own, silently
        raise ConfigError("sweep name: a point is named after its values; sweep another key")
    check_edits(config.document, point_edits(axes, [a.values[0] for a in axes]))
    names = [a.name for a in axes]
    total = math.prod(len(a.values) for a in axes)
    points: list[tuple[dict[str, Any], ExperimentConfig]] = []
    seen: dict[Any, str] = {}  # each point's configuration, as checked, to the point
    for i, values in enumerate(itertools.product(*(a.values for a in axes))):
        point = dict(zip(names, values, strict=True))
        label = "-".join(f"{a.key[-1]}={value_label(v)}" for a, v in zip(axes, values, strict=True))
        edits = point_edits(axes, values, valued=True)
        checked = edited(config, edits, name=f"{i:02d}-{_UNSAFE.sub('', label)}"[:96])
        check_plan(checked)  # the file's bounds too
        where = ", ".join(f"{k}={v!r}" for k, v in point.items())
        said = seen.setdefault(_frozen({**checked.document, "name": ""}), where)
        if said != where:
            raise ConfigError(f"sweep: {said} and {where} are one configuration; sweep others")
        points.append((point, checked))
        if progress is not None:
            progress(i + 1, total)
    return points
