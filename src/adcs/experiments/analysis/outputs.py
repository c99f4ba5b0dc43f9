"""Outputs: what a results folder shows beside its data files (docs/design.md §6).

The generic outputs are ``curves`` (every variant's accuracy curves), ``time.png`` (with a
simulated clock) and the neutral ``report.md``. A *study* — a plug-in such as the paper's
(`adcs.experiments.paper`) — registers itself with `register_study`: it says how a
configuration departs from its setting, and provides its own figures (by output name), tables
and, for a configuration of its setting, its report with verdicts. The runner calls them
(`write_tables`, `figures_by_name`, `write_study_report`); it never names a
study or its outputs itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from adcs.experiments.analysis.report import (
    ReportContext,
    RunRecord,
    Series,
    SeriesSummary,
    write_report,
)

__all__ = [
    "GENERIC_OUTPUTS",
    "Study",
    "StudyReport",
    "Verdict",
    "figures_by_name",
    "output_names",
    "register_study",
    "studies",
    "study_of",
    "write_study_report",
    "write_tables",
]

GENERIC_OUTPUTS = ("curves",)
"""Outputs every configuration may ask for."""


class Verdict(Protocol):
    """A checked claim of a study's report (what the command line prints)."""

    statement: str
    verdict: str


@dataclass(frozen=True, eq=False)
class StudyReport:
    """What a study's report gave: the rows shown on the console and its checked claims."""

    rows: list[SeriesSummary]
    claims: list[Any] = field(default_factory=list)


TableWriter = Callable[[Path, Sequence[RunRecord], bool], Any]
"""``writer(folder, records, in_setting)``: write a table's files into ``folder``."""


@dataclass(frozen=True, eq=False)
class Study:
    """A study's plug-in.

    Attributes
    ----------
    name : str
        Names the manifest's keys ``<name>_setting`` and ``differences_from_<name>``.
    differences : callable
        ``differences(config)`` → how the configuration departs from the study's setting, one
        line each (empty: it is of the setting).
    figures : mapping of output name to (title, series)
    tables : mapping of output name to TableWriter
    report : callable
        ``report(path, records, context)`` → `StudyReport`: the study's ``report.md``,
        written for a configuration of its setting.
    """

    name: str
    differences: Callable[[Any], list[str]]
    figures: Mapping[str, tuple[str, Sequence[Series]]]
    tables: Mapping[str, TableWriter]
    report: Callable[[Path, Sequence[RunRecord], ReportContext], StudyReport]

    @property
    def outputs(self) -> tuple[str, ...]:
        """The output names it provides: its figures, then its tables."""
        return (*self.figures, *self.tables)


_STUDIES: dict[str, Study] = {}


def register_study(study: Study) -> Study:
    """Register ``study`` (again under its name replaces it); returns it."""
    taken = {n for s in _STUDIES.values() if s.name != study.name for n in s.outputs}
    clash = sorted((taken | set(GENERIC_OUTPUTS)) & set(study.outputs))
    if clash:
        raise ValueError(f"study {study.name!r}: outputs {clash} are already provided")
    _STUDIES[study.name] = study
    return study


def studies() -> list[Study]:
    """The registered studies, in registration order."""
    return list(_STUDIES.values())


def output_names() -> tuple[str, ...]:
    """Every output a configuration may ask for: the studies', then the generic ones."""
    return (*(n for s in _STUDIES.values() for n in s.outputs), *GENERIC_OUTPUTS)


def figures_by_name() -> dict[str, tuple[str, Sequence[Series]]]:
    """Title and series of every study's figure, by output name."""
    return {n: f for s in _STUDIES.values() for n, f in s.figures.items()}


def study_of(config: Any) -> tuple[Study | None, dict[str, list[str]]]:
    """The study whose setting ``config`` is (the first), and each study's differences."""
    differs = {s.name: s.differences(config) for s in _STUDIES.values()}
    own = next((s for s in _STUDIES.values() if not differs[s.name]), None)
    return own, differs


def write_tables(
    folder: Path, outputs: Sequence[str], records: Sequence[RunRecord], own: Study | None
) -> None:
    """Write the studies' tables that ``outputs`` names (``in_setting`` for ``own``'s)."""
    for study in _STUDIES.values():
        for name, writer in study.tables.items():
            if name in outputs:
                writer(folder, records, study is own)


def write_study_report(
    path: Path, records: Sequence[RunRecord], context: ReportContext, own: Study | None
) -> StudyReport:
    """``report.md``: ``own``'s report, or the neutral one (one row per variant)."""
    if own is not None:
        return own.report(path, records, context)
    return StudyReport(write_report(path, records, context))
