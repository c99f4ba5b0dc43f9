"""Shards of an experiment run elsewhere: the executor protocol and its Ray implementation.

An experiment's runs are independent per seed (docs/design.md §4: a run's numbers depend only on its
seed, never on which other runs share its batch or process), so the runner can cut each batch of
runs into *shards* — the runs of one seed — and hand them to an executor. `RayExecutor`
runs each shard as a task on an existing Ray cluster (``ray.init(address=...)``) and gives the
results back to the runner, which writes the same results folder, byte for byte, as a local run:
every file but ``manifest.json`` (wall times, sessions, where each shard ran) and ``report.md``
(its wall-time sentence).

Byte-identical results need the same computation on every node: the same versions of adcs,
NumPy and SciPy (checked: a task refuses to run under other versions) and the same CPU features
(NumPy's SIMD kernels of exp and log differ in the last bit between instruction sets; recorded in
the manifest per shard, and a difference from the driver's is logged as a warning).

Ray is imported here only, and only when a `RayExecutor` is made (the ``ray`` extra, or
``flower``, which brings it with Flower's simulation engine).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import platform
import re
import signal
import socket
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol

from adcs.experiments.run.folder import RunError
from adcs.experiments.run.provenance import package_versions
from adcs.sim.data import ClientData
from adcs.sim.engine import RunResult, RunSpec, SimConfig, simulate
from adcs.sim.model import Model

__all__ = [
    "ExecutorError",
    "RayExecutor",
    "ShardExecutor",
    "node_info",
    "simulate_shard",
]

logger = logging.getLogger(__name__)

_CHECKED_PACKAGES = ("adcs", "numpy", "scipy")
"""Packages whose versions must agree between the driver and every node."""


class ExecutorError(RunError):
    """A shard could not be run remotely (no cluster, a failed task, other versions)."""


class ShardExecutor(Protocol):
    """Runs shards — the runs of one seed of one batch — and hands back their results.

    ``submit`` may be called twice with the same key (the leaderboard submits every workload's
    shards before the runner asks for them): the second call returns at once and the shard is
    run once.
    """

    def submit(
        self,
        key: str,
        runs: Sequence[RunSpec],
        data: ClientData,
        config: SimConfig,
        model: Model,
    ) -> None:
        """Start the shard ``key`` (or do nothing if it was started already)."""

    def completed(self, keys: Sequence[str]) -> Iterator[tuple[str, list[RunResult]]]:
        """The submitted shards ``keys``, each as soon as it is done: ``(key, results)``.

        Raises
        ------
        ExecutorError
            A shard failed (its error named).
        """

    def cancel(self, keys: Sequence[str]) -> None:
        """Stop the shards ``keys`` that are still running (after an interrupt)."""

    def describe(self, keys: Sequence[str] | None = None) -> dict[str, Any]:
        """What the manifest records of where the shards ``keys`` (default all) ran."""


def _cpu_features() -> str:
    """A short digest of the CPU features NumPy dispatches on (equal digests: equal kernels)."""
    features: dict[str, bool] | None = None
    for module in ("numpy._core._multiarray_umath", "numpy.core._multiarray_umath"):  # 2.x, 1.x
        try:
            features = importlib.import_module(module).__cpu_features__
            break
        except (ImportError, AttributeError):
            continue
    if features is None:
        return "unknown"
    enabled = ",".join(sorted(k for k, v in features.items() if v))
    return hashlib.sha256(enabled.encode()).hexdigest()[:12]


def node_info() -> dict[str, Any]:
    """This process's host, versions and CPU-feature digest (what a shard's numbers depend on)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "machine": platform.machine(),
        "cpu_features": _cpu_features(),
        "versions": package_versions(_CHECKED_PACKAGES),
    }


def simulate_shard(
    runs: Sequence[RunSpec],
    data: ClientData,
    config: SimConfig,
    model: Model,
    versions: Mapping[str, str | None],
) -> tuple[list[RunResult], dict[str, Any]]:
    """Simulate one shard in this process (what a Ray task runs) and say where it ran.

    Parameters
    ----------
    runs, data, config, model
        As [`adcs.sim.simulate`][adcs.sim.simulate] takes them; one process (``workers=1``).
    versions : mapping
        The driver's versions of adcs, NumPy and SciPy; the shard refuses to run under others.

    Raises
    ------
    ExecutorError
        This node runs other versions than the driver.
    """
    here = node_info()
    differ = {k: (v, here["versions"].get(k)) for k, v in versions.items()
              if here["versions"].get(k) != v}  # fmt: skip
    if differ:
        detail = ", ".join(f"{k} {a} on the driver, {b} here" for k, (a, b) in differ.items())
        raise ExecutorError(
            f"node {here['host']} runs other versions ({detail}): its results would not be "
            "those of a local run"
        )
    return simulate(runs, data, config, model=model, workers=1), here


