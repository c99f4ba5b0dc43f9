"""The ``adcs`` command line: reproduce the paper's experiments, run a configuration, benchmark.

::

    adcs reproduce [fig1|fig2|fig3|table1|theory|all] [--quick] [--seeds N] [--rounds T] [--out DIR]
    adcs run CONFIG [--out DIR] [--resume] [--force]
    adcs leaderboard [--quick] [--workloads NAMES] [--out DIR] [--resume] [--ray-address ADDR]
    adcs bench map|sim|flower|scale|torch|attacks [ARGS...]

The command line owns the terminal (progress, tables, the one-line ``error:`` messages and exit
codes); the library only logs. Every flag is documented in the README's command-line reference,
which `reference_markdown` generates from this app.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import importlib.util
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import click
import typer
import typer.core

from adcs.cli_display import (
    _DEBUG,
    EXIT_INTERRUPTED,
    _configure_logging,
    _debug_traceback,
    _interrupts,
    _limit_blas_threads,
    _Lines,  # noqa: F401 - the progress lines, as tests reach them (cli._Lines)
    _said,
    _signal_name,
    console,
    fail,
)
from adcs.cli_options import (
    CheckpointEvery,
    DataDir,
    Force,
    Out,
    RayAddress,
    Resume,
    Rounds,
    Seeds,
    Sets,
    Track,
    TrackDest,
    TrackTo,
    Workers,
)
from adcs.cli_runs import (
    _export,
    _reproduce_theory,
    _run,
    _run_leaderboard,
    _run_sweep,
    _theory_writer,
    default_workers,  # noqa: F401 - the CLI's default worker count (cli.default_workers)
    input_files,
)
from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    merge_configs,
    packaged_config,
    resolve_config,
)
from adcs.experiments.config.overrides import Edit, option_edits, set_edits
from adcs.round.contract import SelectionError

if TYPE_CHECKING:
    from adcs.experiments.config.sweep import SweepAxis


class _OneLineGroup(typer.core.TyperGroup):
    """Usage errors of the command line itself (a bad option value, an unknown command) as the
    one ``error:`` line and exit status 2 every other refusal gives, not Click's boxed panel."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        call = functools.partial(
            super().main, args, prog_name, complete_var,
            windows_expand_args=windows_expand_args, **extra,
        )  # fmt: skip
        if not standalone_mode:
            return call(standalone_mode=False)
        try:
            code = call(standalone_mode=False)
        except click.ClickException as exc:
            message = exc.format_message().strip()
            if message and not isinstance(exc, click.exceptions.NoArgsIsHelpError):
                # Typer and Click both add the same suggestion to an unknown command
                message = re.sub(r"( Did you mean [^?]*\?)\1+", r"\1", message).rstrip(".")
                ctx = getattr(exc, "ctx", None)
                hint = f"; see `{ctx.command_path} --help`" if ctx is not None else ""
                _fail(message + hint, exc.exit_code)
            sys.exit(exc.exit_code)
        except click.Abort:
            _fail("aborted", 1)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    name="adcs",
    cls=_OneLineGroup,
    help="Adaptive Determinantal Client Scheduling: reproduce the paper, run experiments, bench.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class Target(str, enum.Enum):
    """What ``adcs reproduce`` makes."""

    fig1 = "fig1"
    fig2 = "fig2"
    fig3 = "fig3"
    table1 = "table1"
    theory = "theory"
    all = "all"


class Bench(str, enum.Enum):
    """The benchmark scripts under ``benchmarks/``."""

    map = "map"
    sim = "sim"
    flower = "flower"
    flower_dropin = "flower_dropin"
    scale = "scale"
    torch = "torch"
    attacks = "attacks"


EXPERIMENT_TARGETS = ("fig1", "fig2", "fig3", "table1")


# ---------------------------------------------------------------------------------------------
# errors, signals, logging


_fail = fail


F = TypeVar("F", bound=Callable[..., Any])


