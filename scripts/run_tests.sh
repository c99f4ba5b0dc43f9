#!/usr/bin/env bash
# The whole test suite in three groups that run at the same time, so that the machine's cores
# stay busy until the end:
# - the tests of Flower's Deployment Runtime (real SuperLink and SuperNode processes, mostly
#   waiting out Flower's node heartbeats), in the background;
# - the tests marked `one_process` (tests/conftest.py: they may start Ray, and Flower's
#   Simulation Runtime calls ray.init(), which would join the Ray cluster another test starts,
#   so they must not overlap each other), in one process, in the background;
# - all the others, spread over the machine's cores by pytest-xdist, a module to a process, at a
#   lower CPU priority (nice), so that the two groups above — whose Flower nodes and messages
#   time out when starved of the CPU — get the CPU when they need it.
# No test of one group starts Ray or Flower processes that a test of another group could join.
# The exit status is 0 only when every group passes; the background groups' output is printed
# after the spread group's.
# Usage: scripts/run_tests.sh [BIN] [MARKERS]
#   BIN: the folder holding pytest (default .venv/bin).
#   MARKERS: run only the tests matching this marker expression as well, without the
#   deployment tests (e.g. `numeric`, what CI runs again under a second BLAS kernel).
set -u
bin=${1:-.venv/bin}
only=${2:-}
select="not deployment and not slow${only:+ and ($only)}"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
deployment=
if [ -z "$only" ]; then
  "$bin/pytest" -m "deployment and not slow" > "$logs/deployment" 2>&1 &
  deployment=$!
fi
"$bin/pytest" -m "$select and one_process" > "$logs/serial" 2>&1 &
serial_pid=$!
nice -n 5 "$bin/pytest" -n auto --dist loadscope -m "$select and not one_process"
spread=$?
wait "$serial_pid"
serial=$?
echo "---- the tests that must run in one process (run beside the others) ----"
cat "$logs/serial"
deployed=0
if [ -n "$deployment" ]; then
  wait "$deployment"
  deployed=$?
  echo "---- the Deployment Runtime's tests (run beside the others) ----"
  cat "$logs/deployment"
fi
[ "$spread" -eq 0 ] && [ "$serial" -eq 0 ] && [ "$deployed" -eq 0 ]
