"""`genmem eval` killed with SIGKILL mid-run, a torn last line added, then rerun: it resumes and
ends with the same records as a run that was never interrupted (real default model, greedy)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

_VARIES = {"seconds"}
"""Fields that differ between two runs of the same task: wall time only."""


def _argv(bank: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "genmem.cli", "eval", "--bench", "gsm8k-test", "--limit", "3",
            "--methods", "none", "--bank", bank, "--max-steps", "1", "--max-new-tokens",
            "8", "--out", str(out), "--json"]  # fmt: skip


def _records(out: Path) -> dict[tuple[str, str], dict]:
    path = next(out.rglob("records.jsonl"))
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    keyed = {(r["id"], r["method"]): {k: v for k, v in r.items() if k not in _VARIES} for r in rows}
    assert len(keyed) == len(rows), "a task was recorded twice"
    return keyed


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=_env())
    assert done.returncode == 0, done.stderr[-2000:]


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


@pytest.mark.slow
def test_eval_killed_mid_run_resumes_to_the_same_records(tmp_path: Path, seed_bank_url) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    _run(_argv(seed_bank_url, whole))
    expected = _records(whole)
    assert len(expected) == 3

    proc = subprocess.Popen(_argv(seed_bank_url, killed), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env())  # fmt: skip
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # kill once at least one record is on disk
        found = list(killed.rglob("records.jsonl"))
        if found and found[0].read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    path = next(killed.rglob("records.jsonl"))
    partial = path.read_text().count("\n")
    assert 1 <= partial < 3, "the kill came after the run had finished"
    with path.open("a") as fh:  # the write a kill cuts in half
        fh.write('{"id": "test-2", "method": "no')

    _run(_argv(seed_bank_url, killed))
    assert _records(killed) == expected
