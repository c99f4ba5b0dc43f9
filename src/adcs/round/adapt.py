"""The scheduler a run's rounds ask: told the clients' round durations, resized for over-commitment.

On a simulated clock (`adcs.round.clock`) a scheduler that uses the clients' round durations
(`adcs.schedulers.base.UsesRoundTimes`) is told them, and with over-commitment the scheduler is
asked for ⌈(1 + o)·m⌉ clients (docs/design.md §4). Either change is made to the scheduler that
does the selecting: a wrapper around it — an attack, the defences, the private probe channel —
declares itself a `SchedulerWrapper` (the scheduler it wraps, and itself around another), and is
rebuilt around the changed scheduler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from adcs.round.clock import RoundClock
from adcs.schedulers.base import Scheduler, UsesRoundTimes

__all__ = ["SchedulerWrapper", "scheduler_to_ask"]


@runtime_checkable
class SchedulerWrapper(Protocol):
    """A scheduler around another one, as it declares itself (the attacks' `Lying` and
    `Crafting`, the defences' `Defended`, the private channel's `Private`).

    The round adapts the scheduler it wraps (round durations, over-commitment) and rebuilds the
    wrapper around the result with `around`.
    """

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler it wraps."""
        ...

    def around(self, scheduler: Scheduler) -> Scheduler:
        """The same wrapper around ``scheduler``."""
        ...


def scheduler_to_ask(
    scheduler: Scheduler, who: str, clock: RoundClock | None = None, invited: int | None = None
) -> Scheduler:
    """The scheduler a run's rounds ask: on a clock, told the clients' round durations and asked
    for ``invited`` = ⌈(1 + o)·m⌉ clients (over-commitment; the round keeps the first m).

    Raises
    ------
    ValueError
        Over-commitment with a scheduler that is not a dataclass with a field m, or a scheduler
        that needs round durations without a clock (``who`` names the run).

    A wrapper around a scheduler (an attack, the defences, the private channel: a
    `SchedulerWrapper`) is rebuilt around the scheduler it wraps, told or resized.
    """
    if clock is None:
        inner = _innermost(scheduler)
        if isinstance(inner, UsesRoundTimes) and inner.needs_round_times:
            raise ValueError(
                f"run {who}: its scheduler needs the clients' round durations; "
                "give SimConfig a system profile (system=SystemConfig(...))"
            )
        return scheduler
    seconds = clock.seconds.update
    scheduler = _through_wrappers(
        scheduler, lambda s: s.with_round_times(seconds) if isinstance(s, UsesRoundTimes) else s
    )
    if invited is None or invited == scheduler.m:
        return scheduler

    def invite(inner: Scheduler) -> Scheduler:
        if not _has_field(inner, "m"):
            raise ValueError(
                f"run {who}: over-commitment asks the scheduler for {invited} clients, which "
                f"needs a dataclass scheduler with a field m; {type(inner).__name__} is not"
            )
        out: Scheduler = dataclasses.replace(inner, m=invited)  # type: ignore[type-var]
        return out

    return _through_wrappers(scheduler, invite)


def _has_field(obj: object, name: str) -> bool:
    return dataclasses.is_dataclass(obj) and name in {f.name for f in dataclasses.fields(obj)}


def _innermost(scheduler: Scheduler) -> Scheduler:
    while isinstance(scheduler, SchedulerWrapper):
        scheduler = scheduler.scheduler
    return scheduler


def _through_wrappers(scheduler: Scheduler, change: Callable[[Scheduler], Scheduler]) -> Scheduler:
    """``scheduler`` with ``change`` applied to the scheduler its wrappers wrap (the wrappers
    rebuilt around it; unchanged objects kept)."""
    if not isinstance(scheduler, SchedulerWrapper):
        return change(scheduler)
    inner = scheduler.scheduler
    changed = _through_wrappers(inner, change)
    if changed is inner:
        return scheduler
    return scheduler.around(changed)
