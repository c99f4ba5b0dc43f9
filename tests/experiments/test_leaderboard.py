"""The leaderboard: its methods, scores, ranks and ties, and whole runs (resumed, summarised)."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from adcs.data import FashionMNIST
from adcs.experiments.analysis import stats as stats_mod
from adcs.experiments.config import ConfigError, MethodConfig, config_from_dict
from adcs.experiments.run.runner import RunInterrupted, expand_runs, load_records
from adcs.leaderboard import ranking
from adcs.leaderboard import suite as lb
from adcs.leaderboard.ranking import is_random_baseline
from adcs.schedulers import ADCS, SCHEDULERS, Extra, Variants

WORKLOAD = """\
name = "{name}"
description = "A tiny workload"
m = {m}
seeds = [0, 1]

[data]
partition = "paper_groups"
n_groups = 3
clients_per_group = 2
train_per_client = 40
test_per_client = 10

[sim]
rounds = 6
eval_every = 2
batch_size = 4
local_lr = 0.002
"""
ADCS_POINTS = ADCS.leaderboard_variants
assert ADCS_POINTS is not None
SHIFTED = "tests.plugins.my_selection:Shifted"
"""A scheduler of the tests that declares its own leaderboard variants."""
SUMMARY = ("report.md", "leaderboard.csv", "ranks.csv", "summary.json", "summary.png")
REPRODUCIBLE = ("metrics.csv", "runs.csv", "selections.npz", "summary.json", "client_acc.npz")


def workload(tmp_path: Path, name: str, m: int = 3) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(WORKLOAD.format(name=name, m=m), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------
# the entries


def test_every_scheduler_of_the_table_is_an_entry_and_adcs_at_its_declared_points() -> None:
    methods = lb.leaderboard_methods()
    assert [m.name for m in methods if m.name != "adcs"] == [n for n in SCHEDULERS if n != "adcs"]
    # ADCS's declaration gives the same grids as the committed leaderboard ran (its files are
    # named after them): θ swept at R = 20, then fresh quality at θ = 0.8
    adcs_methods = [m for m in methods if m.name == "adcs"]
    assert adcs_methods == [
        MethodConfig("adcs", params=(("refresh_every", 20),),
                     sweep=(("theta", (0.6, 0.8, 0.9, 0.95)),)),
        MethodConfig("adcs", params=(("refresh_every", 20), ("theta", 0.8),
                                     ("fresh_quality", True))),
    ]  # fmt: skip
    config = config_from_dict({"name": "w", "m": 2, "seeds": [0], "methods": [{"name": "uniform"}]})
    runs = expand_runs(dataclasses.replace(config, methods=methods))
    adcs = [r.meta["params"] for r in runs if r.meta["method"] == "adcs"]
    assert len(runs) == len(SCHEDULERS) - 1 + len(ADCS_POINTS.values) + len(ADCS_POINTS.extras)
    assert len(adcs) == 5 and all(p["refresh_every"] == 20 for p in adcs)
    # the targets are set from the scheduler that declares itself random selection
    assert [n for n in SCHEDULERS if is_random_baseline(n)] == ["uniform"]


def test_a_scheduler_added_by_import_path_runs_at_the_points_it_declares() -> None:
    methods = lb.leaderboard_methods([SHIFTED, "uniform", SHIFTED])
    assert list(dict.fromkeys(m.name for m in methods)) == [*SCHEDULERS, SHIFTED]
    assert methods[:-2] == lb.leaderboard_methods()  # the table's entries first, once
    assert list(methods[-2:]) == [
        MethodConfig(SHIFTED, sweep=(("offset", (0, 2)),)),
        MethodConfig(SHIFTED, params=(("offset", 2), ("reverse", True))),
    ]


def test_a_bad_declaration_of_variants_is_refused() -> None:
    with pytest.raises(ValueError, match=r"published=0\.5 is not among values"):
        Variants(lever="theta", values=(0.6, 0.8), published=0.5)
    with pytest.raises(ValueError, match="the lever 'theta' cannot also be fixed"):
        Variants(lever="theta", values=(0.8,), published=0.8, fixed=(("theta", 0.8),))
    with pytest.raises(ValueError, match="sets \\['theta'\\], the lever or fixed"):
        Variants(lever="theta", values=(0.8,), published=0.8,
                 extras=(Extra("x", (("theta", 0.6),), "x", "x"),))  # fmt: skip
    with pytest.raises(ValueError, match="key must be an identifier"):
        Extra("fresh q", (("fresh_quality", True),), "fresh q", "fresh")


def test_entry_names_come_from_the_declaration() -> None:
    assert ADCS_POINTS.label("ADCS", {"theta": 0.8, "refresh_every": 20}) == "ADCS θ=0.8"
    fresh = {"theta": 0.8, "refresh_every": 20, "fresh_quality": True}
    assert ADCS_POINTS.label("ADCS", fresh) == "ADCS θ=0.8, fresh q"
    assert ADCS_POINTS.label("ADCS", {"theta": 0.6, "refresh_every": 5}) == "ADCS θ=0.6, R=5"
    assert ADCS_POINTS.is_reference({"theta": 0.8, "refresh_every": 20, "fresh_quality": False})
    assert not ADCS_POINTS.is_reference(fresh)
    assert ADCS_POINTS.lever_at({"theta": 0.9, "refresh_every": 5}) is None  # not at R = 20


def test_shipped_workloads_load_paper_first_and_unknown_names_are_refused() -> None:
    paths = lb.workload_paths()
    names = [p.stem for p in paths]
    assert names[0] == "paper" and names[1:] == sorted(names[1:])
    assert {"soft_skew", "dirichlet", "clients100", "m6", "bernoulli"} <= set(names)
    for path in paths:
        config = lb.load_workload(path)
        assert config.name == path.stem and len(config.seeds) >= 3
        assert config.methods == lb.leaderboard_methods()
    (cnn,) = lb.workload_paths(["cnn"])  # optional: only when named
    assert cnn.parent.name == "optional" and "cnn" not in names
    assert lb.load_workload(cnn).model.kind == "cnn"
    with pytest.raises(ConfigError, match=r"no leaderboard workload 'nope'; known: \["):
        lb.workload_paths(["nope"])


def test_a_workload_listing_methods_is_refused(tmp_path: Path) -> None:
    path = workload(tmp_path, "w")
    path.write_text(path.read_text() + '\n[[methods]]\nname = "uniform"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"lists no \[\[methods\]\]"):
        lb.load_workload(path)


def test_quick_workloads_take_the_quick_rounds_and_seeds(tmp_path: Path) -> None:
    config = lb.quick_workload(lb.load_workload(workload(tmp_path, "w")))
    assert config.sim.rounds == lb.QUICK["rounds"]
    assert tuple(config.seeds) == tuple(lb.QUICK["seeds"])


# ---------------------------------------------------------------------------------------------
# ties and ranks


def test_the_tie_test_is_scipys_paired_t_test_at_five_percent() -> None:
    rng = np.random.default_rng(3)
    agree = 0
    for _ in range(300):
        n = int(rng.integers(2, 7))
        a = rng.normal(0.5, 0.05, n)
        b = a - rng.normal(rng.uniform(-0.05, 0.05), 0.03, n)
        ours = lb.tied(dict(enumerate(a)), dict(enumerate(b)))
        p = stats.ttest_rel(a, b).pvalue
        agree += ours == (p >= 0.05)
    assert agree == 300


def test_paired_difference_uses_only_the_common_seeds() -> None:
    a = {0: 0.5, 1: 0.6, 2: 0.7, 9: 1.0}
    b = {0: 0.4, 1: 0.4, 2: 0.4}
    mean, half, n = lb.paired_difference(a, b)
    d = np.array([0.1, 0.2, 0.3])
    assert n == 3 and mean == pytest.approx(d.mean())
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3))
    assert lb.tied({0: 0.5}, {0: 0.5}) and not lb.tied({0: 0.5}, {0: 0.4})
    assert not lb.tied({0: math.nan, 1: 0.2}, {0: 0.1, 1: 0.2})
    assert not lb.tied({0: 0.5}, {1: 0.5})  # nothing in common


def test_the_p_value_is_scipys_paired_t_test_and_agrees_with_the_tie_test() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(2, 7))
        a = rng.normal(0.5, 0.05, n)
        b = a - rng.normal(rng.uniform(-0.05, 0.05), 0.03, n)
        ours = stats_mod.paired_p_value(dict(enumerate(a)), dict(enumerate(b)))
        # relative: the p-value is an incomplete beta function, good to a few ulps
        assert ours == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
        assert (ours >= 0.05) == lb.tied(dict(enumerate(a)), dict(enumerate(b)))
    assert stats_mod.paired_p_value({0: 0.5, 1: 0.6}, {0: 0.5, 1: 0.6}) == 1.0  # no spread, equal
    assert stats_mod.paired_p_value({0: 0.5, 1: 0.6}, {0: 0.4, 1: 0.5}) == 0.0  # no spread, apart
    assert stats_mod.paired_p_value({0: 0.5}, {0: 0.5}) == 1.0
    assert stats_mod.paired_p_value({0: math.nan, 1: 0.2}, {0: 0.1, 1: 0.2}) == 0.0
    assert stats_mod.paired_p_value({0: 0.5}, {1: 0.5}) == 0.0  # nothing in common


def _holm_by_steps(p: list[float], alpha: float) -> list[bool]:
    """Holm's procedure as its paper states it: reject in increasing order of p while
    p_(j) < alpha / (k - j + 1), then stop."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    rejected = [False] * len(p)
    for j, i in enumerate(order):
        if p[i] >= alpha / (len(p) - j):
            break
        rejected[i] = True
    return rejected