def _one_line_errors(command: F) -> F:
    """Turn the library's refusals, OS failures and interrupts into one line and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from adcs.data import ChecksumError, DataError
        from adcs.experiments.run.folder import OutputRefused, RunError, os_error
        from adcs.experiments.run.resultfiles import ResultsFileError
        from adcs.experiments.run.runner import RunInterrupted
        from adcs.registry import PluginError

        with _interrupts() as received:
            try:
                return command(*args, **kwargs)
            except ConfigError as exc:
                raise _fail(_said(exc)) from None
            except RunInterrupted as exc:
                code = EXIT_INTERRUPTED[signal.SIGTERM if received else signal.SIGINT]
                raise _fail(f"{_signal_name(received)}: {_resume_hint(exc)}", code) from None
            except KeyboardInterrupt:
                code = EXIT_INTERRUPTED[signal.SIGTERM if received else signal.SIGINT]
                raise _fail(f"{_signal_name(received)}; nothing was kept", code) from None
            except OutputRefused as exc:
                raise _fail(str(exc)) from None
            except RunError as exc:
                raise _fail(_said(exc), code=1) from None
            except ResultsFileError as exc:  # a results folder read back, spoiled
                raise _fail(_said(exc)) from None
            except PluginError as exc:  # a plug-in raised: named, with the run and the round
                _debug_traceback(exc)
                raise _fail(_said(exc), code=1) from None
            except SelectionError as exc:  # a scheduler broke the contract: its bug, named
                raise _fail(f"scheduler: {_said(exc)}", code=1) from None
            except (FileNotFoundError, ChecksumError, DataError) as exc:
                raise _fail(f"data: {_said(exc)}", code=1) from None
            except OSError as exc:  # its notes say what is kept
                error = os_error("operating system", exc)
                error.__notes__ = getattr(exc, "__notes__", [])  # type: ignore[attr-defined]
                raise _fail(_said(error), code=1) from None

    return wrapper  # type: ignore[return-value]


def _resume_hint(exc: Any) -> str:
    if not exc.resumable:
        return "stopped before the first checkpoint; nothing was kept"
    argv = list(sys.argv[1:])
    if "--out" not in argv and not any(a.startswith("--out=") for a in argv):
        argv += ["--out", str(_DEFAULT_OUT.get("out", ""))]
    if "--resume" not in argv:
        argv.append("--resume")
    return f"{exc.kept} is kept in {exc.partial}; continue with: " + shlex.join(["adcs", *argv])


def _print_version(value: bool) -> None:
    if value:
        from adcs import __version__

        console.print(f"adcs {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the library's log (INFO and above).")
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug", help="Show the traceback of a plug-in that raises (a scheduler, a split)."
        ),
    ] = False,
    blas_threads: Annotated[
        int,
        typer.Option(
            "--blas-threads",
            metavar="N",
            min=1,
            help="Threads of the BLAS library outside the simulator (which always uses one).",
        ),
    ] = 1,
) -> None:
    """Adaptive Determinantal Client Scheduling (ADCS) for federated learning."""
    _configure_logging(verbose)
    _limit_blas_threads(blas_threads)
    _DEBUG[:] = [True] if debug else []


# ---------------------------------------------------------------------------------------------
# configurations


_DEFAULT_OUT: dict[str, Path] = {}


def _default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path("results") / f"{name}-{stamp}"
    _DEFAULT_OUT["out"] = out
    return out


def _out(out: str | None, name: str, resume: bool, inputs: Sequence[Path] = ()) -> Path:
    if out is not None:
        if not out.strip():
            raise _fail("--out is empty: name the results folder (e.g. --out results/mine)")
        from adcs.experiments.run.folder import is_results_folder

        target = Path(os.path.realpath(Path(out).expanduser()))
        for path in inputs if is_results_folder(target) else ():  # --force would delete it
            if target in Path(os.path.realpath(path)).parents:
                raise _fail(f"--out {out} holds {path}, an input of this run: choose another --out")
        return Path(out)
    if resume:
        raise _fail("--resume needs --out: the folder of the interrupted run")
    return _default_out(name)


def _configured(
    config: ExperimentConfig,
    *,
    seeds: int | None,
    rounds: int | None,
    data: Path | None,
    sets: Sequence[str] | None = None,
    preset: Sequence[Edit] = (),
    axes: Sequence[SweepAxis] = (),
) -> ExperimentConfig:
    """``config`` with the command line's overrides, as edits of its document (`configure`,
    the path `adcs.run` takes too): a ``preset`` (``--quick``'s settings), the ``--set``
    edits, the dedicated options; a sweep's ``axes`` are checked against them."""
    from adcs.experiments.run.configure import configure

    edits = [
        *preset,
        *set_edits(sets or ()),
        *option_edits(rounds=rounds, seeds=seeds, data=data),
    ]
    config = configure(config, edits, axes)
    if data is None:
        _check_data_variable(config)
    return config


def _quick_edits(config: ExperimentConfig) -> list[Edit]:
    """``reproduce --quick``: quick.toml's ``[sim]`` (its sub-tables included, ``config``'s
    privacy kept) and seeds."""
    quick = packaged_config("quick").document
    sim = quick["sim"]
    privacy = config.document["sim"].get("privacy")
    if privacy is not None:
        sim["privacy"] = privacy
    return [
        Edit("--quick", ("sim",), sim, "preset"),
        Edit("--quick", ("seeds",), quick["seeds"], "preset"),
    ]


def _check_data_variable(config: ExperimentConfig) -> None:
    """Refuse a ``$ADCS_DATA_DIR`` that names no folder as ``--data`` would be refused."""
    from adcs.data.fashion_mnist import ENV_VAR

    env = os.environ.get(ENV_VAR, "")
    if not env or config.data.dataset != "fashion-mnist" or config.data.path is not None:
        return
    folder = Path(env).expanduser()
    if not folder.is_dir():
        raise ConfigError(
            f"${ENV_VAR} {env!r} is not a folder (looked at {folder.absolute()}); point it at "
            "the Fashion-MNIST folder or unset it"
        )


def _reproduce_config(target: Target) -> ExperimentConfig | None:
    if target is Target.theory:
        return None
    if target is Target.all:
        return merge_configs([packaged_config(n) for n in EXPERIMENT_TARGETS], name="all")
    return packaged_config(target.value)


# ---------------------------------------------------------------------------------------------
# commands


@app.command()
@_one_line_errors
def reproduce(
    target: Annotated[Target, typer.Argument(help="What to reproduce.")] = Target.all,
    quick: Annotated[
        bool,
        typer.Option("--quick", help="Few rounds, one seed (experiments/quick.toml): ~1 minute."),
    ] = False,
    seeds: Seeds = None,
    rounds: Rounds = None,
    out: Out = None,
    data: DataDir = None,
    force: Force = False,
    resume: Resume = False,
    checkpoint_every: CheckpointEvery = None,
    workers: Workers = None,
    ray_address: RayAddress = None,
    sets: Sets = None,
    track: Track = None,
    track_to: TrackDest = None,
) -> None:
    """Reproduce the paper's Figures 1–3, Table 1 and the theory check (Sec. 5–6)."""
    config = _reproduce_config(target)
    if config is None and sets:
        raise _fail("--set applies to experiments; the theory check has no configuration")
    if config is not None:
        config = _configured(
            config, seeds=seeds, rounds=rounds, data=data, sets=sets,
            preset=_quick_edits(config) if quick else (),
        )  # fmt: skip
    name = target.value + ("-quick" if quick else "")
    folder = _out(out, name, resume)
    if config is None:
        if resume:
            raise _fail("--resume applies to experiments; the theory check is not checkpointed")
        if track is not None:
            raise _fail("--track applies to experiments; the theory check trains no runs")
        _reproduce_theory(folder, quick=quick, data=data, force=force)
        return
    if config.name != name:
        config = dataclasses.replace(config, name=name)
    theory = _theory_writer(quick, config.seeds[0], data=data) if target is Target.all else None
    _run(
        config, folder, force=force, resume=resume, quick=quick, workers=workers,
        checkpoint_every=checkpoint_every, theory=theory, ray_address=ray_address,
        track=None if track is None else track.value, track_to=track_to,
    )  # fmt: skip


@app.command()
@_one_line_errors
def run(
    config_path: Annotated[
        Path,
        typer.Argument(
            metavar="CONFIG",
            help="Experiment configuration: a TOML file, or a shipped configuration's name "
            "(fig1, quick, successor/paper, ...; as adcs.run resolves it).",
        ),
    ],
    out: Out = None,
    seeds: Seeds = None,
    rounds: Rounds = None,
    data: DataDir = None,
    force: Force = False,
    resume: Resume = False,
    checkpoint_every: CheckpointEvery = None,
    workers: Workers = None,
    ray_address: RayAddress = None,
    sets: Sets = None,
    track: Track = None,
    track_to: TrackDest = None,
    sweeps: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            metavar="KEY=V1,V2,...",
            help="Run the configuration at each value of KEY (repeatable: every combination), "
            "any key as for --set (or KEY=[V1, V2], a TOML array; or a [sweep] table in the "
            "file): one folder per point, sweep.csv with a column per swept key, sweep.png and "
            "the report's comparison.",
        ),
    ] = None,
) -> None:
    """Run an experiment configuration (TOML; see experiments/*.toml)."""
    from adcs.experiments.config.sweep import load_with_sweep, parse_sweep

    # a --data in place of the file's data.path: the file's own is then not checked
    config_path = resolve_config(config_path)
    config, axes = load_with_sweep(config_path, data_path=None if data is None else str(data))
    axes = [*axes, *(parse_sweep(s) for s in sweeps or ())]
    config = _configured(config, seeds=seeds, rounds=rounds, data=data, sets=sets, axes=axes)
    if axes:
        if track is not None or track_to is not None:
            raise _fail(
                f"--track{'' if track else '-to'}: a sweep is not tracked live yet; adcs export "
                "its folder afterwards"
            )
        _run_sweep(
            config, axes, _out(out, config.name + "-sweep", resume, input_files(config, config_path)),
            force=force, resume=resume,
            workers=workers, checkpoint_every=checkpoint_every, ray_address=ray_address,
        )  # fmt: skip
        return
    folder = _out(out, config.name, resume, input_files(config, config_path))
    _run(
        config, folder, force=force, resume=resume, quick=False, workers=workers,
        checkpoint_every=checkpoint_every, ray_address=ray_address,
        track=None if track is None else track.value, track_to=track_to,
    )  # fmt: skip


