"""Results folders: checked before any work, locked while written, completed atomically.

While a run writes the folder ``OUT`` it holds, beside it::

    .OUT.lock       a lock file (``flock``; released by the kernel when the process dies, even
                    by SIGKILL) naming the writer: pid, start time, command
    .OUT.partial/   the results being written, with ``writer.json`` and, once the first
                    checkpoint is taken, ``checkpoint/`` (``state.pkl`` and ``info.json``)

When everything is written the partial folder is renamed to ``OUT`` in one step (an existing
``OUT`` is replaced only when it is an adcs results folder — it has a ``manifest.json`` written by
adcs — and the caller says so), and the lock file is removed. A run that fails or is interrupted
leaves its partial folder only when it holds a checkpoint (it can then be resumed), else nothing.
A partial folder whose writer is gone is *stale*: the next run on ``OUT`` names it and refuses to
start until it is resumed or discarded (``force``).

Every check that can be made before any work is made by `ResultsFolder.check`; every OS
failure surfaces as `RunError` with a one-line message.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import shutil
import socket
import sys
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import numpy as np

from adcs.experiments.run.provenance import git_info

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux or macOS
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MANIFEST",
    "OutputBusy",
    "OutputRefused",
    "ResultsFolder",
    "RunError",
    "StalePartial",
    "is_results_folder",
    "note_kept",
    "os_error",
    "write_npz",
]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
CHECKPOINT = "checkpoint"
_WRITER = "writer.json"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class RunError(RuntimeError):
    """The experiment cannot be run or its results cannot be written (a one-line reason)."""


class OutputRefused(RunError):
    """The results folder asked for cannot be used as it is now (checked before any work)."""


class OutputBusy(RunError):
    """Another run is writing the results folder now: a failure of this run, not bad input
    (the same command succeeds once the other run is done)."""


def os_error(action: str, exc: OSError, folder: Path | None = None) -> RunError:
    """A one-line `RunError` for an OS failure: what was being done, and why it failed.

    The file is named when the error names one, else ``folder`` (a write to an open file, such
    as one that fills the disk, names none).
    """
    reason = exc.strerror or str(exc)
    filename = exc.filename if exc.filename else folder
    where = f" {filename}" if filename else ""
    return RunError(f"{action}:{where}: {reason}" if where else f"{action}: {reason}")


_KEPT = ": --resume continues it, --force discards it"


def note_kept(exc: BaseException, what: str, partial: Path) -> None:
    """Say on ``exc`` that ``what`` is kept in ``partial`` (a PEP 678 note, which the command
    line's ``error:`` line ends with), in place of an earlier such note."""
    notes = [n for n in getattr(exc, "__notes__", []) if not n.endswith(_KEPT)]
    exc.__notes__ = [*notes, f"{what} is kept in {partial}{_KEPT}"]  # type: ignore[attr-defined]


def is_results_folder(path: Path) -> bool:
    """Whether ``path`` is a folder adcs wrote: its ``manifest.json`` names adcs's version."""
    try:
        doc = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("versions"), dict)
        and ("adcs" in doc["versions"])
    )


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _absolute(path: str | os.PathLike[str]) -> Path:
    """An absolute path with symbolic links resolved where they exist."""
    absolute = Path(os.path.abspath(Path(path).expanduser()))
    with contextlib.suppress(OSError):
        return absolute.resolve()
    return absolute


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, whole."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """``np.savez_compressed``, but byte-reproducible: the archive's entries carry a fixed time.

    ``np.load`` reads it as any ``.npz``; the same arrays always give the same bytes.
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            with zf.open(info, "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(array), allow_pickle=False)


@dataclass(frozen=True)
class StalePartial:
    """A partial results folder left by a run that is no longer running.

    Attributes
    ----------
    path : Path
    writer : dict
        What ``writer.json`` says of the run that made it (pid, started_at, command); may be empty.
    checkpoint : dict or None
        The checkpoint's ``info.json`` (rounds done, saved_at, …), None without a checkpoint.
    """

    path: Path
    writer: Mapping[str, Any]
    checkpoint: Mapping[str, Any] | None

    def describe(self) -> str:
        parts = []
        if self.writer.get("pid") is not None:
            parts.append(f"pid {self.writer['pid']}, started {self.writer.get('started_at', '?')}")
        if self.checkpoint is not None:
            parts.append(f"checkpoint: {self.checkpoint.get('progress', '?')}")
        else:
            parts.append("no checkpoint")
        return f"{self.path.name} ({'; '.join(parts)})"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


class ResultsFolder:
    """The lifecycle of one results folder: check, lock, partial folder, checkpoint, completion.

    Parameters
    ----------
    out : path
        The results folder to write. A symbolic link is followed: the results, the partial
        folder and the lock go where it points (the link stays, and so names the new results).
    data : sequence of path
        Data folders and files: ``out`` may be neither inside a folder nor contain either.
    keep : sequence of path
        Folders ``out`` must not be or contain (e.g. the source checkout; results inside it are
        fine). The current folder and the home folder are always kept.
    """

    def __init__(
        self, out: str | os.PathLike[str], *, data: Iterable[Path] = (), keep: Iterable[Path] = ()
    ) -> None:
        given = Path(out).expanduser()
        absolute = Path(os.path.abspath(given))
        self._link_problem: str | None = None
        if absolute.is_symlink():  # a link is followed: the results land where it points
            try:
                absolute = absolute.resolve()
            except (OSError, RuntimeError) as exc:  # a loop (RuntimeError before Python 3.13)
                self._link_problem = (
                    f"--out {given} is a symbolic link that cannot be followed ({exc})"
                )
        parent = absolute.parent
        with contextlib.suppress(OSError):
            parent = parent.resolve()
        self.given = given
        self.out = parent / absolute.name
        self.partial = parent / f".{absolute.name}.partial"
        self.lock_path = parent / f".{absolute.name}.lock"
        self.data = [_absolute(p) for p in data]
        self.keep = [_absolute(p) for p in keep]
        self._lock: IO[str] | None = None
        self._created: Path | None = None  # the top folder this run created above ``out``

    # -- before any work -----------------------------------------------------------------------

    def check(self, *, force: bool = False, resume: bool = False) -> None:
        """Refuse an unusable target, without touching anything.

        Raises
        ------
        RunError
            ``out`` is the current folder, the home folder, a parent of them or of a protected
            folder, or inside a protected data folder; it exists and is not a folder; it is a
            non-empty folder that is not an adcs results folder, or one without ``force``; or
            its nearest existing parent is not a writable folder.
        """
        git_info()  # the checkout as the run starts, which its manifest records at the end
        out, shown = self.out, self.given
        if self._link_problem is not None:
            raise OutputRefused(self._link_problem)
        if self.out.name in ("", ".", ".."):
            raise OutputRefused(f"--out {shown} names no folder")
        guarded = [
            ("the current folder", _absolute(Path.cwd())),
            ("your home folder", _absolute(Path.home())),
        ]
        guarded += [(f"the source folder {p}", p) for p in self.keep]
        guarded += [(f"the data {'file' if p.is_file() else 'folder'} {p}", p) for p in self.data]
        for what, folder in guarded:
            if _is_within(folder, out):
                relation = "is" if folder == out else "contains"
                raise OutputRefused(f"--out {shown} {relation} {what}; choose a folder of its own")
        for folder in self.data:
            if _is_within(out, folder):
                raise OutputRefused(f"--out {shown} is inside the data folder {folder}")
        if out.exists() and not out.is_dir():
            raise OutputRefused(f"--out {shown} exists and is not a folder")
        if out.is_dir() and not resume:
            try:
                entries = next(os.scandir(out), None)
            except OSError as exc:
                raise os_error(f"cannot read --out {shown}", exc) from None
            if entries is not None:
                if not is_results_folder(out):
                    why = (
                        f"its {MANIFEST} is not one adcs wrote (it names no adcs version)"
                        if (out / MANIFEST).exists()
                        else f"no {MANIFEST}"
                    )
                    raise OutputRefused(
                        f"--out {shown} is a non-empty folder that adcs did not write ({why}); "
                        "--force replaces only adcs results folders"
                    )
                if not force:
                    raise OutputRefused(
                        f"--out {shown} holds earlier results; pass --force to replace them"
                    )
        holder = self.holder()
        if holder is not None:
            raise self._busy(holder)
        self._judge(self.stale(), force=force, resume=resume)
        ancestor = out.parent
        while not ancestor.exists():
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OutputRefused(f"cannot create --out {shown}: {ancestor} is not a folder")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise OutputRefused(f"cannot create --out {shown}: {ancestor} is not writable")

    # -- the lock ------------------------------------------------------------------------------

    def acquire(self, command: str = "") -> None:
        """Create the parent folders and take the lock, or refuse if another run holds it."""
        try:
            self._make_parents()
        except OSError as exc:
            self._remove_created()
            raise os_error(f"cannot create --out {self.given}", exc) from None
        try:
            while True:
                fh = self.lock_path.open("a+", encoding="utf-8")
                if fcntl is not None:  # elsewhere the lock file only names the writer
                    try:
                        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        fh.seek(0)
                        holder = fh.read().strip()
                        fh.close()
                        raise self._busy(holder or "unknown process") from None
                # a lock taken on a file another run has just removed protects nothing
                try:
                    same = os.path.samestat(os.fstat(fh.fileno()), os.stat(self.lock_path))
                except FileNotFoundError:
                    same = False
                if same:
                    break
                fh.close()
            fh.seek(0)
            fh.truncate()
            fh.write(f"pid {os.getpid()} on {socket.gethostname()}, started {_now()}: {command}\n")
            fh.flush()
        except OSError as exc:
            self._remove_created()
            # e.g. /proc, which root may "write" but where no file can be made
            reason = exc.strerror or str(exc)
            raise RunError(
                f"cannot create files beside --out {self.given} (its lock file "
                f"{self.lock_path}): {reason}"
            ) from None
        self._lock = fh

    def release(self) -> None:
        """Remove the lock file and release the lock (removing it while held is race free)."""
        if self._lock is None:
            return
        with contextlib.suppress(OSError):
            self.lock_path.unlink()
        self._lock.close()
        self._lock = None
        self._remove_created()

    def __enter__(self) -> ResultsFolder:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def _make_parents(self) -> None:
        missing = [p for p in (self.out.parent, *self.out.parent.parents) if not p.exists()]
        if missing:
            self._created = missing[-1]
        self.out.parent.mkdir(parents=True, exist_ok=True)

    def _remove_created(self) -> None:
        """Remove the parent folders this run created, when nothing else is in them."""
        if self._created is None or self.out.exists() or self.partial.exists():
            return
        folder = self.out.parent
        while True:
            try:
                folder.rmdir()
            except OSError:
                return
            if folder == self._created:
                self._created = None
                return
            folder = folder.parent

    # -- stale partial folders -----------------------------------------------------------------

    def stale(self) -> list[StalePartial]:
        """Partial folders of runs on ``out`` that no longer run (call with the lock held)."""
        found = []
        names = (f".{self.out.name}.partial", f".{self.out.name}.partial-")
        with contextlib.suppress(OSError):
            for path in sorted(self.out.parent.iterdir()):
                if path == self.partial or (path.is_dir() and path.name.startswith(names[1])):
                    found.append(
                        StalePartial(
                            path,
                            _read_json(path / _WRITER) or {},
                            _read_json(path / CHECKPOINT / "info.json"),
                        )
                    )
        return found

    def _judge(self, stale: list[StalePartial], *, force: bool, resume: bool) -> list[StalePartial]:
        """The stale folders to remove; raise when the caller has not said what to do with them."""
        ours = next((s for s in stale if s.path == self.partial), None)
        others = [s for s in stale if s.path != self.partial]
        if resume:
            if ours is None or ours.checkpoint is None:
                if self.out.is_dir() and is_results_folder(self.out):
                    raise OutputRefused(f"--resume: {self.given} is complete; nothing to resume")
                detail = "" if ours is None else f" ({ours.describe()}; --force starts over)"
                raise OutputRefused(
                    f"--resume: no interrupted run to resume at {self.given}: no checkpoint in "
                    f"{self.partial.name}{detail}"
                )
            stale = others
        if stale and not force:
            names = "; ".join(s.describe() for s in stale)
            hint = (
                "continue it with --resume or discard it with --force"
                if any(s.checkpoint is not None for s in stale) and not resume
                else "remove it or pass --force"
            )
            raise OutputRefused(
                f"--out {self.given}: partial results of a run that is no longer running: "
                f"{names}; {hint}"
            )
        return stale

    def holder(self) -> str | None:
        """Who holds the lock on ``out`` now (None when nobody does); takes nothing."""
        if fcntl is None or not self.lock_path.is_file():
            return None
        try:
            with self.lock_path.open("r", encoding="utf-8") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    return fh.read().strip() or "unknown process"
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except OSError:
            return None
        return None

    def _busy(self, holder: str) -> OutputBusy:
        return OutputBusy(
            f"--out {self.given} is being written by another adcs run ({holder}); wait for it "
            "or choose another --out"
        )

    def prepare(self, *, force: bool = False, resume: bool = False, command: str = "") -> bool:
        """Deal with stale partial folders and make this run's partial folder.

        Returns whether a checkpoint is there to resume (only with ``resume``).

        Raises
        ------
        RunError
            A stale partial folder exists and neither ``resume`` nor ``force`` says what to do
            with it; ``resume`` without a checkpoint to resume; or the folder cannot be made.
        """
        stale = self._judge(self.stale(), force=force, resume=resume)
        for s in stale:
            logger.warning("removing the stale partial folder %s", s.describe())
            shutil.rmtree(s.path, ignore_errors=True)
        if resume:
            self._write_writer(command)
            return True
        try:
            self.partial.mkdir()
            self._write_writer(command)
        except OSError as exc:
            raise os_error(
                f"cannot create the results folder beside --out {self.given}", exc
            ) from None
        return False

    def _write_writer(self, command: str) -> None:
        doc = {"pid": os.getpid(), "host": socket.gethostname(), "started_at": _now(),
               "command": command, "argv": list(sys.argv)}  # fmt: skip
        (self.partial / _WRITER).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")

    # -- checkpoints ---------------------------------------------------------------------------

    @property
    def checkpoint_dir(self) -> Path:
        return self.partial / CHECKPOINT

    def has_checkpoint(self) -> bool:
        return (self.checkpoint_dir / "state.pkl").is_file()

    def save_checkpoint(self, state: Any, info: Mapping[str, Any]) -> None:
        """Write the checkpoint atomically: a reader finds the previous one or this one, whole."""
        folder = self.checkpoint_dir
        folder.mkdir(exist_ok=True)
        atomic_write(folder / "state.pkl", _pickled(state))
        doc = {**info, "saved_at": _now(), "pid": os.getpid()}
        atomic_write(folder / "info.json", (json.dumps(doc, indent=2) + "\n").encode())

    def save_part(self, name: str, value: Any) -> None:
        """Write a finished piece of work once (e.g. a batch's results), atomically."""
        folder = self.checkpoint_dir
        folder.mkdir(exist_ok=True)
        atomic_write(folder / name, _pickled(value))

    def load_part(self, name: str) -> Any:
        with (self.checkpoint_dir / name).open("rb") as fh:
            return pickle.load(fh)

    def load_checkpoint(self) -> Any:
        """The state of the last checkpoint (a pickle this package wrote into its own folder)."""
        try:
            return self.load_part("state.pkl")
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise RunError(
                f"--resume: the checkpoint in {self.partial} cannot be read: {exc}"
            ) from None

    # -- the end -------------------------------------------------------------------------------

    def finish(self) -> None:
        """Put the partial folder in place of ``out`` (replacing an existing one) in one rename."""
        try:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
            (self.partial / _WRITER).unlink(missing_ok=True)
            if self.out.exists():
                old = self.out.with_name(f".{self.out.name}.old-{os.getpid()}")
                self.out.rename(old)
                self.partial.rename(self.out)
                _remove(old)
            else:
                self.partial.rename(self.out)
            _fsync_dir(self.out.parent)
        except OSError as exc:
            raise os_error(f"cannot put the results in place at {self.given}", exc) from None

    def discard(self, *, keep_checkpoint: bool) -> bool:
        """Remove the partial folder, or keep it when it holds a checkpoint and that is asked.

        Returns whether it was kept.
        """
        if keep_checkpoint and self.has_checkpoint():
            for name in os.listdir(self.partial) if self.partial.is_dir() else ():
                if name not in (CHECKPOINT, _WRITER):  # half-written results files
                    path = self.partial / name
                    if path.is_dir():
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        path.unlink(missing_ok=True)
            return True
        shutil.rmtree(self.partial, ignore_errors=True)
        return False


def _pickled(value: Any) -> bytes:
    """``value`` pickled; any failure (a lambda or an open file in a run's state) is a
    `pickle.PicklingError` naming it."""
    try:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise pickle.PicklingError(f"cannot checkpoint the runs' state ({exc})") from exc


def _remove(path: Path) -> None:
    """Remove a replaced results folder (a link itself, never what it points to); say if it stays."""
    if path.is_symlink():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
    if path.exists() or path.is_symlink():
        logger.warning("could not remove the replaced results %s; remove it by hand", path)


@contextlib.contextmanager
def locked(folder: ResultsFolder, command: str = "") -> Iterator[ResultsFolder]:
    """``folder`` with its lock held for the duration of the block."""
    folder.acquire(command)
    try:
        yield folder
    finally:
        folder.release()