def test_holms_adjusted_p_values_reject_what_the_step_down_procedure_rejects() -> None:
    assert stats_mod.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats_mod.holm([0.2]) == [0.2] and stats_mod.holm([]) == []
    assert stats_mod.holm([0.6, 0.5]) == [1.0, 1.0]  # capped at 1
    rng = np.random.default_rng(11)
    for _ in range(300):
        p = list(rng.uniform(0, 0.1, int(rng.integers(1, 12))) ** rng.uniform(0.5, 2))
        adjusted = stats_mod.holm(p)
        assert [a < 0.05 for a in adjusted] == _holm_by_steps(p, 0.05)


def test_holm_ties_what_a_test_alone_would_call_behind() -> None:
    best = {0: 0.60, 1: 0.62, 2: 0.61}
    entries = {
        "best": best,
        "a": {0: 0.57, 1: 0.60, 2: 0.59},  # d = 0.03, 0.02, 0.02
        "b": {0: 0.58, 1: 0.60, 2: 0.60},  # d = 0.02, 0.02, 0.01
        "c": {0: 0.58, 1: 0.595, 2: 0.60},  # d = 0.02, 0.025, 0.01
    }
    raw = {k: stats_mod.paired_p_value(best, v) for k, v in entries.items() if k != "best"}
    assert raw["a"] < raw["b"] < 0.05 <= raw["c"]  # a and b behind when each is read alone ...
    plain = lb.rank_workload(entries, adjust=False)
    holm = lb.rank_workload(entries)
    assert not plain["a"].tied and not plain["b"].tied and plain["c"].tied
    assert plain["a"].p_value == pytest.approx(raw["a"])
    # ... but 3 · p_a ≥ 0.05: Holm rejects nothing, every one of the three is tied
    assert 3 * raw["a"] >= 0.05
    assert holm["a"].tied and holm["b"].tied and holm["c"].tied
    assert holm["a"].p_value == pytest.approx(3 * raw["a"])
    assert holm["b"].p_value == pytest.approx(max(3 * raw["a"], 2 * raw["b"]))
    assert math.isnan(holm["best"].p_value) and holm["best"].best and holm["best"].tied


