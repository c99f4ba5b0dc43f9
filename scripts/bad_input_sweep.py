"""A sweep of bad-input and fault cases against the ``adcs`` command line, each classified.

Every case runs ``python -m adcs ...`` in a temporary folder of its own (this checkout's
``src`` first on the path) and its outcome is put in one of these classes:

- ``clear error``: a non-zero exit status (the expected one where the case names it) and exactly
  one ``error:`` line on stderr saying what the case expects it to say;
- ``sensible``: exit 0 and the case's check of the results passes (e.g. a symbolic link as
  ``--out`` puts them where it points);
- ``traceback``: a Python traceback on either stream;
- ``hang``: the command outlived the case's time limit and was killed;
- ``silent wrong``: exit 0 where the input should have been refused, or results that fail the check;
- ``misleading``: refused, but without one ``error:`` line saying what is wrong, with another exit
  status than expected, or refused where the input is fine.

Run ``python scripts/bad_input_sweep.py`` (``--list`` names the cases, ``--only a,b`` runs some,
``--jobs N`` runs N at once, ``--data DIR`` names the full Fashion-MNIST folder for the cases that
need it; without one they are skipped). The exit status is 1 when any case is a traceback, a hang,
silently wrong or misleading.

The cases live in two tables: ``scripts/bad_input_cases.py`` (the data, the configuration, the
options, the results folder, a cluster, interrupts, with the setups every case shares) and
``scripts/bad_input_families.py`` (reading results back, export, interrupted sweeps, a user's
plug-ins, settings that do nothing, scale); this file runs and classifies them.
"""

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the checkout's root holds the package scripts
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts import bad_input_cases, bad_input_families
from scripts.bad_input_cases import Case, _command, _env, _listener

OUTCOMES = ("clear error", "sensible", "traceback", "hang", "silent wrong", "misleading")
BAD = frozenset({"traceback", "hang", "silent wrong", "misleading"})


def cases(full_data: Path | None, not_ray: str) -> list[Case]:
    """Every case: the older ones, then those of the families added since."""
    return [*bad_input_cases.cases(full_data, not_ray), *bad_input_families.cases(not_ray)]


@dataclass
class Result:
    case: Case
    outcome: str
    rc: int | None
    seconds: float
    line: str = ""
    detail: str = ""


# ---------------------------------------------------------------------------------------------
# running and classifying


@contextlib.contextmanager
def _small_disk(w: Path) -> Iterator[None]:
    small = w / "small"
    small.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(small)], check=True,
                   capture_output=True)  # fmt: skip
    try:
        yield
    finally:
        subprocess.run(["umount", str(small)], check=False, capture_output=True)


