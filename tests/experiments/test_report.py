"""The report: claims computed from the numbers (made to hold, and made to fail), Table 1."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from adcs.experiments.report import (
    PAPER_TABLE1,
    PAPER_TV,
    Claim,
    ClaimTolerances,
    ReportContext,
    RunRecord,
    Series,
    evaluate_claims,
    summarize,
    t_interval,
    table1_rows,
    write_report,
    write_table1,
)

ROUNDS = np.arange(0, 1001, 100)
UNIFORM_SHARE = np.full(10, 0.1)


def record(
    method: str,
    worst: float,
    avg: float,
    *,
    seed: int = 0,
    theta: float | None = None,
    refresh_every: int | None = None,
    share: np.ndarray = UNIFORM_SHARE,
    wiggle: float = 0.0,
) -> RunRecord:
    """A run whose accuracies ramp up to ``worst``/``avg`` and stay there (± ``wiggle``)."""
    ramp = np.minimum(1.0, np.linspace(0.2, 1.5, ROUNDS.size))
    alt = wiggle * (-1.0) ** np.arange(ROUNDS.size)
    variant = method if theta is None else f"{method}-theta={theta}-refresh_every={refresh_every}"
    return RunRecord(
        run_id=f"{variant}-seed={seed}",
        variant=variant,
        method=method,
        seed=seed,
        theta=theta,
        refresh_every=refresh_every,
        params={} if theta is None else {"theta": theta, "refresh_every": refresh_every},
        eval_rounds=ROUNDS,
        worst_acc=worst * ramp + alt,
        avg_acc=avg * ramp,
        test_loss=np.linspace(2.0, 0.5, ROUNDS.size),
        group_share=np.asarray(share, dtype=np.float64),
        tv_to_uniform=0.5 * float(np.abs(np.asarray(share) - 0.1).sum()),
        client_updates=18_000,
        loss_evals=0,
        wall_s=1.0,
    )


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
            theta, r = (0.8, 20) if method == "adcs" else (None, None)
            out.append(
                record(method, worst[method] + jitter, avg[method], seed=s, theta=theta,
                       refresh_every=r, share=skewed(tv[method]))
            )  # fmt: skip
        for theta, w, a in [(0.2, 0.50 if f else 0.25, 0.7), (0.6, 0.48, 0.79 if f else 0.81)]:
            out.append(record("adcs", w, a, seed=s, theta=theta, refresh_every=20))
        fig3 = {1: 0.50, 5: 0.45 if f else 0.499, 100: 0.50, 500: 0.50 if f else 0.40}
        for r, w in fig3.items():
            wig = 0.0 if f else (0.03 if r == 500 else 0.0)
            wig = 0.03 if (f and r == 1) else wig
            out.append(record("adcs", w, 0.8, seed=s, theta=0.8, refresh_every=r, wiggle=wig))
    return out


def by_key(claims: list[Claim]) -> dict[str, Claim]:
    return {c.key: c for c in claims}


def test_t_interval_matches_hand_computation() -> None:
    mean, half = t_interval(np.array([[1.0], [2.0], [3.0]]))
    assert mean[0] == pytest.approx(2.0)
    assert half[0] == pytest.approx(4.302652729911275 / math.sqrt(3))  # t_{0.975, 2} · s/√n
    _, half1 = t_interval(np.array([[1.0]]))
    assert np.isnan(half1).all()


def test_summary_averages_the_tail_then_the_seeds() -> None:
    runs = [record("uniform", 0.3, 0.7, seed=0), record("uniform", 0.5, 0.9, seed=1)]
    summ = summarize(runs, Series("Uniform", "uniform"), tail_fraction=0.1)
    assert summ is not None
    assert summ.n_seeds == 2
    assert summ.worst == pytest.approx(0.4)
    assert summ.avg == pytest.approx(0.8)
    assert summ.tail_rounds == (900, 1000)  # the last ceil(0.1 · 11) = 2 evaluations
    assert summarize(runs, Series("OCS", "ocs")) is None


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
        r for r in paper_like() if r.theta in (None, 0.8) and r.refresh_every in (None, 20)
    ]
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
    with pytest.raises(ValueError, match="tail_fraction"):
        ClaimTolerances(tail_fraction=0.0)


def test_table1_uses_mean_shares_and_sits_beside_the_paper(tmp_path: Path) -> None:
    runs = [
        record("ocs", 0.4, 0.8, seed=0, share=skewed(0.2)),
        record("ocs", 0.4, 0.8, seed=1, share=skewed(0.1)),
        record("uniform", 0.3, 0.8, share=np.asarray(PAPER_TABLE1["uniform"])),
    ]
    rows = {r["method"]: r for r in table1_rows(runs)}
    assert rows["ocs"]["tv"] == pytest.approx(0.15)  # TV of the mean shares
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


def test_report_states_verdicts_and_when_they_are_indicative(tmp_path: Path) -> None:
    context = ReportContext(
        name="quick", rounds=1000, eval_every=100, m=18, n_clients=30, seeds=(0, 1),
        data_source="test data", is_subset=True, quick=True, figures=("fig1.png",),
    )  # fmt: skip
    claims = write_report(tmp_path / "report.md", paper_like(), context)
    text = (tmp_path / "report.md").read_text()
    assert "indicative only" in text
    assert "shipped" in text and "T = 1000" in text
    assert "![fig1](fig1.png)" in text
    assert text.count("**holds**") == sum(c.verdict == "holds" for c in claims) == 10
    full = ReportContext(
        name="full", rounds=20_000, eval_every=100, m=18, n_clients=30, seeds=(0, 1, 2, 3, 4),
        data_source="official", is_subset=False,
    )  # fmt: skip
    assert full.indicative_only == []
