"""The cases of ``scripts/bad_input_sweep.py`` added with the second sweep's families: reading
results back, export, interrupted sweeps, a user's plug-ins, settings that do nothing, scale.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scripts.bad_input_cases import (
    Case,
    _closed_port,
    both,
    earlier_results,
    output_has,
    tiny,
)

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


def _export(add: Callable[[Case], None]) -> None:
    exp = ("export", "{w}/out", "--to")
    add(Case("export-mlflow-sqlite", (*exp, "mlflow", "--dest", "sqlite:///{w}/m.db"), None,
             setup=earlier_results("out"), check=_exists("m.db")))  # fmt: skip
    add(Case("export-mlflow-unreachable", (*exp, "mlflow", "--dest", f"http://{_closed_port()}"),
             "cannot be reached", 1, setup=earlier_results("out"), timeout=20))  # fmt: skip
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


def cases() -> list[Case]:
    """The table of these families' cases."""
    c: list[Case] = []
    for family in (_readback, _export, _settings, _scale):
        family(c.append)
    return c