@app.command()
@_one_line_errors
def leaderboard(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="Few rounds (150, evaluated every 15) and 3 seeds per workload: a smoke run of "
            "the whole pipeline, minutes instead of the suite's CPU-hours.",
        ),
    ] = False,
    workloads: Annotated[
        str | None,
        typer.Option(
            "--workloads",
            metavar="NAMES",
            help="Comma-separated workload names (files of experiments/leaderboard/, or of its "
            "optional/ folder such as cnn, which run only when named) or TOML paths of your own "
            "(default: the suite, every file of experiments/leaderboard/).",
        ),
    ] = None,
    entries: Annotated[
        str | None,
        typer.Option(
            "--entries",
            metavar="NAMES",
            help="Comma-separated schedulers to rank beside the built-in entries, at their "
            "defaults: your own by import path ('mypkg.selection:MyScheduler') or entry point "
            "(set their parameters with --set 'methods.\"mypkg.selection:MyScheduler\".KEY=VALUE').",
        ),
    ] = None,
    rank_by: Annotated[
        str | None,
        typer.Option(
            "--rank-by",
            metavar="COLUMNS",
            help="Comma-separated result columns ranked beside the worst, 10th-percentile and "
            "average accuracy (a per-evaluation column by its final value), e.g. "
            "test_loss,tv_to_uniform; lower ranks first for losses, costs and distances.",
        ),
    ] = None,
    seeds: Seeds = None,
    rounds: Rounds = None,
    out: Out = None,
    data: DataDir = None,
    force: Force = False,
    resume: Resume = False,
    checkpoint_every: CheckpointEvery = None,
    workers: Workers = None,
    ray_address: RayAddress = None,
    sets: Sets = None,
) -> None:
    """Rank every scheduler on a suite of workloads (experiments/leaderboard/*.toml).

    Every scheduler of the name table runs at its defaults, or at the points it declares for the
    leaderboard (ADCS: θ ∈ {0.6, 0.8, 0.9, 0.95} at R = 20, and with fresh quality); each
    workload gets an ordinary results folder inside OUT, and OUT gets the overall ranks, one
    figure per workload, a summary figure and a report saying where each scheduler that
    declares points (ADCS) wins and where it loses.
    """
    from adcs.experiments.config.overrides import split_items
    from adcs.leaderboard.suite import QUICK_EDITS, load_workload, workload_paths
    from adcs.schedulers import SCHEDULERS

    names = None
    if workloads is not None:
        names = split_items(workloads, "--workloads", "workload", "omit it to run the whole suite")
    extra = []
    if entries is not None:  # was: '' ran as if absent
        extra = split_items(entries, "--entries", "entry", "omit it to rank the built-in ones")
    metrics = []
    if rank_by is not None:
        metrics = split_items(rank_by, "--rank-by", "column", "omit it to rank the accuracies")
    for entry in extra:  # named as given, not as the nth method of the table it joins
        try:
            SCHEDULERS.resolve(entry)
        except ValueError as exc:
            raise _fail(f"--entries {entry}: {exc}") from None
    configs = []
    paths = workload_paths(names)
    for path in paths:
        config = load_workload(path, extra)
        preset = QUICK_EDITS if quick else ()
        configs.append(
            _configured(config, seeds=seeds, rounds=rounds, data=data, sets=sets, preset=preset)
        )
    folder = _out(out, "leaderboard" + ("-quick" if quick else ""), resume, paths)
    _run_leaderboard(
        configs, folder, quick=quick, force=force, resume=resume, workers=workers,
        checkpoint_every=checkpoint_every, ray_address=ray_address,
        metrics=metrics,
    )  # fmt: skip


