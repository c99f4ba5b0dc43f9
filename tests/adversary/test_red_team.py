"""The red team's attack families (issue 33) as library attacks, and the bench's per-family k."""

from __future__ import annotations

import numpy as np
import pytest

from adcs.adversary import Crafted, Defence, Target
from adcs.adversary.crafted import craft
from adcs.experiments.config import ConfigError
from benchmarks.bench_attacks import Suite, check_ks, load_suite, parse_suite, plan_suite
from tests.adversary.conftest import GROUP, N, grouped_stats


def built(**kwargs) -> Crafted:
    return Crafted(**kwargs).build(0, N)


def test_a_quiet_attacker_reports_nothing_before_it_starts():
    attack = built(clients=(4, 7), start=5, quiet=True, factor=10.0)
    stats = grouped_stats()
    before, rows, _ = craft(attack, stats, 4)
    assert rows.size == 0
    assert np.isnan(before.losses[[4, 7]]).all() and np.isnan(before.updates[[4, 7]]).all()
    honest = np.delete(np.arange(N), [4, 7])
    np.testing.assert_array_equal(before.losses[honest], stats.losses[honest])
    after, rows, _ = craft(attack, stats, 5)  # then it lies
    np.testing.assert_allclose(after.losses[[4, 7]], 10.0 * np.asarray(stats.losses)[[4, 7]])
    loud = built(clients=(4, 7), start=5)  # without quiet: honest before start
    assert craft(loud, stats, 4)[0] is stats


def test_the_smother_reports_the_worst_groups_mean_direction_and_loss_zero():
    stats = grouped_stats()
    losses = np.array(stats.losses)
    attack = built(clients=(9, 10, 11, 6), target="smother", cosine=1.0, loss=0.0, scale=0.01)
    told, rows, directions = craft(attack, stats, 0, Defence(corroborate=True, peers=2))
    assert directions is not None
    np.testing.assert_array_equal(told.losses[rows], 0.0)
    honest = np.flatnonzero(~attack.rows(stats.clients))
    by_loss = honest[np.argsort(-losses[honest], kind="stable")]
    updates = np.asarray(stats.updates, dtype=np.float64)
    units = updates / np.linalg.norm(updates, axis=1, keepdims=True)
    first = by_loss[0] // GROUP  # the highest-loss honest client's group (grouped_stats' groups)
    target = units[[c for c in honest if c // GROUP == first]].mean(axis=0)
    target /= np.linalg.norm(target)
    # members 6 and 9 (the first two in ascending order) smother the worst group
    pair = [int(np.flatnonzero(stats.clients[rows] == c)[0]) for c in (6, 9)]
    cos = directions[pair] @ target
    assert (cos > 1 - 1e-6).all()
    others = [int(np.flatnonzero(stats.clients[rows] == c)[0]) for c in (10, 11)]
    assert (directions[others] @ target < 0.99).all()  # the next two: another group
    sent = np.linalg.norm(told.updates[rows], axis=1)
    np.testing.assert_allclose(sent, 0.01 * np.linalg.norm(updates[stats.clients[rows]], axis=1),
                               rtol=1e-5)  # fmt: skip


def test_the_new_options_are_validated():
    with pytest.raises(ValueError, match="loss"):
        Crafted(clients=(1,), loss=-1.0)
    with pytest.raises(ValueError, match="quiet"):
        Crafted(clients=(1,), quiet=1)  # type: ignore[arg-type]
    assert Crafted(clients=(1,), target="smother").target is Target.SMOTHER


def test_the_suite_runs_each_red_team_family_at_its_own_k():
    config, suite = load_suite("experiments/attacks_recommended.toml")
    ks = {name: suite.ks_of(keys) for name, keys in suite.families}
    assert ks["burst"] == (1, 3) and ks["sybils"] == (3, 10)
    assert ks["smother"] == (2, 4) and ks["flatten"] == (2,)
    assert ks["sleeper"] == suite.family_k  # the earlier families keep family_k
    plan = plan_suite(config, suite, ["families"])
    forms = {(p.attack, p.defence) for p in plan if p.block == "families"}
    assert ("sleeper", "bound") in forms and ("sleeper", "off") not in forms  # undefended = false
    assert ("smother", "off") in forms and ("smother", "bound") in forms
    naive = {(p.attack, p.adaptive) for p in plan if p.defence == "bound"}
    assert ("smother", True) in naive and ("smother", False) not in naive  # naive = false
    with pytest.raises(ConfigError, match=r"families\.f\.undefended"):
        parse_suite({"families": {"f": {"undefended": 1}}})
    check_ks(config, suite)
    wrong = parse_suite({"families": {"f": {"k": [2, 2]}}})
    with pytest.raises(ConfigError, match=r"families\.f\.k"):
        check_ks(config, wrong)
    assert isinstance(wrong, Suite)


def test_the_families_table_reports_each_attackers_lift():
    from types import SimpleNamespace

    from benchmarks.attack_families import family_lines, lift

    def measured(block, defence, rates, base, malicious=(1, 2), attack="smother", k=2):
        planned = SimpleNamespace(block=block, defence=defence, adaptive=False, attack=attack,
                                  k=k, method="adcs", malicious=malicious, seed=0,
                                  run_id=f"adcs/{defence}/{attack}/seed0",
                                  baseline=f"adcs/{defence}/none/seed0")  # fmt: skip
        return SimpleNamespace(planned=planned, rates=np.asarray(rates),
                               baseline_rates=np.asarray(base), worst=0.5)  # fmt: skip

    run = measured("families", "off", [0.6, 0.9, 0.3, 0.6], [0.6, 0.45, 0.6, 0.6])
    assert lift(run) == pytest.approx(2.0)  # client 1: 0.9 against its own 0.45
    assert np.isnan(lift(measured("families", "off", [1, 1, 1, 1], [1, 0, 0, 1])))
    lines = family_lines([run], ["adcs"])
    assert any(line.startswith("| smother | 2 | off | adcs |") and "| 2.00× |" in line
               for line in lines)  # fmt: skip
