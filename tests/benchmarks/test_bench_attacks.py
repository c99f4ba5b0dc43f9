"""Smoke test of the attack suite: its plan, its run on a few rounds, and its results folder."""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.adversary import Defence, selection_rates
from adcs.data import load_subset
from adcs.experiments.config import ConfigError
from benchmarks import bench_attacks


def test_the_shipped_suite_plans_every_attack_once():
    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    plan = bench_attacks.plan_suite(config, suite)
    methods, seeds = len(config.methods), len(config.seeds)
    lies, ks, poisons = len(suite.lies), len(suite.k), len(suite.poisons)
    believers = methods - len(suite.blind)
    family_runs = sum(  # each at its k: off, bound naive (unless false), bound adaptive
        len(suite.ks_of(keys))
        * (int(keys.get("undefended", True)) + 1 + int(keys.get("naive", True)))
        for _, keys in suite.families
    )
    expected = seeds * (
        3 * methods  # no attack: off, on, on+robust
        + believers * lies * ks * 3  # capture: off, on naive, on adaptive
        + methods * poisons * ks * 3  # poison: off, on+robust naive and adaptive
        + len(suite.cost_methods) * len(suite.costs)
        + methods  # no attack with the bounds
        + methods * family_runs  # families (every method)
    )
    assert len(plan) == expected
    ids = [p.run_id for p in plan]
    assert len(set(ids)) == len(ids)
    assert not any(p.block == "capture" and p.method == "uniform" for p in plan)
    by_id = {p.run_id: p for p in plan}
    for p in plan:
        assert p.baseline in by_id and by_id[p.baseline].attack == "none"
        if p.k:
            assert len(p.malicious) == p.k
    k1 = {p.seed: p.malicious for p in plan if p.k == 1}
    k3 = {p.seed: p.malicious for p in plan if p.k == 3}
    assert all(set(k1[s]) <= set(k3[s]) for s in config.seeds)  # nested