def _bench_candidates(name: str) -> list[Path]:
    """Where ``bench_NAME.py`` may be: ./benchmarks, the checkout's, the installed package's."""
    file = f"bench_{name}.py"
    repo = Path(__file__).resolve().parents[2]
    installed = Path(__file__).resolve().parent / "_benchmarks"  # package data of the wheel
    return [Path.cwd() / "benchmarks" / file, repo / "benchmarks" / file, installed / file]


def _load_bench(name: str) -> Callable[[Sequence[str]], Any]:
    candidates = _bench_candidates(name)
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise _fail(
            f"benchmark script bench_{name}.py not found (looked in "
            + ", ".join(str(p.parent) for p in candidates)
            + "); an installed adcs carries them in adcs/_benchmarks: reinstall it, or run "
            "from the adcs source checkout",
            code=1,
        )
    spec = importlib.util.spec_from_file_location(f"adcs_bench_{name}", path)
    if spec is None or spec.loader is None:
        raise _fail(f"cannot load {path}", code=1)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    main = getattr(module, "main", None)
    if not callable(main):
        raise _fail(f"{path} has no main(argv) function", code=1)
    return main


@app.command()
@_one_line_errors
def export(
    results: Annotated[
        Path,
        typer.Argument(
            metavar="RESULTS",
            help="A finished adcs results folder (a sweep's or leaderboard's too).",
        ),
    ],
    to: Annotated[
        TrackTo,
        typer.Option("--to", help="The tracking backend (each in its extra of the same name)."),
    ],
    dest: Annotated[
        str | None,
        typer.Option(
            "--dest",
            metavar="DIR|URI",
            help="Log folder, or an MLflow tracking URI (default: RESULTS/tensorboard or "
            "RESULTS/mlruns).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Finish an export that stopped: write only the runs --dest lacks.",
        ),
    ] = False,
) -> None:
    """Write a results folder's evaluations to TensorBoard or MLflow, one run per adcs run."""
    _export(results, to.value, dest, resume=resume)


