"""A Flower Deployment Runtime on this machine: a SuperLink and SuperNodes as child processes.

`LocalFederation` starts ``flower-superlink`` and ``flower-supernode`` processes on
127.0.0.1 (free ports, a private ``FLWR_HOME``, Flower's telemetry, update check and runtime
dependency installation off, so nothing leaves the machine), submits an app with ``flwr run``,
follows it with ``flwr list`` and reads its log with ``flwr log``. It is what adcs's tests and
benchmark use to run the example app on real processes, and a quick way to try an app before
deploying it. Every process it starts is stopped by its PID, with its descendants, when the
federation is closed (``with LocalFederation.start(...) as federation: ...``), even when the body
fails.

``flwr run`` exits 0 once the run is *submitted*, whatever becomes of it (``flwr run --stream``
too, after the run's log has ended); what became of it is the run's status in ``flwr list --run-id
ID --format json``: ``finished:completed``, ``finished:failed`` or ``finished:stopped``.
`wait` follows the log until the run ends and then checks that status.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["LocalFederation", "NodeProcess", "RunFailed"]

logger = logging.getLogger(__name__)

CONNECTION = "adcs-local"
"""The name of the SuperLink connection written into the federation's ``config.toml``."""

FINISHED = "finished"


class RunFailed(RuntimeError):
    """A run ended other than ``finished:completed``, or did not end in time."""