def test_the_worst_auc_is_the_trapezoid_area_over_the_rounds_spanned() -> None:
    rounds = np.array([0, 10, 30])
    values = np.array([0.0, 0.5, 0.5])
    # 10 rounds from 0 to 0.5 (area 2.5), then 20 at 0.5 (area 10), over 30 rounds
    assert ranking.curve_area(rounds, values) == pytest.approx(12.5 / 30)
    assert ranking.curve_area(np.array([5]), np.array([0.3])) == 0.3
    assert math.isnan(ranking.curve_area(rounds, np.array([0.1, math.nan, 0.2])))
    assert math.isnan(ranking.curve_area(np.array([]), np.array([])))


def test_ranks_share_equal_means_put_non_finite_last_and_mark_the_best_and_ties() -> None:
    entries = {
        "a": {0: 0.50, 1: 0.52, 2: 0.54},
        "b": {0: 0.60, 1: 0.61, 2: 0.62},  # the best, clearly
        "c": {0: 0.50, 1: 0.52, 2: 0.54},  # the same mean as a
        "d": {0: 0.62, 1: 0.55, 2: 0.64},  # noisy: not told apart from b
        "e": {0: math.nan, 1: 0.9, 2: 0.9},
    }
    placing = lb.rank_workload(entries)
    assert placing["b"].rank == 1 and placing["b"].best and placing["b"].tied
    assert placing["d"].rank == 2 and placing["d"].tied and not placing["d"].best
    assert placing["a"].rank == placing["c"].rank == 3.5
    assert not placing["a"].tied
    assert placing["e"].rank == 5 and math.isnan(placing["e"].mean) and not placing["e"].tied