@app.command()
@_one_line_errors
def merge(
    parts: Annotated[
        list[Path],
        typer.Argument(
            metavar="FOLDER...",
            help="Finished results folders of one configuration but for its methods and seeds "
            "(other seeds, or schedulers added later), no run in two of them.",
        ),
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out",
            metavar="DIR",
            help="The joined results folder: new, or an earlier adcs results folder with --force.",
        ),
    ],
    force: Force = False,
) -> None:
    """Join results folders of one configuration into one: its seeds, or schedulers, run apart.

    Split by seeds, the joined data files are those of one run of every seed, byte for byte.
    Split within a seed (a scheduler run later), each run is as its part computed it, which can
    differ from a run beside all of them in its last bits (the report says so). The report,
    tables and figures are written from the joined files; the manifest lists each part under
    merged_from.
    """
    from adcs.experiments.run.merge import merge_results

    argv = shlex.join(["adcs", "merge", *map(str, parts), "--out", out, *(["--force"] * force)])
    folder = merge_results(parts, _out(out, "merged", False, parts), force=force, command=argv)
    console.print(f"Merged {len(parts)} folders: {folder}")


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],  # `adcs bench sim --help` is the script's help
    },
)
def bench(
    ctx: typer.Context,
    which: Annotated[
        str | None,
        typer.Argument(
            metavar="{map|sim|flower|scale|torch|attacks}",
            help="Which benchmark: map, sim, flower, scale, torch or attacks.",
        ),
    ] = None,
) -> None:
    """Run a speed/memory benchmark (benchmarks/bench_*.py); extra arguments are passed on.

    ``adcs bench sim --help`` shows the benchmark's own options (``--data DIR`` names the
    Fashion-MNIST folder in every benchmark that reads it).
    """
    if which is None or which in ("--help", "-h"):
        console.print(ctx.get_help())
        raise typer.Exit(2 if which is None else 0)
    names = [b.value for b in Bench]
    if which not in names:
        raise _fail(f"unknown benchmark {which!r}; choose one of {names}")
    main = _load_bench(which)
    argv0 = sys.argv[0] if sys.argv else ""
    sys.argv[:1] = [f"adcs bench {which}"]  # the script's usage line names the real command
    try:
        code = main(list(ctx.args))
    finally:
        sys.argv[:1] = [argv0]
    raise typer.Exit(int(code) if isinstance(code, int) else 0)


# ---------------------------------------------------------------------------------------------
# the README's reference, generated from this app


def reference_markdown() -> str:
    """The command-line reference (every command, argument and option), as markdown.

    The README holds this text between ``<!-- cli-reference -->`` markers; a test checks they
    agree, and ``python scripts/cli_reference.py`` rewrites it.
    """
    from adcs.cli_reference import reference_markdown as of_app

    return of_app(app)


if __name__ == "__main__":  # pragma: no cover
    app()