@dataclass
class NodeProcess:
    """One SuperNode: its process, node config and log file."""

    partition_id: int
    node_config: dict[str, Any]
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        """What the SuperNode and its ClientApps have written so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@dataclass
class LocalFederation:
    """A SuperLink and SuperNodes on 127.0.0.1 (module docstring). Build with `start`.

    Attributes
    ----------
    folder : Path
        Holds ``flwr-home/`` (the CLI's and SuperLink's ``FLWR_HOME``), one home per SuperNode,
        and ``logs/``.
    address : str
        The SuperLink's one HTTP API (Fleet, Control and Runtime), ``127.0.0.1:<port>``.
    nodes : dict of int to NodeProcess
        The running SuperNode of each partition id.
    """

    folder: Path
    address: str
    env: dict[str, str]
    superlink: subprocess.Popen[bytes]
    nodes: dict[int, NodeProcess] = field(default_factory=dict)
    _started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)
    # every pid started, or found below one, with its start time (a pid the system reuses is
    # another process)
    _seen: dict[int, str | None] = field(default_factory=dict)
    _run_logs: dict[int, str] = field(default_factory=dict)
    _restarts: int = 0

    # ------------------------------------------------------------------ processes

    @classmethod
    def start(
        cls,
        folder: str | os.PathLike[str],
        n_nodes: int = 0,
        node_config: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        ready_timeout_s: float = 60.0,
    ) -> LocalFederation:
        """Start a SuperLink and ``n_nodes`` SuperNodes (partition ids 0..n_nodes−1).

        Parameters
        ----------
        folder : path
            An empty folder for homes and logs.
        n_nodes : int
            SuperNodes to start now (more with `start_node`).
        node_config : mapping, optional
            Node config entries every SuperNode gets besides its ``partition-id``.
        env : mapping, optional
            Extra environment of every process (e.g. ``ADCS_DATA_DIR``).
        ready_timeout_s : float
            How long to wait for the SuperLink to accept connections.
        """
        root = Path(folder)
        (root / "logs").mkdir(parents=True, exist_ok=True)
        home = root / "flwr-home"
        home.mkdir(exist_ok=True)
        port = _free_port()
        address = f"127.0.0.1:{port}"
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n'
            f'[superlink.{CONNECTION}]\naddress = "{address}"\ninsecure = true\n',
            encoding="utf-8",
        )
        bin_dir = str(Path(sys.executable).parent)
        base = dict(os.environ)
        base.update(
            {
                "PATH": bin_dir + os.pathsep + base.get("PATH", ""),
                "FLWR_HOME": str(home),
                "FLWR_TELEMETRY_ENABLED": "0",
                "FLWR_DISABLE_UPDATE_CHECK": "1",
                "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        base.update(env or {})
        federation = cls(root, address, base, superlink=None)  # type: ignore[arg-type]
        try:
            federation.superlink = federation._spawn(
                ["flower-superlink", "--insecure", "--port", str(port),
                 "--disable-runtime-dependency-installation"],
                root / "logs" / "superlink.log",
                base,
            )  # fmt: skip
            _wait_for_port(port, ready_timeout_s, federation.superlink)
            for pid in range(n_nodes):
                federation.start_node(pid, **dict(node_config or {}))
        except BaseException:
            federation.close()
            raise
        return federation

    def start_node(self, partition_id: int, **node_config: Any) -> NodeProcess:
        """Start a SuperNode serving ``partition_id`` (replacing a stopped one of that id)."""
        if partition_id in self.nodes and self.nodes[partition_id].process.poll() is None:
            raise ValueError(f"partition {partition_id} already has a running SuperNode")
        config = {"partition-id": partition_id, **node_config}
        self._restarts += 1
        name = f"supernode-{partition_id}-{self._restarts}"
        home = self.folder / name
        home.mkdir(exist_ok=True)
        env = {**self.env, "FLWR_HOME": str(home)}
        command = [
            "flower-supernode", "--insecure", "--superlink", self.address,
            "--port", str(_free_port()), "--node-config", _node_config_arg(config),
        ]  # fmt: skip
        log_path = self.folder / "logs" / f"{name}.log"
        node = NodeProcess(partition_id, config, self._spawn(command, log_path, env), log_path)
        self.nodes[partition_id] = node
        return node

    def kill_node(self, partition_id: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (default SIGKILL: a machine failure) to a SuperNode and everything it
        started, and reap it."""
        node = self.nodes[partition_id]
        tree = _descendants(node.pid)
        self._note(tree)
        _signal_tree(node.pid, sig, tree)
        node.process.wait()

    def _spawn(self, command: list[str], log_path: Path, env: Mapping[str, str]) -> Any:
        log = open(log_path, "ab")
        self._logs.append(log)
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
        )
        self._started.append(process)
        self._note([process.pid])
        logger.debug("started %s (pid %d)", command[0], process.pid)
        return process

    def close(self, grace_s: float = 5.0) -> None:
        """Stop every process this federation started, by PID, with its descendants."""
        live = [p for p in self._started if p.poll() is None]
        trees = {p.pid: _descendants(p.pid) for p in live}
        self._note(pid for tree in trees.values() for pid in tree)
        for p in live:
            _signal_tree(p.pid, signal.SIGTERM, trees[p.pid])
        deadline = time.monotonic() + grace_s
        for p in live:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in live:  # whatever is left, and descendants that outlived their parent
            late = _descendants(p.pid)
            self._note(late)
            _signal_tree(p.pid, signal.SIGKILL, trees[p.pid] + late)
            p.wait()
        # Descendants that no longer had a parent to be found by; a killed process still runs
        # until the kernel has torn it down (a loaded machine takes a while), so wait for that.
        deadline = time.monotonic() + grace_s
        while (left := self.leftover()) and time.monotonic() < deadline:
            for pid in left:
                _signal_tree(pid, signal.SIGKILL, [])
            time.sleep(0.05)
        for log in self._logs:
            log.close()
        self._logs.clear()

    def leftover(self) -> list[int]:
        """Processes started here, or found below them, that still run (empty after close)."""
        return sorted(pid for pid, started in self._seen.items() if _running(pid, started))

    def _note(self, pids: Iterable[int]) -> None:
        for pid in pids:
            self._seen.setdefault(pid, _start_time(pid))

    def __enter__(self) -> LocalFederation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ runs

    def flwr(self, *args: str, timeout_s: float = 120.0) -> str:
        """Run the ``flwr`` command line against this federation; its standard output."""
        command = [str(Path(sys.executable).parent / "flwr"), *args]
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if done.returncode != 0:
            raise RunFailed(f"{' '.join(args[:1])} failed: {done.stderr.strip() or done.stdout}")
        return done.stdout

    def submit(self, app_dir: str | os.PathLike[str], run_config: Mapping[str, Any]) -> int:
        """``flwr run APP adcs-local --run-config FILE --format json``; returns the run id."""
        overrides = self.folder / f"run-config-{time.monotonic_ns()}.toml"
        overrides.write_text(_toml(run_config), encoding="utf-8")
        out = self.flwr("run", str(app_dir), CONNECTION, "--run-config", str(overrides),
                        "--format", "json")  # fmt: skip
        reply = _json_object(out)
        if not reply.get("success") or reply.get("run-id") is None:
            raise RunFailed(f"flwr run did not start a run: {out.strip()}")
        return int(reply["run-id"])

    def status(self, run_id: int) -> str:
        """The run's status, e.g. ``running`` or ``finished:completed`` (``flwr list``)."""
        out = self.flwr("list", CONNECTION, "--run-id", str(run_id), "--format", "json")
        runs = _json_object(out).get("runs", [])
        if len(runs) != 1:
            raise RunFailed(f"flwr list knows no run {run_id}: {out.strip()}")
        return str(runs[0]["status"])

    def wait(self, run_id: int, timeout_s: float) -> str:
        """Wait until the run finishes; its final status. RunFailed unless it completed.

        Follows the run's log with ``flwr log ID --stream``, which returns when the run has
        finished (one CLI process for the whole wait: each ``flwr`` call costs a second or two
        of CPU), then reads the final status with ``flwr list``. The streamed log is kept for
        `log`.
        """
        try:
            self._run_logs[run_id] = self.flwr(
                "log", str(run_id), CONNECTION, "--stream", timeout_s=timeout_s
            )
        except subprocess.TimeoutExpired as err:
            raise RunFailed(
                f"run {run_id} is still {self.status(run_id)!r} after {timeout_s:g} s"
            ) from err
        status = self.status(run_id)
        deadline = time.monotonic() + 30.0
        while not status.startswith(FINISHED) and time.monotonic() < deadline:
            time.sleep(1.0)  # the stream ended without the run having finished (a lost link)
            status = self.status(run_id)
        if status != f"{FINISHED}:completed":
            raise RunFailed(f"run {run_id} ended {status!r}:\n{self.log(run_id)}")
        return status

    def log(self, run_id: int) -> str:
        """The run's log: what its ServerApp wrote (streamed by `wait`, else ``flwr log
        ID --show``)."""
        if run_id in self._run_logs:
            return self._run_logs[run_id]
        return self.flwr("log", str(run_id), CONNECTION, "--show")