_WAIT_S = 0.5
"""How long one wait for a finished shard blocks (signals are handled between waits)."""
_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _signal_handlers() -> dict[int, Any]:
    """This process's handlers of SIGINT and SIGTERM (empty outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {s: signal.getsignal(s) for s in _SIGNALS}


def _restore(handlers: Mapping[int, Any]) -> None:
    """Put back the handlers ``ray.init`` replaced: an interrupt then stops a run the usual way
    (the shards not yet back are cancelled and the finished ones kept for ``--resume``)."""
    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


_CONNECT_TIMEOUT_S = 5.0
"""How long the cluster's port is given to answer before the address is called unreachable."""


def _check_listening(address: str) -> None:
    """Refuse at once an address where nothing listens (``ray.init`` would retry for minutes).

    ``HOST:PORT`` and ``ray://HOST:PORT`` are checked with one TCP connection; other forms
    (``"auto"``) are left to Ray.

    Raises
    ------
    ExecutorError
        Nothing answers on HOST:PORT within `_CONNECT_TIMEOUT_S`.
    """
    match = re.fullmatch(r"(?:ray://)?\[?([^\]\s]+?)\]?:(\d+)", address)
    if match is None:
        return
    host, port = match.group(1), int(match.group(2))
    try:
        with socket.create_connection((host, port), timeout=_CONNECT_TIMEOUT_S) as sock:
            speaks = _speaks_grpc(sock)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ExecutorError(
            f"cannot connect to the Ray cluster at {address}: nothing answers on {host}:{port} "
            f"({reason.lower()}); start one with `ray start --head` or check the address"
        ) from None
    if not speaks:
        raise ExecutorError(
            f"cannot connect to the Ray cluster at {address}: {host}:{port} answers but is not "
            "a Ray cluster (it does not reply as a Ray head's gRPC port does); check the "
            "address (`ray status` on the head prints it)"
        )


_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""A client's HTTP/2 connection preface and an empty SETTINGS frame (RFC 9113 §3.4)."""
_SETTINGS_FRAME = 4
_REPLY_TIMEOUT_S = 2.0
"""How long a listener is given to reply as a gRPC server (one answers in milliseconds)."""


def _speaks_grpc(sock: socket.socket) -> bool:
    """Whether the peer answers an HTTP/2 preface with a SETTINGS frame, as every gRPC server
    (a Ray head's GCS port, a Ray Client server) must; other listeners are silent or say else."""
    sock.settimeout(_REPLY_TIMEOUT_S)
    try:
        sock.sendall(_HTTP2_PREFACE)
        header = b""
        while len(header) < 9:
            chunk = sock.recv(9 - len(header))
            if not chunk:
                return False
            header += chunk
    except OSError:  # a timeout, a reset: not a gRPC server
        return False
    return header[3] == _SETTINGS_FRAME


