"""What the command line shows: progress (bars or plain lines), the summary tables, consoles.

Split from `adcs.cli`, which owns the commands, the one-line errors and the exit codes.
Off a terminal (a log, a pipe, CI) progress is a plain line about every 10 s and tables are
printed at their natural width, never cut at 80 columns.
"""

from __future__ import annotations

import logging
import math
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.measure import Measurement
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

if TYPE_CHECKING:
    from adcs.experiments.run.runner import ExperimentOutcome
    from adcs.leaderboard.suite import LeaderboardOutcome

# no emoji codes: a path or import path holding ':name:' is printed as it is, not as a picture
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print the one ``error:`` line and return the exit to raise (2: bad input, 1: failed)."""
    # escaped: messages name TOML tables such as [sim.system], which are not markup
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


PROGRESS_LINE_EVERY_S = 10.0
"""Seconds between plain-text progress lines when stderr is not a terminal."""


# ---------------------------------------------------------------------------------------------
# SIGTERM, as the progress callbacks see it


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt."""


_RECEIVED: list[int] = []
"""The SIGTERMs received during the current command."""


def _check_terminated() -> None:
    """Raise `_Terminated` after a SIGTERM: the progress callbacks call this.

    The signal handler raises at once, but Python drops an exception raised while a finaliser
    runs (it prints "Exception ignored"); the next progress report then stops the run for sure.
    """
    if _RECEIVED:
        raise _Terminated


EXIT_INTERRUPTED = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""Exit status after an interrupt: 128 + the signal's number, as shells report it."""


