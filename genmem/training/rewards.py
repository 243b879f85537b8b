"""Reward parts of stage 3 (paper section 3 and appendix C.5), each a pure function.

Process channel, per memory policy:

- :func:`format_reward`: 1 when the completion is exactly one valid SID of the codebooks (L
  level tokens, each code in range) and, for MemEvolver, the update's operation is ``insert``
  or ``revise``; else 0. Malformed text gets 0, never an exception.
- :func:`sid_agreement_reward`: code-level agreement with the reference SID: the share of
  levels whose code matches (0 for an invalid completion; None without a reference).
- :func:`judge_score`: the strategic-quality judge's 0/1/2 verdict scaled to [0, 1].
- MemEvolver's strategic quality is :math:`R_{evo} = r_{faithful} + r_{loc} + r_{op}`:
  :func:`faithful_reward` (the judge on the distilled experience against the trajectory),
  :func:`localization_reward` (code-level agreement between the update SID and the SID the
  frozen codebooks give the new payload's embedding: does the address name the region the
  content belongs to) and :func:`operation_reward` (``revise`` on an occupied SID, ``insert``
  on an empty one).

Outcome channel: :func:`contrastive_outcome` (Eq. 4): the task score with memory minus the score
without, plus ``alpha_partial`` when both succeed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from genmem.errors import InvalidSID
from genmem.memory.sid import SIDSpec

__all__ = [
    "ALPHA_PARTIAL",
    "JudgeVerdict",
    "contrastive_outcome",
    "faithful_reward",
    "format_reward",
    "judge_score",
    "localization_reward",
    "operation_reward",
    "parse_completion_sid",
    "sid_agreement_reward",
]

ALPHA_PARTIAL = 0.2
"""Bonus when both the with-memory and the no-memory runs succeed (the paper leaves it open)."""


class JudgeVerdict(BaseModel):
    """The strategic-quality judge's structured verdict (0, 1 or 2)."""

    reason: str = Field(max_length=160, description="One sentence: why this score.")
    score: Literal[0, 1, 2] = Field(
        description="0 = no help or misleading, 1 = partly, 2 = useful."
    )


def parse_completion_sid(text: str, spec: SIDSpec) -> tuple[int, ...] | None:
    """The codes of a completion that is exactly one valid SID (whitespace aside), else None."""
    if not isinstance(text, str):
        return None
    try:
        return spec.parse(text.strip()).codes
    except (InvalidSID, ValueError):
        return None


def format_reward(
    text: str, spec: SIDSpec, *, op: str | None = None, needs_op: bool = False
) -> float:
    """1.0 when ``text`` is one valid SID (and, if ``needs_op``, ``op`` is insert/revise)."""
    if parse_completion_sid(text, spec) is None:
        return 0.0
    if needs_op and op not in ("insert", "revise"):
        return 0.0
    return 1.0


def sid_agreement_reward(text: str, reference: str | None, spec: SIDSpec) -> float | None:
    """Share of levels whose code matches the reference SID (None when there is no reference)."""
    if not reference:
        return None
    ref = spec.parse(reference).codes
    codes = parse_completion_sid(text, spec)
    if codes is None:
        return 0.0
    return sum(a == b for a, b in zip(codes, ref, strict=True)) / len(ref)


def judge_score(verdict: JudgeVerdict | None) -> float:
    """The judge's 0/1/2 scaled to [0, 1]; a missing or unreadable verdict scores 0."""
    return 0.0 if verdict is None else verdict.score / 2


def faithful_reward(verdict: JudgeVerdict | None) -> float:
    """r_faithful: the judge's verdict on the distilled experience against the trajectory."""
    return judge_score(verdict)


def localization_reward(update_sid: Sequence[int] | None, content_sid: Sequence[int]) -> float:
    """r_loc: share of levels where the update SID agrees with the payload's quantised SID."""
    if update_sid is None:
        return 0.0
    if len(update_sid) != len(content_sid):
        raise ValueError(f"SIDs of different depth: {update_sid} vs {content_sid}")
    return sum(a == b for a, b in zip(update_sid, content_sid, strict=True)) / len(content_sid)


def operation_reward(op: str | None, occupied: bool | None) -> float:
    """r_op: 1 for revise on an occupied SID or insert on an empty one, else 0."""
    if occupied is None or op not in ("insert", "revise"):
        return 0.0
    return 1.0 if (op == "revise") == occupied else 0.0


def contrastive_outcome(
    with_memory: float, without_memory: float, *, alpha_partial: float = ALPHA_PARTIAL
) -> float:
    """R_out = r(mem) - r(no mem) + alpha_partial * [both succeed] (scores in [0, 1])."""
    for name, value in (("with_memory", with_memory), ("without_memory", without_memory)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}={value}: task scores must lie in [0, 1]")
    both = with_memory >= 1.0 and without_memory >= 1.0
    return with_memory - without_memory + (alpha_partial if both else 0.0)
