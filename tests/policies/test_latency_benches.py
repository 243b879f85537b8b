"""The issue-38 bench scripts run end to end on the real default model and print their keys."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sid_latency_reports_both_engines_and_their_agreement(capsys) -> None:
    assert _script("sid_latency").main(["--contexts", "1", "--agreement", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "cpu" and report["fast_dtype"] == "float32"
    assert set(report["ref_ms"]) == set(report["fast_ms"]) == {"1", "5", "10", "20"}
    assert report["speedup_greedy"] > 0 and report["speedup_beam20"] > 0
    # float32 on both sides: the engines return the same SID lists
    assert report["sid_agreement"] == 1.0
    assert report["max_score_diff"] < 1e-3


@pytest.mark.slow
def test_choice_scoring_reports_both_layouts_and_their_agreement(capsys) -> None:
    assert _script("choice_scoring").main(["--games", "1", "--commands", "12", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["packed_used"] is True
    assert report["turns"] >= 1 and report["max_commands"] >= 12
    assert set(report["ref_ms"]) == set(report["fast_ms"]) == {"cold", "warm"}
    assert report["choice_agreement"] == 1.0 and report["max_score_diff"] < 1e-3


def test_the_scripts_refuse_bad_sizes() -> None:
    with pytest.raises(SystemExit) as latency:
        _script("sid_latency").main(["--contexts", "0"])
    with pytest.raises(SystemExit) as scoring:
        _script("choice_scoring").main(["--commands", "-1"])
    assert latency.value.code == 2 == scoring.value.code
