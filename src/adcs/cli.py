"""The ``adcs`` command line: reproduce the paper's experiments, run a configuration, benchmark.

::

    adcs reproduce [fig1|fig2|fig3|table1|theory|all] [--quick] [--seeds N] [--rounds T] [--out DIR]
    adcs run CONFIG.toml [--out DIR]
    adcs bench map|sim|flower [ARGS...]

The command line owns the terminal (progress bar, tables); the library only logs.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import logging
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from adcs.experiments.config import (
    ConfigError,
    ExperimentConfig,
    load_config,
    merge_configs,
    packaged_config,
    with_overrides,
)

if TYPE_CHECKING:
    from adcs.experiments.runner import ExperimentOutcome

app = typer.Typer(
    name="adcs",
    help="Adaptive Determinantal Client Scheduling: reproduce the paper, run experiments, bench.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


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


EXPERIMENT_TARGETS = ("fig1", "fig2", "fig3", "table1")


# ---------------------------------------------------------------------------------------------
# helpers


def _fail(message: str, code: int = 2) -> typer.Exit:
    # escaped: messages name TOML tables such as [sim.system], which are not markup
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


@app.callback()
def _main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Show the library's log.")
    ] = False,
    blas_threads: Annotated[
        int,
        typer.Option(
            "--blas-threads", min=1, help="Threads of the BLAS library (the products are small)."
        ),
    ] = 1,
) -> None:
    """Adaptive Determinantal Client Scheduling (ADCS) for federated learning."""
    _configure_logging(verbose)
    _limit_blas_threads(blas_threads)


def _configure_logging(verbose: bool) -> None:
    """Show the library's log (the ``adcs`` logger only) through rich, on stderr."""
    logger = logging.getLogger("adcs")
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    if not any(getattr(h, "_adcs_cli", False) for h in logger.handlers):
        handler = RichHandler(console=err_console, show_path=False, show_time=False)
        handler._adcs_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)


def _limit_blas_threads(n: int) -> None:
    """Cap BLAS threads: the simulator's many small products run slower, not faster, on several
    threads, and much slower when the cores are shared with other work."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        logging.getLogger(__name__).info(
            "threadpoolctl is not installed: BLAS threads left as they are "
            "(set OPENBLAS_NUM_THREADS=%d to cap them)",
            n,
        )
        return
    threadpool_limits(limits=n, user_api="blas")


class _RateColumn(ProgressColumn):
    """Steps (simulated rounds, theory cases) per second."""

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "steps")
        elapsed = task.finished_time if task.finished else task.elapsed
        if not elapsed or not task.completed:
            return Text(f"… {unit}/s", style="cyan")
        return Text(f"{task.completed / elapsed:,.1f} {unit}/s", style="cyan")


@contextmanager
def _live_progress() -> Iterator[Progress]:
    """One live progress display; each stage of the work adds its own bar to it."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console, transient=False) as bar:
        yield bar


def _tracker(bar: Progress, description: str, unit: str) -> Callable[[int, int], None]:
    """A new bar on ``bar``, and the ``progress(done, total)`` callback that moves it."""
    task = bar.add_task(description, total=None, unit=unit)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    return update


