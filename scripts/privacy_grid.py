"""The private-selection grid of issue 34: configs, and a resumable driver that runs them in order.

The leaderboard's workloads (``experiments/leaderboard/{paper,dirichlet,bernoulli}.toml``,
T = 4 000, seeds 0-2) with each method behind the private probe channel at ε per client over the
run ∈ {1, 2, 4, 8, 16} (δ = 1/N^1.1, the channel's default), and without privacy (ε = ∞).

The updates are aggregated in the clear (``private_updates = false``: secure aggregation, no DP),
so the accounted ε is the *selection's own* privacy cost — what a scheduler spends beyond Uniform,
which releases nothing: Uniform is run once per workload and is the reference at every ε.

Each method's probe noise is calibrated to its own plan: the probe releases per client it makes
over the run (`planned_probes`; a loss is one release, an update probe's reply two), so every
method spends its whole budget evenly; a client that releases more than planned stops at the
budget (the channel's guarantee does not depend on the plan).

Usage (from the repository root)::

    python scripts/privacy_grid.py configs            # write experiments/privacy/grid/*.toml
    python scripts/privacy_grid.py jobs               # list the runs in order, done or not
    python scripts/privacy_grid.py run                # run what is not done (resumes a partial one)
    python scripts/privacy_grid.py scrub DATA_DIR     # drop this machine's paths from the results
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

WORKLOADS = ("paper", "dirichlet", "bernoulli")
EPSILONS = (4.0, 1.0, 16.0, 2.0, 8.0)
"""The finite ε of the grid, in the order they are run (the goal's ε = 4 first)."""
METHODS = ("powerofchoice", "ocs", "divfl", "adcs", "adcs2")
"""The probing methods; Uniform releases nothing and is run once per workload (ε = ∞ folder)."""
PRIVATE_FORMS = {"averaged_loss": "adcs.privacy.forms:AveragedLoss"}
"""Private forms (docs/concepts/privacy.md): a short name (its folder) and the scheduler; each is
run at every ε like the methods, and without privacy in a folder of its own."""
SAMPLED = "averaged_loss_sampled"
"""The private form AveragedLoss with ``sample = true`` (Thompson sampling), added once the
grid's ε = 4 showed the plain form starving a group: its own single-method configs and folders
(``WORKLOAD/inf-averaged_loss_sampled``, ``WORKLOAD/epsE-averaged_loss_sampled``), cheap to run
(it trains the selected clients only)."""
LOSS_WINDOW = 0.2
"""The private forms' loss window h (``sim.privacy.loss_window``): Δ = 0.4, not 3."""
SOURCE = Path("experiments/leaderboard")
CONFIGS = Path("experiments/privacy/grid")
RESULTS = Path("results/privacy/grid")
LOSS_RANGE = (0.0, 3.0)
"""A probed loss is clipped to [0, 3]: a 10-class model starts at ln 10 ≈ 2.3."""
SKETCH_DIM = 64
CLIP = 0.01
"""C of a sketched direction and of a norm: about the norm of one local SGD step of the
workloads' model at the start (η_ℓ = 0.001, Fashion-MNIST's pixels in [0, 1])."""


@dataclass(frozen=True)
class Workload:
    """What a release plan needs of a workload: T, m, N and the availability p."""

    rounds: int
    m: int
    n_clients: int
    available: float


def workload(name: str) -> Workload:
    raw = tomllib.loads((SOURCE / f"{name}.toml").read_text())
    data, sim = raw["data"], raw["sim"]
    n = data.get("n_clients") or data["n_groups"] * data["clients_per_group"]
    p = float(sim.get("availability", {}).get("p", 1.0))
    return Workload(int(sim["rounds"]), int(raw["m"]), int(n), p)


def planned_probes(method: str, w: Workload) -> int:
    """Probe releases per client over the run (the expected count, rounded up).

    PowerOfChoice asks every available client's loss each round (one release); OCS and DivFL ask
    every available client's update each round (its loss and its direction or norm: two); the
    private form AveragedLoss asks every available client's loss each round; ADCS asks
    them at its refreshes only (every 20 rounds); ADCS-2 asks every available client's loss each
    round and is shown each delivered update with its loss (two releases per selection, a client
    being selected T m / N times in expectation).
    """
    per_round = {"powerofchoice": 1.0, "averaged_loss": 1.0, "ocs": 2.0, "divfl": 2.0}
    per_round["adcs"] = 2.0 / 20
    if method in per_round:
        count = per_round[method] * w.available * w.rounds
    elif method == "adcs2":
        count = (
            w.available * w.rounds
            + 2.0 * w.rounds * min(w.m, w.available * w.n_clients) / w.n_clients
        )
    else:
        raise ValueError(f"no release plan for {method!r}")
    return int(-(-count // 1))


def _body(name: str) -> list[str]:
    text = (SOURCE / f"{name}.toml").read_text()
    return [line for line in text.splitlines() if not line.startswith("#")]


def write_configs() -> list[Path]:
    """Per workload: one config without privacy (Uniform and every method), one per private
    form without privacy, and one with ``[sim.privacy]`` at ε = 4 (the driver sets the others)
    and every probing method and private form, each with its own plan (``by_method``)."""
    CONFIGS.mkdir(parents=True, exist_ok=True)
    head = "# Written by scripts/privacy_grid.py from experiments/leaderboard/{}.toml (issue 34).\n"
    paths = []
    for name in WORKLOADS:
        w = workload(name)
        body = "\n".join(_body(name))
        methods = "\n\n".join(f'[[methods]]\nname = "{m}"' for m in ("uniform", *METHODS))
        path = CONFIGS / f"{name}-inf.toml"
        path.write_text(head.format(name) + body + "\n\n" + methods + "\n")
        paths.append(path)
        for form, scheduler in PRIVATE_FORMS.items():
            path = CONFIGS / f"{name}-{form}-inf.toml"
            path.write_text(head.format(name) + body + f'\n\n[[methods]]\nname = "{scheduler}"\n')
            paths.append(path)
        sampled = f'\n\n[[methods]]\nname = "{PRIVATE_FORMS["averaged_loss"]}"\nsample = true\n'
        path = CONFIGS / f"{name}-{SAMPLED}-inf.toml"
        path.write_text(head.format(name) + body + sampled)
        paths.append(path)
        own = [
            "[sim.privacy]",
            "epsilon = 4.0",
            "private_updates = false",
            f"planned_probes = {planned_probes('averaged_loss', w)}",
            f"loss_range = [{LOSS_RANGE[0]}, {LOSS_RANGE[1]}]",
            f"loss_window = {LOSS_WINDOW}",
        ]
        path = CONFIGS / f"{name}-{SAMPLED}.toml"
        path.write_text(head.format(name) + body + "\n\n" + "\n".join(own) + sampled)
        paths.append(path)
        privacy = [
            "[sim.privacy]",
            "epsilon = 4.0",
            "private_updates = false",
            f"loss_range = [{LOSS_RANGE[0]}, {LOSS_RANGE[1]}]",
            f"sketch_dim = {SKETCH_DIM}",
            f"direction_clip = {CLIP}",
            f"norm_clip = {CLIP}",
            "",
            "[sim.privacy.by_method]  # each method's own plan of probe releases per client",
        ]
        for method in (*METHODS, *PRIVATE_FORMS):
            own = [f"planned_probes = {planned_probes(method, w)}"]
            if method == "ocs":  # OCS ranks by the update's norm: it releases that alone
                own.append('updates_as = "norm"')
            if method in PRIVATE_FORMS:
                own.append(f"loss_window = {LOSS_WINDOW}")
            privacy.append(f'"{PRIVATE_FORMS.get(method, method)}" = {{ {", ".join(own)} }}')
        schedulers = [PRIVATE_FORMS.get(m, m) for m in (*METHODS, *PRIVATE_FORMS)]
        methods = "\n\n".join(f'[[methods]]\nname = "{m}"' for m in schedulers)
        path = CONFIGS / f"{name}.toml"
        path.write_text(
            head.format(name) + body + "\n\n" + "\n".join(privacy) + "\n\n" + methods + "\n"
        )
        paths.append(path)
    return paths


@dataclass(frozen=True)
class Job:
    config: Path
    out: Path
    epsilon: float | None


def jobs() -> list[Job]:
    """Every run in order: ε = ∞ on every workload first, then each ε on every workload (4
    first: the goal's ε), the sampled private form (cheap) before the others."""
    out = []
    for name in WORKLOADS:
        out.append(Job(CONFIGS / f"{name}-inf.toml", RESULTS / name / "inf", None))
    for name in WORKLOADS:
        for form in PRIVATE_FORMS:
            folder = RESULTS / name / f"inf-{form}"
            out.append(Job(CONFIGS / f"{name}-{form}-inf.toml", folder, None))
    for name in WORKLOADS:
        folder = RESULTS / name / f"inf-{SAMPLED}"
        out.append(Job(CONFIGS / f"{name}-{SAMPLED}-inf.toml", folder, None))
    for eps in EPSILONS:
        for name in WORKLOADS:  # the cheap ones first
            folder = RESULTS / name / f"eps{eps:g}-{SAMPLED}"
            out.append(Job(CONFIGS / f"{name}-{SAMPLED}.toml", folder, eps))
        for name in WORKLOADS:
            out.append(Job(CONFIGS / f"{name}.toml", RESULTS / name / f"eps{eps:g}", eps))
    return out


def done(job: Job) -> bool:
    return (job.out / "runs.csv").is_file() and (job.out / "report.md").is_file()


def run(job: Job, data: str | None) -> None:
    cmd = [sys.executable, "-m", "adcs", "run", str(job.config), "--out", str(job.out)]
    cmd += ["--workers", "1"] + (["--data", data] if data else [])
    if job.epsilon is not None:
        cmd += ["--set", f"sim.privacy.epsilon={job.epsilon}"]
    resume = (job.out.parent / f".{job.out.name}.partial").exists()  # an interrupted run
    started = time.time()
    result = subprocess.run([*cmd, "--resume"] if resume else cmd, check=False)
    if result.returncode != 0 and resume:
        result = subprocess.run([*cmd, "--force"], check=False)
    status = "ok" if result.returncode == 0 else f"failed ({result.returncode})"
    print(f"{job.out}: {status} in {time.time() - started:.0f} s", flush=True)


def _scrubbed(value: object, data: str) -> object:
    """``value`` (a manifest's JSON) without the data folder's path and the interpreter's path."""
    if isinstance(value, dict):
        out = {k: _scrubbed(v, data) for k, v in value.items() if not (k == "path" and v == data)}
        if isinstance(out.get("command"), str):
            out["command"] = out["command"].replace(f" --data {data}", "")
        return out
    if isinstance(value, list):
        items = [v for i, v in enumerate(value) if v != data and not (
            v == "--data" and i + 1 < len(value) and value[i + 1] == data)]  # fmt: skip
        return [
            "adcs" if isinstance(v, str) and v.endswith("/adcs/__main__.py") else _scrubbed(v, data)
            for v in items
        ]
    if isinstance(value, str):
        return value.replace(f" ({data})", "")
    return value


def scrub(data: str) -> None:
    """Drop the data folder's path and the interpreter's path from the grid's manifests and
    reports (what a committed file must not name)."""
    for manifest in sorted(RESULTS.glob("*/*/manifest.json")):  # finished folders only
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        manifest.write_text(json.dumps(_scrubbed(doc, data), indent=2) + "\n", encoding="utf-8")
        report = manifest.parent / "report.md"
        if report.is_file():
            text = report.read_text(encoding="utf-8").replace(f" ({data})", "")
            report.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("configs")
    sub.add_parser("jobs")
    runner = sub.add_parser("run")
    runner.add_argument("--data", help="the data's folder (default: $ADCS_DATA_DIR)")
    scrubber = sub.add_parser("scrub")
    scrubber.add_argument("data")
    args = parser.parse_args()
    if args.command == "configs":
        for path in write_configs():
            print(path)
    elif args.command == "scrub":
        scrub(args.data)
    elif args.command == "jobs":
        for job in jobs():
            print(f"{'done' if done(job) else 'todo'} {job.out}")
    else:
        for job in jobs():
            if not done(job):
                run(job, args.data)


if __name__ == "__main__":
    main()
