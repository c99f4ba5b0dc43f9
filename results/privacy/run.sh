#!/bin/sh
# How results/privacy/ was made (issue 34, a first small measurement), from the repository root, with
# ADCS_DATA_DIR set to the Fashion-MNIST folder; one process at a time, niced, on a shared 2-core
# machine (about 3 min of wall time in all). The full grid is pending.
set -e
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
    results/privacy/paper-full-eps4 > results/privacy/report.md
