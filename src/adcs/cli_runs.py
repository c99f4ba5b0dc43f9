"""How the command line drives runs: workers, the Ray executor, progress and the summaries of
``adcs run``, ``reproduce``, ``leaderboard`` and sweeps (the commands themselves are in
`adcs.cli`)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adcs.cli_display import (
    _RECEIVED,
    EXIT_INTERRUPTED,
    Display,
    _print_leaderboard,
    _print_summary,
    _progress,
    _said,
    _signal_name,
    console,
    fail,
)
from adcs.experiments.config import ExperimentConfig

if TYPE_CHECKING:
    from adcs.experiments.config.sweep import SweepAxis
    from adcs.experiments.run.distributed import ShardExecutor

__all__ = ["REAL_PROBE_ROUNDS", "TheoryWriter", "default_workers"]


def default_workers() -> int:
    """Half the CPUs this process may use, at most 4, at least 1 (polite on a shared machine)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus // 2))


TheoryWriter = Callable[[Path, Display], Mapping[str, Any]]


REAL_PROBE_ROUNDS = {True: 50, False: 200}
"""Rounds of full-participation training before the real Fashion-MNIST updates are probed."""


def _theory_writer(quick: bool, seed: int, *, data: Path | None = None) -> TheoryWriter:
    """A function writing the theory check into a folder, with progress on the given display.

    Besides the synthetic grid, the check measures the paper's quantities on real Fashion-MNIST
    updates of the paper's setting (groups as clusters), probed after a few training rounds.
    """
    try:
        from adcs.theory.check import fashion_mnist_probe
    except ImportError as exc:
        raise fail(f"the theory check is not available: {exc}", code=1) from exc

    def write(folder: Path, display: Display) -> Mapping[str, Any]:
        from adcs.theory.check import write_theory_check

        rounds = REAL_PROBE_ROUNDS[quick]
        probe = fashion_mnist_probe(rounds, seed, data_path=data)
        report = write_theory_check(folder, **_theory_args(quick, seed, probe, rounds, display))
        return {"theory": {"report": str(Path(report).relative_to(folder.parent))}}

    return write


def _theory_args(
    quick: bool, seed: int, probe: Any, rounds: int, display: Display
) -> dict[str, Any]:
    return {
        "quick": quick,
        "seed": seed,
        "progress": display.tracker("theory", "cases"),
        "real_updates": probe.updates,
        "real_groups": probe.groups,
        "real_quality": probe.losses,
        "real_description": (
            f"Fashion-MNIST, the paper's setting, probed after {rounds} rounds of"
            " full-participation training (one local step, batch 16, η_ℓ = 0.001)"
        ),
    }


def _run(
    config: ExperimentConfig,
    out: Path,
    *,
    force: bool,
    resume: bool,
    quick: bool,
    workers: int | None,
    checkpoint_every: int | None,
    theory: TheoryWriter | None = None,
    ray_address: str | None = None,
    track: str | None = None,
    track_to: str | None = None,
) -> None:
    from adcs.experiments.run.runner import plan_experiment, run_experiment

    if track is None and track_to is not None:  # a setting that does nothing
        raise fail(f"--track-to {track_to} does nothing without --track: add --track or remove it")
    planned = plan_experiment(config, out, overwrite=force, resume=resume)
    plan = planned.runs
    console.print(
        f"[bold]{config.name}[/]: {len(plan)} distinct runs × {config.sim.rounds} rounds, "
        f"seeds {list(config.seeds)}, m = {config.m}" + _where(workers, ray_address)
    )
    command = shlex.join(["adcs", *sys.argv[1:]])
    with (
        _executor(ray_address) as executor,
        _progress() as display,
        _tracking(track, track_to, config.name, plan, resume) as tracker,
    ):
        finalize = None if theory is None else (lambda tmp: theory(tmp / "theory", display))
        outcome = run_experiment(
            config, out, overwrite=force, resume=resume, quick=quick, finalize=finalize,
            workers=workers if workers is not None or resume else default_workers(),
            checkpoint_every=checkpoint_every, command=command,
            progress=display.tracker(config.name, "rounds"),
            extra_manifest={"command": command}, executor=executor,
            on_eval=_evaluations(display, tracker), planned=planned,
        )  # fmt: skip
    _print_summary(outcome)


