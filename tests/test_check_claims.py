"""The claims check (scripts/check_claims.py): generated reports regenerate, prose claims recompute."""

from __future__ import annotations

import csv
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from adcs.experiments.analysis import stats
from adcs.leaderboard import ranking
from scripts.check_claims import ClaimError, check, check_prose, evaluate, prose_findings

SOURCE = Path(__file__).resolve().parent.parent / "results" / "successor" / "seeds34" / "cnn"
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
    verdict = "tied" if tied else "ahead" if mean > 0 else "behind"
    return f"{100 * mean:+.2f} ± {100 * half:.2f}", verdict


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
    found = re.search(r"^\| ADCS2 \| 2 \| (\d+\.\d\d)%", text, re.M)
    assert found, "the report's table has ADCS2's worst accuracy"
    shown = found.group(1)
    changed = f"{float(shown) + 0.01:.2f}"
    report.write_text(text.replace(f"| ADCS2 | 2 | {shown}%", f"| ADCS2 | 2 | {changed}%", 1))

    problems, _ = check(results)

    assert len(problems) == 1 and problems[0].startswith(f"{report}: differs")
    assert f"+| ADCS2 | 2 | {shown}%" in problems[0]


def _runs_only(folder: Path, values: dict[str, dict[int, float]]) -> None:
    """A development folder: runs.csv alone, one row per variant and seed."""
    folder.mkdir(parents=True)
    lines = ["run_id,method,seed,variant,params,final_worst_acc,final_avg_acc"]
    for variant, per_seed in values.items():
        for seed, v in per_seed.items():
            lines.append(f'{variant}-{seed},{variant},{seed},{variant},"{{}}",{v!r},{v!r}')
    (folder / "runs.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_folder_of_runs_csv_alone_is_read_and_paired(tmp_path: Path) -> None:
    # a − b = 0.1 on every seed: a paired difference of +10 points with no spread
    _runs_only(tmp_path / "dev", {"a": {0: 0.5, 1: 0.6, 2: 0.7}, "b": {0: 0.4, 1: 0.5, 2: 0.6}})
    cache: dict = {}

    assert evaluate("diff dev worst a b", tmp_path, cache) == "+10.00 ± 0.00"
    assert evaluate("verdict dev worst a b", tmp_path, cache) == "ahead"
    assert evaluate("verdict dev worst b a", tmp_path, cache) == "behind"
    assert evaluate("best dev avg", tmp_path, cache) == "a has the highest mean"


def test_versus_holds_a_stated_gain_against_the_paired_interval(tmp_path: Path) -> None:
    _runs_only(tmp_path / "w", {"a": {0: 0.5, 1: 0.5, 2: 0.7}, "b": {0: 0.4, 1: 0.5, 2: 0.5}})
    mean, half = stats.t_interval(np.array([0.1, 0.0, 0.2]))
    lo, hi = 100 * (mean - half), 100 * (mean + half)

    text = evaluate("versus w worst a b 10", tmp_path, {})

    assert lo < 10 < hi
    assert text == f"[{lo:+.2f}, {hi:+.2f}], which includes +10"
    assert evaluate(f"versus w worst a b {hi + 1:.0f}", tmp_path, {}).endswith(
        "excludes " + f"+{hi + 1:.0f}"
    )


def test_best_is_refused_over_entries_run_on_different_seeds(tmp_path: Path) -> None:
    _runs_only(tmp_path / "w", {"a": {0: 0.5, 1: 0.6, 2: 0.7}, "b": {0: 0.4, 1: 0.5}})

    with pytest.raises(ClaimError, match="different seeds"):
        evaluate("best w worst", tmp_path, {})


def test_a_malformed_marker_is_named(tmp_path: Path) -> None:
    _runs_only(tmp_path / "w", {"a": {0: 0.5}})

    with pytest.raises(ClaimError, match="kind must be one of"):
        evaluate("median w worst a", tmp_path, {})
    with pytest.raises(ClaimError, match="diff takes a folder and 3 argument"):
        evaluate("diff w worst a", tmp_path, {})
    with pytest.raises(ClaimError, match="no results folder"):
        evaluate("mean nowhere worst a", tmp_path, {})


def test_wall_reads_the_manifests_wall_time(tmp_path: Path) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "manifest.json").write_text('{"wall_s": 5095.4}', encoding="utf-8")

    assert evaluate("wall w", tmp_path, {}) == "85 min"
    with pytest.raises(ClaimError, match="no wall_s"):
        evaluate("wall nowhere", tmp_path, {})
    with pytest.raises(ClaimError, match="wall takes a folder and 0 argument"):
        evaluate("wall w extra", tmp_path, {})


