"""Each reward part on hand-built cases, malformed completions included."""

from __future__ import annotations

import pytest

from genmem.memory.sid import DEFAULT_SPEC
from genmem.training.rewards import (
    JudgeVerdict,
    contrastive_outcome,
    faithful_reward,
    format_reward,
    judge_score,
    localization_reward,
    operation_reward,
    sid_agreement_reward,
)

REF = "<SID_L1_3><SID_L2_5><SID_L3_1><SID_L4_7>"

MALFORMED = [
    "",
    "   ",
    "the address is <SID_L1_3>",
    "<SID_L1_3><SID_L2_5><SID_L3_1>",  # too short
    "<SID_L1_3><SID_L2_5><SID_L3_1><SID_L4_7><SID_L4_7>",  # too long
    "<SID_L1_48><SID_L2_5><SID_L3_1><SID_L4_7>",  # code out of range (48 codes: 0-47)
    "<SID_L2_3><SID_L1_5><SID_L3_1><SID_L4_7>",  # levels out of order
    "<SID_L1_3><SID_L2_5><SID_L3_1><SID_L4_7> and more",
    None,
]


def test_valid_sid_gets_format_one() -> None:
    assert format_reward(REF, DEFAULT_SPEC) == 1.0
    assert format_reward(f"  {REF}\n", DEFAULT_SPEC) == 1.0


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_completions_get_zero_without_crashing(text) -> None:
    assert format_reward(text, DEFAULT_SPEC) == 0.0
    assert sid_agreement_reward(text, REF, DEFAULT_SPEC) == 0.0


def test_evolver_format_needs_a_valid_operation() -> None:
    assert format_reward(REF, DEFAULT_SPEC, op="revise", needs_op=True) == 1.0
    assert format_reward(REF, DEFAULT_SPEC, op="insert", needs_op=True) == 1.0
    assert format_reward(REF, DEFAULT_SPEC, op="delete", needs_op=True) == 0.0
    assert format_reward(REF, DEFAULT_SPEC, op=None, needs_op=True) == 0.0


def test_sid_agreement_counts_matching_levels() -> None:
    def agree(text: str) -> float | None:
        return sid_agreement_reward(text, REF, DEFAULT_SPEC)

    assert sid_agreement_reward(REF, REF, DEFAULT_SPEC) == 1.0
    assert agree("<SID_L1_3><SID_L2_5><SID_L3_0><SID_L4_0>") == 0.5
    assert agree("<SID_L1_0><SID_L2_5><SID_L3_0><SID_L4_7>") == 0.5
    assert agree("<SID_L1_0><SID_L2_0><SID_L3_0><SID_L4_0>") == 0.0
    assert sid_agreement_reward(REF, None, DEFAULT_SPEC) is None


def test_judge_scores_scale_to_unit_interval() -> None:
    assert [judge_score(JudgeVerdict(reason="r", score=s)) for s in (0, 1, 2)] == [0, 0.5, 1]
    assert judge_score(None) == 0.0 and faithful_reward(None) == 0.0
    with pytest.raises(ValueError):
        JudgeVerdict(reason="r", score=3)


def test_localization_and_operation() -> None:
    assert localization_reward((3, 5, 1, 7), (3, 5, 1, 7)) == 1.0
    assert localization_reward((3, 5, 0, 0), (3, 5, 1, 7)) == 0.5
    assert localization_reward(None, (3, 5, 1, 7)) == 0.0
    with pytest.raises(ValueError, match="different depth"):
        localization_reward((3, 5), (3, 5, 1, 7))
    assert operation_reward("revise", occupied=True) == 1.0
    assert operation_reward("insert", occupied=False) == 1.0
    assert operation_reward("insert", occupied=True) == 0.0
    assert operation_reward("revise", occupied=False) == 0.0
    assert operation_reward("keep", occupied=True) == 0.0
    assert operation_reward("revise", occupied=None) == 0.0


@pytest.mark.parametrize(
    ("mem", "nomem", "expected"),
    [(1.0, 0.0, 1.0), (0.0, 1.0, -1.0), (1.0, 1.0, 0.2), (0.0, 0.0, 0.0), (0.5, 0.25, 0.25)],
)
def test_contrastive_outcome(mem, nomem, expected) -> None:
    assert contrastive_outcome(mem, nomem) == pytest.approx(expected)


def test_contrastive_outcome_refuses_scores_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match=r"with_memory=1\.5"):
        contrastive_outcome(1.5, 0.0)
    assert contrastive_outcome(1.0, 1.0, alpha_partial=0.5) == 0.5
