"""Provenance: what made a results folder — package versions, the git commit of the checkout and
the platform, as every manifest records them; and the checkout a results folder must keep clear of.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["RECORDED_PACKAGES", "git_info", "package_versions", "provenance", "source_checkout"]


RECORDED_PACKAGES = ("adcs", "numpy", "scipy", "matplotlib", "typer", "rich", "torch")
"""The packages whose versions every manifest records (beside Python's)."""


def package_versions(names: Sequence[str]) -> dict[str, str | None]:
    """The installed version of each package of ``names`` (None: not installed)."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], cwd=Path(__file__).resolve().parent, capture_output=True,
            text=True, timeout=5, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@functools.cache
def git_info() -> dict[str, Any]:
    """The commit of this package's checkout and whether it had changes, asked once per process:
    a run's code is what it imported at its start, so a commit made while it runs is not its."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def provenance() -> dict[str, Any]:
    """Versions, git commit and platform, as every manifest records them (the commit as it was
    when this process first asked: a results folder's check at the start of a run)."""
    return {
        "versions": {"python": platform.python_version(), **package_versions(RECORDED_PACKAGES)},
        "git": dict(git_info()),
        "platform": platform.platform(),
    }


def source_checkout() -> list[Path]:
    """This package's source checkout when it runs from one (a results folder must not be it)."""
    checkout = Path(__file__).resolve().parents[4]
    return [checkout] if (checkout / "pyproject.toml").is_file() else []
