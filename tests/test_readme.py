"""The README's library example runs as written and shows what it says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_library_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if "scheduler.select" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, str(README), "exec"), {})
    lines = out.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["updates", "none", "none"]
    picks = [re.findall(r"\d+", line.split(" ", 2)[2]) for line in lines]
    assert all(len(p) == 18 and len(set(p)) == 18 for p in picks)
    assert picks[0] == picks[1] == picks[2]  # the kernel holds between refreshes
