"""Who advances the worker lanes: this process, forked processes, or threads.

Forked workers (Linux) share the data copy-on-write and run truly in parallel; each one dies
with its parent (``prctl``'s parent-death signal, or a watching thread), ignores Ctrl-C (the
parent handles it and stops them) and sends its lane's state back through a pipe. What a forked
worker inherits is the module global `_FORKED`, set only while the workers run.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import multiprocessing.process
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as mp_wait
from typing import Any

from adcs.sim.lanes import _Lane
from adcs.sim.spec import Evaluation, SimConfig

OnEval = Callable[[list[Evaluation]], None]

logger = logging.getLogger(__name__)


def _run_lanes(
    lanes: list[_Lane],
    config: SimConfig,
    progress: Callable[[int], None] | None,
    until: int,
    on_eval: OnEval | None = None,
) -> None:
    """Advance every lane to round ``until``: in this process, forked processes or threads.

    ``on_eval`` receives each lane's evaluations in this process (one call at a time).
    """
    lock = threading.Lock()
    stop = threading.Event()
    reported = [-1]

    def report() -> None:
        if progress is None:
            return
        with lock:
            done = min(s.rounds_done for s in lanes)
            if done > reported[0]:
                reported[0] = done
                progress(done)

    def evaluated(events: list[Evaluation]) -> None:
        if on_eval is not None:
            with lock:
                on_eval(events)

    hand_on = None if on_eval is None else evaluated
    if len(lanes) == 1:
        lanes[0].run(config, report, stop, until, on_eval)
        return
    if _can_fork():
        _run_lanes_in_processes(lanes, config, report, until, hand_on)
        return
    errors: list[BaseException] = []

    def work(lane: _Lane) -> None:
        try:
            lane.run(config, report, stop, until, hand_on)
        except BaseException as exc:  # re-raised in the calling thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in lanes]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # a timed join lets KeyboardInterrupt through
                thread.join(0.2)
    except BaseException:
        stop.set()
        raise
    if errors:
        raise errors[0]


def _can_fork() -> bool:
    # Forked workers share the data copy-on-write and run truly in parallel (the round loop is
    # Python and holds the GIL between matrix products). Elsewhere, threads.
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


_FORKED: tuple[list[_Lane], SimConfig, Any, int, bool] | None = None
"""What a forked worker inherits: the lanes, the config, the shared round counters, ``until``,
and whether to send its evaluations as they happen."""

_PR_SET_PDEATHSIG = 1

_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _die_with_parent(parent: int) -> None:
    """Make this forked worker die with its parent, even a parent killed by SIGKILL.

    Linux's parent-death signal does it; should it be unavailable, a thread polls the parent.
    Either way a worker whose parent is already gone exits at once.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        armed = False
    if not armed:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
    if os.getppid() != parent:
        os._exit(1)


def _forked_worker(index: int, conn: Connection, parent: int) -> None:
    """A forked process: advance lane ``index`` and send its state (or its error) back."""
    _die_with_parent(parent)
    # Ctrl-C reaches the whole process group: the parent handles it and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)  # blocked around the fork
    assert _FORKED is not None
    lanes, config, counters, until, evaluations = _FORKED
    lane = lanes[index]

    def report() -> None:
        counters[index] = lane.rounds_done

    def evaluated(events: list[Evaluation]) -> None:
        conn.send(("eval", events))

    try:
        lane.run(config, report, threading.Event(), until, evaluated if evaluations else None)
        message: tuple[str, Any] = ("ok", lane.export())
    except BaseException as exc:
        message = ("error", _portable_error(exc))
    try:
        conn.send(message)
    except Exception as exc:  # e.g. an unpicklable scheduler state
        reason = f"simulation worker {index}: cannot send the runs' state back ({exc})"
        conn.send(("error", pickle.PicklingError(reason)))
    conn.close()


def _portable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError carrying its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


def _run_lanes_in_processes(
    lanes: list[_Lane],
    config: SimConfig,
    report: Callable[[], None],
    until: int,
    on_eval: OnEval | None = None,
) -> None:
    """Advance each lane in its own forked process and take its state back.

    The workers die with this process (see `_die_with_parent`); on any exception here —
    a worker's error, KeyboardInterrupt, the CLI's SIGTERM — they are terminated and reaped
    before it propagates, so none is left running.
    """
    global _FORKED
    ctx = multiprocessing.get_context("fork")
    counters = ctx.Array("q", [s.rounds_done for s in lanes], lock=False)
    _FORKED = (lanes, config, counters, until, on_eval is not None)
    processes: list[multiprocessing.process.BaseProcess] = []
    pending: dict[Connection, int] = {}
    outcomes: dict[int, Mapping[str, Any]] = {}
    try:
        for i in range(len(lanes)):
            receiver, sender = ctx.Pipe(duplex=False)
            process = ctx.Process(target=_forked_worker, args=(i, sender, os.getpid()), daemon=True)
            # an interrupt raised inside fork's hooks would be lost ("Exception ignored"):
            # it waits until the child exists, then arrives here
            signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
            try:
                process.start()
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
            sender.close()
            processes.append(process)
            pending[receiver] = i
        while pending:
            ready = [c for c in mp_wait(list(pending), timeout=0.5) if isinstance(c, Connection)]
            for conn in ready:
                i = pending.pop(conn)
                try:
                    kind, payload = conn.recv()
                except EOFError:
                    conn.close()
                    processes[i].join(1.0)
                    raise RuntimeError(
                        f"simulation worker {i} (pid {processes[i].pid}) died "
                        f"(exit code {processes[i].exitcode})"
                    ) from None
                if kind == "eval":  # an evaluation on the way; the lane's state comes later
                    pending[conn] = i
                    if on_eval is not None:
                        on_eval(payload)
                    continue
                conn.close()
                if kind == "error":
                    raise payload
                outcomes[i] = payload
            # after the evaluations that came in: a progress line then shows the latest one
            for lane, count in zip(lanes, counters, strict=True):
                lane.rounds_done = max(lane.rounds_done, int(count))
            report()
    finally:
        _FORKED = None
        for conn in pending:
            conn.close()
        _stop_processes(processes)
    for i, lane in enumerate(lanes):
        lane.absorb(outcomes[i])
    report()


def _stop_processes(processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Terminate the workers still running and reap every one (no zombie, no orphan)."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + 5.0
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """One BLAS and OpenMP thread for the duration of a call (restored afterwards).

    The simulator's matrix products are small (480 × 784 × 60 per stream and round): a
    multi-threaded BLAS spends more on synchronising than it gains, and on a busy machine its
    spinning threads make a run several times slower. Parallelism comes from ``workers`` instead.
    OpenMP is PyTorch's CPU thread pool (a torch model's kernels are as small), and a forked worker
    cannot use a pool its parent started: it would wait forever for threads that were not copied.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logger.debug("threadpoolctl is not installed; BLAS keeps its own thread count")
        yield
        return
    with threadpool_limits(limits={"blas": 1, "openmp": 1}):
        yield
