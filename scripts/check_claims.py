"""No committed report says more than its data: regenerate the generated, verify the hand-written.

Every Markdown file under ``results/`` is one of three kinds (:func:`classify`):

- **generated** — written by code from the raw files beside it: a results folder's ``report.md``
  and ``table1.md``/``.csv`` (by the study's report code, from ``runs.csv``, ``metrics.csv``,
  ``group_share.csv`` and ``manifest.json``), a leaderboard's ``report.md``, ``ranks.csv``,
  ``leaderboard.csv`` and ``summary.json`` (by :func:`adcs.leaderboard.suite.
  summarize_leaderboard`), and the outputs of the scripts listed in :data:`SCRIPT_OUTPUTS`. The
  check regenerates each with the project's code (never a copy of it) and fails on any
  difference; ``--write`` rewrites them instead (they are pure functions of the raw files).
  Scripts that write into the folder they read (:data:`FOLDER_SCRIPTS`) run on a copy of it.
- **not regenerable** — written by a run that cannot be repeated from files
  (:data:`NOT_REGENERABLE`, each with the reason), or needing the data set when
  ``ADCS_DATA_DIR`` is not set (:data:`DATA_SCRIPT_OUTPUTS`); listed, not checked.
- **prose** — everything else (``FINDINGS.md``, ``DIAGNOSIS.md``, …): every number and every
  comparative word (:data:`COMPARATIVES`) must come through a *claim marker*, which the check
  recomputes from the raw files::

      ADCS2 minus PowerOfChoice: <!-- claim diff leaderboard/m6 worst adcs2 powerofchoice -->
      +0.58 ± 1.62<!-- /claim --> points, <!-- claim verdict leaderboard/m6 worst adcs2
      powerofchoice -->tied<!-- /claim -->.

  (in a file the text follows ``-->`` directly, on one line with it).

  GitHub shows only the text between the comments. A marker names a statistic, the results
  folder(s) it reads (relative to the Markdown file; ``a,b`` pools the seeds of several folders,
  the first folder's run of a seed winning), the metric and the entries (by method name, or by
  the entry's display name, quoted when it has spaces); the text must equal what the statistic
  renders (:data:`KINDS`). ``--write`` fills the text in. Numbers exempt from markers: those in
  code spans and blocks, link targets, HTML comments, numbered-list markers, and those naming what
  ran rather than what it gave, or citing — after ``=`` (``m = 18``, ``seeds = 0–2``), ``§``,
  ``Fig.``, ``Figure``, ``Table``, ``Sec.``, ``Algorithm``, ``issue``, ``part(s)`` and a venue's
  year (``ICML 2021``). A number quoted from elsewhere (a paper's claim) goes in a code span.

Usage::

    python scripts/check_claims.py [--write] [RESULTS]     (default RESULTS: results)

Exits 1 listing every difference and every unverified claim, number or word.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from adcs.data import DATASETS
from adcs.experiments.analysis import stats
from adcs.experiments.analysis.outputs import study_of, write_study_report, write_tables
from adcs.experiments.analysis.records import variant_labels
from adcs.experiments.analysis.report import TIME_FIGURE, ReportContext, fmt, pm
from adcs.experiments.analysis.timing import is_timed, time_summaries
from adcs.experiments.config import config_from_dict
from adcs.experiments.run.merge import merge_notes
from adcs.experiments.run.results import load_records, privacy_note, system_note
from adcs.leaderboard import ranking
from adcs.leaderboard.suite import summarize_leaderboard
from adcs.leaderboard.sweep import write_sweep_summary

REPO = Path(__file__).resolve().parent.parent

SCRIPT_OUTPUTS: dict[str, list[tuple[str, list[str]]]] = {
    "successor/ablation.md": [("", ["ablation_report.py", "results/successor/ablation"])],
    "successor/paper20k.md": [
        ("", ["successor_compare.py", "--committed", "results", "--new", "results/successor",
              "--workloads", "paper:paper20k", "--entry", "adcs2"]),
    ],
    "successor/cnn_compare.md": [
        ("", ["successor_compare.py", "--committed", "results", "--new", "results/successor",
              "--workloads", "cnn:cnn", "--entry", "adcs2"]),
    ],
    "successor/adaptive.md": [
        ("", ["successor_compare.py", "--committed", "results/leaderboard", "--new",
              "results/leaderboard", "--entry", "adcs2_adaptive"]),
        *(("### cnn: adcs2_adaptive against " + b + " (paired by seed, no adjustment)",
           ["successor_paired.py", "--a", "adcs2_adaptive", "--b", b, "results/cnn",
            "results/successor/cnn", "results/successor/seeds34/cnn",
            "results/successor/adaptive/cnn"]) for b in ("powerofchoice", "adcs2")),
    ],
    "successor/verdicts.md": [
        ("", ["successor_compare.py", "--committed", "results/leaderboard", "--new",
              "results/leaderboard", "--entry", "adcs2", "--entry", "adcs2_adaptive",
              "--workloads", "paper,bernoulli,clients100,dirichlet,m6,soft_skew,cnn"]),
    ],
    "leaderboard/cnn_reproduction.md": [
        ("", ["compare_results.py", "--markdown", "results/cnn", "results/leaderboard/cnn"]),
    ],
    "successor/tuning/choice.md": [
        ("", ["tuning_protocol.py", "choose", "results/successor/tuning/dev",
              "experiments/successor/tuning"]),
    ],
    "successor/tuning/report.md": [
        ("", ["tuning_protocol.py", "report", "results/successor/tuning/eval"]),
    ],
    "successor/diagnosis_tables.md": [
        ("", ["diagnose_adcs.py", "--parts", "1,2", "--leaderboard", "results/leaderboard"]),
    ],
    "successor/seeds34.md": [
        ("### cnn", ["successor_paired.py", "--a", "adcs2", "--b", "powerofchoice", "results/cnn",
                     "results/successor/cnn", "results/successor/seeds34/cnn"]),
    ],
    "privacy/first.md": [
        ("", ["privacy_summary.py", *(f"results/privacy/paper-{f}" for f in (
            "inf", "probes-eps4", "probes-eps16", "probes-eps64", "full-eps4"))]),
    ],
    "privacy/report.md": [("", ["privacy_grid_report.py", "results/privacy/grid"])],
}  # fmt: skip
DATA_SCRIPT_OUTPUTS: dict[str, list[tuple[str, list[str]]]] = {
    "successor/group_cosines.md": [
        ("", ["group_cosines.py", "--workloads", "paper,m6,clients100,bernoulli,soft_skew,dirichlet",
              "--rounds", "600", "--every", "150"]),
    ],
    "peers/summary.md": [
        ("", ["peers_summary.py", "--baseline", "md", "--with", "results/peers/poc_a03",
              *(f"results/peers/{f}" for f in ("poc_a03", "poc_a03_logistic", "poc_a03_constant",
                                                "poc_a2", "clustered_a03", "poc_authors_lr005",
                                                "poc_authors_lr0005", "clustered_shards",
                                                "clustered_dirichlet"))]),
        ("", ["peers_summary.py", "--baseline", "md", "--with", "results/peers/clustered_shards",
              "results/peers/clustered_shards_adcs2",
              "results/peers/clustered_shards_adcs_variants",
              "results/peers/clustered_shards_adcs_theta",
              "results/peers/clustered_shards_adcs2_raw",
              "results/peers/clustered_shards_adcs2_raw_steps",
              "results/peers/clustered_shards_adcs2_raw_kernel"]),
        ("", ["peers_summary.py", "--baseline", "md", "--with", "results/peers/clustered_dirichlet",
              "results/peers/clustered_dirichlet_adcs"]),
    ],
}  # fmt: skip
"""Script outputs that rebuild the partitions from the data set: regenerated when
``ADCS_DATA_DIR`` names it, else listed as unchecked."""

FOLDER_SCRIPTS: dict[str, list[str]] = {
    "attacks": ["attack_suite_report.py", "{folder}"],
    "attacks/recommended": ["attack_suite_report.py", "{folder}"],
    "attacks/no_harm/attacks": ["attack_suite_report.py", "{folder}"],
    "attacks/no_harm/dirichlet": ["attack_suite_report.py", "{folder}"],
    "attacks/no_harm/bernoulli": ["attack_suite_report.py", "{folder}"],
    "attacks/no_harm_strict/dirichlet": ["attack_suite_report.py", "{folder}"],
    "attacks/no_harm_strict/bernoulli": ["attack_suite_report.py", "{folder}"],
    "attacks/families": ["attack_families_summary.py", "{folder}", "--window", "100"],
}
"""Scripts that write ``report.md`` into the results folder they read (relative path → script
and arguments, ``{folder}`` standing for the folder): run on a copy of it."""

"""Script outputs under results/ (relative path → (heading, script and arguments) per part):
the file is each part's heading line, if any, followed by the script's standard output, run from
the repository root (the commands of the folder's ``run.sh``)."""

NOT_REGENERABLE: dict[str, str] = {
    "attacks/costs": "written by `adcs bench attacks` from its runs, not from files",
    "attacks/families/seed0": "written by `adcs bench attacks` from its runs, not from files",
    "attacks/families/seed1": "written by `adcs bench attacks` from its runs, not from files",
    "paper/theory/report.md": "written by the theory check from its own probes (a new run)",
    "attacks/smother_ablation.md": "written by benchmarks/smother_ablation.py from its own runs",
    "attacks/ablation_no_attack.md": "written by benchmarks/smother_ablation.py from its own runs",
}
"""Generated files (or folders of them) that only a new run, or the data set, could rewrite."""

COMPARATIVES = (
    "best", "better", "worse", "highest", "lowest", "tied", "tie", "ties", "ahead", "behind",
    "hold", "holds", "held", "solved", "solves", "beat", "beats", "win", "wins", "won", "lose",
    "loses", "lost", "significant", "significantly", "outperform", "outperforms", "leads",
)  # fmt: skip
"""Words that state a comparison: in prose only inside a claim marker's text."""


# ---------------------------------------------------------------------------------------------
# generated reports


def _runner_report(folder: Path, out: Path) -> None:
    """A results folder's report.md and study tables, from its raw files, into ``out``."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    config = config_from_dict(manifest["config"], source=manifest.get("config_source", "?"))
    records = load_records(folder)
    own, _ = study_of(config)
    write_tables(out, config.outputs, records, own)
    notes = []
    if (folder / "system.csv").is_file():
        with (folder / "system.csv").open(newline="", encoding="utf-8") as fh:
            rows = [[int(r["seed"]), 0, 0, 0, 0, float(r["round_s"])] for r in csv.DictReader(fh)]
        notes.append(system_note(rows))
    if any(r.extra.get("epsilon") is not None for r in records):
        notes.append(privacy_note(records))
    notes += merge_notes(manifest)
    context = ReportContext(
        name=config.name, rounds=config.sim.rounds, eval_every=config.sim.eval_every, m=config.m,
        n_clients=manifest["data"]["n_clients"], seeds=config.seeds,
        data_source=manifest["data"]["source"], is_subset=manifest["data"]["is_subset"],
        quick=manifest["quick"], figures=_figures(folder, config.outputs),
        wall_s=float(manifest["wall_s"]), description=config.description,
        model=config.model.describe(),
        dataset=DATASETS.resolve(config.data.dataset).title or config.data.dataset,
        notes=(*notes, *(
            f"See also [{p.parent.name}/report.md]({p.parent.name}/report.md)."
            for p in sorted(folder.glob("*/report.md"))
        )),
    )  # fmt: skip
    write_study_report(out / "report.md", records, context, own)


def _figures(folder: Path, outputs: Sequence[str]) -> tuple[str, ...]:
    """The figures the runner drew, in its order (:func:`adcs.experiments.analysis.figures.write_figures`:
    the outputs asked for, then ``time.png``), as the folder holds them."""
    names = [*(f"{n}.png" for n in outputs), TIME_FIGURE]
    return tuple(n for n in dict.fromkeys(names) if (folder / n).is_file())


LEADERBOARD_FILES = ("report.md", "ranks.csv", "leaderboard.csv", "summary.json")


def _leaderboard_report(folder: Path, out: Path) -> None:
    """A leaderboard's summary files, rewritten from its workloads' folders, into ``out``."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    work = out / "copy"
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns(*LEADERBOARD_FILES, "*.png"))
    names = [p.parent.name for p in folder.glob("*/manifest.json")]
    names = sorted(names, key=lambda n: (n != "paper", n))
    summarize_leaderboard(work, manifest.get("workloads", names), quick=bool(manifest["quick"]))
    for name in LEADERBOARD_FILES:
        shutil.copy(work / name, out / name)
    shutil.rmtree(work)


