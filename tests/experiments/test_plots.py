"""Evaluation figures: the PNGs are written and carry the bootstrap intervals as error bars."""

from __future__ import annotations

from pathlib import Path

import pytest

from genmem.experiments.evaluate import EvalConfig, EvalReport, MethodSummary
from genmem.experiments.plots import plot_eval_summary


def _summary(method: str, acc: float, ci: tuple[float, float]) -> MethodSummary:
    return MethodSummary(
        bench="gsm8k",
        method=method,
        n=10,
        metrics={"accuracy": acc},
        success_rate=acc,
        mean_seconds=1.0,
        errors=0,
        metrics_ci={"accuracy": ci, "success_rate": ci},
    )


def test_eval_summary_png_has_the_intervals_as_error_bars(tmp_path: Path, errorbars) -> None:
    report = EvalReport(
        bench="gsm8k",
        settings=EvalConfig(methods=["none"]),
        summaries=[_summary("none", 0.4, (0.1, 0.7)), _summary("sid", 0.6, (0.3, 0.8))],
        records="records.jsonl",
    )
    path = plot_eval_summary(report, ("accuracy",), tmp_path / "summary.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert len(errorbars) == 2  # one set of bars per method
    none, sid = errorbars
    assert none["y"] == pytest.approx([40.0, 40.0])
    assert [list(side) for side in none["yerr"]] == [
        pytest.approx([30.0, 30.0]),  # below the bar: 40 - 10
        pytest.approx([30.0, 30.0]),  # above it: 70 - 40
    ]
    assert [list(side) for side in sid["yerr"]] == [
        pytest.approx([30.0, 30.0]),
        pytest.approx([20.0, 20.0]),
    ]


def test_each_named_estimate_is_a_bar_with_its_interval(tmp_path: Path, errorbars) -> None:
    from genmem.envs.stats import mean_interval
    from genmem.experiments.plots import plot_estimates

    table = {"sid": mean_interval([0.6, 0.8]), "gone": None, "best": mean_interval([0.9, 0.9])}
    path = plot_estimates(table, tmp_path / "p.png", ylabel="share (%)", title="t")
    assert path.read_bytes()[:4] == b"\x89PNG"
    [bars] = errorbars  # one bar per estimate; the missing one left out
    assert bars["x"] == [0, 1] and bars["y"] == pytest.approx([70.0, 90.0])
    sid = table["sid"]
    assert sid is not None
    below, above = (list(side) for side in bars["yerr"])
    assert below[0] == pytest.approx(100 * (sid.mean - sid.ci[0]))
    assert above[0] == pytest.approx(100 * (sid.ci[1] - sid.mean))
    assert below[1] == above[1] == 0.0  # a constant estimate has no spread
