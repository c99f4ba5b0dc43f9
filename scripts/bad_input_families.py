"""The cases of ``scripts/bad_input_sweep.py`` added with the second sweep's families: reading
results back, export, interrupted sweeps, a user's plug-ins, settings that do nothing, scale.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scripts.bad_input_cases import (
    SRC,
    TINY,
    Case,
    _closed_port,
    both,
    earlier_results,
    output_has,
    tiny,
    write,
)

PLUG = """from dataclasses import dataclass
import numpy as np
from adcs.data.partition_table import PartitionKind
from adcs.schedulers import BasicState, SchedulerBase, Selection

@dataclass(frozen=True)
class Low(SchedulerBase[BasicState]):
    offset: int = 0
    weight: float = 1.0
    deep: bool = False
    pair: tuple[int, int] = (1, 2)

    def init(self, n_clients, data_sizes=None):
        return BasicState(n_clients, self._check_init(n_clients, data_sizes))

    def select(self, state, round_idx, stats, rng):
        clients = np.flatnonzero(stats.available)[: self.m]
        return Selection(clients, np.full(clients.size, self.weight)), state

class SelectRaises(Low):
    def select(self, state, round_idx, stats, rng):
        if round_idx == 1:
            raise ZeroDivisionError("empty quality table")
        return super().select(state, round_idx, stats, rng)

class InitRaises(Low):
    def init(self, n_clients, data_sizes=None):
        raise KeyError("cluster map")

@dataclass(frozen=True)
class MaskRaises:
    kind = "mask-raises"

    def mask(self, key, round_idx, groups):
        if round_idx == 2:
            raise ConnectionError("trace server down")
        return np.ones(groups.shape[0], dtype=bool)

    def describe(self):
        return {}

def _split(data, rng, **params):
    raise IndexError("label 9 has no samples")

SPLIT = PartitionKind(_split, frozenset({"n_clients"}))
"""

SPOILS: dict[str, Callable[[Path], None]] = {
    "empty": lambda p: p.write_bytes(b""),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2 - 1]),
    "corrupt": lambda p: p.write_bytes(p.read_bytes()[:20] + b"\xff\xfe\x00" * 8),
    "foreign": lambda p: p.write_text('{"mine": 1}\n' if p.suffix == ".json" else "a,b\n1,2\n"),
}


def spoiled(file: str, spoil: str) -> Callable[[Path], None]:
    """Earlier results in ``w/out`` with ``file`` spoiled."""

    def setup(w: Path) -> None:
        earlier_results("out")(w)
        SPOILS[spoil](w / "out" / file)

    return setup


def _exists(name: str) -> Callable[[Path, str], bool]:
    return lambda w, output: (w / name).exists()


def _readback(add: Callable[[Case], None]) -> None:
    """Reading results back: ``adcs export`` of a folder with a spoiled file (``adcs.load_results``
    reads through the same readers; tests/experiments/test_resultfiles.py covers it)."""
    for file in ("manifest.json", "runs.csv", "metrics.csv"):
        for spoil in SPOILS:
            add(Case(f"export-{spoil}-{file.replace('.', '-')}",
                     ("export", "{w}/out", "--to", "tensorboard"), f"{{w}}/out/{file} ", 2,
                     setup=spoiled(file, spoil)))  # fmt: skip


def _export(add: Callable[[Case], None], silent: str) -> None:
    """Export: the how-to's sqlite store, a server away or silent, a full disk, a second export."""
    exp = ("export", "{w}/out", "--to")
    add(Case("export-mlflow-sqlite", (*exp, "mlflow", "--dest", "sqlite:///{w}/m.db"), None,
             setup=earlier_results("out"), check=_exists("m.db")))  # fmt: skip
    add(Case("export-mlflow-unreachable", (*exp, "mlflow", "--dest", f"http://{_closed_port()}"),
             "cannot be reached", 1, setup=earlier_results("out"), timeout=20))  # fmt: skip
    add(Case("export-mlflow-silent", (*exp, "mlflow", "--dest", f"http://{silent}"),
             "does not answer within 5 s", 1, setup=earlier_results("out"), timeout=40))  # fmt: skip
    add(Case("export-full-disk", (*exp, "tensorboard", "--dest", "{w}/small/tb"),
             "{w}/small/tb/.partial", 1, needs="mount", setup=earlier_results("out", rounds=20_000)))  # fmt: skip
    add(Case("export-twice", (*exp, "tensorboard"), "--resume", 2,
             setup=both(earlier_results("out"), _exported)))  # fmt: skip
    add(Case("export-resume", (*exp, "tensorboard", "--resume"), None,
             setup=both(earlier_results("out"), _exported),
             check=output_has("tensorboard:")))  # fmt: skip