@contextmanager
def _tracking(
    kind: str | None, dest: str | None, experiment: str, plan: Sequence[Any], resume: bool = False
) -> Iterator[Any]:
    """The live tracker of ``--track`` (None without it), each run opened with its parameters."""
    if kind is None:
        yield None
        return
    from adcs.tracking import TrackingError, default_destination, make_tracker, run_params

    where: str | Path = dest if dest is not None else default_destination(kind)
    if kind == "tensorboard" and dest is None:
        where = Path(where) / experiment  # one folder of runs per experiment
    try:
        tracker = make_tracker(kind, where, experiment, resume=resume)
    except (ImportError, TrackingError) as exc:
        raise fail(str(exc), code=1) from None
    for spec in plan:
        tracker.start(spec.run_id, run_params(spec))
    console.print(f"tracking: {kind} at {getattr(tracker, 'uri', where)}")
    try:
        yield tracker
    finally:
        tracker.close()


def _evaluations(display: Display, tracker: Any) -> Callable[[list[Any]], None]:
    """``on_eval``: the progress line shows the latest accuracy; the tracker logs every one."""

    def seen(events: list[Any]) -> None:
        if not events:
            return
        worst = sum(e.worst_acc for e in events) / len(events)
        avg = sum(e.avg_acc for e in events) / len(events)
        display.note = f"round {events[0].round}: worst {worst:.1%}, avg {avg:.1%}"
        if tracker is not None:
            from adcs.tracking import log_evaluations

            log_evaluations(tracker, events)

    return seen


def _where(workers: int | None, ray_address: str | None) -> str:
    """What the first line says of where the runs go: the workers asked for, or the cluster."""
    if ray_address is not None:
        return f", shards on the Ray cluster at {ray_address}"
    return f", {workers} worker(s)" if workers is not None else ""


@contextmanager
def _executor(address: str | None) -> Iterator[ShardExecutor | None]:
    """No executor (a local run), or a connection to the Ray cluster at ``address``."""
    if address is None:
        yield None
        return
    from adcs.experiments.run.distributed import RayExecutor

    with RayExecutor(address) as executor:
        yield executor


def _reproduce_theory(out: Path, *, quick: bool, data: Path | None, force: bool) -> None:
    from adcs.theory.check import fashion_mnist_probe, run_theory_check

    rounds = REAL_PROBE_ROUNDS[quick]
    with _progress() as display:
        probe = fashion_mnist_probe(rounds, 0, data_path=data)
        try:
            report = run_theory_check(
                out, overwrite=force, command=shlex.join(["adcs", *sys.argv[1:]]),
                **_theory_args(quick, 0, probe, rounds, display),
            )  # fmt: skip
        except ValueError as exc:
            raise fail(str(exc), code=1) from None
    console.print(f"Theory check: [bold]{report.parent}[/]\n  report: {report}")


def _run_leaderboard(
    configs: Sequence[ExperimentConfig],
    out: Path,
    *,
    quick: bool,
    force: bool,
    resume: bool,
    workers: int | None,
    checkpoint_every: int | None,
    ray_address: str | None,
    metrics: Sequence[str] = (),
) -> None:
    from adcs.experiments.run.runner import expand_runs
    from adcs.leaderboard.suite import run_leaderboard

    n_runs = sum(len(expand_runs(c)) for c in configs)
    console.print(
        f"[bold]leaderboard[/]: {len(configs)} workloads, {n_runs} distinct runs"
        + _where(workers, ray_address)
    )
    for c in configs:
        console.print(f"  {c.name}: {len(expand_runs(c))} runs × {c.sim.rounds} rounds, "
                      f"seeds {list(c.seeds)}, m = {c.m}")  # fmt: skip
    command = shlex.join(["adcs", *sys.argv[1:]])

    def announce(name: str, state: str) -> None:
        if state == "done":
            console.print(f"{name}: finished earlier, kept")
        elif state == "resume":
            console.print(f"{name}: resuming from its checkpoint")

    with _executor(ray_address) as executor, _progress() as display:
        outcome = run_leaderboard(
            configs, out, quick=quick, force=force, resume=resume, executor=executor,
            workers=workers if workers is not None or resume else default_workers(),
            checkpoint_every=checkpoint_every, command=command, on_workload=announce,
            progress=lambda name: display.tracker(name, "rounds"), metrics=metrics,
        )  # fmt: skip
    _print_leaderboard(outcome)


