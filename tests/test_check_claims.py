"""The claims check (scripts/check_claims.py): generated reports regenerate, prose claims recompute."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from adcs.experiments import ranking, stats
from scripts.check_claims import check, check_prose, prose_findings

SOURCE = Path(__file__).resolve().parent.parent / "results" / "successor" / "seeds34" / "dirichlet"
"""A small committed results folder: ADCS2 and PowerOfChoice on seeds 3 and 4."""

DIFF = "<!-- claim diff w worst adcs2 powerofchoice -->{}<!-- /claim -->"
VERDICT = "<!-- claim verdict w worst adcs2 powerofchoice -->{}<!-- /claim -->"


@pytest.fixture
def results(tmp_path: Path) -> Path:
    shutil.copytree(SOURCE, tmp_path / "results" / "w")
    return tmp_path / "results"


def _worst(folder: Path) -> dict[str, dict[int, float]]:
    records, acc = ranking.workload_scores(folder.parent, folder.name)
    return {s.method: s.worst for s in ranking.scores_of(folder.name, records, acc)[0]}


def _expected(folder: Path) -> tuple[str, str]:
    worst = _worst(folder)
    mean, half, _ = stats.paired_difference(worst["adcs2"], worst["powerofchoice"])
    tied = stats.tied(worst["adcs2"], worst["powerofchoice"])
    return f"{100 * mean:+.2f} ± {100 * half:.2f}", "tied" if tied else "behind"


def _findings(results: Path, diff: str, verdict: str) -> Path:
    path = results / "FINDINGS.md"
    path.write_text(
        f"ADCS2 is {DIFF.format(diff)} points from PowerOfChoice:\n{VERDICT.format(verdict)}.\n",
        encoding="utf-8",
    )
    return path


def test_the_committed_folder_and_true_claims_pass(results: Path) -> None:
    diff, verdict = _expected(results / "w")
    _findings(results, diff, verdict)

    problems, _ = check(results)

    assert problems == []


def test_a_changed_number_in_prose_fails(results: Path) -> None:
    diff, verdict = _expected(results / "w")
    wrong = diff.replace(diff[1], str((int(diff[1]) + 1) % 10), 1)
    path = _findings(results, wrong, verdict)

    problems = check_prose(path, write=False)

    assert len(problems) == 1
    assert f"says {wrong!r}; the data give {diff!r}" in problems[0]


def test_a_wrong_comparative_word_fails(results: Path) -> None:
    diff, verdict = _expected(results / "w")
    path = _findings(results, diff, "ahead")

    problems = check_prose(path, write=False)

    assert verdict != "ahead"
    assert len(problems) == 1 and f"says 'ahead'; the data give {verdict!r}" in problems[0]


def test_write_fills_in_what_the_data_give(results: Path) -> None:
    diff, verdict = _expected(results / "w")
    path = _findings(results, "?", "?")

    check_prose(path, write=True)

    assert check_prose(path, write=False) == []
    assert DIFF.format(diff) in path.read_text(encoding="utf-8")
    assert VERDICT.format(verdict) in path.read_text(encoding="utf-8")


def test_an_unmarked_number_or_comparison_fails() -> None:
    text = (
        "ADCS2 gains 0.58 points.\nIt is tied with PowerOfChoice.\nAt m = 18 and `--rounds 400`.\n"
    )

    findings = prose_findings(text)

    assert findings == [
        "line 1: number(s) without a claim marker: 0.58",
        "line 2: comparative word(s) without a claim marker: tied",
    ]


def test_an_unknown_entry_or_metric_is_named(results: Path) -> None:
    path = results / "FINDINGS.md"
    path.write_text(
        "<!-- claim mean w worst nobody -->x<!-- /claim -->\n"
        "<!-- claim mean w speed adcs2 -->x<!-- /claim -->\n",
        encoding="utf-8",
    )

    problems = check_prose(path, write=False)

    assert len(problems) == 2
    assert "entry 'nobody': not found" in problems[0]
    assert "metric 'speed'" in problems[1]


def test_a_changed_number_in_a_generated_report_fails(results: Path) -> None:
    report = results / "w" / "report.md"
    text = report.read_text(encoding="utf-8")
    report.write_text(text.replace("62.72%", "62.73%", 1), encoding="utf-8")

    problems, _ = check(results)

    assert "62.72%" in text
    assert len(problems) == 1 and problems[0].startswith(f"{report}: differs")
    assert "+| ADCS2 | 2 | 62.72%" in problems[0]