SWEEP_FILES = ("report.md", "sweep.csv")


def _sweep_report(folder: Path, out: Path) -> None:
    """A sweep's table and report, rewritten from its points' folders, into ``out``."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    work = out / "copy"
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns(*SWEEP_FILES, "*.png"))
    points = []
    for name, point in manifest["sweep"]["points"].items():
        doc = json.loads((folder / name / "manifest.json").read_text(encoding="utf-8"))
        points.append(
            (point, config_from_dict(doc["config"], source=doc.get("config_source", "?")))
        )
    # as run_sweep writes them: the points' ranks (a leaderboard's summary), then the comparison
    summarize_leaderboard(work, list(manifest["sweep"]["points"]), quick=bool(manifest["quick"]))
    write_sweep_summary(work, points)
    for name in SWEEP_FILES:
        shutil.copy(work / name, out / name)
    shutil.rmtree(work)


def _folder_script(argv: list[str], folder: Path, out: Path) -> None:
    """Run the script on a copy of ``folder`` at the same relative path (the report names it)."""
    folder = folder.resolve()
    rel = folder.relative_to(REPO) if REPO in folder.parents else Path(folder.name)
    root = out / "copy"
    work = root / rel
    shutil.copytree(folder, work, ignore=shutil.ignore_patterns("report.md", "*.png"))
    for sub in folder.glob("*/*/report.md"):  # the per-run folders' own reports are inputs too
        shutil.copy(sub, work / sub.relative_to(folder))
    _script_output([("", [a.replace("{folder}", str(rel)) for a in argv])], cwd=root)
    shutil.move(work / "report.md", out / "report.md")
    shutil.rmtree(root)


def _script_output(parts: Sequence[tuple[str, list[str]]], cwd: Path = REPO) -> str:
    text = ""
    for heading, argv in parts:
        env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}
        if "ADCS_DATA_DIR" in os.environ:
            env["ADCS_DATA_DIR"] = os.environ["ADCS_DATA_DIR"]
        done = subprocess.run(
            [sys.executable, str(REPO / "scripts" / argv[0]), *argv[1:]],
            cwd=cwd, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
        text += (heading + "\n" if heading else "") + done.stdout
    return text


@dataclass(frozen=True)
class Generated:
    """Files that code writes from the raw files of ``folder`` (``make(folder, out)``)."""

    folder: Path
    files: tuple[str, ...]
    make: Callable[[Path, Path], None]


def classify(results: Path) -> tuple[list[Generated], list[Path], dict[Path, str]]:
    """The generated files, the prose files and the files not regenerable (with the reason)."""
    generated: list[Generated] = []
    claimed: set[Path] = set()
    not_regen: dict[Path, str] = {}
    for manifest in sorted(results.rglob("manifest.json")):
        folder = manifest.parent
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        if "config" in doc and "runs" in doc:
            files = tuple(
                p.name for p in sorted(folder.iterdir()) if p.name in ("report.md",)
                or p.name.startswith("table1.")
            )  # fmt: skip
            if not files:
                continue  # a folder kept for its runs.csv (development runs): nothing generated
            generated.append(Generated(folder, files, _runner_report))
        elif doc.get("kind") == "leaderboard":
            generated.append(Generated(folder, LEADERBOARD_FILES, _leaderboard_report))
        elif doc.get("kind") == "sweep":
            generated.append(Generated(folder, SWEEP_FILES, _sweep_report))
        else:
            continue
        claimed.update(folder / f for f in generated[-1].files)
    for rel, argv in FOLDER_SCRIPTS.items():
        folder = results / rel
        if (folder / "report.md").is_file():

            def run(f: Path, out: Path, argv: list[str] = argv) -> None:
                _folder_script(argv, f, out)

            generated.append(Generated(folder, ("report.md",), run))
            claimed.add(folder / "report.md")
    data = os.environ.get("ADCS_DATA_DIR")
    for rel, parts in {**SCRIPT_OUTPUTS, **DATA_SCRIPT_OUTPUTS}.items():
        path = results / rel
        if not path.is_file():
            continue
        if rel in DATA_SCRIPT_OUTPUTS and not data:
            not_regen[path] = "rebuilds the partitions from the data set: set ADCS_DATA_DIR"
            claimed.add(path)
            continue

        def make(
            _: Path,
            out: Path,
            parts: Sequence[tuple[str, list[str]]] = parts,
            name: str = path.name,
        ) -> None:
            (out / name).write_text(_script_output(parts), encoding="utf-8")

        generated.append(Generated(path.parent, (path.name,), make))
        claimed.add(path)
    prose = []
    for md in sorted(results.rglob("*.md")):
        if md in claimed:
            continue
        why = next((w for r, w in NOT_REGENERABLE.items() if _under(md, results / r)), None)
        if why is not None:
            not_regen[md] = why
        else:
            prose.append(md)
    return generated, prose, not_regen


def _under(path: Path, prefix: Path) -> bool:
    return path == prefix or prefix in path.parents


def check_generated(gen: Generated, write: bool) -> list[str]:
    """Regenerate ``gen`` into a temporary folder; the differences (rewritten with ``write``)."""
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        try:
            gen.make(gen.folder, out)
        except Exception as exc:  # a report that cannot be made is a finding, not a crash
            return [f"{gen.folder}: cannot regenerate ({type(exc).__name__}: {exc})"]
        for name in gen.files:
            old_path, new_path = gen.folder / name, out / name
            old = old_path.read_text(encoding="utf-8") if old_path.is_file() else ""
            new = new_path.read_text(encoding="utf-8") if new_path.is_file() else ""
            if _same_but_wall_time(old, new):
                continue
            if write:
                old_path.write_text(new, encoding="utf-8")
                continue
            diff = difflib.unified_diff(
                old.splitlines(), new.splitlines(), str(old_path), "regenerated", n=0,
                lineterm="",
            )  # fmt: skip
            problems.append(f"{old_path}: differs from its regeneration\n" + "\n".join(diff))
    return problems


_WALL = re.compile(r"wall time \d+(\.\d+)? s")


def _same_but_wall_time(old: str, new: str) -> bool:
    """Equal up to the settings line's wall time: the report takes it a moment before the
    manifest does, so the manifest's may be a tenth of a second longer (it is not a result)."""
    return _WALL.sub("wall time", old) == _WALL.sub("wall time", new)