class RayExecutor:
    """Shards as tasks on an existing Ray cluster (one CPU each).

    Parameters
    ----------
    address : str
        What ``ray.init(address=...)`` takes: ``"HOST:PORT"`` of the cluster's head when this
        process runs on a node of the cluster, ``"ray://HOST:10001"`` (Ray Client) from
        elsewhere, or ``"auto"``.

    Use it as a context manager: the connection is opened on entry (an unreachable cluster is an
    `ExecutorError`) and closed on exit when this executor opened it.
    """

    def __init__(self, address: str) -> None:
        if not isinstance(address, str) or not address.strip():
            raise ValueError(f"address must be a non-empty string, got {address!r}")
        self.address = address.strip()
        self._ray: Any = None
        self._task: Any = None
        self._owns_connection = False
        self._refs: dict[str, Any] = {}
        self._data: dict[int, tuple[Any, Any]] = {}
        self._where: dict[str, dict[str, Any]] = {}
        self._local = node_info()

    # -- connection ------------------------------------------------------------------------------

    def __enter__(self) -> RayExecutor:
        self.open()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def open(self) -> None:
        """Connect to the cluster (once)."""
        if self._ray is not None:
            return
        try:
            import ray
        except ImportError:
            raise ExecutorError(
                "--ray-address needs Ray: pip install 'adcs[ray]' (or the flower extra)"
            ) from None
        if not ray.is_initialized():
            _check_listening(self.address)
            handlers = _signal_handlers()
            try:
                with warnings.catch_warnings():  # Ray's notes on its future defaults
                    warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\.")
                    ray.init(
                        address=self.address, logging_level=logging.WARNING,
                        configure_logging=False, include_dashboard=False,
                    )  # fmt: skip
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError, …
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise ExecutorError(
                    f"cannot connect to the Ray cluster at {self.address}: {reason}"
                ) from None
            finally:
                _restore(handlers)  # Ray's own would kill this process on SIGTERM, untidily
            self._owns_connection = True
        self._ray = ray
        self._task = ray.remote(num_cpus=1, max_retries=0)(simulate_shard)

    def close(self) -> None:
        """Drop the data put in the object store and disconnect (if this executor connected)."""
        if self._ray is None:
            return
        self._refs.clear()
        self._data.clear()
        if self._owns_connection:
            self._ray.shutdown()
        self._ray = None
        self._task = None
        self._owns_connection = False

    # -- shards ----------------------------------------------------------------------------------

    def _data_ref(self, data: Any) -> Any:
        """``data`` (or a model) in the object store, put once however many shards read it."""
        entry = self._data.get(id(data))
        if entry is None or entry[0] is not data:
            entry = (data, self._ray.put(data))
            self._data[id(data)] = entry
        return entry[1]

    def submit(
        self,
        key: str,
        runs: Sequence[RunSpec],
        data: ClientData,
        config: SimConfig,
        model: Model,
    ) -> None:
        """Start the shard as a Ray task (once per key)."""
        self.open()
        if key in self._refs:
            return
        self._refs[key] = self._task.remote(
            list(runs), self._data_ref(data), config, self._data_ref(model),
            self._local["versions"],
        )  # fmt: skip

    def completed(self, keys: Sequence[str]) -> Iterator[tuple[str, list[RunResult]]]:
        """Each shard of ``keys`` as soon as its task is done."""
        ray = self._ray
        pending = {self._refs[k]: k for k in keys}
        while pending:
            # a short timeout, so that Ctrl-C and SIGTERM are handled while shards run
            done, _ = ray.wait(list(pending), num_returns=1, timeout=_WAIT_S)
            if not done:
                continue
            key = pending.pop(done[0])
            try:
                results, where = ray.get(done[0])
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                raise ExecutorError(f"shard {key} failed on the Ray cluster: {cause}") from None
            except ray.exceptions.RayError as exc:
                raise ExecutorError(f"shard {key} was lost on the Ray cluster: {exc}") from None
            del self._refs[key]
            self._note(key, where)
            yield key, results

    def _note(self, key: str, where: dict[str, Any]) -> None:
        self._where[key] = {k: where[k] for k in ("host", "pid", "cpu_features")}
        if where["cpu_features"] != self._local["cpu_features"]:
            logger.warning(
                "shard %s ran on %s, whose CPU features differ from this machine's: its numbers "
                "may differ in the last bits from a local run's",
                key,
                where["host"],
            )

    def cancel(self, keys: Sequence[str]) -> None:
        """Cancel the still running tasks of ``keys`` (forcefully: they hold no state)."""
        if self._ray is None:
            return
        for key in keys:
            ref = self._refs.pop(key, None)
            if ref is not None:
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # already finished or lost: nothing to stop
                    logger.debug("could not cancel shard %s", key, exc_info=True)

    def describe(self, keys: Sequence[str] | None = None) -> dict[str, Any]:
        """The cluster's address, this driver's CPU-feature digest and where shards ran."""
        chosen = self._where if keys is None else {k: self._where[k] for k in keys
                                                    if k in self._where}  # fmt: skip
        return {
            "kind": "ray",
            "address": self.address,
            "driver_cpu_features": self._local["cpu_features"],
            "shards": dict(sorted(chosen.items())),
        }
