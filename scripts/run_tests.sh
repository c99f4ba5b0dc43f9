#!/usr/bin/env bash
# The whole test suite, in two pytest processes at once: the tests of Flower's Deployment Runtime
# (real SuperLink and SuperNode processes, mostly waiting out Flower's node heartbeats) beside all
# the others, which run one at a time (Flower's Simulation Runtime calls ray.init(), which would
# join the Ray cluster another test starts, so those must not overlap). Its exit status is 0 only
# when both pass; the deployment tests' output is printed after the others'.
# Usage: scripts/run_tests.sh [BIN]   (BIN: the folder holding pytest, default .venv/bin)
set -u
bin=${1:-.venv/bin}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$bin/pytest" -m "deployment and not slow" > "$log" 2>&1 &
deployment=$!
"$bin/pytest" -m "not deployment and not slow"
others=$?
wait "$deployment"
deployed=$?
echo "---- the Deployment Runtime's tests (run beside the others) ----"
cat "$log"
[ "$others" -eq 0 ] && [ "$deployed" -eq 0 ]
