#!/bin/sh
# How results/peers/ was made (issue 23, part 4), from the repository root, with ADCS_DATA_DIR set
# to the Fashion-MNIST folder; one process at a time (--workers 1), niced, on a shared 2-core machine
# (about 1 h 15 min of wall time in all, most of it poc_a03; clustered_shards, run later on its
# own, took about 2 h 30 min of one process beside other work, interrupted once and resumed with
# --resume: its manifest's sessions; clustered_shards_adcs2 about 10 min; clustered_dirichlet
# about 50 min and clustered_shards_adcs_variants about 40 min side by side;
# clustered_dirichlet_adcs about 16 min with --workers 2 and clustered_shards_adcs2_raw about 12
# min beside it; clustered_shards_adcs2_raw_steps and clustered_shards_adcs2_raw_kernel about
# 15 min each with --workers 2, clustered_shards_adcs_theta 14 min with --workers 2; results do not
# depend on the workers).
set -e
for c in poc_a03 poc_a03_logistic poc_a03_constant poc_a2 clustered_a03 poc_authors_lr005 \
    poc_authors_lr0005 clustered_shards clustered_shards_adcs2 clustered_shards_adcs_variants \
    clustered_dirichlet clustered_dirichlet_adcs clustered_shards_adcs2_raw \
    clustered_shards_adcs2_raw_steps clustered_shards_adcs2_raw_kernel \
    clustered_shards_adcs_theta; do
    nice -n 10 adcs run "experiments/peers/$c.toml" --out "results/peers/$c" --workers 1
done
# global test accuracy (the papers' metric) and gains over MD paired by seed; clustered_a03 has no
# MD run of its own and takes poc_a03's (seed 0, cut to 150 rounds: the same run up to there)
python scripts/peers_summary.py --baseline md --with results/peers/poc_a03 results/peers/poc_a03 \
    results/peers/poc_a03_logistic results/peers/poc_a03_constant results/peers/poc_a2 \
    results/peers/clustered_a03 results/peers/poc_authors_lr005 results/peers/poc_authors_lr0005 \
    results/peers/clustered_shards results/peers/clustered_dirichlet > results/peers/summary.md
# the later folders without MD runs of their own take those of the folder they were run beside
# (the same configuration and seeds: the same MD runs)
python scripts/peers_summary.py --baseline md --with results/peers/clustered_shards \
    results/peers/clustered_shards_adcs2 results/peers/clustered_shards_adcs_variants \
    results/peers/clustered_shards_adcs_theta results/peers/clustered_shards_adcs2_raw \
    results/peers/clustered_shards_adcs2_raw_steps results/peers/clustered_shards_adcs2_raw_kernel \
    >> results/peers/summary.md
python scripts/peers_summary.py --baseline md --with results/peers/clustered_dirichlet \
    results/peers/clustered_dirichlet_adcs >> results/peers/summary.md