def _default_out(name: str) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("results") / f"{name}-{stamp}"


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise _fail(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise _fail(f"--out {out} exists and is not empty; choose another folder or pass --force")


def _apply_overrides(
    config: ExperimentConfig,
    *,
    quick: bool,
    seeds: int | None,
    rounds: int | None,
    data: Path | None,
) -> ExperimentConfig:
    if quick:
        q = packaged_config("quick")
        config = dataclasses.replace(config, sim=q.sim, seeds=q.seeds)
    return with_overrides(
        config,
        rounds=rounds,
        seeds=None if seeds is None else tuple(range(seeds)),
        data_path=None if data is None else str(data),
    )


def _reproduce_config(target: Target) -> ExperimentConfig | None:
    if target is Target.theory:
        return None
    if target is Target.all:
        return merge_configs([packaged_config(n) for n in EXPERIMENT_TARGETS], name="all")
    return packaged_config(target.value)


TheoryRunner = Callable[[Path, Progress], Mapping[str, Any]]


REAL_PROBE_ROUNDS = {True: 50, False: 200}
"""Rounds of full-participation training before the real Fashion-MNIST updates are probed."""


def _theory_runner(
    quick: bool, seed: int, *, data: Path | None = None, overwrite: bool = False
) -> TheoryRunner:
    """A function writing the theory check into a folder, with a bar on the given display.

    Besides the synthetic grid, the check measures the paper's quantities on real Fashion-MNIST
    updates of the paper's setting (groups as clusters), probed after a few training rounds.
    """
    try:
        from adcs.experiments.theory_check import fashion_mnist_probe, run_theory_check
    except ImportError as exc:
        raise _fail(f"the theory check is not available: {exc}", code=1) from exc

    def run(folder: Path, bar: Progress) -> Mapping[str, Any]:
        update = _tracker(bar, "theory", "cases")
        rounds = REAL_PROBE_ROUNDS[quick]
        probe = fashion_mnist_probe(rounds, seed, data_path=data)
        report = run_theory_check(
            folder,
            quick=quick,
            seed=seed,
            overwrite=overwrite,
            progress=update,
            real_updates=probe.updates,
            real_groups=probe.groups,
            real_quality=probe.losses,
            real_description=(
                f"Fashion-MNIST, the paper's setting, probed after {rounds} rounds of"
                " full-participation training (one local step, batch 16, η_ℓ = 0.001)"
            ),
        )
        return {"theory": {"report": str(Path(report).relative_to(folder.parent))}}

    return run


# ---------------------------------------------------------------------------------------------
# the summary printed at the end


def _pct(x: float, half: float = math.nan) -> str:
    return f"{100 * x:.2f}" + ("" if math.isnan(half) else f" ± {100 * half:.2f}")


def _print_summary(outcome: ExperimentOutcome) -> None:
    from adcs.experiments.figures import curve_series
    from adcs.experiments.report import FIGURE_SERIES, Series, select_runs, summarize

    records = outcome.records
    series: list[Series] = []
    shown: set[str] = set()  # one row per variant: ADCS θ=0.8, R=20 is in all three figures
    for group in FIGURE_SERIES.values():
        for s in group:
            runs = select_runs(records, s)
            if runs and runs[0].variant not in shown:
                shown.add(runs[0].variant)
                series.append(s)
    if not series:
        series = list(curve_series(records))
    table = Table(title="End of training (mean over seeds, ± 95% interval; accuracy in %)")
    for col in ("series", "seeds", "worst acc.", "avg acc.", "TV", "client updates"):
        table.add_column(col, justify="left" if col == "series" else "right")
    for s in series:
        summ = summarize(records, s)
        if summ is not None:
            table.add_row(
                summ.label, str(summ.n_seeds), _pct(summ.worst, summ.worst_half),
                _pct(summ.avg, summ.avg_half), f"{summ.tv:.4f}", f"{summ.client_updates:,.0f}",
            )  # fmt: skip
    console.print(table)
    evaluated = [c for c in outcome.claims if c.verdict != "not evaluated"]
    if evaluated:
        claims = Table(title="The paper's claims (details in report.md)")
        claims.add_column("claim")
        claims.add_column("verdict")
        for c in evaluated:
            style = "green" if c.verdict == "holds" else "red"
            claims.add_row(c.statement, f"[{style}]{c.verdict}[/]")
        console.print(claims)
    if outcome.is_subset:
        console.print(
            "[yellow]The shipped Fashion-MNIST subset was used: results are indicative only.[/]"
        )
    folder = outcome.folder
    console.print(f"Results: [bold]{folder}[/]")
    for fig in outcome.figures:
        console.print(f"  figure: {folder / fig}")
    if (folder / "table1.md").exists():
        console.print(f"  table:  {folder / 'table1.md'}")
    console.print(f"  report: {folder / 'report.md'}")


def _run(
    config: ExperimentConfig,
    out: Path,
    *,
    force: bool,
    quick: bool,
    theory: TheoryRunner | None = None,
    workers: int = 1,
) -> None:
    from adcs.data import ChecksumError
    from adcs.experiments.runner import RunError, expand_runs, run_experiment

    n_runs = len(expand_runs(config))
    console.print(
        f"[bold]{config.name}[/]: {n_runs} distinct runs × {config.sim.rounds} rounds, "
        f"seeds {list(config.seeds)}, m = {config.m}"
    )
    try:
        with _live_progress() as bar:
            finalize = None if theory is None else (lambda tmp: theory(tmp / "theory", bar))
            outcome = run_experiment(
                config, out, overwrite=force, quick=quick, finalize=finalize, workers=workers,
                progress=_tracker(bar, config.name, "rounds"),
                extra_manifest={"command": "adcs " + " ".join(sys.argv[1:])},
            )  # fmt: skip
    except ConfigError as exc:
        raise _fail(str(exc)) from exc
    except RunError as exc:
        raise _fail(str(exc), code=1) from exc
    except (FileNotFoundError, ChecksumError) as exc:
        raise _fail(f"data: {exc}", code=1) from exc
    _print_summary(outcome)


# ---------------------------------------------------------------------------------------------
# commands


Seeds = Annotated[int | None, typer.Option("--seeds", help="Use seeds 0..N-1.", min=1)]
Rounds = Annotated[int | None, typer.Option("--rounds", help="Rounds T per run.", min=1)]
Out = Annotated[Path | None, typer.Option("--out", help="Results folder (default results/…).")]
DataDir = Annotated[Path | None, typer.Option("--data", help="Fashion-MNIST folder.")]
Force = Annotated[bool, typer.Option("--force", help="Replace a non-empty --out folder.")]
Workers = Annotated[
    int,
    typer.Option(
        "--workers",
        min=1,
        help="Processes advancing different seeds at once (results unchanged; default: CPUs).",
    ),
]
DEFAULT_WORKERS = os.cpu_count() or 1


@app.command()
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
    workers: Workers = DEFAULT_WORKERS,
) -> None:
    """Reproduce the paper's Figures 1–3, Table 1 and the theory check (Sec. 5–6)."""
    try:
        config = _reproduce_config(target)
        if config is not None:
            config = _apply_overrides(config, quick=quick, seeds=seeds, rounds=rounds, data=data)
    except ConfigError as exc:
        raise _fail(str(exc)) from exc
    name = target.value + ("-quick" if quick else "")
    out = out if out is not None else _default_out(name)
    _check_out(out, force)
    seed = 0 if config is None else config.seeds[0]
    if config is None:
        _reproduce_theory(out, quick=quick, seed=seed, data=data, force=force)
        return
    if config.name != name:
        config = dataclasses.replace(config, name=name)
    theory = _theory_runner(quick, seed, data=data) if target is Target.all else None
    _run(config, out, force=force, quick=quick, theory=theory, workers=workers)