def _exported(w: Path) -> None:
    import subprocess

    from scripts.bad_input_cases import _command, _env

    subprocess.run(_command(["export", str(w / "out"), "--to", "tensorboard"]), cwd=w,
                   env=_env(()), capture_output=True, check=True)  # fmt: skip


IDLE = {  # a key that does nothing without another: the TOML, and what the error names
    "defence-window-no-cap": ("[sim.defence]\nwindow = 50", "sim.defence.window = 50 does nothing"),
    "defence-trim-plain-mean": ("[sim.defence]\ntrim = 0.3", "without aggregation = 'trimmed_mean'"),
    "defence-trim-median": ('[sim.defence]\naggregation = "median"\ntrim = 0.1', "sim.defence.trim"),
    "defence-consistency": ("[sim.defence]\nconsistency = 0.5", "without received = true"),
    "defence-peers": ("[sim.defence]\npeers = 5", "without corroborate = true"),
    "attack-factor": ('[sim.attack]\nn_malicious = 1\nlie = ["direction"]\nfactor = 3.0',
                      "sim.attack.factor = 3.0 does nothing"),
    "attack-direction": ('[sim.attack]\nn_malicious = 1\ndirection = "random"',
                         "without a direction lie"),
}  # fmt: skip


def _settings(add: Callable[[Case], None]) -> None:
    """Settings that do nothing: a key without the one it needs, an empty list item."""
    T = "{w}/tiny.toml"
    for name, (toml, says) in IDLE.items():
        add(Case(f"idle-{name}", ("run", T, "--out", "{w}/out"), says, 2, setup=tiny(toml)))
    for name, value, says in [("empty-value", "m=2,,3", "item 2 of 3 is empty"),
                              ("trailing-comma", "m=2,3,", "item 3 of 3 is empty"),
                              ("only-commas", "m=,", "names no value")]:  # fmt: skip
        add(Case(f"sweep-{name}", ("run", T, "--sweep", value, "--out", "{w}/out"), says, 2,
                 setup=tiny()))  # fmt: skip
    add(Case("track-to-without-track", ("run", T, "--out", "{w}/out", "--track-to", "{w}/tb"),
             "does nothing without --track", 2, setup=tiny()))  # fmt: skip
    board = ("leaderboard", "--out", "{w}/out")
    for option, value, says in [("--entries", "", "--entries '' names no entry"),
                                ("--entries", "uniform,,md", "item 2 of 3 is empty"),
                                ("--rank-by", "", "--rank-by '' names no column"),
                                ("--workloads", "paper,", "item 2 of 2 is empty")]:  # fmt: skip
        slug = f"{option[2:]}-{'empty' if not value else 'empty-item'}"
        add(Case(slug, (*board, option, value), says, 2))


def _scale(add: Callable[[Case], None]) -> None:
    """22 500 points: progress shows while they are checked (it was 100 s of silence)."""
    rates = ",".join(f"{0.001 * (i + 1):.3f}" for i in range(150))
    seeds = "[" + ",".join(f"[{i}]" for i in range(150)) + "]"
    add(Case("sweep-22500-points-progress",
             ("run", "{w}/tiny.toml", "--sweep", f"sim.local_lr={rates}", "--sweep",
              f"seeds={seeds}", "--out", "{w}/out"),
             "terminated (SIGTERM)", 143, setup=tiny(), signal_after="checking points",
             timeout=30))  # fmt: skip