@contextmanager
def _interrupts() -> Iterator[list[int]]:
    """SIGTERM stops the run the way Ctrl-C does; yields the list the signal received is put in."""
    received = _RECEIVED
    received.clear()

    def on_term(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if len(received) == 1:  # later ones must not cut the clean-up short
            raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (e.g. an embedding test runner): nothing to install
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


_DEBUG: list[bool] = []
"""Whether ``--debug`` was given (a plug-in's traceback is then shown above its error line)."""


def _debug_traceback(exc: BaseException) -> None:
    """With ``--debug``, the traceback of what ``exc`` was raised from (the plug-in's own)."""
    if _DEBUG:
        cause = exc.__cause__ or exc
        text = getattr(exc, "plugin_traceback", None) or "".join(
            traceback.format_exception(type(cause), cause, cause.__traceback__)
        )
        err_console.print(text, highlight=False, markup=False, end="", soft_wrap=True)


def _said(exc: BaseException) -> str:
    """The error's message and its notes (e.g. what of the run is kept for ``--resume``)."""
    return "; ".join([str(exc), *getattr(exc, "__notes__", [])])


def _signal_name(received: Sequence[int]) -> str:
    return "terminated (SIGTERM)" if received else "interrupted (Ctrl-C)"


# ---------------------------------------------------------------------------------------------
# progress


class _RateColumn(ProgressColumn):
    """Steps (simulated rounds, theory cases) per second."""

    def render(self, task: Task) -> Text:
        unit = task.fields.get("unit", "steps")
        elapsed = task.finished_time if task.finished else task.elapsed
        if not elapsed or not task.completed:
            return Text(f"… {unit}/s", style="cyan")
        return Text(f"{task.completed / elapsed:,.1f} {unit}/s", style="cyan")


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class _Lines:
    """Progress as plain lines on stderr, one at most every ``every`` seconds (not a terminal)."""

    def __init__(self, every: float = PROGRESS_LINE_EVERY_S) -> None:
        self.every = every
        self.note = ""  # the latest evaluation, in words (see ``_run``'s on_eval)

    def tracker(self, description: str, unit: str) -> Callable[[int, int], None]:
        """``progress(done, total)``: print at most every ``every`` s; stop after a SIGTERM."""
        start = time.monotonic()
        first: list[int | None] = [None]
        last = [-math.inf]
        shown = [-1]

        def update(done: int, total: int) -> None:
            _check_terminated()
            now = time.monotonic()
            if first[0] is None:
                first[0] = done  # a resumed run starts part-way: rates count this session only
            if done == shown[0] or (now - last[0] < self.every and done < total):
                return
            last[0], shown[0] = now, done
            elapsed = now - start
            fresh = done - (first[0] or 0)
            rate = fresh / elapsed if elapsed > 0 and fresh > 0 else math.nan
            eta = 0.0 if done >= total else (total - done) / rate if rate > 0 else math.nan
            share = 100.0 * done / total if total else 100.0
            err_console.print(
                f"{description}: {done:,}/{total:,} {unit} ({share:.0f}%), "
                + (f"{rate:,.1f} {unit}/s, " if math.isfinite(rate) else "")
                + f"elapsed {_clock(elapsed)}, ETA {_clock(eta)}"
                + (f"; {self.note}" if self.note else ""),
                highlight=False,
                soft_wrap=True,
            )

        return update


class _Bars:
    """Progress as rich bars on a terminal."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.note = ""  # the latest evaluation, in words

    def tracker(self, description: str, unit: str) -> Callable[[int, int], None]:
        task = self.bar.add_task(description, total=None, unit=unit, note="")

        def update(done: int, total: int) -> None:
            _check_terminated()
            self.bar.update(task, completed=done, total=total, note=self.note)

        return update


Display = _Bars | _Lines


@contextmanager
def _progress() -> Iterator[Display]:
    """Bars on a terminal, plain lines every ~10 s otherwise (logs, CI, ``nohup``)."""
    if not err_console.is_terminal:
        yield _Lines()
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[unit]}"),
        _RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[note]}"),
    )
    with Progress(*columns, console=err_console, transient=False) as bar:
        yield _Bars(bar)


# ---------------------------------------------------------------------------------------------
# the summary printed at the end


def _pct(x: float, half: float = math.nan) -> str:
    if math.isnan(x):
        return "—"
    return f"{100 * x:.2f}" + ("" if math.isnan(half) else f" ± {100 * half:.2f}")


def _print_table(table: Table) -> None:
    """A table on stdout; off a terminal (a log, a pipe) at its natural width, never cut at 80."""
    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update(width=_LOG_WIDTH), table).maximum
    console.print(table, width=max(console.width, min(natural, _LOG_WIDTH)), crop=False)


_LOG_WIDTH = 400
"""The widest a table is printed off a terminal (its columns never fold below their content)."""


def _print_summary(outcome: ExperimentOutcome) -> None:
    from adcs.experiments.analysis.report import FINAL_FRACTION

    rows = outcome.summaries
    window = f" (rounds {rows[0].tail_rounds[0]}–{rows[0].tail_rounds[1]})" if rows else ""
    table = Table(
        title=(
            f"final = mean of each run's last {100 * FINAL_FRACTION:.0f}% of evaluations{window};"
            " mean over seeds ± 95% interval; accuracy in %"
        )
    )
    widest = max((len(s.label) for s in rows), default=6)
    # a long label wraps (at 28 characters at least), the numbers never do
    table.add_column("series", overflow="fold", min_width=min(widest, 28))
    for col in ("seeds", "final worst acc.", "final avg acc.", "TV", "client updates"):
        table.add_column(col, justify="right", no_wrap=True)
    for s in rows:
        table.add_row(
            s.label, str(s.n_seeds), _pct(s.worst, s.worst_half), _pct(s.avg, s.avg_half),
            f"{s.tv:.4f}", f"{s.client_updates:,.0f}",
        )  # fmt: skip
    _print_table(table)
    _print_claims(outcome)
    if outcome.is_subset:
        console.print(
            "[yellow]The shipped Fashion-MNIST subset was used: results are indicative only.[/]"
        )
    folder = outcome.folder
    console.print(f"Results: [bold]{folder}[/]" + (" (resumed)" if outcome.resumed else ""))
    for fig in outcome.figures:
        console.print(f"  figure: {folder / fig}")
    if (folder / "table1.md").exists():
        console.print(f"  table:  {folder / 'table1.md'}")
    console.print(f"  report: {folder / 'report.md'}")


def _print_claims(outcome: ExperimentOutcome) -> None:
    """The paper's claims with their verdicts, or why this run cannot test them."""
    from adcs.experiments.paper import CLAIMS_NEED

    evaluated = [c for c in outcome.claims if c.verdict != "not evaluated"]
    if not evaluated:
        return
    untested = all(c.verdict == "not tested" for c in evaluated)
    title = (
        f"The paper's claims: not tested by this run ({CLAIMS_NEED}; our numbers are in report.md)"
        if untested
        else "The paper's claims (details in report.md)"
    )
    claims = Table(title=title)
    claims.add_column("claim")
    claims.add_column("verdict")
    styles = {"holds": "green", "does not hold": "red"}
    for c in evaluated:
        claims.add_row(c.statement, f"[{styles.get(c.verdict, 'yellow')}]{c.verdict}[/]")
    _print_table(claims)


def _print_leaderboard(outcome: LeaderboardOutcome) -> None:
    table = Table(
        title="Overall ranks by final worst accuracy (mean rank over workloads; best or tied: "
        "not told apart from the best by a paired t-test over seeds at 5%, Holm-adjusted over the "
        "workload's comparisons)"
    )
    table.add_column("place", justify="right")
    table.add_column("entry", overflow="fold", min_width=14)
    for col in ("mean rank", "best", "best or tied", "workloads"):
        table.add_column(col, justify="right", no_wrap=True)
    for i, r in enumerate(outcome.ranks):
        table.add_row(str(i + 1), r.entry, f"{r.mean_rank:.2f}", str(r.best), str(r.tied),
                      str(r.workloads))  # fmt: skip
    _print_table(table)
    folder = outcome.folder
    console.print(f"Leaderboard: [bold]{folder}[/]" + (" (resumed)" if outcome.resumed else ""))
    console.print(f"  report: {outcome.report}")
    console.print(f"  figures: {folder / 'summary.png'} and one per workload")


# ---------------------------------------------------------------------------------------------
# the library's log on stderr


class _Once(logging.Filter):
    """Let each distinct warning through once per command (the same data warning, say)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


def _configure_logging(verbose: bool) -> None:
    """Show the library's log (the ``adcs`` logger only) on stderr, each warning once."""
    logger = logging.getLogger("adcs")
    logger.setLevel(logging.INFO if verbose else logging.WARNING)
    for handler in [h for h in logger.handlers if getattr(h, "_adcs_cli", False)]:
        logger.removeHandler(handler)
    handler = RichHandler(console=err_console, show_path=False, show_time=False)
    handler._adcs_cli = True  # type: ignore[attr-defined]
    handler.addFilter(_Once())
    logger.addHandler(handler)
    logger.propagate = False  # the root logger's handlers would print it a second time


def _limit_blas_threads(n: int) -> None:
    """Cap BLAS threads: the many small products run slower, not faster, on several threads,
    and much slower when the cores are shared with other work."""
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