# ---------------------------------------------------------------------- helpers


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_port(port: int, timeout_s: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with {process.returncode} at start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"flower-superlink did not listen on port {port} within {timeout_s:g} s")


def _children() -> dict[int, list[int]]:
    """Parent pid → child pids of every process (Linux ``/proc``; empty elsewhere)."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat") if Path("/proc").is_dir() else []:
        try:
            stat = entry.read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) "
        tree.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    return tree


def _descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def _start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot), or None where /proc cannot tell."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def _running(pid: int, started: str | None = None) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie awaiting its parent), and the
    one that started at ``started`` where that is known (not another one given the same pid)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    if fields is None:
        return True  # no /proc: signal 0 is all there is to go by
    if started is not None and len(fields) > 19 and fields[19] != started:
        return False
    return fields[0] != "Z"


def _signal_tree(pid: int, sig: int, descendants: list[int] | None = None) -> None:
    """``sig`` to ``pid``, its process group (if it leads one) and each descendant, by PID."""
    targets = _descendants(pid) if descendants is None else descendants
    for send, target in ((os.killpg, pid), (os.kill, pid), *((os.kill, d) for d in targets)):
        try:
            send(target, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _node_config_arg(config: Mapping[str, Any]) -> str:
    return " ".join(f"{key}={_toml_value(value)}" for key, value in config.items())


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    raise ValueError(f"config values must be bool, int, float or str, got {value!r}")


def _toml(config: Mapping[str, Any]) -> str:
    return "".join(f"{json.dumps(key)} = {_toml_value(value)}\n" for key, value in config.items())


def _json_object(text: str) -> dict[str, Any]:
    """The JSON object in a command's output (Flower may print warnings around it)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise RunFailed(f"expected JSON, got: {text.strip()}")
    parsed = json.loads(text[start : end + 1])
    if not isinstance(parsed, dict):
        raise RunFailed(f"expected a JSON object, got: {text.strip()}")
    return parsed
