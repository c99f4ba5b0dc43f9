"""Figures: the paper's three figures and the generic curves are written as real PNGs."""

from __future__ import annotations

from pathlib import Path

from adcs.experiments.analysis.figures import plot_accuracy, write_figures
from adcs.experiments.analysis.report import RunRecord
from adcs.experiments.paper import FIGURE_SERIES, FIGURES

from .records import adcs, record

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def paper_like(seeds: int = 2) -> list[RunRecord]:
    """Runs of Fig. 1, part of Fig. 2 (θ = 0.2, 0.6, 0.8) and all of Fig. 3."""
    out = []
    for s in range(seeds):
        for i, method in enumerate(("uniform", "powerofchoice", "ocs", "divfl", "staticdpp")):
            out.append(record(method, 0.3 + 0.02 * i, 0.8, seed=s, noise=0.01))
        for theta in (0.2, 0.6, 0.8):
            out.append(adcs(0.4, 0.8, theta, 20, seed=s, noise=0.01))
        for r in (1, 5, 100, 500):
            out.append(adcs(0.45, 0.8, 0.8, r, seed=s, noise=0.01))
    return out


def _png_size(path: Path) -> tuple[int, int]:
    raw = path.read_bytes()
    assert raw[:8] == PNG_MAGIC
    return int.from_bytes(raw[16:20], "big"), int.from_bytes(raw[20:24], "big")


def test_paper_figures_are_drawn_from_their_series(tmp_path: Path) -> None:
    written = write_figures(tmp_path, paper_like(), ["fig1", "fig2", "fig3", "curves"], FIGURES)
    assert written == ["fig1.png", "fig2.png", "fig3.png", "curves.png"]
    for name in written:
        width, height = _png_size(tmp_path / name)
        assert width > 600 and height > 300


def test_named_figures_need_their_definition(tmp_path: Path) -> None:
    assert write_figures(tmp_path, paper_like(), ["fig1", "curves"]) == ["curves.png"]


def test_only_series_with_runs_are_drawn(tmp_path: Path) -> None:
    runs = paper_like()
    drawn = plot_accuracy(runs, FIGURE_SERIES["fig2"], tmp_path / "f.png", "t")
    # the constructed runs have θ = 0.2, 0.6, 0.8 (R = 20) but not 0.4 or 1.0
    assert drawn == ["Uniform", "ADCS θ=0.2", "ADCS θ=0.6", "ADCS θ=0.8"]


def test_a_figure_without_any_of_its_runs_is_skipped(tmp_path: Path) -> None:
    only_uniform = [record("uniform", 0.3, 0.8, seed=s) for s in range(2)]
    assert write_figures(tmp_path, only_uniform, ["fig3", "curves"], FIGURES) == ["curves.png"]
    assert not (tmp_path / "fig3.png").exists()


def test_the_curves_figure_draws_every_variant(tmp_path: Path) -> None:
    runs = paper_like(seeds=2)
    drawn = plot_accuracy(runs, [], tmp_path / "none.png", "t")
    assert drawn == []
    write_figures(tmp_path, runs, ["curves"])
    from adcs.experiments.analysis.report import curve_series

    assert len(curve_series(runs)) == len({r.variant for r in runs}) == 12


def test_timed_runs_get_accuracy_against_simulated_time(tmp_path: Path) -> None:
    import dataclasses

    from adcs.experiments.analysis.figures import plot_accuracy_against_time

    from .records import ROUNDS

    runs = []
    for s in range(2):
        for gamma, seconds in ((0.0, 3.0), (0.5, 1.0)):  # two ADCS variants alike in θ and R
            base = adcs(0.4, 0.8, seed=s)
            variant = f"{base.variant}-gamma={gamma}"
            runs.append(dataclasses.replace(
                base, variant=variant, run_id=f"{variant}-seed={s}",
                params={**base.params, "gamma": gamma},
                eval_clock=ROUNDS * seconds, total_time=500 * seconds, client_time=0.0,
            ))  # fmt: skip
    drawn = plot_accuracy_against_time(runs, tmp_path / "time.png")
    assert drawn == [
        "adcs-theta=0.8-refresh_every=20-gamma=0.0",
        "adcs-theta=0.8-refresh_every=20-gamma=0.5",
    ]
    assert _png_size(tmp_path / "time.png") == (1440, 960)
    assert write_figures(tmp_path, runs, []) == ["time.png"]
    assert write_figures(tmp_path, [record("uniform", 0.3, 0.8)], []) == []  # no clock, no figure


def test_variants_too_close_for_short_labels_are_labelled_apart() -> None:
    from adcs.experiments.analysis.records import variant_labels

    from .records import record

    runs = [
        record("adcs", 0.5, 0.8, params={"theta": 0.8, "w": [1, 2, 3, 4, 5]}),
        record("adcs", 0.5, 0.8, params={"theta": 0.8, "w": [1, 2, 3, 4, 6]}),
        record("adcs", 0.5, 0.8, params={"theta": 0.80000001, "w": [1, 2, 3, 4, 6]}),
    ]
    labels = variant_labels(runs)
    assert len(set(labels.values())) == 3, labels
    assert labels[runs[0].variant] == "ADCS theta=0.8, w=[1, 2, 3, 4, 5]"
    assert labels[runs[2].variant] == "ADCS theta=0.80000001, w=[1, 2, 3, 4, 6]"