def test_the_overall_table_averages_ranks_and_counts_bests_and_ties() -> None:
    w1 = {"x": {0: 0.9, 1: 0.91}, "y": {0: 0.5, 1: 0.52}}
    w2 = {"x": {0: 0.4, 1: 0.42}, "y": {0: 0.8, 1: 0.81}, "z": {0: 0.1, 1: 0.12}}
    rows, placings = lb.rank_table({"w1": w1, "w2": w2})
    by = {r.entry: r for r in rows}
    assert by["x"].mean_rank == 1.5 and by["y"].mean_rank == 1.5 and by["z"].mean_rank == 3
    assert by["x"].best == 1 and by["y"].best == 1 and by["z"].workloads == 1
    assert by["x"].ranks == {"w1": 1.0, "w2": 2.0}
    assert by["x"].marks["w1"] == "★" and by["y"].marks["w2"] == "★"
    assert [r.entry for r in rows] == ["x", "y", "z"]  # equal mean ranks: by ties, then name
    assert placings["w2"]["y"].best


def test_an_entry_that_ran_on_fewer_workloads_is_listed_last_without_a_place() -> None:
    from adcs.leaderboard.report import _rank_section

    w1 = {"x": {0: 0.5, 1: 0.52}, "y": {0: 0.4, 1: 0.41}}
    w2 = {"x": {0: 0.5, 1: 0.51}, "y": {0: 0.4, 1: 0.42}, "z": {0: 0.9, 1: 0.91}}
    rows, _ = lb.rank_table({"w1": w1, "w2": w2})
    assert [(r.entry, r.mean_rank) for r in rows] == [("x", 1.5), ("y", 2.5), ("z", 1.0)]
    assert [r.entry for r in ranking.placed(rows)] == ["x", "y"]
    text = "\n".join(_rank_section(["w1", "w2"], {m: rows for m in ranking.METRICS}))
    assert "| 1 | x |" in text and "| 2 | y |" in text and "| — | z | 1.00 |" in text
    assert text.splitlines()[4].endswith("| 1 ★ | 2 |")  # x: the best on w1, its place on w2
    assert text.splitlines()[6].endswith("| — | 1 ★ |")  # z: did not run on w1
    assert "without a place: z (ran on 1 of 2)" in text


def test_the_preamble_names_a_table_row_that_ran_on_some_workloads_only() -> None:
    from types import SimpleNamespace

    from adcs.leaderboard.report import _preamble

    def score(method: str) -> Any:
        return SimpleNamespace(method=method, label=method)

    everyone = [score(name) for name in SCHEDULERS if name != "uniform"]
    scores = {"w1": everyone, "w2": [*everyone, score("uniform")]}
    context = {"seeds": [0, 1, 2], "is_subset": False}
    text = " ".join(
        _preamble(
            ["w1", "w2"], scores, {"w1": context, "w2": context}, False, [], {}, "leaderboard"
        )
    )
    assert "at its defaults; uniform only on w2, added to the table between their runs." in text


# ---------------------------------------------------------------------------------------------
# whole leaderboards


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory, synthetic: FashionMNIST) -> Path:
    tmp = tmp_path_factory.mktemp("board")
    configs = [lb.load_workload(workload(tmp, "alpha")), lb.load_workload(workload(tmp, "beta", 2))]
    outcome = lb.run_leaderboard(configs, tmp / "out", dataset=synthetic, workers=2)
    assert outcome.workloads == ["alpha", "beta"]
    return outcome.folder


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_leaderboard_writes_each_workload_and_its_summary(board: Path) -> None:
    for name in (*SUMMARY, "alpha.png", "beta.png", "manifest.json"):
        assert (board / name).is_file(), name
    for w in ("alpha", "beta"):
        assert (board / w / "report.md").is_file()
        entries = len(SCHEDULERS) - 1 + len(ADCS_POINTS.values) + len(ADCS_POINTS.extras)
        assert len(load_records(board / w)) == 2 * entries  # two seeds
    manifest = json.loads((board / "manifest.json").read_text())
    assert manifest["kind"] == "leaderboard" and manifest["workloads"] == ["alpha", "beta"]