def _dist(name: str, target: str) -> Callable[[Path], None]:
    """An installed distribution ``name`` (its dist-info on the path) declaring the scheduler
    entry point ``low`` as ``target``."""
    info = f"{name.replace('-', '_')}-1.0.dist-info"
    return both(write(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"),
                write(f"{info}/entry_points.txt", f"[adcs.schedulers]\nlow = {target}\n"))  # fmt: skip


def _plugins(add: Callable[[Case], None]) -> None:
    """A user's plug-ins that raise, break the weights' contract or get a value of another type."""
    env = (("PYTHONPATH", f"{SRC}:{{w}}"),)  # the plug-in module in the case's folder

    def plugged(name: str, toml: str = "") -> Callable[[Path], None]:
        text = TINY.format(rounds=4, sim="").replace('"uniform"', f'"{name}"') + toml
        return both(write("plug.py", PLUG), write("p.toml", text))

    run = ("run", "{w}/p.toml", "--out", "{w}/out")
    for name, args, says, code in [
        ("select-raises", ("plug:SelectRaises",), "plug:SelectRaises raised ZeroDivisionError in "
         "select, run plug:SelectRaises-seed=0 at round 1", 1),
        ("init-raises", ("plug:InitRaises",), "plug:InitRaises raised KeyError in init", 1),
        ("mask-raises", ("uniform",), "availability plug:MaskRaises raised ConnectionError in "
         "mask, round 2", 1),
        ("negative-weights", ("plug:Low", "methods.0.weight=-1"), "non-negative selection", 1),
        ("nan-weights", ("plug:Low", "methods.0.weight=nan"), "non-negative selection", 1),
        ("int-as-float", ("plug:Low", "methods.0.offset=1.5"), "offset must be int", 2),
        ("bool-as-int", ("plug:Low", "methods.0.deep=1"), "deep must be bool", 2),
        ("tuple-too-long", ("plug:Low", "methods.0.pair=[1,2,3]"), "pair must be tuple", 2),
        ("entry-point-twice", ("low",), "declared by 2 distributions: pkg-a (plug:Low), pkg-b "
         "(plug:SelectRaises)", 2),
    ]:  # fmt: skip
        sets = tuple(x for a in args[1:] for x in ("--set", a))
        setup = plugged(
            args[0], '[sim.availability]\nkind = "plug:MaskRaises"\n' * (name == "mask-raises")
        )
        if name == "entry-point-twice":
            setup = both(setup, _dist("pkg-a", "plug:Low"), _dist("pkg-b", "plug:SelectRaises"))
        add(Case(f"plugin-{name}", (*run, *sets), says, code, setup=setup, env=env))
    toml = (
        'name = "s"\nm = 2\nseeds = [0]\n[data]\npartition = "plug:SPLIT"\nn_clients = 4\n'
        '[sim]\nrounds = 2\n[[methods]]\nname = "uniform"\n'
    )
    split = both(write("plug.py", PLUG), write("p.toml", toml))
    add(Case("plugin-split-raises", run, "partition plug:_split raised IndexError in its split", 1,
             setup=split, env=env))  # fmt: skip


def _interrupted(add: Callable[[Case], None]) -> None:
    """Interrupted sweeps: say what is kept and how to resume (or that nothing is)."""
    sweep = ("run", "{w}/tiny.toml", "--sweep", "m=1,2")
    add(Case("sweep-sigterm-before-checkpoint",
             (*sweep, "--out", "{w}/out", "--checkpoint-every", "100000"),
             "stopped before the first checkpoint; nothing was kept", 143,
             setup=tiny(rounds=1_000_000), signal_after="rounds (", timeout=60))  # fmt: skip
    add(Case("sweep-full-disk", (*sweep, "--out", "{w}/small/o"),
             "is kept in {w}/small/.o.partial: --resume continues it", 1, needs="mount",
             setup=tiny(rounds=4000)))  # fmt: skip


def cases(silent: str) -> list[Case]:
    """The table of these families' cases (``silent``: an address that accepts and never answers)."""
    c: list[Case] = []
    for family in (_readback, _settings, _scale, _plugins, _interrupted):
        family(c.append)
    _export(c.append, silent)
    return c
