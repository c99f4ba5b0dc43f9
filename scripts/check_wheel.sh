#!/usr/bin/env bash
# Build the wheel, install it into a fresh virtual environment (no source checkout on the path),
# and run the main job from it: `adcs reproduce --quick`, a benchmark it carries, `--version`,
# the shipped configurations by name.
# Usage: scripts/check_wheel.sh [PYTHON] [extra adcs reproduce arguments, e.g. --data DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
shift || true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip wheel --quiet --no-deps . -w "$work/dist"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "$work"/dist/adcs-*.whl
cd "$work"  # away from the checkout: only the installed package is importable
"$work/venv/bin/adcs" --version
"$work/venv/bin/python" -c "import adcs, sys; assert '/site-packages/' in adcs.__file__, adcs.__file__"
"$work/venv/bin/adcs" bench map --help > /dev/null
# every shipped configuration is package data, found by name as `adcs run NAME` finds it
"$work/venv/bin/python" -c "
from adcs.experiments.config import resolve_config, shipped_configs
assert {'fig1', 'quick', 'successor/paper', 'leaderboard/m6'} <= set(shipped_configs())
print('shipped configurations:', len(shipped_configs()), resolve_config('successor/paper'))
"
"$work/venv/bin/adcs" reproduce --quick --out "$work/quick" "$@"
test -f "$work/quick/report.md"
echo "wheel: installed, adcs reproduce --quick ran from it"