def test_the_summary_numbers_are_those_of_the_workloads_runs(board: Path) -> None:
    rows = _read_csv(board / "leaderboard.csv")
    assert {r["workload"] for r in rows} == {"alpha", "beta"}
    for w in ("alpha", "beta"):
        runs = _read_csv(board / w / "runs.csv")
        mine = [r for r in rows if r["workload"] == w]
        assert len(mine) == len({r["variant"] for r in runs})
        for row in mine:
            worst = [float(r["final_worst_acc"]) for r in runs if r["variant"] == row["variant"]]
            avg = [float(r["final_avg_acc"]) for r in runs if r["variant"] == row["variant"]]
            assert float(row["worst"]) == pytest.approx(np.mean(worst))
            assert float(row["avg"]) == pytest.approx(np.mean(avg))
            updates = [float(r["client_updates"]) for r in runs if r["variant"] == row["variant"]]
            assert float(row["client_updates"]) == pytest.approx(np.mean(updates))
        uniform = [float(r["final_worst_acc"]) for r in runs if r["method"] == "uniform"]
        target = float(mine[0]["target_worst"])
        assert target == pytest.approx(lb.TARGET_FRACTION * np.mean(uniform))
        # ranks on the workload agree with the means
        means = {r["entry"]: float(r["worst"]) for r in mine}
        ranks = {r["entry"]: float(r["rank_worst"]) for r in mine}
        for e1 in means:
            for e2 in means:
                if means[e1] > means[e2]:
                    assert ranks[e1] < ranks[e2]
        best = [r["entry"] for r in mine if r["best_worst"] == "true"]
        assert best and all(means[b] == max(means.values()) for b in best)


def test_the_ten_percent_quantile_is_computed_from_every_clients_accuracy(board: Path) -> None:
    rows = {(r["workload"], r["variant"]): r for r in _read_csv(board / "leaderboard.csv")}
    records = load_records(board / "alpha")
    with np.load(board / "alpha" / "client_acc.npz") as npz:
        acc = {k: npz[k] for k in npz.files}
    variant = records[0].variant
    finals = []
    for r in (r for r in records if r.variant == variant):
        q = np.quantile(acc[r.run_id].astype(np.float64), 0.1, axis=-1)
        finals.append(q[r.tail].mean())
    assert float(rows[("alpha", variant)]["p10"]) == pytest.approx(np.mean(finals))


def test_the_report_says_where_adcs_wins_and_loses_from_the_numbers(board: Path) -> None:
    text = (board / "report.md").read_text()
    assert "## Where ADCS wins and where it loses" in text
    assert "## Overall ranks" in text and "## ADCS's θ on each workload" in text
    assert "## Workload: alpha" in text and "## Workload: beta" in text
    doc = json.loads((board / "summary.json").read_text())
    top = doc["ranks"]["worst"][0]
    sharing = [r["entry"] for r in doc["ranks"]["worst"] if r["mean_rank"] == top["mean_rank"]]
    if len(sharing) == 1:
        assert f"the lowest mean rank is {top['entry']}'s ({top['mean_rank']:.2f}" in text
    else:  # a lowest mean rank several share is no one's alone
        assert f"the lowest mean rank, {top['mean_rank']:.2f}, is shared by" in text
        assert f"the lowest mean rank is {top['entry']}'s" not in text
    paper = next(e for e in doc["workloads"]["alpha"]["entries"] if e["entry"] == "ADCS θ=0.8")
    if paper["worst"]["tied"]:
        assert "**Loses** on 2" not in text
    # what the report says of each workload's table is the summary's
    for w in ("alpha", "beta"):
        for e in doc["workloads"][w]["entries"]:
            assert f"| {e['entry']} |" in text


