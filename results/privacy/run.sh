#!/bin/sh
# How results/privacy/ was made (issue 34), from the repository root, with ADCS_DATA_DIR set to the
# Fashion-MNIST folder; one process at a time, niced, on a shared 2-core machine.
set -e

# 1. The first, small measurement (T = 1 000, one seed; about 3 min): first.md.
run() { nice -n 10 adcs run "$@" --workers 1 --force; }
run experiments/privacy/paper.toml --out results/privacy/paper-inf
for eps in 4 16 64; do
    run experiments/privacy/paper_probes.toml --set sim.privacy.epsilon=$eps \
        --out results/privacy/paper-probes-eps$eps
done
run experiments/privacy/paper_eps4_full.toml --out results/privacy/paper-full-eps4
# provenance without this machine's paths: the data folder and the interpreter's path of adcs
for f in results/privacy/paper-*/manifest.json results/privacy/paper-*/report.md; do
    sed -i -e "s| ($ADCS_DATA_DIR)||g" -e 's|"[^"]*/adcs/__main__\.py"|"adcs"|' "$f"
done
python scripts/privacy_summary.py results/privacy/paper-inf results/privacy/paper-probes-eps4 \
    results/privacy/paper-probes-eps16 results/privacy/paper-probes-eps64 \
    results/privacy/paper-full-eps4 > results/privacy/first.md

# 2. The grid (T = 4 000, seeds 0-2; three workloads, ε ∈ {1, 2, 4, 8, 16, ∞}): report.md and
# privacy.png. `run` runs the grid's points in order (ε = ∞, then ε = 4, 1, 16, 2, 8 on each
# workload), one adcs run at a time, resuming an interrupted one; what did not run is listed in
# report.md.
python scripts/privacy_grid.py configs
nice -n 5 python scripts/privacy_grid.py run
python scripts/privacy_grid.py scrub "$ADCS_DATA_DIR"
python scripts/privacy_grid_report.py results/privacy/grid --figure results/privacy/privacy.png \
    > results/privacy/report.md
