"""The paper's layer: claims computed from the numbers (made to hold, and made to fail), Table 1,
its report, and which configurations are of the paper's setting."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from adcs.experiments import paper
from adcs.experiments.analysis.report import ReportContext, RunRecord
from adcs.experiments.config import packaged_config
from adcs.experiments.config.overrides import with_overrides
from adcs.experiments.paper import (
    PAPER_TABLE1,
    PAPER_TV,
    Claim,
    ClaimTolerances,
    evaluate_claims,
    table1_rows,
    write_table1,
)

from .records import UNIFORM_SHARE, adcs, record


def skewed(tv: float) -> np.ndarray:
    """Group shares with the given TV distance to uniform (mass moved from group 9 to group 0)."""
    share = UNIFORM_SHARE.copy()
    share[0] += tv
    share[9] -= tv
    return share


def paper_like(seeds: int = 2, *, flip: bool = False) -> list[RunRecord]:
    """Numbers for which every claim of Sec. 6 holds; ``flip=True`` makes every one fail."""
    f = flip
    worst = {
        "uniform": 0.30, "powerofchoice": 0.40, "ocs": 0.42, "divfl": 0.38,
        "staticdpp": 0.40 if f else 0.02, "adcs": 0.35 if f else 0.50,
    }  # fmt: skip
    avg = {
        "uniform": 0.78, "powerofchoice": 0.80, "ocs": 0.79, "divfl": 0.78,
        "staticdpp": 0.50, "adcs": 0.75 if f else 0.80,
    }  # fmt: skip
    tv = {
        "uniform": 0.002, "powerofchoice": 0.19, "ocs": 0.10 if f else 0.22, "divfl": 0.12,
        "staticdpp": 0.40, "adcs": 0.14,
    }  # fmt: skip
    if f:
        worst["uniform"] = 0.45  # baselines no longer beat Uniform
    out = []
    for s in range(seeds):
        jitter = 0.002 * s
        for method in worst:
            if method == "adcs":
                out.append(
                    adcs(worst[method] + jitter, avg[method], seed=s, share=skewed(tv[method]))
                )
            else:
                out.append(record(method, worst[method] + jitter, avg[method], seed=s,
                                  share=skewed(tv[method])))  # fmt: skip
        for theta, w, a in [(0.2, 0.50 if f else 0.25, 0.7), (0.6, 0.48, 0.79 if f else 0.81)]:
            out.append(adcs(w, a, theta, 20, seed=s))
        fig3 = {1: 0.50, 5: 0.45 if f else 0.499, 100: 0.50, 500: 0.50 if f else 0.40}
        for r, w in fig3.items():
            wig = 0.0 if f else (0.03 if r == 500 else 0.0)
            wig = 0.03 if (f and r == 1) else wig
            out.append(adcs(w, 0.8, 0.8, r, seed=s, wiggle=wig))
    return out


def by_key(claims: list[Claim]) -> dict[str, Claim]:
    return {c.key: c for c in claims}


def test_every_claim_holds_on_numbers_built_to_match_the_paper() -> None:
    claims = by_key(evaluate_claims(paper_like()))
    assert len(claims) == 10
    not_holding = {k: c.evidence for k, c in claims.items() if c.verdict != "holds"}
    assert not_holding == {}


def test_every_claim_fails_on_numbers_built_against_the_paper() -> None:
    claims = by_key(evaluate_claims(paper_like(flip=True)))
    holding = {k: c.evidence for k, c in claims.items() if c.verdict != "does not hold"}
    assert holding == {}


def test_evidence_shows_the_numbers_the_verdict_follows_from() -> None:
    claims = by_key(evaluate_claims(paper_like()))
    assert "ADCS worst 50.10%" in claims["adcs_highest_worst"].evidence
    assert "OCS 42.10%" in claims["adcs_highest_worst"].evidence
    tv = claims["tv_order"].evidence
    assert (
        "measured: Uniform 0.0020 < ADCS (θ=0.8, R=20) 0.1400 < PowerOfChoice 0.1900 < OCS 0.2200"
        in tv
    )
    flipped = by_key(evaluate_claims(paper_like(flip=True)))["tv_order"].evidence
    assert "measured: Uniform 0.0020 < OCS 0.1000 < ADCS" in flipped


def test_claims_without_their_runs_are_not_evaluated() -> None:
    only_fig1 = [
        r for r in paper_like()
        if r.params.get("theta") in (None, 0.8) and r.params.get("refresh_every") in (None, 20)
    ]  # fmt: skip
    claims = by_key(evaluate_claims(only_fig1))
    assert claims["adcs_highest_worst"].verdict == "holds"
    assert claims["theta02_below_uniform_worst"].verdict == "not evaluated"
    assert "adcs_theta0.2" in claims["theta02_below_uniform_worst"].evidence
    assert claims["small_r_same_as_r1"].verdict == "not evaluated"
    assert claims["large_r_deteriorates"].verdict == "not evaluated"


def test_tolerances_move_the_verdict() -> None:
    runs = paper_like()
    # ADCS 0.80 vs best other 0.80: competitive at any tolerance; StaticDPP gap 0.28
    strict = ClaimTolerances(much_lower=0.5)
    assert by_key(evaluate_claims(runs, strict))["staticdpp_much_lower_worst"].verdict == (
        "does not hold"
    )
    with pytest.raises(ValueError, match="same"):
        ClaimTolerances(same=2.0)


def test_table1_uses_mean_shares_and_sits_beside_the_paper(tmp_path: Path) -> None:
    runs = [
        record("ocs", 0.4, 0.8, seed=0, share=skewed(0.2)),
        record("ocs", 0.4, 0.8, seed=1, share=skewed(0.1)),
        record("uniform", 0.3, 0.8, share=np.asarray(PAPER_TABLE1["uniform"])),
    ]
    rows = {r["method"]: r for r in table1_rows(runs)}
    assert rows["ocs"]["tv"] == pytest.approx(0.15)  # the mean of the runs' own TVs
    assert rows["ocs"]["share"][0] == pytest.approx(0.25)
    assert rows["ocs"]["paper_tv"] == PAPER_TV["ocs"]
    assert rows["uniform"]["max_abs_share_diff"] == pytest.approx(0.0)
    write_table1(tmp_path, runs)
    with (tmp_path / "table1.csv").open() as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 20
    assert {r["method"] for r in table} == {"ocs", "uniform"}
    md = (tmp_path / "table1.md").read_text()
    assert "| OCS |" in md and "OCS (paper)" in md and "0.2241" in md


def test_table1_off_the_papers_setting_has_no_paper_columns(tmp_path: Path) -> None:
    runs = [record("ocs", 0.4, 0.8, share=skewed(0.2))]
    write_table1(tmp_path, runs, paper_columns=False)
    md = (tmp_path / "table1.md").read_text()
    assert "paper" not in md.lower() and "0.2241" not in md
    with (tmp_path / "table1.csv").open() as fh:
        assert "paper_tv" not in next(csv.reader(fh))


def test_a_run_that_cannot_test_the_claims_says_not_tested(tmp_path: Path) -> None:
    context = ReportContext(
        name="quick", rounds=1000, eval_every=100, m=18, n_clients=30, seeds=(0, 1),
        data_source="test data", is_subset=True, quick=True, figures=("fig1.png",),
    )  # fmt: skip
    claims = paper.write_report(tmp_path / "report.md", paper_like(), context)
    text = (tmp_path / "report.md").read_text()
    assert "not tested by this run" in text and paper.CLAIMS_NEED in text
    assert "shipped" in text and "T = 1000" in text
    assert "![fig1](fig1.png)" in text
    assert "**holds**" not in text and "**does not hold**" not in text
    assert {c.verdict for c in claims} <= {"not tested", "not evaluated"}
    assert sum(c.verdict == "not tested" for c in claims) == 10
    assert "final = mean over each run's last 10% of evaluations" in text.lower()


def test_a_run_that_can_test_the_claims_gets_verdicts(tmp_path: Path) -> None:
    context = ReportContext(
        name="fig1", rounds=20_000, eval_every=100, m=18, n_clients=30, seeds=(0, 1),
        data_source="test data", is_subset=False, figures=("fig1.png",),
    )  # fmt: skip
    claims = paper.write_report(tmp_path / "report.md", paper_like(), context)
    text = (tmp_path / "report.md").read_text()
    assert "not tested" not in text
    assert "indicative only" in text  # 2 seeds of the full setting's 5
    assert text.count("**holds**") == sum(c.verdict == "holds" for c in claims) == 10
    full = dataclasses.replace(context, seeds=(0, 1, 2, 3, 4))
    assert paper.indicative_reasons(full) == []


@pytest.mark.parametrize(
    "is_subset, rounds, seeds, testable",
    [(False, 20_000, 2, True), (True, 20_000, 5, False), (False, 19_999, 5, False),
     (False, 20_000, 1, False)],
)  # fmt: skip
def test_which_runs_can_test_the_claims(
    is_subset: bool, rounds: int, seeds: int, testable: bool
) -> None:
    assert (paper.untested_reasons(is_subset, rounds, seeds) == []) is testable


@pytest.mark.parametrize("name", ["fig1", "fig2", "fig3", "table1", "quick"])
def test_the_shipped_configurations_are_of_the_papers_setting(name: str) -> None:
    config = packaged_config(name)
    assert paper.differences(config) == []
    assert paper.differences(with_overrides(config, rounds=10, seeds=[0])) == []


def test_other_settings_are_named() -> None:
    config = packaged_config("fig1")
    other = dataclasses.replace(
        config, m=5, sim=dataclasses.replace(config.sim, batch_size=32, dropout=0.1)
    )
    assert paper.differences(other) == [
        "m = 5 (paper: 18)",
        "sim.batch_size = 32 (paper: 16)",
        "sim.dropout = 0.1 (paper: 0.0)",
    ]


def beside_the_paper() -> list[RunRecord]:
    """The paper's six methods, and MD, Oort, a user's own scheduler (its import path) and a
    second ADCS variant of the same θ and R, two seeds each."""
    extra = [
        record(m, 0.2 + 0.01 * i, 0.7, seed=s)
        for i, m in enumerate(("md", "oort", "mine.sched:Mine"))
        for s in (0, 1)
    ]
    grad = [
        record("adcs", 0.33, 0.7, seed=s, params={"theta": 0.8, "refresh_every": 20,
                                                  "quality": "grad_norm"})
        for s in (0, 1)
    ]  # fmt: skip
    plain = [
        dataclasses.replace(r, params={**r.params, "quality": "loss"}, variant=r.variant + "-q")
        if r.method == "adcs" else r
        for r in paper_like()
    ]  # fmt: skip
    return plain + extra + grad


def test_every_variant_that_ran_is_in_the_papers_report_console_figures_and_table(
    tmp_path: Path,
) -> None:
    records = beside_the_paper()
    variants = {r.variant for r in records}
    context = ReportContext(
        name="mine", rounds=200, eval_every=100, m=18, n_clients=30, seeds=(0, 1),
        data_source="test data", is_subset=False, figures=("fig1.png",),
    )  # fmt: skip
    shown = paper.STUDY.report(tmp_path / "report.md", records, context)
    text = (tmp_path / "report.md").read_text()
    assert {s.series.label for s in shown.rows} >= {"MD", "Oort", "mine.sched:Mine"}
    assert len(shown.rows) == len(variants) == 16  # the console's table: every variant
    # the neutral report comes first, whole; the paper's sections are added to it
    assert text.index("## Every run, by variant") < text.index("## The paper's claims, checked")
    every = text[text.index("## Every run") : text.index("## Selection by group")]
    figure1 = text[text.index("## Figure 1") : text.index("## Table 1")]
    grad = "ADCS quality=grad_norm, refresh_every=20, theta=0.8"  # names in alphabetical order
    for label in ("MD", "Oort", "mine.sched:Mine", grad):
        assert f"| {label} |" in every and f"| {label} |" in figure1
    assert "| ADCS (θ=0.8, R=20) quality=loss |" in figure1  # told apart from grad_norm
    # Figure 1: its six, then every variant no figure of the paper shows (not Figs 2-3's)
    curves = paper.figure_series(records, "fig1")
    assert len(curves) == 10
    assert {paper.select_runs(records, s)[0].variant for s in curves[6:]} == {
        "md",
        "oort",
        "mine.sched:Mine",
        "adcs-theta=0.8-refresh_every=20-quality=grad_norm",
    }
    labels = [s.label for s in curves]
    assert len(set(labels)) == len(labels)
    table = table1_rows(records)
    assert len({r["method"] for r in table}) == len(table) == 10  # Fig. 1's six and four more
    assert {r["label"] for r in table} >= {"MD", "Oort", "mine.sched:Mine"}