def test_a_declared_schedulers_variants_get_their_own_report_sections(
    tmp_path: Path, synthetic: FashionMNIST
) -> None:
    config = lb.load_workload(workload(tmp_path, "alpha"), entries=[SHIFTED])
    mine = tuple(m for m in config.methods if m.name in ("uniform", SHIFTED))
    config = dataclasses.replace(config, methods=mine)
    folder = lb.run_leaderboard([config], tmp_path / "out", dataset=synthetic, workers=1).folder
    text = (folder / "report.md").read_text()
    assert "## Where Shifted wins and where it loses" in text
    assert "## Shifted's k on each workload" in text and "ADCS" not in text
    assert "Shifted at k ∈ {0, 2} and with reversed at k = 2: the points it declares" in text
    doc = json.loads((folder / "summary.json").read_text())
    entries = {e["entry"]: e["worst"]["mean"] for e in doc["workloads"]["alpha"]["entries"]}
    assert set(entries) == {"Uniform", "Shifted k=0", "Shifted k=2", "Shifted k=2, reversed"}
    point = doc[f"{SHIFTED}_offset"]["alpha"]
    best = 0 if entries["Shifted k=0"] > entries["Shifted k=2"] else 2  # ties: the published
    assert point["best_offset"] == best
    assert point["best_worst"] == entries[f"Shifted k={best}"]
    assert point["paper_worst"] == entries["Shifted k=2"]
    assert point["rev_worst"] == entries["Shifted k=2, reversed"]
    assert "- **Shifted k=2, reversed** (the highest indices first) is the best or tied" in text


def test_an_interrupted_leaderboard_resumes_to_the_same_files(
    tmp_path: Path, synthetic: FashionMNIST, board: Path
) -> None:
    configs = [
        lb.load_workload(workload(tmp_path, "alpha")),
        lb.load_workload(workload(tmp_path, "beta", 2)),
    ]

    def progress(name: str) -> Any:
        def report(done: int, total: int) -> None:
            if name == "beta" and done >= 3:
                raise KeyboardInterrupt

        return report

    out = tmp_path / "out"
    with pytest.raises(RunInterrupted, match="--resume") as info:
        lb.run_leaderboard(configs, out, dataset=synthetic, progress=progress,
                           checkpoint_every=1)  # fmt: skip
    assert info.value.resumable and not out.exists()
    states: list[tuple[str, str]] = []
    lb.run_leaderboard(configs, out, dataset=synthetic, resume=True,
                       on_workload=lambda w, s: states.append((w, s)))  # fmt: skip
    assert states == [("alpha", "done"), ("beta", "resume")]
    for name in ("leaderboard.csv", "ranks.csv", "summary.json", "report.md"):
        assert (out / name).read_bytes() == (board / name).read_bytes(), name
    for w in ("alpha", "beta"):
        for name in REPRODUCIBLE:
            assert (out / w / name).read_bytes() == (board / w / name).read_bytes(), (w, name)


def test_a_finished_workload_joins_a_leaderboard_which_keeps_its_own_and_reranks_all(
    tmp_path: Path, board: Path
) -> None:
    import shutil

    small = tmp_path / "small"  # the board as if it had run alpha alone
    shutil.copytree(board, small)
    shutil.rmtree(small / "beta")
    doc = json.loads((small / "manifest.json").read_text())
    doc["workloads"] = ["alpha"]
    beta_config = doc["configs"].pop("beta")
    (small / "manifest.json").write_text(json.dumps(doc))
    alpha_before = {p.name: p.read_bytes() for p in (small / "alpha").iterdir()}
    names = lb.join_leaderboard(small, [board / "beta"], command="join beta")
    assert names == ["alpha", "beta"]
    assert {p.name: p.read_bytes() for p in (small / "alpha").iterdir()} == alpha_before
    for name in REPRODUCIBLE:
        assert (small / "beta" / name).read_bytes() == (board / "beta" / name).read_bytes()
    for name in ("leaderboard.csv", "ranks.csv", "summary.json", "report.md"):
        assert (small / name).read_bytes() == (board / name).read_bytes(), name
    doc = json.loads((small / "manifest.json").read_text())
    assert doc["workloads"] == ["alpha", "beta"] and doc["configs"]["beta"] == beta_config
    assert [j["workload"] for j in doc["joined"]] == ["beta"]
    with pytest.raises(ConfigError, match="already holds a workload 'beta'"):
        lb.join_leaderboard(small, [board / "beta"])
    with pytest.raises(ConfigError, match="no finished leaderboard"):
        lb.join_leaderboard(small / "alpha", [board / "beta"])
    with pytest.raises(ConfigError, match="no finished results folder"):
        lb.join_leaderboard(small, [tmp_path / "nothing"])