# ---------------------------------------------------------------------------------------------
# claim markers


class ClaimError(ValueError):
    """A marker that cannot be computed: an unknown kind, folder, metric or entry."""


def _scores(base: Path, folders: str) -> dict[str, ranking.Score]:
    """The entries of the folders (comma-separated, relative to ``base``), seeds pooled."""
    pooled: dict[str, ranking.Score] = {}
    values: dict[str, dict[str, dict[int, float]]] = {}
    for rel in folders.split(","):
        folder = (base / rel).resolve()
        if not (folder / "runs.csv").is_file():
            raise ClaimError(f"{rel}: no results folder (runs.csv) there")
        for score in _folder_scores(folder):
            pooled.setdefault(score.label, score)
            mine = values.setdefault(score.label, {})
            for metric in (*ranking.METRICS, *score.columns):
                for seed, v in score.values(metric).items():
                    mine.setdefault(metric, {}).setdefault(seed, v)
    return {label: _with_values(s, values[label]) for label, s in pooled.items()}


def _folder_scores(folder: Path) -> list[ranking.Score]:
    """The entries of one folder; a folder of ``runs.csv`` alone (development runs, kept without
    their curves) gives each variant's final worst and average accuracy per seed."""
    if (folder / "metrics.csv").is_file():
        records, acc = ranking.workload_scores(folder.parent, folder.name)
        # the leaderboard's entry names, which tell apart every variant (records.tell_apart)
        return ranking.scores_of(folder.name, records, acc, ranking.entry_labels(records))[0]
    with (folder / "runs.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    scores = []
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        per_seed = {
            m: {int(r["seed"]): float(r[f"final_{m}_acc"]) for r in mine} for m in ("worst", "avg")
        }
        score = ranking.Score(
            workload=folder.name, variant=variant, method=mine[0]["method"], label=variant,
            params=json.loads(mine[0]["params"]), worst=per_seed["worst"], p10={},
            avg=per_seed["avg"], rounds_to_target={}, client_updates=math.nan,
            loss_evals=math.nan, tv=math.nan,
        )  # fmt: skip
        scores.append(score)
    return scores


def _with_values(score: ranking.Score, values: dict[str, dict[int, float]]) -> ranking.Score:
    columns = {c: v for c, v in values.items() if c not in ranking.METRICS}
    return replace(
        score, worst=values.get("worst", {}), p10=values.get("p10", {}),
        avg=values.get("avg", {}), columns=columns,
    )  # fmt: skip


def _entry(scores: dict[str, ranking.Score], name: str) -> ranking.Score:
    if name in scores:
        return scores[name]
    by_method = [s for s in scores.values() if s.method == name]
    if len(by_method) == 1:
        return by_method[0]
    raise ClaimError(
        f"entry {name!r}: {'ambiguous' if by_method else 'not found'} (entries: {sorted(scores)})"
    )


def _values(score: ranking.Score, metric: str) -> dict[int, float]:
    try:
        return score.values(metric)
    except KeyError:
        raise ClaimError(f"metric {metric!r}: not one of {list(ranking.METRICS)}") from None


def _points(metric: str) -> bool:
    return metric in ranking.METRICS or metric.endswith("_acc")


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _mean(scores: dict[str, ranking.Score], metric: str, entry: str) -> str:
    values = _values(_entry(scores, entry), metric)
    mean, half = stats.t_interval(list(values.values()))  # type: ignore[arg-type]
    if _points(metric):
        return pm(float(mean), float(half))
    return f"{float(mean):,.0f}" if abs(mean) >= 100 else fmt(float(mean))


def _diff(scores: dict[str, ranking.Score], metric: str, a: str, b: str) -> str:
    mean, half, _ = stats.paired_difference(
        _values(_entry(scores, a), metric), _values(_entry(scores, b), metric)
    )
    scale = 100.0 if _points(metric) else 1.0
    if math.isnan(half):
        return f"{scale * mean:+.2f} (one common seed)"
    return f"{scale * mean:+.2f} ± {scale * half:.2f}"


def _verdict(scores: dict[str, ranking.Score], metric: str, a: str, b: str) -> str:
    va, vb = _values(_entry(scores, a), metric), _values(_entry(scores, b), metric)
    if stats.tied(va, vb):
        return "tied"
    mean, _, _ = stats.paired_difference(va, vb)
    return "ahead" if mean > 0 else "behind"


def _placings(scores: dict[str, ranking.Score], metric: str) -> dict[str, ranking.Placing]:
    """The leaderboard's ranks; only among entries run on the same seeds (means over different
    seeds do not compare: pool fewer folders, or compare two entries with ``diff``)."""
    values = {k: _values(s, metric) for k, s in scores.items()}
    if len({tuple(sorted(v)) for v in values.values()}) > 1:
        raise ClaimError(f"the entries ran on different seeds: {sorted(values)}")
    return ranking.rank_workload({k: s.ranked(metric) for k, s in scores.items()})


def _versus(scores: dict[str, ranking.Score], metric: str, a: str, b: str, delta: str) -> str:
    mean, half, n = stats.paired_difference(
        _values(_entry(scores, a), metric), _values(_entry(scores, b), metric)
    )
    try:
        claimed = float(delta)
    except ValueError:
        raise ClaimError(f"{delta!r}: not a number") from None
    if n < 2 or math.isnan(half):
        return f"one common seed: no interval to hold {claimed:+g} against"
    scale = 100.0 if _points(metric) else 1.0
    lo, hi = scale * (mean - half), scale * (mean + half)
    word = "includes" if lo <= claimed <= hi else "excludes"
    return f"[{lo:+.2f}, {hi:+.2f}], which {word} {claimed:+g}"


def _best(scores: dict[str, ranking.Score], metric: str) -> str:
    placings = _placings(scores, metric)
    top = next(k for k, p in placings.items() if p.best)
    others = sorted((k for k, p in placings.items() if p.tied and k != top),
                    key=lambda k: placings[k].rank)  # fmt: skip
    return f"{top} has the highest mean" + (f", tied with {_and(others)}" if others else "")


def _rank(scores: dict[str, ranking.Score], metric: str, entry: str) -> str:
    placings = _placings(scores, metric)
    return f"{placings[_entry(scores, entry).label].rank:g} of {len(placings)}"


def _seeds(scores: dict[str, ranking.Score], entry: str) -> str:
    return ", ".join(str(s) for s in sorted(_entry(scores, entry).worst))


def _ratio(folder: Path, what: str, entry: str) -> str:
    """Time to a target (``worst``, ``avg``) or the total time (``total``) over the reference's,
    paired by seed (:func:`adcs.experiments.analysis.timing.time_summaries`, the report's time table), and
    whether its interval includes 1."""
    if not (folder / "runs.csv").is_file():
        raise ClaimError(f"{folder.name}: no results folder (runs.csv) there")
    records = load_records(folder)
    if not is_timed(records):
        raise ClaimError(f"{folder.name}: its runs have no simulated clock")
    labels = variant_labels(records)
    rows = {labels[t.variant]: t for t in time_summaries(records)}
    if entry not in rows:
        raise ClaimError(f"entry {entry!r}: not found (entries: {sorted(rows)})")
    if what not in ("worst", "avg", "total"):
        raise ClaimError(f"ratio of {what!r}: not one of worst, avg, total")
    e = getattr(rows[entry], f"{what}_ratio")
    if not e.complete:
        return "— (a seed never reached the target)"
    inside = e.mean - e.half <= 1.0 <= e.mean + e.half
    return f"{e.mean:.2f} ± {e.half:.2f}× ({'includes' if inside else 'excludes'} 1)"


_ATTACK_RUNS: dict[Path, list[object]] = {}


def _attack(folder: Path, column: str, row: str, method: str) -> str:
    """A number of an attack suite's families report (`benchmarks.attack_families.claim_text`),
    recomputed from the folder's runs.csv and selections.npz."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks import attack_families, bench_attacks

    folder = folder.resolve()
    if not (folder / "selections.npz").is_file():
        raise ClaimError(f"{folder.name}: no attack suite results (selections.npz) there")
    if folder not in _ATTACK_RUNS:
        _ATTACK_RUNS[folder] = list(bench_attacks.read_folder(folder)[2])
    try:
        return attack_families.claim_text(_ATTACK_RUNS[folder], column, row, method)
    except ValueError as exc:
        raise ClaimError(str(exc)) from None


def _wall(folder: Path) -> str:
    """A finished folder's wall time, its manifest's ``wall_s``, in whole minutes."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    wall = manifest.get("wall_s")
    if not isinstance(wall, int | float):
        raise ClaimError(f"{folder.name}: no finished folder (no wall_s in its manifest.json)")
    return f"{wall / 60:.0f} min"


KINDS: dict[str, tuple[int, Callable[..., str]]] = {
    "attack": (3, _attack),
    "wall": (0, _wall),
    "ratio": (2, _ratio),
    "mean": (2, _mean),
    "diff": (3, _diff),
    "verdict": (3, _verdict),
    "versus": (4, _versus),
    "best": (1, _best),
    "rank": (2, _rank),
    "seeds": (1, _seeds),
}
"""Marker kinds: number of arguments after the folder(s), and what the text must be.

- ``mean F METRIC E``: E's mean over seeds ± the 95 % t half-width (accuracies in %, as the
  reports print them);
- ``diff F METRIC A B``: the paired mean difference A − B over their common seeds ± its 95 %
  half-width (points for accuracies), :func:`adcs.experiments.analysis.stats.paired_difference`;
- ``verdict F METRIC A B``: ``tied`` when the paired t-test at 5 % cannot tell them apart
  (:func:`adcs.experiments.analysis.stats.tied`, one planned comparison, unadjusted), else ``ahead`` or
  ``behind`` (A relative to B);
- ``versus F METRIC A B DELTA``: the 95 % interval of the paired difference A − B (points for
  accuracies) and whether it includes DELTA (e.g. a gain another paper reports);
- ``best F METRIC``: the entry with the highest mean and those tied with it, as the
  leaderboard ranks them (:func:`adcs.leaderboard.ranking.rank_workload`: the paired t-test,
  Holm-adjusted over the folder's comparisons with the best);
- ``rank F METRIC E``: E's place among the folder's entries, "2 of 7";
- ``seeds F E``: the seeds E ran on;
- ``wall F``: how long the run that wrote F took (its ``manifest.json``'s ``wall_s``), in
  minutes;
- ``attack F COLUMN ROW METHOD``: a number of an attack suite's families report (``adcs bench
  attacks``), as the report prints it: ROW ``none`` (COLUMN ``change``: the bounds' no-attack
  cost in points; ``worst``: the defended no-attack honest worst, %) or ``FAMILY:K:MODE`` (MODE
  ``off``, ``naive`` or ``adaptive``; COLUMN ``seeds``, ``share``, ``coalition``, ``interval``
  (over any interval of ≥ W rounds), ``lift``, ``worst`` or ``change``);
- ``ratio F {worst,avg,total} E``: on the simulated clock, E's time to the worst- or
  average-accuracy target, or its total time, over the reference's, paired by seed, ± its 95 %
  half-width, and whether that interval includes 1 (E by the report's label).

METRIC is ``worst``, ``p10``, ``avg`` or a rankable column (``adcs run --help``'s columns)."""

MARKER = re.compile(r"<!--\s*claim\s+(?P<spec>.*?)\s*-->(?P<text>.*?)<!--\s*/claim\s*-->", re.S)


def evaluate(spec: str, base: Path, cache: dict[str, dict[str, ranking.Score]]) -> str:
    """The text a marker's ``spec`` (``KIND FOLDERS ARGS…``) renders, read from ``base``."""
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise ClaimError(f"cannot read {spec!r}: {exc}") from None
    if not words or words[0] not in KINDS:
        raise ClaimError(f"{spec!r}: the kind must be one of {sorted(KINDS)}")
    n_args, render = KINDS[words[0]]
    if len(words) != 2 + n_args:
        raise ClaimError(f"{spec!r}: {words[0]} takes a folder and {n_args} argument(s)")
    if words[0] == "ratio":
        return _ratio(base / words[1], *words[2:])
    if words[0] == "attack":
        return _attack(base / words[1], *words[2:])
    if words[0] == "wall":
        return _wall(base / words[1])
    key = str(base / words[1])
    if key not in cache:
        cache[key] = _scores(base, words[1])
    return render(cache[key], *words[2:])


_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_LIST_ITEM = re.compile(r"^(\s*)\d+\.\s", re.M)
_EXEMPT = re.compile(
    r"(=\s*|§\s*|\b(?i:Fig\.|Figure|Table|Sec\.|Algorithm|issue|parts?)\s+"
    r"|\b(?:AISTATS|ICML|ICLR|NeurIPS|arXiv),?\s+)"
    r"[-+]?\d[\d.,]*(?:\s*(?:[–,-]|and|or)\s*[-+]?\d[\d.,]*)*"
)
_NUMBER = re.compile(r"(?<![\w.])(?<!\w[-−])[-+−]?\d+(?:[.,]\d+)*(?![\w])")
_WORD = re.compile(r"\b(" + "|".join(COMPARATIVES) + r")\b", re.I)


def prose_findings(text: str) -> list[str]:
    """Numbers and comparative words outside claim markers, one line each (``line N: …``)."""
    masked = MARKER.sub(lambda m: " " * len(m.group(0).replace("\n", "")) + "\n" * m.group(0)
                        .count("\n"), text)  # fmt: skip
    for pattern in (_FENCE, _COMMENT):
        masked = pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), masked)
    findings = []
    for i, line in enumerate(masked.splitlines(), start=1):
        line = _LIST_ITEM.sub(r"\1", _LINK_TARGET.sub("]", _CODE.sub(" ", line)))
        line = _EXEMPT.sub(" ", line)
        numbers = _NUMBER.findall(line)
        words = [w.lower() for w in _WORD.findall(line)]
        if numbers:
            findings.append(f"line {i}: number(s) without a claim marker: {', '.join(numbers)}")
        if words:
            findings.append(f"line {i}: comparative word(s) without a claim marker: "
                            f"{', '.join(words)}")  # fmt: skip
    return findings


