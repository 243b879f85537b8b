"""Prefix accuracy of ranked SIDs: rates per level and cut-off, per-query depths, intervals."""

from __future__ import annotations

import pytest

from genmem.envs.stats import IntervalConfig
from genmem.training.sid_eval import score_beams

REFERENCES = [(0, 1, 2, 3), (1, 1, 1, 1), (2, 0, 0, 0)]
BEAMS = [
    [(0, 1, 2, 0), (0, 1, 2, 3)],  # three levels at top-1, the exact SID at top-2
    [(0, 1, 1, 1), (1, 1, 0, 0)],  # levels 2-4 right but not level 1, then two levels
    [(3, 0, 0, 0)],  # a shorter beam: only levels 2-4 right
]


def test_rates_and_depths_per_cut_off() -> None:
    acc = score_beams(BEAMS, REFERENCES, [1, 2])
    assert acc.depth == {1: [3, 0, 0], 2: [4, 2, 0]}
    assert acc.prefix[1] == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0])
    assert acc.prefix[2] == pytest.approx([2 / 3, 2 / 3, 1 / 3, 1 / 3])
    # Per level, a code counts wherever the rest of the candidate went.
    assert acc.level[1] == pytest.approx([1 / 3, 1.0, 1.0, 2 / 3])
    assert acc.exact(2) == pytest.approx(1 / 3)


def test_each_prefix_rate_has_a_seeded_bootstrap_interval() -> None:
    settings = IntervalConfig(resamples=2000, seed=7)
    acc = score_beams(BEAMS * 10, REFERENCES * 10, [1, 2], settings)
    for k in (1, 2):
        assert len(acc.prefix_ci[k]) == 4
        for rate, (lo, hi) in zip(acc.prefix[k], acc.prefix_ci[k], strict=True):
            assert 0.0 <= lo <= rate <= hi <= 1.0
    lo, hi = acc.prefix_ci[1][0]
    assert 0.1 < lo < 1 / 3 < hi < 0.55  # 10 of 30: wide, as 30 queries are few
    assert acc.prefix_ci[1][3] == (0.0, 0.0)  # no query has it: nothing to resample
    again = score_beams(BEAMS * 10, REFERENCES * 10, [1, 2], settings)
    assert again.prefix_ci == acc.prefix_ci


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="2 beams for 3 references"):
        score_beams(BEAMS[:2], REFERENCES, [1])
