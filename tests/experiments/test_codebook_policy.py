"""The codebook ablation's policy extras: row-against-row pairing and a kept alignment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genmem.experiments.codebook_policy import (
    METHODS,
    AlignedHits,
    AlignmentMismatch,
    CodebookPolicyConfig,
    TaskScores,
    align_and_score,
    paired_rows,
    rate,
)


def _hits(per_query: dict[str, bool]) -> AlignedHits:
    r = rate(list(per_query.values()))
    return AlignedHits(
        policy="p", steps=1, train_seconds=0.0, candidates=5, heldout=len(per_query),
        hit_at_1={m: r for m in METHODS}, hit_at_5={m: r for m in METHODS}, vs_tfidf={},
        per_query={q: dict.fromkeys(METHODS, h) for q, h in per_query.items()},
    )  # fmt: skip


def _tasks(per_task: dict[str, float]) -> TaskScores:
    return TaskScores(
        bench="b", n=len(per_task), addresser="quantizer", score=rate(list(per_task.values())),
        errors=0, per_task=per_task,
    )  # fmt: skip


def test_rows_pair_by_question_and_by_task_on_what_both_hold() -> None:
    a = ("4", _hits({"q1": True, "q2": True, "q3": False}), _tasks({"t1": 1.0, "t2": 0.0}))
    b = ("3", _hits({"q1": False, "q2": True, "q4": True}), _tasks({"t1": 0.0, "t2": 0.0}))
    c = ("x", None, None)  # a row with neither part is left out of every pair
    pairs = paired_rows([a, b, c])
    assert list(pairs) == ["4 - 3"]
    hit = pairs["4 - 3"]["sid_hit_at_5"]
    assert (hit.n, hit.wins, hit.losses, hit.ties) == (2, 1, 0, 1)  # q1, q2: the shared ones
    assert hit.diff == pytest.approx(0.5)
    task = pairs["4 - 3"]["task_score"]
    assert (task.n, task.diff, task.wins) == (2, pytest.approx(0.5), 1)


def test_a_finished_alignment_of_another_step_count_is_kept_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "align" / "8x8-prefix"
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"stage": "align", "status": "done"}))
    (out / "report.json").write_text(json.dumps({"steps": 500}))
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(AlignmentMismatch, match="500 steps, not 3"):
        align_and_score("sqlite:///unused.db?bank=x", out, CodebookPolicyConfig(align_steps=3))
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize(
    "fields", [{"align_steps": -1}, {"tasks": -1}, {"align_eval": -1}, {"candidates": 4}]
)
def test_bad_policy_settings_are_refused(fields: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        CodebookPolicyConfig(**fields)
