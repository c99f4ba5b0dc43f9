"""The cases of ``scripts/bad_input_sweep.py`` added with the second sweep's families: reading
results back, export, interrupted sweeps, a user's plug-ins, settings that do nothing, scale.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from scripts.bad_input_cases import Case, _closed_port, both, earlier_results, output_has

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


def cases() -> list[Case]:
    """The table of these families' cases."""
    c: list[Case] = []
    for family in (_readback, _export):
        family(c.append)
    return c