def test_variants_the_leaderboard_names_alike_are_kept_apart() -> None:
    # results/systems runs ADCS at three γ, which the leaderboard's entry names tell apart
    systems = SOURCE.parents[2] / "systems"
    with (systems / "runs.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))

    def worst(suffix: str) -> dict[int, float]:
        return {
            int(r["seed"]): float(r["final_worst_acc"])
            for r in rows
            if r["method"] == "adcs" and r["variant"].endswith(suffix)
        }

    mean, half, _ = stats.paired_difference(worst("gamma=0.25"), worst("comm_score=speed"))

    text = evaluate('diff . worst "ADCS θ=0.8, gamma=0.25" "ADCS θ=0.8, gamma=0"', systems, {})

    assert text == f"{100 * mean:+.2f} ± {100 * half:.2f}"


def test_an_attack_suites_report_regenerates_and_its_numbers_recompute(tmp_path: Path) -> None:
    """results/attacks: the report rewritten from its files by the check, and a FINDINGS marker
    reading a family row and the bounds' no-attack cost as the report prints them."""
    import dataclasses

    from adcs.adversary import Defence
    from adcs.data import load_subset
    from benchmarks import bench_attacks

    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    suite = dataclasses.replace(
        suite,
        families=(("burst", {"cosine": 0.5, "factor": 10.0, "start": 2, "quiet": True}),),
        family_k=(1,),
        bound=Defence(cap=1.5, window=3, any_interval=True),
    )
    folder = tmp_path / "results" / "attacks"
    measured = bench_attacks.run_suite(
        bench_attacks._with_rounds(config, 7, [0, 1]), suite, folder, dataset=load_subset(),
        blocks=["families"], methods=["uniform", "divfl"], workers=1,
    )  # fmt: skip
    report = (folder / "report.md").read_text(encoding="utf-8")
    row = next(line for line in report.splitlines() if line.startswith("| burst | 1 | off | divfl"))
    share, change = row.split("|")[6].strip(), row.split("|")[11].strip()
    cost = next(  # the bounds' no-attack cost: method, seeds, without, with, change
        line
        for line in report.splitlines()
        if line.startswith("| divfl") and line.split("|")[2].strip() == "2"
    )
    runs = [m for m in measured if m.planned.method == "divfl" and m.planned.attack == "none"]
    worst = {m.planned.defence: [r.worst for r in runs if r.planned.defence == m.planned.defence]
             for m in runs}  # fmt: skip
    expected_cost = f"{100 * (np.mean(worst['bound']) - np.mean(worst['off'])):+.1f}"
    assert cost.split("|")[5].strip() == expected_cost
    bounded = [  # the goal row: the largest any-interval share of the bounded runs at k <= 3
        float(line.split("|")[8]) for line in report.splitlines()
        if line.startswith("| burst |") and "| bound," in line and "| divfl |" in line
    ]  # fmt: skip
    interval = f"{max(bounded):.2f}"
    marker = "<!-- claim attack . {} {} divfl -->{}<!-- /claim -->"
    (folder / "FINDINGS.md").write_text(
        f"Share {marker.format('share', 'burst:1:off', share)}, worst "
        f"{marker.format('change', 'burst:1:off', change)} points, at no attack "
        f"{marker.format('change', 'none', expected_cost)} points, over any interval at most "
        f"{marker.format('interval', 'goal', interval)}.\n",
        encoding="utf-8",
    )
    problems, _ = check(tmp_path / "results")
    assert problems == []
    (folder / "report.md").write_text(report.replace("| burst |", "| bursts |", 1))
    (folder / "FINDINGS.md").write_text(
        f"Share {marker.format('share', 'burst:1:off', '9.99')}.\n", encoding="utf-8"
    )
    problems, _ = check(tmp_path / "results")
    assert len(problems) == 2 and any("differs" in p for p in problems)
    assert any("9.99" in p for p in problems)
