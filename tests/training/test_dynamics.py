"""Training-dynamics curves: trailing means, per-step means per role, and the figures."""

from __future__ import annotations

import math

import pytest

from genmem.training.dynamics import (
    RATES,
    eligibility_rates,
    plot_grpo_dynamics,
    plot_loss,
    step_means,
    trailing_mean,
)

PNG = b"\x89PNG"


def test_trailing_mean_uses_shorter_prefixes_and_skips_nan() -> None:
    assert trailing_mean([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]
    assert trailing_mean([1.0, math.nan, 3.0], 3) == [1.0, 1.0, 2.0]
    assert math.isnan(trailing_mean([math.nan], 3)[0])
    with pytest.raises(ValueError, match="window"):
        trailing_mean([1.0], 0)


def _rows() -> list[dict]:
    return [
        {"role": "retriever", "step": 0, "sid_valid": True, "answered": False, "format": 1.0},
        {"role": "retriever", "step": 0, "sid_valid": False, "answered": True, "format": 0.0},
        {"role": "evolver", "step": 0, "sid_valid": True, "sid_match": None, "format": 1.0},
        {"role": "retriever", "step": 1, "sid_valid": True, "answered": True, "format": 1.0},
    ]


def test_step_means_split_by_role_and_count_booleans() -> None:
    table = step_means(_rows(), "retriever", ["sid_valid", "answered", "sid_match"])
    assert table["steps"] == [1, 2]  # TRL's global step 0 is the first step
    assert table["sid_valid"] == [0.5, 1.0] and table["answered"] == [0.5, 1.0]
    assert all(math.isnan(v) for v in table["sid_match"])  # never given: no value, not 0
    evolver = step_means(_rows(), "evolver", ["format", "sid_match"])
    assert evolver["steps"] == [1] and evolver["format"] == [1.0]


def test_failed_parts_are_left_out_of_step_means() -> None:
    # A judge that raised leaves its part NaN: the step's mean is over the parts that exist.
    rows = [
        {"role": "retriever", "step": 0, "strategy_judge": math.nan, "process_channel": math.nan},
        {"role": "retriever", "step": 0, "strategy_judge": 0.5, "process_channel": 2.5},
    ]
    table = step_means(rows, "retriever", ["strategy_judge", "process_channel"])
    assert table["strategy_judge"] == [0.5] and table["process_channel"] == [2.5]


def test_eligibility_rates_per_role() -> None:
    rates = eligibility_rates(_rows(), "retriever")
    assert rates["sid_valid"] == round(2 / 3, 4) and rates["answered"] == round(2 / 3, 4)
    assert rates["sid_match"] is None and rates["retrieved"] is None  # never recorded
    assert eligibility_rates(_rows(), "evolver")["sid_valid"] == 1.0


def test_figures_are_written(tmp_path) -> None:
    parts = {"retriever": ("format",), "evolver": ("format", "operation")}
    path = plot_grpo_dynamics(_rows(), parts, tmp_path / "grpo.png", window=3)
    assert open(path, "rb").read(4) == PNG
    loss = plot_loss([3.0, 2.5, 2.0], tmp_path / "mid.png", title="mid", steps=[1, 2, 3])
    assert open(loss, "rb").read(4) == PNG
    assert set(RATES) == {"sid_valid", "retrieved", "sid_match", "answered"}
