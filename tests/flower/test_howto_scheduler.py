"""The own-scheduler how-to's Flower section: its code builds both strategies, and its probing
scheduler, run by ``SchedulerStrategy`` over an in-process grid, picks what adcs's own replay of
the same rounds picks (conftest.reference_run)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the Flower extra (adcs[flower]) is not installed")

from adcs.flower import LocalData, ScheduledFedAvg, SchedulerStrategy
from adcs.schedulers.base import ProbeKind
from tests.test_howto_own_scheduler import PAGE, write_package

from .conftest import reference_run, synthetic_clients
from .test_strategy import SEED, N, run_inprocess, task_identity  # noqa: F401 (a fixture)


@pytest.fixture
def mypkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The how-to's package, importable (not installed)."""
    monkeypatch.syspath_prepend(str(write_package(tmp_path)))
    for name in ("mypkg", "mypkg.selection", "mypkg.probing"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import mypkg.probing

    return mypkg.probing


def test_the_pages_flower_code_builds_both_strategies(mypkg: Any) -> None:
    section = PAGE.read_text().split("## In a Flower app")[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    names: dict[str, Any] = {}
    first = code.group(1).split("# in an app built on")[0]
    exec(compile(first, str(PAGE), "exec"), names)
    assert isinstance(names["strategy"], SchedulerStrategy)
    assert names["strategy"].scheduler == mypkg.LossThenSpread(m=3, d=6)
    exec(compile(code.group(1), str(PAGE), "exec"), names)
    assert isinstance(names["strategy"], ScheduledFedAvg)
    assert names["strategy"].scheduler == mypkg.LossThenSpread(m=3, d=6)


@pytest.mark.usefixtures("task_identity")
def test_the_probing_scheduler_picks_in_flower_what_adcs_replays(
    mypkg: Any,
) -> None:
    clients: list[LocalData] = synthetic_clients(N, seed=1)
    scheduler = mypkg.LossThenSpread(m=3, d=6)
    strategy, _, grid = run_inprocess(scheduler, clients, 4)
    reference = reference_run(scheduler, clients, 4, SEED)
    for record, ref in zip(strategy.history, reference, strict=True):
        assert record.probe_kind is ProbeKind.UPDATES is ref.probe_kind
        np.testing.assert_array_equal(record.selected, ref.selected)
        assert len(set(record.selected.tolist())) == 3
        server_round = record.server_round
        assert len(grid.trained(**{"server-round": server_round})) == 6  # the probe trained d


def test_the_example_app_builds_it_from_the_pages_run_config(
    mypkg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex

    monkeypatch.syspath_prepend(str(PAGE.parents[2] / "examples" / "flower-app"))
    from adcs_flower_app.server_app import make_scheduler
    from adcs_flower_app.task import run_config

    line = next(
        x for x in PAGE.read_text().splitlines() if x.startswith("flwr run") and "mypkg" in x
    )
    words = shlex.split(line)
    pairs = shlex.split(words[words.index("--run-config") + 1])  # Flower's key=value pairs
    given = {k: v.strip("'") for k, _, v in (p.partition("=") for p in pairs)}
    given = {k: int(v) if v.isdigit() else v for k, v in given.items()}
    assert make_scheduler(run_config(given)) == mypkg.LossThenSpread(m=6, d=12)
