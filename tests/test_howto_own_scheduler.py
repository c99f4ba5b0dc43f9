"""The own-scheduler how-to (docs/how-to/own-scheduler.md) as a reader uses it: its files are
written out as it names them (a code block starting ``# <file>``), its package builds and its
entry points resolve, its probing scheduler picks what the page says and runs from the current
folder with the command line."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.schedulers import SCHEDULERS, ClientStats, ProbeKind

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "how-to" / "own-scheduler.md"


def howto_files() -> dict[str, str]:
    """The page's files by name: each code block whose first line is ``# <file name>``."""
    blocks = re.findall(r"```(?:python|toml)\n# ([\w/.]+)\n(.*?)```", PAGE.read_text(), re.S)
    return {name: text for name, text in blocks}


def write_package(folder: Path) -> Path:
    """The how-to's package project (``pyproject.toml`` and ``mypkg/``) under ``folder``."""
    files = howto_files()
    (folder / "mypkg").mkdir(parents=True)
    (folder / "mypkg" / "__init__.py").write_text("")
    for name in ("pyproject.toml", "mypkg/selection.py", "mypkg/probing.py"):
        (folder / name).write_text(files[name])
    return folder


def probing_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> type:
    """``LossThenSpread`` from the page's ``mypkg/probing.py``, imported as ``probing``."""
    (tmp_path / "probing.py").write_text(howto_files()["mypkg/probing.py"])
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "probing", raising=False)
    return SCHEDULERS.resolve("probing:LossThenSpread")


def test_the_page_names_its_files() -> None:
    assert set(howto_files()) == {
        "mypkg/selection.py", "mypkg/probing.py", "pyproject.toml", "spread.toml"
    }  # fmt: skip


def test_the_probing_scheduler_takes_the_highest_loss_then_the_farthest_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cls = probing_module(tmp_path, monkeypatch)
    scheduler = cls(m=3, d=5)
    state = scheduler.init(8)
    rng = np.random.default_rng(0)
    available = np.ones(8, dtype=bool)
    available[6] = False
    probe = scheduler.probe(state, 0, available, rng)
    assert probe.kind is ProbeKind.UPDATES and probe.clients is not None
    assert probe.clients.size == 5 and available[probe.clients].all()
    assert np.array_equal(probe.clients, np.unique(probe.clients))
    # client 1 has the highest loss; 7's update is farthest from 1's; then 3 is farthest from both
    clients = np.array([1, 2, 3, 5, 7])
    losses = np.array([9.0, 1.0, 2.0, 3.0, 0.5])
    updates = np.array([[0.0, 0.0], [0.1, 0.0], [2.0, 2.0], [0.0, 0.2], [5.0, 0.0]])
    stats = ClientStats(available, clients, losses, updates)
    selection, _ = scheduler.select(state, 0, stats, rng)
    assert selection.clients.tolist() == [1, 7, 3]
    # three failed probes (NaN losses, an infinite update): the picks are topped up at random
    losses[[0, 1]] = np.nan
    updates[4, 0] = np.inf
    stats = ClientStats(available, clients, losses, updates)
    picks = scheduler.select(state, 0, stats, rng)[0].clients.tolist()
    assert picks[:2] == [5, 3] and picks[2] in {0, 1, 2, 4, 7}  # available, not picked
    with pytest.raises(ValueError, match="d must be an int >= m = 3"):
        cls(m=3, d=2)


def test_the_probing_scheduler_runs_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = howto_files()
    (tmp_path / "probing.py").write_text(files["mypkg/probing.py"])
    (tmp_path / "spread.toml").write_text(files["spread.toml"])
    monkeypatch.chdir(tmp_path)  # the adcs command's path lacks the current folder
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "probing", raising=False)
    rounds = 3
    sets = [f"sim.rounds={rounds}", "sim.eval_every=3", "data.train_per_client=30",
            "data.test_per_client=10"]  # fmt: skip
    args = ["run", "spread.toml", "--out", "out"] + [a for s in sets for a in ("--set", s)]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    with (tmp_path / "out" / "runs.csv").open() as f:
        runs = {row["method"]: row for row in csv.DictReader(f)}
    assert sorted(runs) == ["powerofchoice", "probing:LossThenSpread"]
    mine = runs["probing:LossThenSpread"]
    # d = 12 updates probed a round; the 6 picked among them train no second time
    assert int(mine["client_updates"]) == 12 * rounds and int(mine["loss_evals"]) == 0


def test_the_package_builds_and_its_entry_points_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_package(tmp_path / "project")
    site = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"]
    pip += ["--no-build-isolation", "--target", str(site), str(project)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    monkeypatch.syspath_prepend(str(site))
    for name in ("mypkg", "mypkg.selection", "mypkg.probing"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    spread, lowest = SCHEDULERS.resolve("spread"), SCHEDULERS.resolve("lowest")
    assert (spread.__module__, spread.__name__) == ("mypkg.probing", "LossThenSpread")
    assert (lowest.__module__, lowest.__name__) == ("mypkg.selection", "LowestIndex")
    assert Path(sys.modules["mypkg.probing"].__file__ or "").is_relative_to(site)
    assert spread(m=2, d=4).d == 4