def _reproduce_theory(out: Path, *, quick: bool, seed: int, data: Path | None, force: bool) -> None:
    runner = _theory_runner(quick, seed, data=data, overwrite=force)
    try:
        with _live_progress() as bar:
            runner(out, bar)
    except (FileExistsError, ValueError) as exc:
        raise _fail(str(exc), code=1) from exc
    console.print(f"Theory check: [bold]{out}[/]\n  report: {out / 'report.md'}")


@app.command()
def run(
    config_path: Annotated[
        Path, typer.Argument(metavar="CONFIG.toml", help="Experiment configuration.")
    ],
    out: Out = None,
    seeds: Seeds = None,
    rounds: Rounds = None,
    data: DataDir = None,
    force: Force = False,
    workers: Workers = DEFAULT_WORKERS,
) -> None:
    """Run an experiment configuration (TOML; see experiments/*.toml)."""
    try:
        config = load_config(config_path)
        config = _apply_overrides(config, quick=False, seeds=seeds, rounds=rounds, data=data)
    except ConfigError as exc:
        raise _fail(str(exc)) from exc
    out = out if out is not None else _default_out(config.name)
    _check_out(out, force)
    _run(config, out, force=force, quick=False, workers=workers)


def _bench_candidates(name: str) -> list[Path]:
    file = f"bench_{name}.py"
    repo = Path(__file__).resolve().parents[2]
    return [Path.cwd() / "benchmarks" / file, repo / "benchmarks" / file]


def _load_bench(name: str) -> Callable[[Sequence[str]], Any]:
    candidates = _bench_candidates(name)
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise _fail(
            f"benchmark script bench_{name}.py not found (looked in "
            + ", ".join(str(p.parent) for p in candidates)
            + "); run from the adcs source checkout",
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
        typer.Argument(metavar="{map|sim|flower}", help="Which benchmark: map, sim or flower."),
    ] = None,
) -> None:
    """Run a speed/memory benchmark (benchmarks/bench_*.py); extra arguments are passed on.

    ``adcs bench sim --help`` shows the benchmark's own options.
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


if __name__ == "__main__":  # pragma: no cover
    app()