def test_an_entry_run_later_joins_a_workload_which_keeps_its_runs_and_reranks(
    tmp_path: Path, board: Path, synthetic: FashionMNIST
) -> None:
    import shutil

    from adcs.experiments.run.runner import run_experiment

    copy = tmp_path / "copy"
    shutil.copytree(board, copy)
    doc = json.loads((copy / "alpha" / "manifest.json").read_text())["config"]
    later = tmp_path / "later" / "alpha"  # named as the workload it joins
    run_experiment(
        config_from_dict({**doc, "methods": [{"name": SHIFTED}]}), later, dataset=synthetic
    )
    before = load_records(copy / "alpha")
    assert lb.join_entries(copy, [later], command="join later") == ["alpha"]
    after = {r.run_id: r for r in load_records(copy / "alpha")}
    shifted = [r for r in load_records(later)]
    assert list(after) == [*(r.run_id for r in before), *(r.run_id for r in shifted)]
    for r in [*before, *shifted]:  # every run as it was computed
        np.testing.assert_array_equal(after[r.run_id].worst_acc, r.worst_acc)
    manifest = json.loads((copy / "manifest.json").read_text())
    assert manifest["configs"]["alpha"]["methods"][-1] == {"name": SHIFTED}
    assert manifest["entries_joined"][0]["workload"] == "alpha"
    ranks = {r["entry"]: r for r in _read_csv(copy / "ranks.csv") if r["metric"] == "worst"}
    assert ranks["Shifted k=0"]["workloads"] == "1" and ranks["Shifted k=0"]["place"] == ""
    assert f"{SHIFTED} only on alpha" in " ".join((copy / "report.md").read_text().split())
    assert not list(copy.glob(".*"))  # no staging or old folder left
    with pytest.raises(ConfigError, match="named as no workload"):
        lb.join_entries(copy, [tmp_path / "later"])
    with pytest.raises(ConfigError, match=r"is in .* and in"):  # the runs are there already
        lb.join_entries(copy, [later])
    assert [r.run_id for r in load_records(copy / "alpha")] == list(after)


def test_resuming_with_other_workloads_is_refused_with_the_difference_named(
    tmp_path: Path, synthetic: FashionMNIST
) -> None:
    configs = [lb.load_workload(workload(tmp_path, "alpha"))]

    def stop(name: str) -> Any:
        def report(done: int, total: int) -> None:
            if done >= 2:
                raise KeyboardInterrupt

        return report

    out = tmp_path / "out"
    with pytest.raises(RunInterrupted):
        lb.run_leaderboard(configs, out, dataset=synthetic, progress=stop, checkpoint_every=1)
    other = [lb.load_workload(workload(tmp_path, "alpha", 2))]
    with pytest.raises(
        ConfigError, match=r"workloads differ .* in alpha\.m \(interrupted run: 3, now: 2\)"
    ):
        lb.run_leaderboard(other, out, dataset=synthetic, resume=True)
    renamed = [lb.load_workload(workload(tmp_path, "gamma"))]
    with pytest.raises(ConfigError, match=r"ran the workloads \['alpha'\], not \['gamma'\]"):
        lb.run_leaderboard(renamed, out, dataset=synthetic, resume=True)


def test_workload_names_must_be_distinct(tmp_path: Path, synthetic: FashionMNIST) -> None:
    config = lb.load_workload(workload(tmp_path, "alpha"))
    with pytest.raises(ConfigError, match="distinct"):
        lb.run_leaderboard([config, config], tmp_path / "out", dataset=synthetic)
    assert not (tmp_path / "out").exists()