def check_prose(path: Path, write: bool) -> list[str]:
    """Verify (or with ``write`` fill in) a prose file's markers; then its unmarked claims."""
    text = path.read_text(encoding="utf-8")
    cache: dict[str, dict[str, ranking.Score]] = {}
    problems: list[str] = []

    def verify(m: re.Match[str]) -> str:
        line = text.count("\n", 0, m.start()) + 1
        try:
            want = evaluate(m.group("spec"), path.parent, cache)
        except ClaimError as exc:
            problems.append(f"{path}:{line}: claim {m.group('spec')!r}: {exc}")
            return m.group(0)
        if m.group("text") != want:
            if write:
                return m.group(0).replace(f"-->{m.group('text')}<!--", f"-->{want}<!--", 1)
            problems.append(
                f"{path}:{line}: claim {m.group('spec')!r} says {m.group('text')!r}; the data "
                f"give {want!r}"
            )
        return m.group(0)

    new = MARKER.sub(verify, text)
    if write and new != text:
        path.write_text(new, encoding="utf-8")
    problems += [f"{path}:{f}" for f in prose_findings(new)]
    return problems


# ---------------------------------------------------------------------------------------------


def check(results: Path, write: bool = False) -> tuple[list[str], dict[Path, str]]:
    """Every problem under ``results`` and the files not regenerable (with the reason)."""
    generated, prose, not_regen = classify(results)
    problems = []
    for gen in generated:
        problems += check_generated(gen, write)
    for path in prose:
        problems += check_prose(path, write)
    return problems, not_regen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=REPO / "results")
    parser.add_argument(
        "--write", action="store_true",
        help="rewrite the generated files and fill in the markers' text from the data",
    )  # fmt: skip
    args = parser.parse_args(argv)
    problems, not_regen = check(args.results, args.write)
    for path, why in sorted(not_regen.items()):
        print(f"not regenerable (unchecked): {path}: {why}")
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s)" if problems else "every report agrees with its data")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
