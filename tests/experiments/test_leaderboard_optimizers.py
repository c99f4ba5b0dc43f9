"""The leaderboard under another federated optimiser: counterparts found from the configurations,
each entry against random selection with Holm's adjustment, and the report's words from them."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from adcs.experiments.analysis.stats import holm
from adcs.leaderboard import optimizers as lo
from adcs.leaderboard.ranking import Score

PLAIN: dict[str, Any] = {
    "name": "dirichlet",
    "description": "Dirichlet",
    "m": 10,
    "seeds": [0, 1, 2],
    "data": {"dataset": "fashion-mnist", "partition": {"kind": "dirichlet", "alpha": 0.3}},
    "sim": {"rounds": 4000, "local_lr": 0.001, "server_lr": 1.0},
    "methods": [{"name": "uniform"}],
}


def _variant(name: str, **sim: Any) -> dict[str, Any]:
    config = copy.deepcopy(PLAIN)
    config["name"] = name
    config["sim"].update(sim)
    config["methods"].append({"name": "adcs2"})  # a row added to the table later: not a difference
    return config


def test_a_workload_differing_in_the_optimiser_alone_is_paired_with_its_plain_counterpart() -> None:
    adam = {"kind": "fedadam", "eta": 0.03, "beta_1": 0.9, "beta_2": 0.99, "tau": 0.0001}
    configs = {
        "dirichlet": PLAIN,
        "dirichlet_fedprox": _variant("dirichlet_fedprox", prox_mu=0.01),
        "dirichlet_adam": _variant("dirichlet_adam", server_optimizer=adam),
        "other_lr": _variant("other_lr", prox_mu=0.01, local_lr=0.01),  # differs elsewhere too
    }
    pairs = lo.counterparts(configs)
    assert [(p.workload, p.base) for p in pairs] == [
        ("dirichlet_fedprox", "dirichlet"),
        ("dirichlet_adam", "dirichlet"),
    ]
    assert pairs[0].change == "FedProx μ = 0.01"
    assert pairs[1].change == "FedAdam (η = 0.03, β₁ = 0.9, β₂ = 0.99, τ = 0.0001)"
    # one local step (the default): FedProx's term μ (w − w_t) is zero at it; a server
    # optimizer acts whatever the local steps
    assert "is zero at that step" in pairs[0].inert and pairs[1].inert == ""
    assert lo.counterparts({"dirichlet": PLAIN, "m6": {**PLAIN, "m": 6}}) == []
    five = {**PLAIN, "sim": {**PLAIN["sim"], "local_steps": 5}}
    prox5 = {**five, "sim": {**five["sim"], "prox_mu": 0.01}}
    (pair,) = lo.counterparts({"e5": five, "e5_prox": prox5})
    assert pair.base == "e5" and pair.inert == ""


def _score(label: str, method: str, worst: list[float]) -> Score:
    return Score(
        workload="w", variant=label, method=method, label=label, params={},
        worst=dict(enumerate(worst)), p10={}, avg={}, rounds_to_target={},
        client_updates=0.0, loss_evals=0.0, tv=0.0,
    )  # fmt: skip


def test_each_entry_against_random_selection_is_a_holm_adjusted_paired_t_test() -> None:
    uniform = [0.20, 0.22, 0.21]
    scores = [
        _score("Uniform", "uniform", uniform),
        _score("A", "adcs", [0.40, 0.43, 0.41]),  # clearly ahead
        _score("B", "divfl", [0.22, 0.23, 0.24]),  # a little ahead
        _score("C", "ocs", [0.01, 0.04, 0.02]),  # clearly behind
    ]
    got = lo.gains(scores)
    assert list(got) == ["A", "B", "C"]
    seeds = [0, 1, 2]
    values = {s.label: np.array([s.worst[k] for k in seeds]) for s in scores[1:]}
    raw = [stats.ttest_rel(values[e], uniform).pvalue for e in got]
    for e, p in zip(got, holm(raw), strict=True):
        assert got[e].mean == pytest.approx(np.mean(values[e] - uniform))
        # relative: the p-values are incomplete beta functions, good to a few ulps
        assert got[e].p_value == pytest.approx(p, rel=1e-9)
    assert got["A"].verdict == "ahead" and got["C"].verdict == "behind"
    assert (got["B"].verdict == "tied") == (got["B"].p_value >= 0.05)
    assert lo.gains([_score("A", "adcs", [0.4, 0.4])]) == {}  # no random selection: nothing


def test_the_section_names_where_selection_still_helps_and_where_its_gain_is_lost() -> None:
    uniform_b, uniform_w = [0.20, 0.22, 0.21], [0.50, 0.52, 0.51]
    base = [
        _score("Uniform", "uniform", uniform_b),
        _score("Keeps", "adcs", [0.40, 0.43, 0.41]),
        _score("Loses", "divfl", [0.40, 0.41, 0.42]),
    ]
    with_opt = [
        _score("Uniform", "uniform", uniform_w),
        _score("Keeps", "adcs", [0.60, 0.63, 0.61]),
        _score("Loses", "divfl", [0.50, 0.53, 0.50]),
        _score("New", "adcs2", [0.55, 0.57, 0.56]),
    ]
    pair = lo.Counterpart(workload="w_opt", base="w", change="FedProx μ = 0.01")
    text = "\n".join(lo.optimiser_section([pair], {"w": base, "w_opt": with_opt}))
    assert "### w_opt: w with FedProx μ = 0.01" in text
    assert "cannot act here" not in text
    assert "**Still helps (ahead on both):** Keeps (+20.33 ± 1.43 → +10.33" in text
    assert "**Helps on w only (its gain does not survive the change):** Loses (+20.00" in text
    assert "Ran on w_opt only (no counterpart to compare): New." in text
    assert "| Keeps | +20.33 ± " in text and "| ahead |" in text
    assert lo.optimiser_section([], {}) == []
    # an inert change: how many shared runs end bit-identical is counted, not assumed
    rounded = [*base[:2], _score("Loses", "divfl", [0.40, 0.41, 0.4200001])]
    inert = lo.Counterpart(workload="w_prox", base="w", change="FedProx μ = 0.01", inert="E = 1")
    text = "\n".join(lo.optimiser_section([inert], {"w": base, "w_prox": rounded}))
    assert (
        "**The change cannot act here:** E = 1: 8 of the 9 runs they share end at the same" in text
    )
    assert not math.isnan(lo.gains(with_opt)["New"].mean)


def test_fedprox_proximal_term_is_sized_from_the_configuration() -> None:
    three = {**PLAIN, "sim": {**PLAIN["sim"], "local_steps": 3}}
    prox3 = {**three, "sim": {**three["sim"], "prox_mu": 0.01}}
    # the last of E = 3 steps has drifted 2 steps: μ · 2 · η_ℓ of the gradient; over the round
    # the term adds μ η_ℓ² (0 + 1 + 2) g to an update of 3 η_ℓ g
    largest, update = lo.prox_scale(prox3)  # type: ignore[misc]
    assert largest == pytest.approx(0.01 * 2 * 0.001, rel=1e-12)
    assert update == pytest.approx(0.01 * 0.001**2 * 3 / (3 * 0.001), rel=1e-12)
    assert lo.prox_scale(three) is None  # no FedProx
    assert lo.prox_scale({**PLAIN, "sim": {**PLAIN["sim"], "prox_mu": 0.01}}) is None  # E = 1
    (pair,) = lo.counterparts({"e3": three, "e3_prox": prox3})
    assert "at most 2e-05 of it here (μ = 0.01, η_ℓ = 0.001, E = 3)" in pair.scale
    assert "μ η_ℓ (E − 1)/2 = 1e-05 of it" in pair.scale


def _write_selections(folder: Any, runs: dict[str, np.ndarray]) -> None:
    folder.mkdir(parents=True)
    np.savez(folder / "selections.npz", **{f"selected/{k}": v for k, v in runs.items()})


def test_agreement_counts_rounds_selecting_the_same_set_and_the_final_gap(tmp_path: Any) -> None:
    rounds = np.array([[0, 1], [2, 3], [4, 5], [6, 7]])
    moved = rounds.copy()
    moved[2:] = [[4, 6], [5, 7]]  # apart from round 3 on
    swapped = rounds[:, ::-1]  # the same sets in another order: alike
    _write_selections(tmp_path / "w", {"a-seed=0": rounds, "a-seed=1": moved, "u-seed=0": rounds,
                                       "u-seed=1": rounds})  # fmt: skip
    _write_selections(tmp_path / "b", {"a-seed=0": swapped, "a-seed=1": rounds,
                                       "u-seed=0": rounds, "u-seed=1": rounds})  # fmt: skip
    scores = {
        "w": [_score("u", "uniform", [0.5, 0.5]), _score("a", "adcs", [0.30, 0.40])],
        "b": [_score("u", "uniform", [0.5, 0.5]), _score("a", "adcs", [0.30, 0.45])],
    }
    pair = lo.Counterpart(workload="w", base="b", change="FedProx μ = 0.01", scale="x")
    got = lo.agreement(tmp_path, pair, scores)
    assert got["a"].alike == pytest.approx((1.0 + 0.5) / 2) and got["a"].first_apart == 3
    assert got["a"].gap == pytest.approx(0.05 / 2) and got["a"].largest == pytest.approx(0.05)
    assert got["u"].alike == 1.0 and got["u"].first_apart is None and got["u"].seeds == 2
    text = "\n".join(lo.optimiser_section([pair], scores, {"w": got}))
    # 4 runs: (1 + 0.5 + 1 + 1) / 4 of the rounds alike; gaps 0, 0.05, 0, 0
    assert "Over the 4 runs both ran (entry and seed), 87.5% of the rounds select" in text
    assert "by 1.25 points on average (at most 5.00); u selects the same clients in every" in text
    assert "| a | −12.50 ± " in text and "| tied | 75% |" in text
    assert "**Answer:** of the 0 entries ahead of Uniform on b, 0 are still ahead" in text
    assert lo.agreement(tmp_path / "none", pair, scores) == {}