def test_the_summary_can_be_rewritten_from_the_workloads_alone(tmp_path: Path, board: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(board, copy)
    for name in SUMMARY:
        (copy / name).unlink()
    lb.summarize_leaderboard(copy)
    for name in ("leaderboard.csv", "ranks.csv", "summary.json", "report.md"):
        assert (copy / name).read_bytes() == (board / name).read_bytes(), name


def test_any_result_column_can_be_ranked_lower_first_for_a_loss(
    tmp_path: Path, board: Path
) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(board, copy)
    lb.summarize_leaderboard(copy, metrics=["test_loss", "p10_acc"])
    rows = [r for r in _read_csv(copy / "leaderboard.csv") if r["workload"] == "alpha"]
    runs = _read_csv(board / "alpha" / "runs.csv")
    for row in rows:  # the mean over seeds of each run's final test loss
        finals = [float(r["final_test_loss"]) for r in runs if r["variant"] == row["variant"]]
        assert float(row["test_loss"]) == pytest.approx(np.mean(finals))
    loss = {r["entry"]: float(r["test_loss"]) for r in rows}
    best = [r["entry"] for r in rows if r["best_test_loss"] == "true"]
    assert best and all(loss[b] == min(loss.values()) for b in best)  # lower is better
    ranked = {r["metric"] for r in _read_csv(copy / "ranks.csv")}
    assert ranked == {"worst", "p10", "avg", "test_loss", "p10_acc"}
    with pytest.raises(ValueError, match="cannot rank by 'acc_g'"):
        lb.summarize_leaderboard(copy, metrics=["acc_g"])


def test_a_table_row_without_runs_is_named_in_the_report_not_claimed(
    tmp_path: Path, board: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a leaderboard runs every row of the table; a row added later has no runs in an earlier
    # leaderboard, and its report must not claim to cover it
    import shutil

    from adcs.schedulers import Uniform

    assert "added to the table after this run" not in (board / "report.md").read_text()
    copy = tmp_path / "copy"
    shutil.copytree(board, copy)
    monkeypatch.setitem(SCHEDULERS, "newcomer", Uniform)
    lb.summarize_leaderboard(copy)
    report = (copy / "report.md").read_text()
    assert "name table at its defaults (except newcomer, added to the table after this run)" in (
        " ".join(report.split())
    )


def test_two_entries_of_one_class_keep_rows_of_their_own() -> None:
    from adcs.leaderboard.ranking import entry_labels, rank_table, scores_of

    from .records import record

    runs = [
        record("adcs", worst, 0.8, seed=s,
               params={"theta": 0.8, "refresh_every": 20, "quality": quality})
        for quality, worst in (("loss", 0.5), ("grad_norm", 0.3))
        for s in (0, 1)
    ] + [record("uniform", 0.4, 0.8, seed=s) for s in (0, 1)]  # fmt: skip
    labels = entry_labels(runs)  # both are "ADCS θ=0.8" by ADCS's declaration alone
    assert sorted(labels.values()) == [
        "ADCS θ=0.8, quality=grad_norm", "ADCS θ=0.8, quality=loss", "Uniform"
    ]  # fmt: skip
    scores, _ = scores_of("w", runs, {}, labels)
    rows, placings = rank_table({"w": {s.label: s.ranked("worst") for s in scores}})
    assert [r.entry for r in rows] == [
        "ADCS θ=0.8, quality=loss", "Uniform", "ADCS θ=0.8, quality=grad_norm"
    ]  # fmt: skip
    assert placings["w"]["ADCS θ=0.8, quality=grad_norm"].rank == 3.0


def test_a_workload_whose_schedulers_had_little_to_choose_is_named_from_its_selections(
    tmp_path: Path,
) -> None:
    from adcs.leaderboard.report import same_selections

    def selections(other: list[list[int]], available: list[int]) -> str | None:
        a = {"selected/a-seed=0": np.array([[0, 1], [2, 3]]), "selected/b-seed=0": other}
        np.savez(tmp_path / "selections.npz", **a, **{"n_available/seed0": np.array(available)})
        return same_selections(tmp_path)

    assert selections([[1, 2], [3, 1]], [3, 4]) is None  # a choice in every round, used
    assert selections([[1, 0], [3, 1]], [2, 4]) == (
        "in 50% of the rounds no more than m = 2 clients were available (3.0 on average): every "
        "scheduler then selects every available client, so the entries can differ only in the "
        "other rounds"
    )
    said = selections([[1, 0], [3, 2]], [2, 2])  # the same clients, in another order
    assert said == (
        "every entry selected the same clients in every round of every seed: in every round no "
        "more than m = 2 clients were available (2.0 on average), so every scheduler selects "
        "every available client"
    )
