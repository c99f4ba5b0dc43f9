#!/usr/bin/env bash
# The whole test suite: the tests of Flower's Deployment Runtime (real SuperLink and SuperNode
# processes, mostly waiting out Flower's node heartbeats) in the background, beside the others, at
# a lower CPU priority (nice): their daemons' CPU then goes to the others only when they wait, and
# their timeouts (minutes) leave room for it. Measured on a 2-core machine: the spread group below
# 7:09 beside them at the same priority, 4:38 with them niced; the whole run 9:44 and 7:57.
# Those run first spread over the machine's cores by pytest-xdist, a module to a process; then,
# in one process, the tests marked `one_process` (tests/conftest.py: they may start Ray, and
# Flower's Simulation Runtime calls ray.init(), which would join the Ray cluster another test
# starts, so they must not overlap). The exit status is 0 only when every part passes; the
# deployment tests' output is printed last.
# Usage: scripts/run_tests.sh [BIN] [MARKERS]
#   BIN: the folder holding pytest (default .venv/bin).
#   MARKERS: run only the tests matching this marker expression as well, without the
#   deployment tests (e.g. `numeric`, what CI runs again under a second BLAS kernel).
set -u
bin=${1:-.venv/bin}
only=${2:-}
select="not deployment and not slow${only:+ and ($only)}"
if [ -z "$only" ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  nice -n 10 "$bin/pytest" -m "deployment and not slow" > "$log" 2>&1 &
  deployment=$!
fi
"$bin/pytest" -n auto --dist loadscope -m "$select and not one_process"
spread=$?
"$bin/pytest" -m "$select and one_process"
serial=$?
deployed=0
if [ -z "$only" ]; then
  wait "$deployment"
  deployed=$?
  echo "---- the Deployment Runtime's tests (run beside the others) ----"
  cat "$log"
fi
[ "$spread" -eq 0 ] && [ "$serial" -eq 0 ] && [ "$deployed" -eq 0 ]