def test_bad_suites_are_refused(tmp_path: Path):
    path = tmp_path / "s.toml"
    text = bench_attacks.DEFAULT_CONFIG.read_text()
    path.write_text(text.replace('robust = "norm_clip"', 'robust = "mode"'))
    with pytest.raises(ConfigError, match="suite"):
        bench_attacks.load_suite(path)
    path.write_text(text.replace("\n[suite]\n", "\n[suite]\nspeed = 3\n"))
    with pytest.raises(ConfigError, match=r"suite\.speed"):
        bench_attacks.load_suite(path)
    for family in ("gone = { absent = true }", "absent = { factor = 10.0 }"):
        path.write_text(text.replace("[suite.families]\n", f"[suite.families]\n{family}\n"))
        with pytest.raises(ConfigError, match="the family named 'absent', and only they"):
            bench_attacks.load_suite(path)
    assert bench_attacks.main(["--config", str(path)]) == 2


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--k", "0"], "suite.k must be distinct integers >= 1, got [0]"),
        (["--k", "1,1"], "suite.k must be distinct integers >= 1, got [1, 1]"),
        (["--family-k", "40"], "suite.k=40 leaves no honest client"),
        (["--k", "a"], "--k must be comma-separated integers, got 'a'"),
        (["--seeds", "0,x"], "--seeds must be comma-separated integers, got '0,x'"),
        (["--rounds", "0"], "--rounds must be >= 1, got 0"),
        (["--workers", "0"], "--workers must be >= 1, got 0"),
        (["--methods", "nope"], "--methods: no method ['nope'] in the suite's"),
    ],
)
def test_bad_flags_are_one_error_line(tmp_path: Path, capsys, flags, message):
    # each stopped with a traceback (or, --k 1,1, with two runs of one id) before any run
    assert bench_attacks.main([*flags, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_short_suite_writes_its_results(tmp_path: Path, capsys):
    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    config = bench_attacks._with_rounds(config, 4, [0])
    suite = dataclasses.replace(
        suite,
        k=(1,),
        lies=(("loss",), ("loss", "direction")),
        poisons=("sign_flip",),
        costs=(("corroborate", Defence(corroborate=True)),),
        families=(("sleeper", {"cosine": 0.5, "factor": 10.0, "start": 2}),),
        family_k=(3,),
    )
    out = tmp_path / "attacks"
    measured = bench_attacks.run_suite(config, suite, out, dataset=load_subset(), workers=1)
    names = {p.name for p in out.iterdir()}
    assert {"runs.csv", "selections.npz", "client_acc.npz", "report.md", "manifest.json"} <= names
    report = (out / "report.md").read_text()
    assert "Capture ratio, k = 1" in report and "No-attack cost" in report and "The goal" in report
    assert "How capturable each scheduler is" in report
    for method in ("powerofchoice", "ocs", "divfl", "adcs"):
        assert f"- **{method}" in report  # a plain verdict for every scheduler that reads reports
    assert "- **uniform**: reads no client statistics" in report
    assert "| sleeper | 3 | bound, adaptive | uniform |" in report and "| coalition |" in report
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert (
        len(rows) == len(measured) == len(json.loads((out / "manifest.json").read_text())["runs"])
    )
    with np.load(out / "selections.npz") as selections:
        for row in rows:
            since = int(row["since"])  # a sleeper's rates count the rounds from its start
            rates = selection_rates(selections[f"selected/{row['run_id']}"][since:], 30)
            liars = json.loads(row["malicious"])
            np.testing.assert_allclose(json.loads(row["liar_rates"]), rates[liars], atol=1e-6)
    assert "runs (clean" in capsys.readouterr().out
    # a second run may replace its own results, never another folder
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a results folder"):
        bench_attacks.run_suite(config, suite, tmp_path / "other", dataset=load_subset())


def test_the_verdict_names_the_lies_that_capture_a_scheduler():
    """A liar at 3x its no-attack rate is captured, one at 1.2x is not, one lifted to every round
    is; rates sit side by side."""
    n, liar = 30, 4

    def measured(attack: str, rate: float, clean: float, defence: str = "off") -> Any:
        planned = bench_attacks.Planned(
            run_id=f"adcs/{defence}/{attack}", block="capture", method="adcs", seed=0,
            defence=defence, attack=attack, k=1, adaptive=False, malicious=(liar,),
            baseline="adcs/off/none", spec=None,  # type: ignore[arg-type]
        )  # fmt: skip
        rates, base = np.full(n, 0.5), np.full(n, 0.5)
        rates[liar], base[liar] = rate, clean
        return bench_attacks.Measured(planned, rates, base, 0.5, 0.6, 0.7, 0, 0)

    lines = bench_attacks.capturability_lines(
        [
            measured("loss", 0.9, 0.3),
            measured("norm", 0.36, 0.3),
            measured("loss", 0.33, 0.3, defence="on"),
            measured("direction", 1.0, 0.67),  # at the ratio's ceiling, yet every round
        ],
        ["uniform", "adcs"],
    )
    text = "\n".join(lines)
    assert "| adcs | loss | 90 (30) | 33 (30) | – |" in text
    assert "| adcs | norm | 36 (30) | – | – |" in text
    verdict = next(line for line in lines if line.startswith("- **adcs**"))
    assert "by: loss 90% vs 30%; direction 100% vs 67%. With defences on, by: none." in verdict
    assert "norm" not in verdict
    assert any(line.startswith("- **uniform**") for line in lines)


def test_a_rewrite_keeps_nested_results_folders(tmp_path: Path):
    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    config = bench_attacks._with_rounds(config, 2, [0])
    out = tmp_path / "attacks"
    (out / "families" / "seed0").mkdir(parents=True)
    (out / "families" / "seed0" / "runs.csv").write_text("x")
    (out / "manifest.json").write_text("{}")
    bench_attacks.run_suite(
        config, suite, out, dataset=load_subset(), blocks=["clean"], methods=["uniform"], workers=1
    )
    assert (out / "families" / "seed0" / "runs.csv").read_text() == "x"
    assert (out / "report.md").is_file()


def _interval_share_brute(selected: np.ndarray, client: int, window: int, n: int) -> float:
    """Every interval [s, e) of at least W rounds, counted one by one."""
    hits = (selected == client).any(axis=1)
    fair = (selected >= 0).sum() / selected.shape[0] / n
    rounds = selected.shape[0]
    return max(
        hits[s:e].sum() / (e - s) / fair
        for s in range(rounds)
        for e in range(s + window, rounds + 1)
    )


def test_the_any_interval_share_is_the_largest_over_every_interval():
    from benchmarks.attack_families import interval_share

    rng = np.random.default_rng(3)
    n, m = 6, 2
    for rounds, window in ((9, 1), (20, 3), (31, 7)):
        selected = np.stack([rng.choice(n, size=m, replace=False) for _ in range(rounds)])
        for client in range(n):
            expected = _interval_share_brute(selected, client, window, n)
            assert interval_share(selected, [client], window, n) == pytest.approx(expected)
        both = max(_interval_share_brute(selected, c, window, n) for c in (1, 4))
        assert interval_share(selected, [1, 4], window, n) == pytest.approx(both)
    # a burst after an emptied window: b = 3 of W = 4 rounds in two back-to-back windows, then
    # every round for L = 6 > W rounds — (3 + 3) / 6 over the fair share 1/2 is 2x
    selected = np.array([[1, 2]] * 4 + [[0, 1]] * 6 + [[1, 2]] * 4)
    assert interval_share(selected, [0], 4, 4) == pytest.approx(2.0)
    assert np.isnan(interval_share(selected[:3], [0], 4, 4))  # shorter than W


def test_the_families_report_is_computed_from_the_raw_files(tmp_path: Path):
    """Every number of the families' tables and goals (shares over any interval, the honest worst
    change against the same defences' no-attack run and against the run without the attackers,
    the bounds' no-attack cost) recomputed from runs.csv and selections.npz."""
    from benchmarks.attack_families import interval_share

    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    config = bench_attacks._with_rounds(config, 8, [0, 1])
    suite = dataclasses.replace(
        suite,
        families=(
            ("sleeper", {"cosine": 0.5, "factor": 10.0, "start": 2}),
            ("absent", {"absent": True, "naive": False}),
        ),
        family_k=(3,),
        bound=Defence(cap=1.5, window=3, any_interval=True),
    )
    out = tmp_path / "attacks"
    bench_attacks.run_suite(
        config, suite, out, dataset=load_subset(), blocks=["families"],
        methods=["uniform", "adcs"], workers=1,
    )  # fmt: skip
    rows = {row["run_id"]: row for row in csv.DictReader((out / "runs.csv").open())}
    report = (out / "report.md").read_text()
    table = {
        tuple(cell.strip() for cell in line.split("|")[1:5]): line.split("|")[6:13]
        for line in report.splitlines()
        if line.startswith("| sleeper |")
    }
    absent = {
        (row["method"], row["defence"], row["seed"]): row
        for row in rows.values()
        if row["block"] == "families" and row["attack"] == "absent"
    }
    assert len(absent) == 8  # 2 methods, off and bound, 2 seeds
    with np.load(out / "selections.npz") as selections:
        for row in absent.values():  # the attackers are never selected
            chosen = selections[f"selected/{row['run_id']}"]
            assert not np.isin(chosen, json.loads(row["malicious"])).any()
        for (_family, k, mode, method), cols in table.items():
            runs = [row for row in rows.values() if row["block"] == "families"
                    and row["attack"] == "sleeper" and row["method"] == method and row["k"] == k
                    and bench_attacks.attack_families._mode(_row_fields(row)) == mode]  # fmt: skip
            assert len(runs) == 2  # one per seed
            intervals = [
                interval_share(
                    selections[f"selected/{r['run_id']}"], json.loads(r["malicious"]), 3, 30
                )
                for r in runs
            ]
            assert [float(r["interval_share"]) for r in runs] == pytest.approx(intervals, abs=1e-4)
            assert float(cols[2]) == pytest.approx(max(intervals), abs=0.005)
            changes = [
                float(r["honest_worst"]) - float(rows[r["baseline"]]["honest_worst"]) for r in runs
            ]
            assert float(cols[5]) == pytest.approx(100 * np.mean(changes), abs=0.05)
            without = [
                float(r["honest_worst"])
                - float(absent[(method, r["defence"], r["seed"])]["honest_worst"])
                for r in runs
            ]
            assert float(cols[6]) == pytest.approx(100 * np.mean(without), abs=0.05)
    variants = {row["method"] for row in rows.values()}
    assert {key[3] for key in table} == variants and len(variants) == 2  # the blind one too
    for variant in variants:
        off = [float(rows[f"{variant}/off/none/seed{s}"]["honest_worst"]) for s in (0, 1)]
        bound = [float(rows[f"{variant}/bound/none/seed{s}"]["honest_worst"]) for s in (0, 1)]
        line = next(li for li in report.splitlines() if li.startswith(f"| {variant} | 2 |"))
        change = float(line.split("|")[5])
        assert change == pytest.approx(100 * np.mean(np.subtract(bound, off)), abs=0.05)
    assert "#### The goals with the bounds on" in report and "k ≤ 3: largest attacker" in report
    assert "against the defended run without the attackers" in report
    assert "(absent, k = " not in report  # the runs without the attackers are not an attack


def _row_fields(row: dict[str, str]) -> Any:
    """A runs.csv row as the fields `attack_families._mode` reads."""
    from types import SimpleNamespace

    return SimpleNamespace(defence=row["defence"], adaptive=row["adaptive"] == "True")


def test_a_report_is_rewritten_from_its_files_and_seed_folders_merge(tmp_path: Path):
    """The report written by the runs equals the one `write_report` rebuilds from the files; the
    folders of one seed each, merged, give the same files and report as one run of both seeds."""
    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    suite = dataclasses.replace(
        suite,
        families=(("burst", {"cosine": 0.5, "factor": 10.0, "start": 2, "quiet": True}),),
        family_k=(1,),
        bound=Defence(cap=1.5, window=3, any_interval=True),
    )
    data = load_subset()

    def run(seeds: list[int], name: str) -> Path:
        out = tmp_path / name
        bench_attacks.run_suite(
            bench_attacks._with_rounds(config, 7, seeds), suite, out, dataset=data,
            blocks=["families"], methods=["uniform", "divfl"], workers=1,
        )  # fmt: skip
        return out

    both = run([0, 1], "both")
    written = (both / "report.md").read_text()
    bench_attacks.write_report(both)
    assert (both / "report.md").read_text() == written
    parts = [run([0], "seed0"), run([1], "seed1")]
    assert (
        bench_attacks.main(["--merge", ",".join(map(str, parts)), "--out", str(tmp_path / "m")])
        == 0
    )
    merged = tmp_path / "m"
    assert (merged / "report.md").read_text() == written
    manifest = json.loads((merged / "manifest.json").read_text())
    assert manifest["seeds"] == [0, 1] and len(manifest["parts"]) == 2
    assert sorted(manifest["runs"]) == sorted(
        json.loads((both / "manifest.json").read_text())["runs"]
    )
    with np.load(both / "selections.npz") as a, np.load(merged / "selections.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key])
    # a part of the same seed with another family joins, its no-attack runs kept once
    other = tmp_path / "other"
    bench_attacks.run_suite(
        bench_attacks._with_rounds(config, 7, [0]),
        dataclasses.replace(suite, families=(("flatten", {"cosine": 1.0, "factor": 1e6}),)),
        other, dataset=data, blocks=["families"], methods=["uniform", "divfl"], workers=1,
    )  # fmt: skip
    joined = tmp_path / "joined"
    bench_attacks.merge_folders([parts[0], other], joined)
    ids = json.loads((joined / "manifest.json").read_text())["runs"]
    assert len(ids) == len(set(ids)) and any("/flatten/" in i for i in ids)
    assert sum("/none/" in i for i in ids) == 4  # off and bound, two methods, once each
    assert "| flatten | 1 |" in (joined / "report.md").read_text()
    # a run that two parts ran differently is refused, in one line
    bad = tmp_path / "bad"
    shutil.copytree(other, bad)
    with np.load(bad / "selections.npz") as npz:
        arrays = {key: npz[key] for key in npz.files}
    key = next(k for k in arrays if k.endswith("/off/none/seed0"))
    arrays[key] = arrays[key][::-1]
    np.savez_compressed(bad / "selections.npz", **arrays)
    assert bench_attacks.main(["--merge", f"{parts[0]},{bad}", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()
    # or, asked to, kept as the first part ran it, and named in the manifest
    bench_attacks.merge_folders([parts[0], bad], tmp_path / "kept", keep_first=True)
    kept = json.loads((tmp_path / "kept" / "manifest.json").read_text())
    assert kept["differing_duplicates"] == [key.split("/", 1)[1]]
    with (
        np.load(tmp_path / "kept" / "selections.npz") as npz,
        np.load(parts[0] / "selections.npz") as first,
    ):
        np.testing.assert_array_equal(npz[key], first[key])
    # a merged folder merged again: its parts stand in its place, its differing runs stay named
    bench_attacks.merge_folders([tmp_path / "kept", parts[1]], tmp_path / "again", keep_first=True)
    again = json.loads((tmp_path / "again" / "manifest.json").read_text())
    plain = json.loads((parts[1] / "manifest.json").read_text())
    assert again["parts"] == [
        *kept["parts"],
        {k: plain[k] for k in ("argv", "wall_s", "finished_at")},
    ]
    assert len(again["parts"]) == 3 and again["differing_duplicates"][0] == kept[
        "differing_duplicates"][0]  # fmt: skip


def test_families_none_leaves_the_no_attack_runs_of_the_families_block():
    config, suite = bench_attacks.load_suite(bench_attacks.DEFAULT_CONFIG)
    plan = bench_attacks.plan_suite(
        config, bench_attacks.chosen_families(suite, "none"), blocks=["families"]
    )
    assert plan and {p.attack for p in plan} == {"none"}
    assert {p.defence for p in plan} == {"off", "bound"}
    assert len(plan) == 2 * len(config.methods) * len(config.seeds)
    first = suite.families[0][0]
    one = bench_attacks.chosen_families(suite, first)
    assert [name for name, _ in one.families] == [first]
    with pytest.raises(ConfigError, match="no family"):
        bench_attacks.chosen_families(suite, "nothing")