def _run(case: Case, w: Path) -> tuple[int | None, str, str, float]:
    """Run the case's command in ``w``: (exit status or None when killed, stdout, stderr, s)."""
    args = [a.replace("{w}", str(w)) for a in case.args]
    start = time.monotonic()
    proc = subprocess.Popen(_command(args), cwd=w, env=_env(case.env, w), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    if case.signal_after is None:
        try:
            out, err = proc.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return None, out, err, time.monotonic() - start
        return proc.returncode, out, err, time.monotonic() - start
    return _run_and_signal(proc, case, start)


def _run_and_signal(
    proc: subprocess.Popen[str], case: Case, start: float
) -> tuple[int | None, str, str, float]:
    """Read the output until ``case.signal_after`` shows, send SIGTERM, give it 5 s to exit."""
    import selectors

    assert proc.stdout is not None and proc.stderr is not None and case.signal_after
    seen = {"out": "", "err": ""}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    deadline = start + case.timeout
    while case.signal_after not in seen["out"] + seen["err"] and time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        for key, _ in sel.select(timeout=0.1):
            line = key.fileobj.readline()  # type: ignore[union-attr]
            seen[key.data] += line
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, seen["out"] + out, seen["err"] + err, time.monotonic() - start
    return proc.returncode, seen["out"] + out, seen["err"] + err, time.monotonic() - start


def classify(case: Case, rc: int | None, out: str, err: str, w: Path) -> tuple[str, str, str]:
    """(outcome, the error line, what was wrong) of one finished case."""
    text = out + err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    line = errors[0] if errors else ""
    if rc is None:
        return "hang", line, "killed after the time limit"
    if "Traceback (most recent call last)" in text:
        return "traceback", line, text.strip().splitlines()[-1][:200]
    if case.says is None:
        if rc != 0:
            return "misleading", line, f"refused (exit {rc}) an input that is fine"
        if case.check is not None and not case.check(w, text):
            return "silent wrong", line, "exit 0 but the results fail the check"
        return "sensible", line, ""
    if rc == 0:
        return "silent wrong", line, "exit 0 where the input should be refused"
    says = case.says.replace("{w}", str(w))
    if len(errors) != 1:
        return "misleading", line, f"{len(errors)} error lines (exit {rc})"
    if says not in line:
        return "misleading", line, f"the error line does not say {says!r}"
    if case.code is not None and rc != case.code:
        return "misleading", line, f"exit {rc}, expected {case.code}"
    return "clear error", line, ""


def _skip_reason(case: Case, full_data: Path | None) -> str | None:
    if case.needs == "data" and full_data is None:
        return "no full Fashion-MNIST folder (--data)"
    if case.needs == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            return "Ray is not installed"
    if case.needs == "mount" and os.geteuid() != 0:
        return "mounting a small tmpfs needs root"
    return None


def run_case(case: Case, root: Path) -> Result:
    w = root / case.name
    w.mkdir()
    w = w.resolve()
    try:
        if case.setup is not None:
            case.setup(w)
        with _small_disk(w) if case.needs == "mount" else contextlib.nullcontext():
            rc, out, err, seconds = _run(case, w)
            outcome, line, detail = classify(case, rc, out, err, w)
    except (OSError, subprocess.SubprocessError) as exc:
        return Result(case, "misleading", None, 0.0, "", f"the case could not be set up: {exc}")
    return Result(case, outcome, rc, seconds, line, detail)


def sweep(
    names: Sequence[str] | None = None, *, jobs: int = 2, full_data: Path | None = None
) -> tuple[list[Result], list[tuple[Case, str]]]:
    """Run the cases (all, or those named); returns the results and the skipped cases."""
    server, address = _listener()
    try:
        table = cases(full_data, address)
        known = {c.name for c in table}
        unknown = sorted(set(names or ()) - known)
        if unknown:
            raise SystemExit(f"error: no case(s) {unknown}; --list names them")
        chosen = [c for c in table if names is None or c.name in names]
        skipped = [(c, r) for c in chosen if (r := _skip_reason(c, full_data)) is not None]
        todo = [c for c in chosen if _skip_reason(c, full_data) is None]
        with tempfile.TemporaryDirectory(prefix="adcs-sweep-") as tmp:
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                results = list(pool.map(lambda c: run_case(c, Path(tmp)), todo))
    finally:
        server.close()
    return results, skipped


def report(results: Sequence[Result], skipped: Sequence[tuple[Case, str]]) -> str:
    lines = [f"{'case':32} {'outcome':13} {'exit':>4} {'s':>5}  error line / what was wrong"]
    for r in results:
        said = f"{r.detail} | {r.line}" if r.outcome in BAD else r.line
        lines.append(
            f"{r.case.name:32} {r.outcome:13} {'-' if r.rc is None else r.rc:>4} "
            f"{r.seconds:5.1f}  {said[:300]}"
        )
    for case, reason in skipped:
        lines.append(f"{case.name:32} {'skipped':13} {'':>4} {'':>5}  {reason}")
    counts = Counter(r.outcome for r in results)
    lines.append("")
    lines.append(
        f"{len(results)} cases run, {len(skipped)} skipped: "
        + ", ".join(f"{counts.get(o, 0)} {o}" for o in OUTCOMES)
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=None, help="comma-separated case names")
    parser.add_argument("--list", action="store_true", help="name the cases and stop")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once")
    parser.add_argument("--data", default=os.environ.get("ADCS_DATA_DIR") or None,
                        help="the full Fashion-MNIST folder (default: $ADCS_DATA_DIR)")  # fmt: skip
    args = parser.parse_args(argv)
    full = Path(args.data) if args.data else None
    if args.list:
        print("\n".join(c.name for c in cases(full, "127.0.0.1:1")))
        return 0
    names = None if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    results, skipped = sweep(names, jobs=args.jobs, full_data=full)
    print(report(results, skipped))
    return 1 if any(r.outcome in BAD for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