def input_files(config: ExperimentConfig, *given: Path) -> list[Path]:
    """``given`` and the files ``config``'s simulator reads (an availability trace, a system
    profile): an ``--out`` that holds one is refused, --force would delete it with the folder."""
    tables = config.document["sim"].values()
    return [*given, *(Path(t["path"]) for t in tables if isinstance(t, dict) and "path" in t)]


def _run_sweep(
    config: ExperimentConfig,
    axes: Sequence[SweepAxis],
    out: Path,
    *,
    force: bool,
    resume: bool,
    workers: int | None,
    checkpoint_every: int | None,
    ray_address: str | None,
) -> None:
    from adcs.experiments.run.configure import sweep_points
    from adcs.experiments.run.runner import expand_runs
    from adcs.leaderboard.sweep import run_sweep

    with _progress() as checking:  # a large sweep takes a while to check before it runs
        points = sweep_points(config, axes, progress=checking.tracker("checking points", "points"))
    n_runs = sum(len(expand_runs(c)) for _, c in points)
    swept = ", ".join(a.name for a in axes)
    rounds = sorted({c.sim.rounds for _, c in points})
    console.print(
        f"[bold]{config.name}[/]: a sweep over {swept}: {len(points)} points, {n_runs} distinct "
        f"runs × {'–'.join(map(str, rounds[:: max(len(rounds) - 1, 1)]))} rounds"
        + _where(workers, ray_address)
    )
    command = shlex.join(["adcs", *sys.argv[1:]])
    with _executor(ray_address) as executor, _progress() as display:
        outcome = run_sweep(
            config, axes, out, points=points, force=force, resume=resume, executor=executor,
            workers=workers if workers is not None or resume else default_workers(),
            checkpoint_every=checkpoint_every, command=command,
            progress=lambda name: display.tracker(name, "rounds"),
        )  # fmt: skip
    console.print(f"Sweep: [bold]{outcome.folder}[/]" + (" (resumed)" if outcome.resumed else ""))
    console.print(f"  report: {outcome.report}")
    console.print(
        f"  table: {outcome.folder / 'sweep.csv'}; figure: {outcome.folder / 'sweep.png'}"
    )


def _export(results: Path, to: str, dest: str | None, *, resume: bool) -> None:
    """``adcs export``: each refusal or failure one line, an interrupt saying what was written."""
    from adcs.experiments.run.folder import os_error
    from adcs.experiments.run.resultfiles import ResultsFileError
    from adcs.tracking import ExportError, TrackingError
    from adcs.tracking import export as export_results

    try:
        where = export_results(results, to, dest, resume=resume)
    except (FileNotFoundError, ExportError, ResultsFileError) as exc:
        raise fail(_said(exc)) from None
    except (ImportError, TrackingError) as exc:
        raise fail(_said(exc), code=1) from None
    except KeyboardInterrupt as exc:
        code = EXIT_INTERRUPTED[signal.SIGTERM if _RECEIVED else signal.SIGINT]
        said = "; ".join(getattr(exc, "__notes__", [])) or "nothing was written"
        raise fail(f"{_signal_name(_RECEIVED)}: {said}", code) from None
    except OSError as exc:
        error = os_error("export", exc)
        error.__notes__ = getattr(exc, "__notes__", [])  # type: ignore[attr-defined]
        raise fail(_said(error), code=1) from None
    console.print(f"{to}: {where}")
