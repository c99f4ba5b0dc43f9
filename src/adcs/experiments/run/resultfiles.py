"""Read the files of a results folder back, each kind through one reader that names the file.

Everything that reads a results folder back (`adcs.load_results`, ``adcs export``,
`adcs.experiments.run.results.load_records`, a leaderboard's resume) reads its
``manifest.json``, its tables (``runs.csv``, ``metrics.csv``, ``leaderboard.csv`` …) and its
arrays (``selections.npz`` …) through the readers here. A file that is missing raises
`FileNotFoundError`; one that is empty, truncated, corrupt or not what adcs writes raises
`ResultsFileError`, whose message names the file and what is wrong with it.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "METRIC_COLUMNS",
    "RUN_COLUMNS",
    "ResultsFileError",
    "Table",
    "parsed",
    "read_arrays",
    "read_manifest",
    "read_table",
]

RUN_COLUMNS = ("run_id", "method", "seed", "variant", "params")
"""The columns every ``runs.csv`` adcs writes has."""
METRIC_COLUMNS = ("run_id", "round")
"""The columns every ``metrics.csv`` adcs writes has."""

T = TypeVar("T")


class ResultsFileError(ValueError):
    """A file of a results folder that cannot be read back: empty, truncated, corrupt or foreign.

    Attributes
    ----------
    path : Path
        The file.
    """

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path


def _require(path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(
            f"{path.parent} is not an adcs results folder: {path.name} is missing"
        )
    if not path.is_file():
        raise ResultsFileError(path, "is not a file")


def read_manifest(path: Path) -> dict[str, Any]:
    """``manifest.json`` as a dict: a JSON object adcs wrote (it names adcs's version).

    Raises
    ------
    FileNotFoundError
        There is no such file.
    ResultsFileError
        It is empty, not UTF-8, not JSON, or not a manifest adcs wrote.
    """
    _require(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ResultsFileError(path, "is not UTF-8 text (not a manifest adcs wrote)") from None
    if not text.strip():
        raise ResultsFileError(path, "is empty (an interrupted copy?)") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsFileError(
            path, f"cannot be read as JSON ({exc.msg}, line {exc.lineno}): truncated or corrupt"
        ) from None
    versions = doc.get("versions") if isinstance(doc, dict) else None
    if not isinstance(versions, dict) or "adcs" not in versions:
        raise ResultsFileError(path, "is not a manifest adcs wrote (it names no adcs version)")
    for key in ("sweep", "run_wall_s"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ResultsFileError(path, f"holds a {key!r} that is not a JSON object")
    points = (doc.get("sweep") or {}).get("points") or {}
    if not isinstance(points, dict) or not all(isinstance(v, dict) for v in points.values()):
        raise ResultsFileError(path, "holds sweep points that are not JSON objects")
    return doc


@dataclass(frozen=True)
class Table:
    """A CSV file read back: its header and its rows (every cell a string)."""

    path: Path
    header: list[str]
    rows: list[dict[str, str]]


def read_table(path: Path, columns: Sequence[str] = ()) -> Table:
    """A CSV file of a results folder, checked whole: a header holding ``columns``, rows of
    exactly the header's length, a last line ended (a cut one is refused, not read as missing or
    shortened values).

    Raises
    ------
    FileNotFoundError
        There is no such file.
    ResultsFileError
        It is empty, not UTF-8 CSV, lacks one of ``columns``, or has a row of another length.
    """
    _require(path)
    try:
        text = path.read_text(encoding="utf-8")
        lines = list(csv.reader(io.StringIO(text, newline="")))
    except UnicodeDecodeError:
        raise ResultsFileError(path, "is not UTF-8 text (not a table adcs wrote)") from None
    except csv.Error as exc:
        raise ResultsFileError(path, f"is not a CSV table ({exc})") from None
    if not lines or not any(cell.strip() for cell in lines[0]):
        raise ResultsFileError(path, "is empty (no header line)")
    if not text.endswith("\n"):  # adcs ends every line: a cut last line may parse whole
        raise ResultsFileError(path, "is truncated: its last line is cut off")
    header, body = lines[0], lines[1:]
    missing = [c for c in columns if c not in header]
    if missing:
        raise ResultsFileError(
            path,
            f"lacks the column(s) {', '.join(missing)} (its header: {', '.join(header)[:200]}); "
            "not a table adcs wrote",
        )
    rows = []
    for i, cells in enumerate(body, start=2):
        if len(cells) != len(header):
            raise ResultsFileError(
                path,
                f"has {len(cells)} fields on line {i} where its header has {len(header)} "
                "(truncated or corrupt)",
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return Table(path, header, rows)


def parsed(path: Path, what: str, convert: Callable[..., T], *args: Any) -> T:
    """``convert(*args)``, with a value of the file that does not parse named as its fault.

    ``what`` says which value (``"run 'uniform-s0'"``).
    """
    try:
        return convert(*args)
    except (ValueError, TypeError, KeyError, json.JSONDecodeError) as exc:
        raise ResultsFileError(path, f"holds a value that cannot be read: {what} ({exc})") from None


@contextmanager
def _npz_errors(path: Path) -> Iterator[None]:
    try:
        yield
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        reason = str(exc)
        if "allow_pickle" in reason:
            reason = "it holds Python objects (pickles), which adcs never writes"
        raise ResultsFileError(path, f"cannot be read as a .npz archive ({reason})") from None


def read_arrays(path: Path, keep: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:
    """The arrays of a ``.npz`` file of a results folder (those whose name ``keep`` accepts).

    Never loads pickled objects.

    Raises
    ------
    FileNotFoundError
        There is no such file.
    ResultsFileError
        It is empty, truncated, not a ``.npz`` archive, or holds objects.
    """
    _require(path)
    if path.stat().st_size == 0:
        raise ResultsFileError(path, "is empty (an interrupted copy?)")
    if not zipfile.is_zipfile(path):
        raise ResultsFileError(path, "is not a .npz archive (truncated or another kind of file)")
    with _npz_errors(path), np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files if keep is None or keep(k)}
