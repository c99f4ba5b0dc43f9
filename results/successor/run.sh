#!/bin/sh
# How results/successor/ was made (issue 23), from the repository root, with ADCS_DATA_DIR set
# to the Fashion-MNIST folder; one core (--workers 1).
set -e
# 1. the diagnosis: parts 1-2 read committed files only (DIAGNOSIS.md's tables); part 3 trains a
#    T = 1 000 run of ADCS per workload, not committed (--parts 3 --data DIR to see it)
python scripts/diagnose_adcs.py --parts 1,2 --leaderboard results/leaderboard \
    > results/successor/diagnosis_tables.md
# 2. ADCS-2 on the leaderboard's six workloads: an entry of results/leaderboard (five seeds for
#    every entry; its manifest.json names the commands)
# 3. the paper's setting at T = 20 000, 5 seeds (compare with results/paper's ADCS)
adcs run experiments/successor/paper20k.toml --out results/successor/paper20k --workers 1
python scripts/successor_compare.py --committed results --new results/successor \
    --workloads paper:paper20k --entry adcs2 > results/successor/paper20k.md
# 5. the CNN workload (results/cnn's configuration and length): ADCS-2 on seeds 0-2, then seeds 3-4
#    of ADCS-2 and PowerOfChoice (tied on 3 seeds)
adcs run experiments/successor/cnn.toml --out results/successor/cnn --workers 1
adcs run experiments/successor/seeds34/cnn.toml --out results/successor/seeds34/cnn --workers 1
python scripts/successor_compare.py --committed results --new results/successor \
    --workloads cnn:cnn --entry adcs2 > results/successor/cnn_compare.md
# 6. ADCS-2 with θ chosen online (issue 35): five seeds on the six workloads, ranked against the
#    leaderboard's runs (the configs were written by scripts/successor_configs.py
#    experiments/successor/adaptive --seeds 0,1,2,3,4 --method adcs2_adaptive)
for w in paper bernoulli clients100 dirichlet m6 soft_skew; do
    adcs run experiments/successor/adaptive/$w.toml --out results/successor/adaptive/$w --workers 1
done
adcs run experiments/successor/adaptive/cnn.toml --out results/successor/adaptive/cnn --workers 1
#    then the leaderboard's three workloads with another server optimizer, at its three seeds
#    (configs: scripts/successor_configs.py experiments/successor/adaptive --seeds 0,1,2
#    --method adcs2_adaptive --workloads paper_fedadam,dirichlet_fedprox,dirichlet_e3), and all
#    nine joined to the leaderboard as an entry (the runs there kept; adcs merge's rules)
for w in paper_fedadam dirichlet_fedprox dirichlet_e3; do
    adcs run experiments/successor/adaptive/$w.toml --out results/successor/adaptive/$w --workers 1
done
python -c 'from adcs.leaderboard.suite import join_entries; join_entries("results/leaderboard", ["results/successor/adaptive/" + w for w in ["paper", "bernoulli", "m6", "soft_skew", "clients100", "dirichlet", "paper_fedadam", "dirichlet_fedprox", "dirichlet_e3"]])'
python scripts/check_claims.py --write   # adaptive.md: the six workloads' ranking and the CNN pairs
# seeds34.md: successor_paired.py's table for cnn under a heading
# (scripts/check_claims.py's SCRIPT_OUTPUTS has the exact commands)
# 7. equal tuning budgets (issue 35): PowerOfChoice's d, ADCS's θ × R and ADCS-2's θ, eight points
#    each on development seeds 100-102, chosen, then evaluated once on seeds 0-4
#    (scripts/tuning_protocol.py's docstring is the protocol; tuning/FINDINGS.md reads it)
python scripts/tuning_protocol.py configs experiments/successor/tuning
for w in paper bernoulli clients100 dirichlet m6 soft_skew; do
    adcs run experiments/successor/tuning/dev/$w.toml --out results/successor/tuning/dev/$w --workers 1
done
python scripts/tuning_protocol.py choose results/successor/tuning/dev experiments/successor/tuning \
    > results/successor/tuning/choice.md
for w in paper bernoulli clients100 dirichlet m6 soft_skew; do
    adcs run experiments/successor/tuning/eval/$w.toml --out results/successor/tuning/eval/$w --workers 1
done
python scripts/tuning_protocol.py report results/successor/tuning/eval > results/successor/tuning/report.md
# the development folders keep runs.csv and manifest.json only (what `choose` reads)
