"""The older cases of ``scripts/bad_input_sweep.py``: the data, the configuration, the command
line's options, the results folder, a cluster, interrupts (each a :class:`Case`), with the setups
and checks the cases of every family share.
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")  # fmt: skip
SUBSET = SRC / "adcs" / "data" / "subset"
QUICK = str(REPO / "experiments" / "quick.toml")

TINY = """name = "tiny"
m = 3
seeds = [0]
[data]
dataset = "synthetic"
n_clients = 6
[sim]
rounds = {rounds}
eval_every = 2
{sim}
[[methods]]
name = "uniform"
"""

Setup = Callable[[Path], None]
Check = Callable[[Path, str], bool]


@dataclass(frozen=True)
class Case:
    """One bad input or fault, and what a good command line does with it.

    Attributes
    ----------
    name : str
    args : tuple of str
        The arguments after ``adcs``; ``{w}`` is the case's own folder (also the working folder).
    says : str or None
        Text the one ``error:`` line must hold; None: the case must succeed (exit 0).
    code : int or None
        The exit status expected of a refusal (None: any non-zero one).
    setup : callable, optional
        Prepares the case's folder (data folders, configurations, links).
    check : callable, optional
        ``check(folder, output)`` of a case that must succeed: its results are right.
    env : tuple of (str, str)
        Environment variables (``{w}`` expanded).
    signal_after : str or None
        Send SIGTERM once this text appears on stdout or stderr (then ``code`` is 143).
    needs : str or None
        ``"data"``: the full Fashion-MNIST files; ``"ray"``: Ray installed; ``"mount"``: a tmpfs.
    timeout : float
    """

    name: str
    args: tuple[str, ...]
    says: str | None = None
    code: int | None = None
    setup: Setup | None = None
    check: Check | None = None
    env: tuple[tuple[str, str], ...] = ()
    signal_after: str | None = None
    needs: str | None = None
    timeout: float = 60.0


# ---------------------------------------------------------------------------------------------
# setups


def tiny(sim: str = "", rounds: int = 4, name: str = "tiny.toml") -> Setup:
    def setup(w: Path) -> None:
        (w / name).write_text(TINY.format(rounds=rounds, sim=sim), encoding="utf-8")

    return setup


def write(name: str, text: str | bytes) -> Setup:
    def setup(w: Path) -> None:
        path = w / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text.replace("{w}", str(w)), encoding="utf-8")

    return setup


def both(*setups: Setup) -> Setup:
    def setup(w: Path) -> None:
        for s in setups:
            s(w)

    return setup


def data_copy(source: Path, spoil: Callable[[Path], None] | None = None) -> Setup:
    """The four files of ``source`` copied to ``w/data``, then spoiled."""

    def setup(w: Path) -> None:
        data = w / "data"
        data.mkdir()
        for name in FILES:
            shutil.copy(source / name, data / name)
        if spoil is not None:
            spoil(data)

    return setup


def _drop(name: str, then: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    def spoil(data: Path) -> None:
        (data / name).unlink()
        if then is not None:
            then(data / name)

    return spoil


def _gunzip(data: Path) -> None:
    for name in FILES:
        gz = data / name
        gz.with_suffix("").write_bytes(gzip.decompress(gz.read_bytes()))
        gz.unlink()


def _regzip(data: Path) -> None:
    _gunzip(data)
    for name in FILES:
        plain = (data / name).with_suffix("")
        (data / name).write_bytes(gzip.compress(plain.read_bytes(), mtime=0))


def _corrupt(data: Path) -> None:
    path = data / FILES[1]
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _truncate(data: Path) -> None:
    path = data / FILES[0]
    path.write_bytes(path.read_bytes()[:1000])


def arrays(name: str = "d/good.npz", lacking: bool = False) -> Setup:
    def setup(w: Path) -> None:
        import numpy as np

        rng = np.random.default_rng(0)
        (w / name).parent.mkdir(parents=True, exist_ok=True)
        if lacking:
            np.savez(w / name, x_train=rng.random((40, 3)))
            return
        np.savez(w / name, x_train=rng.random((40, 3)), y_train=np.arange(40) % 2,
                 x_test=rng.random((20, 3)), y_test=np.arange(20) % 2)  # fmt: skip

    return setup


def _save_npy(path: Path) -> None:
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        np.save(fh, np.zeros(3))


ARRAYS_TOML = """name = "arr"
m = 2
seeds = [0]
[data]
dataset = "arrays"
path = "{path}"
[data.partition]
kind = "iid"
n_clients = 4
[sim]
rounds = 2
eval_every = 1
[[methods]]
name = "uniform"
"""


def symlink(link: str, target: str, make_target: bool = True) -> Setup:
    def setup(w: Path) -> None:
        if make_target:
            (w / target).mkdir(parents=True, exist_ok=True)
        (w / link).symlink_to(w / target)

    return setup


def earlier_results(name: str, rounds: int = 4) -> Setup:
    def setup(w: Path) -> None:
        tiny(rounds=rounds)(w)
        subprocess.run(_command(["run", str(w / "tiny.toml"), "--out", str(w / name)]),
                       cwd=w, env=_env(()), capture_output=True, check=True)  # fmt: skip

    return setup


HOLD_LOCK = """
import fcntl, sys, time
fh = open(sys.argv[1], "a+")
fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
fh.write("pid 1 on sweep, started now: adcs run other.toml\\n"); fh.flush()
open(sys.argv[2], "w").close()
time.sleep(float(sys.argv[3]))
"""


def locked_out(name: str, seconds: float = 30.0) -> Setup:
    """A helper process holds the lock of ``--out name`` for ``seconds`` (as a running run)."""

    def setup(w: Path) -> None:
        ready = w / ".ready"
        subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(w / f".{name}.lock"), str(ready),
                          str(seconds)], start_new_session=True)  # fmt: skip
        deadline = time.monotonic() + 10
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)

    return setup


# ---------------------------------------------------------------------------------------------
# checks


def results_at(target: str, link: str | None = None) -> Check:
    def check(w: Path, output: str) -> bool:
        ok = (w / target / "manifest.json").is_file()
        if link is not None:
            ok = ok and (w / link).is_symlink()
        leftovers = [p.name for p in w.iterdir() if ".old-" in p.name or ".partial" in p.name]
        return ok and not leftovers

    return check


def output_has(*texts: str, absent: Sequence[str] = ()) -> Check:
    def check(w: Path, output: str) -> bool:
        return all(t in output for t in texts) and not any(a in output for a in absent)

    return check


# ---------------------------------------------------------------------------------------------
# the cases


def _listener() -> tuple[socket.socket, str]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server, f"127.0.0.1:{server.getsockname()[1]}"


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def cases(full_data: Path | None, not_ray: str) -> list[Case]:
    """The table of cases (``full_data``: the official files, for the cases that need them)."""
    T = "{w}/tiny.toml"
    OUT = ["--out", "{w}/out"]
    q = ["run", QUICK, "--rounds", "2", "--seeds", "1", *OUT]
    full = full_data if full_data is not None else SUBSET
    c: list[Case] = []
    add = c.append
    # -- the data
    add(Case("data-no-folder", (*q, "--data", "{w}/nowhere"), "is not a folder", 2))
    add(Case("data-empty-folder", (*q, "--data", "{w}/data"), "it is empty", 1,
             setup=lambda w: (w / "data").mkdir()))  # fmt: skip
    add(Case("data-file-missing", (*q, "--data", "{w}/data"), f"{FILES[3]} is missing", 1,
             setup=data_copy(SUBSET, _drop(FILES[3]))))  # fmt: skip
    add(Case("data-folder-for-file", (*q, "--data", "{w}/data"), "is a folder, not a file", 1,
             setup=data_copy(SUBSET, _drop(FILES[3], os.mkdir))))  # fmt: skip
    add(Case("data-fifo-for-file", (*q, "--data", "{w}/data"), "is a named pipe (FIFO)", 1,
             setup=data_copy(SUBSET, _drop(FILES[3], os.mkfifo))))  # fmt: skip
    add(
        Case(
            "data-dangling-link",
            (*q, "--data", "{w}/data"),
            f"{FILES[3]} is missing",
            1,
            setup=data_copy(SUBSET, _drop(FILES[3], lambda p: p.symlink_to(p.parent / "x"))),
        )
    )
    add(Case("data-gunzipped", (*q, "--data", "{w}/data"), "there only decompressed", 1,
             setup=data_copy(SUBSET, _gunzip)))  # fmt: skip
    add(Case("data-is-a-file", (*q, "--data", "{w}/tiny.toml"), "is not a folder", 2,
             setup=tiny()))  # fmt: skip
    add(Case("data-subset-files-as-full", (*q, "--data", "{w}/data"), "MD5 mismatch", 1,
             setup=data_copy(SUBSET)))  # fmt: skip
    add(Case("data-corrupt", (*q, "--data", "{w}/data"), "MD5 mismatch", 1,
             setup=data_copy(full, _corrupt), needs="data"))  # fmt: skip
    add(Case("data-truncated", (*q, "--data", "{w}/data"), "MD5 mismatch", 1,
             setup=data_copy(full, _truncate), needs="data"))  # fmt: skip
    add(Case("data-regzipped", (*q, "--data", "{w}/data"), None,
             setup=data_copy(full, _regzip), check=results_at("out"), needs="data"))  # fmt: skip
    add(Case("data-env-missing", tuple(q), "$ADCS_DATA_DIR '{w}/nowhere' is not a folder", 2,
             env=(("ADCS_DATA_DIR", "{w}/nowhere"),)))  # fmt: skip
    add(Case("data-env-file-missing", tuple(q), f"{FILES[3]} is missing", 1,
             setup=data_copy(SUBSET, _drop(FILES[3])),
             env=(("ADCS_DATA_DIR", "{w}/data"),)))  # fmt: skip
    add(
        Case(
            "data-env-empty-folder",
            tuple(q),
            "it is empty",
            1,
            setup=lambda w: (w / "data").mkdir(),
            env=(("ADCS_DATA_DIR", "{w}/data"),),
        )
    )
    add(Case("data-path-in-config-bad", ("run", "{w}/c.toml", *OUT), "data.path 'gone.npz'", 2,
             setup=write("c.toml", ARRAYS_TOML.format(path="gone.npz"))))  # fmt: skip
    add(Case("data-path-overridden", ("run", "{w}/c.toml", "--data", "{w}/d/good.npz", *OUT),
             None, setup=both(write("c.toml", ARRAYS_TOML.format(path="gone.npz")), arrays()),
             check=results_at("out")))  # fmt: skip
    add(Case("arrays-npy-as-npz", ("run", "{w}/c.toml", *OUT), "is not a .npz archive", 1,
             setup=both(write("c.toml", ARRAYS_TOML.format(path="d/a.npz")),
                        lambda w: _save_npy(w / "d" / "a.npz"))))  # fmt: skip
    add(Case("arrays-not-npz", ("run", "{w}/c.toml", *OUT), "is not a .npz archive", 1,
             setup=both(write("c.toml", ARRAYS_TOML.format(path="d/bad.npz")),
                        write("d/bad.npz", "not an archive"))))  # fmt: skip
    add(
        Case(
            "arrays-lacking",
            ("run", "{w}/c.toml", *OUT),
            "lacks the array(s)",
            1,
            setup=both(
                write("c.toml", ARRAYS_TOML.format(path="d/x.npz")),
                arrays("d/x.npz", lacking=True),
            ),
        )
    )
    add(Case("trace-missing", ("run", T, *OUT), "gone.npz does not exist", 2,
             setup=tiny('[sim.availability]\nkind = "trace"\npath = "gone.npz"')))  # fmt: skip
    add(Case("trace-not-npz", ("run", T, *OUT), "t.npz is not a .npz archive", 2,
             setup=both(write("t.npz", "round,client\n0,1\n"),
                        tiny('[sim.availability]\nkind = "trace"\npath = "t.npz"'))))  # fmt: skip
    # -- the configuration
    add(Case("config-missing", ("run", "{w}/gone.toml", *OUT), "no such configuration file", 2))
    add(Case("config-folder", ("run", "{w}", *OUT), "is a folder", 2))
    add(Case("config-binary", ("run", "{w}/b.toml", *OUT), "not UTF-8", 2,
             setup=write("b.toml", b"\xff\xfe\x00binary")))  # fmt: skip
    add(
        Case(
            "config-bom",
            ("run", "{w}/bom.toml", *OUT),
            None,
            check=results_at("out"),
            setup=write("bom.toml", b"\xef\xbb\xbf" + TINY.format(rounds=4, sim="").encode()),
        )
    )
    add(Case("config-not-toml", ("run", "{w}/x.toml", *OUT), "not valid TOML", 2,
             setup=write("x.toml", "name = \n")))  # fmt: skip
    add(Case("config-empty", ("run", "{w}/e.toml", *OUT), "e.toml", 2, setup=write("e.toml", "")))
    add(Case("config-unknown-key", ("run", T, *OUT), "sim.roundz", 2, setup=tiny("roundz = 3")))
    add(Case("config-dropout-1.5", ("run", T, *OUT), "[0, 1), got 1.5", 2,
             setup=tiny("dropout = 1.5")))  # fmt: skip
    add(Case("config-dropout-1.0", ("run", T, *OUT), "[0, 1), got 1.0", 2,
             setup=tiny("dropout = 1.0")))  # fmt: skip
    add(Case("config-nan-lr", ("run", T, *OUT), "sim.local_lr", 2, setup=tiny("local_lr = nan")))
    add(Case("config-rounds-float", ("run", T, *OUT), "sim.rounds", 2,
             setup=write("tiny.toml", TINY.format(rounds=2.5, sim=""))))  # fmt: skip
    add(Case("config-rounds-negative", ("run", T, *OUT), "sim.rounds", 2, setup=tiny(rounds=-3)))
    add(
        Case(
            "config-eval-every-0",
            ("run", T, *OUT),
            "sim.eval_every",
            2,
            setup=write("tiny.toml", TINY.format(rounds=4, sim="").replace("= 2\n", "= 0\n")),
        )
    )
    add(
        Case(
            "config-m-above-n",
            ("run", T, *OUT),
            "exceeds the number of clients",
            2,
            setup=write("tiny.toml", TINY.format(rounds=4, sim="").replace("m = 3", "m = 9")),
        )
    )
    add(Case("config-eval-clients-above-n", ("run", T, *OUT), "sim.eval_clients = 100", 2,
             setup=tiny("eval_clients = 100")))  # fmt: skip
    add(Case("config-huge-rounds", ("run", T, *OUT), "sim.rounds = 10000000000000", 2,
             setup=tiny(rounds=10**13)))  # fmt: skip
    add(Case("config-huge-rounds-eval", ("run", T, *OUT), "sim.rounds = 3000000000", 2,
             setup=write("tiny.toml", TINY.format(rounds=3 * 10**9, sim="").replace(
                 "eval_every = 2", "eval_every = 1"))))  # fmt: skip
    add(Case("config-clients-beyond-int32", ("run", T, *OUT), "data.n_clients must be at most", 2,
             setup=write("tiny.toml", TINY.format(rounds=4, sim="").replace(
                 "n_clients = 6", "n_clients = 10000000000000"))))  # fmt: skip
    add(Case("config-clients-beyond-memory", ("run", T, *OUT), "the number of clients N", 2,
             setup=write("tiny.toml", TINY.format(rounds=4, sim="").replace(
                 "n_clients = 6", "n_clients = 2000000000"))))  # fmt: skip
    add(Case("config-batch-huge", ("run", T, *OUT), "batch_size", 2,
             setup=tiny("batch_size = 1000000000000")))  # fmt: skip
    add(Case("config-unknown-method", ("run", T, *OUT), "nosuch", 2,
             setup=write("tiny.toml", TINY.format(rounds=4, sim="").replace(
                 'name = "uniform"', 'name = "nosuch"'))))  # fmt: skip
    add(Case("config-attack-suite", ("run", str(REPO / "experiments" / "attacks.toml"), *OUT),
             "adcs bench attacks", 2))  # fmt: skip
    # -- the command line's own options
    add(Case("rounds-huge", ("run", T, "--rounds", "10000000000000", *OUT), "--rounds", 2,
             setup=tiny()))  # fmt: skip
    add(Case("seeds-huge", ("run", T, "--seeds", "1000000000", *OUT), "--seeds 1000000000", 2,
             setup=tiny()))  # fmt: skip
    add(Case("leaderboard-rounds-huge",
             ("leaderboard", "--workloads", "paper", "--rounds", "10000000000000", *OUT),
             "--rounds", 2))  # fmt: skip
    add(Case("rounds-set-twice", ("run", T, "--rounds", "3", "--set", "sim.rounds=5", *OUT),
             "--set sim.rounds and --rounds both set sim.rounds", 2, setup=tiny()))  # fmt: skip
    add(Case("sweep-key-twice",
             ("run", T, "--sweep", "data.n_clients=6,8", "--sweep", "data=[{}]", *OUT),
             "sweep data.n_clients and sweep data both set data", 2, setup=tiny()))  # fmt: skip
    add(Case("sweep-point-too-large", ("run", T, "--sweep", "sim.rounds=2,10000000000000", *OUT),
             "(sweep sim.rounds=10000000000000): sim.rounds = 10000000000000", 2,
             setup=tiny()))  # fmt: skip
    add(Case("rounds-zero", ("run", T, "--rounds", "0", *OUT), "--rounds", 2, setup=tiny()))
    add(Case("rounds-text", ("run", T, "--rounds", "abc", *OUT), "--rounds", 2, setup=tiny()))
    add(Case("seeds-negative", ("run", T, "--seeds", "-1", *OUT), "--seeds", 2, setup=tiny()))
    add(Case("workers-zero", ("run", T, "--workers", "0", *OUT), "--workers", 2, setup=tiny()))
    add(Case("checkpoint-negative", ("run", T, "--checkpoint-every", "-1", *OUT),
             "--checkpoint-every", 2, setup=tiny()))  # fmt: skip
    add(Case("blas-threads-zero", ("--blas-threads", "0", "run", T, *OUT), "--blas-threads", 2,
             setup=tiny()))  # fmt: skip
    add(Case("unknown-option", ("run", T, "--bogus", *OUT), "--bogus", 2, setup=tiny()))
    add(Case("unknown-command", ("runn",), "No such command", 2))
    add(Case("missing-argument", ("run",), "Missing argument", 2))
    add(Case("reproduce-bad-target", ("reproduce", "fig9"), "fig9", 2))
    add(Case("resume-without-out", ("run", T, "--resume"), "--resume needs --out", 2,
             setup=tiny()))  # fmt: skip
    add(Case("resume-nothing", ("run", T, "--resume", *OUT), "no interrupted run", 2,
             setup=tiny()))  # fmt: skip
    add(Case("workloads-empty", ("leaderboard", "--workloads", "", *OUT), "names no workload", 2))
    add(Case("workloads-unknown", ("leaderboard", "--workloads", "nosuch", *OUT), "nosuch", 2))
    add(Case("bench-unknown", ("bench", "nosuch"), "unknown benchmark", 2))
    add(Case("bench-torch-help", ("bench", "torch", "--help"), None,
             check=output_has("usage: adcs bench torch")))  # fmt: skip
    # -- the results folder
    add(Case("out-empty", ("run", T, "--out", ""), "--out is empty", 2, setup=tiny()))
    add(Case("out-current", ("run", T, "--out", "."), "the current folder", 2, setup=tiny()))
    add(Case("out-is-a-file", ("run", T, "--out", T), "not a folder", 2, setup=tiny()))
    add(Case("out-parent-is-a-file", ("run", T, "--out", "{w}/tiny.toml/sub"), "not a folder",
             2, setup=tiny()))  # fmt: skip
    add(Case("out-foreign-folder", ("run", T, *OUT, "--force"), "no manifest.json", 2,
             setup=both(tiny(), write("out/notes.txt", "mine"))))  # fmt: skip
    add(Case("out-foreign-manifest", ("run", T, *OUT, "--force"), "not one adcs wrote", 2,
             setup=both(tiny(), write("out/manifest.json", '{"mine": 1}'))))  # fmt: skip
    add(Case("out-earlier-results", ("run", T, *OUT), "pass --force", 2,
             setup=earlier_results("out")))  # fmt: skip
    add(Case("out-earlier-results-force", ("run", T, *OUT, "--force"), None,
             setup=earlier_results("out"), check=results_at("out")))  # fmt: skip
    add(Case("out-inside-data", (*q[:-2], "--data", str(SUBSET), "--out", f"{SUBSET}/x"),
             "inside the data folder", 2))  # fmt: skip
    add(Case("out-read-only-place", ("run", T, "--out", "/proc/adcs-out"),
             "cannot create files beside --out", 1, setup=tiny()))  # fmt: skip
    add(Case("out-symlink", ("run", T, "--out", "{w}/link"), None,
             setup=both(tiny(), symlink("link", "target")),
             check=results_at("target", "link")))  # fmt: skip
    add(Case("out-symlink-force", ("run", T, "--out", "{w}/link", "--force"), None,
             setup=both(earlier_results("target"), symlink("link", "target", False)),
             check=results_at("target", "link")))  # fmt: skip
    add(Case("out-dangling-symlink", ("run", T, "--out", "{w}/link"), None,
             setup=both(tiny(), symlink("link", "later/target", False)),
             check=results_at("later/target", "link")))  # fmt: skip
    add(
        Case(
            "out-symlink-loop",
            ("run", T, "--out", "{w}/a"),
            "cannot be followed",
            2,
            setup=both(tiny(), symlink("a", "b", False), symlink("b", "a", False)),
        )
    )
    add(Case("out-busy", ("run", T, *OUT), "being written by another adcs run", 1,
             setup=both(tiny(), locked_out("out"))))  # fmt: skip
    add(
        Case(
            "out-stale-partial",
            ("run", T, *OUT),
            "no longer running",
            2,
            setup=both(tiny(), write(".out.partial/writer.json", '{"pid": 999999}')),
        )
    )
    add(Case("out-full-disk", ("run", "{w}/tiny.toml", "--out", "{w}/small/o"),
             "{w}/small/.o.partial: No space left on device", 1, needs="mount",
             setup=tiny(rounds=4000)))  # fmt: skip
    # -- a cluster that is not there, or not Ray
    add(Case("ray-refused", ("run", T, *OUT, "--ray-address", _closed_port()), "nothing answers",
             1, setup=tiny(), needs="ray", timeout=30))  # fmt: skip
    add(Case("ray-not-ray", ("run", T, *OUT, "--ray-address", not_ray), "not a Ray cluster", 1,
             setup=tiny(), needs="ray", timeout=30))  # fmt: skip
    add(Case("ray-not-ray-sigterm", ("run", T, *OUT, "--ray-address", not_ray),
             "terminated (SIGTERM)", 143, setup=tiny(), signal_after="shards on the Ray",
             needs="ray", timeout=30))  # fmt: skip
    # -- interrupts
    add(Case("sigterm-during-run", ("run", T, *OUT, "--checkpoint-every", "100"),
             "terminated (SIGTERM)", 143, setup=tiny(rounds=1_000_000),
             signal_after="rounds (", timeout=90))  # fmt: skip
    # -- the main demo on the shipped subset
    add(Case("demo-claims-not-tested",
             ("reproduce", "fig1", "--quick", "--rounds", "20", "--seeds", "1", *OUT), None,
             check=output_has("not tested", absent=["does not hold"]),
             env=(("ADCS_DATA_DIR", ""),), timeout=120))  # fmt: skip
    return c


def _env(extra: Sequence[tuple[str, str]], w: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("COLUMNS", None)
    for key, value in extra:
        env[key] = value.replace("{w}", str(w)) if w is not None else value
    return env


def _command(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "adcs", *args]
