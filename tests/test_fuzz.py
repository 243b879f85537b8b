"""Hostile input to every parser and entry point: only typed errors, and a bank left as it was.

A few hundred examples per target here; ``bench/fuzz.py`` runs 10,000 each and records counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz_targets import TARGETS, fuzz

EXAMPLES = {
    "task_file": 150,
    "codebook_dir": 150,
    "memory_lookup_args": 150,
    "model_replies": 60,
    "fusion_replies": 60,
    "decomposition_replies": 60,
}
"""Targets that write files or run a graph node per example get fewer in CI."""


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_hostile_input_gets_a_typed_error_or_a_valid_result(name: str, tmp_path: Path) -> None:
    counts = fuzz(TARGETS[name], EXAMPLES.get(name, 400), tmp_path)
    assert counts["tried"] >= 50
    assert counts.get("refused", 0) > 0  # the strategies reach the error paths ...
    if name not in ("policy_record", "bank_url"):  # no bank or valid record is generated
        assert counts.get("accepted", 0) > 0  # ... and the valid ones
