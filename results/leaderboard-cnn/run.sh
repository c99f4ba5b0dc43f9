#!/bin/sh
# How results/leaderboard-cnn/ is made (issue 35, part 2), from the repository root, with
# ADCS_DATA_DIR set to the Fashion-MNIST folder: the CNN workload's seeds in parts, then joined.
set -e
adcs leaderboard --workloads cnn --set 'seeds=[0,1]' --workers 2 \
    --out results/leaderboard-cnn/seeds_0_1
# the next two ran at the same time (three lanes on two cores)
adcs leaderboard --workloads cnn --set 'seeds=[2,3]' --workers 2 \
    --out results/leaderboard-cnn/seeds_2_3
adcs leaderboard --workloads cnn --set 'seeds=[4]' --workers 1 \
    --out results/leaderboard-cnn/seed_4
# (an interrupted part continues with the same command and --resume)
adcs merge results/leaderboard-cnn/seeds_0_1/cnn results/leaderboard-cnn/seeds_2_3/cnn \
    results/leaderboard-cnn/seed_4/cnn --out results/leaderboard-cnn/cnn
python -c 'from adcs.leaderboard.suite import join_leaderboard; join_leaderboard("results/leaderboard", ["results/leaderboard-cnn/cnn"])'
rm -r results/leaderboard-cnn/cnn    # joined: results/leaderboard/cnn is its copy
python scripts/check_claims.py --write
