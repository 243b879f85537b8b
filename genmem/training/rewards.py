"""Reward parts of stage 3 (paper section 3 and appendix C.5), and the judge's messages (its
rubrics: :mod:`genmem.policies.prompts.judge`).

Process channel, per memory policy:

- :func:`format_reward`: 1 when the SID turn is exactly one valid SID of the codebooks (L level
  tokens, each code in range) and, for MemEvolver, the update's operation is ``insert`` or
  ``revise``; else 0. Malformed text gets 0, never an exception.
- :func:`sid_agreement_reward`: code-level agreement with the reference SID: the share of
  levels whose code matches (0 for an invalid completion; None without a reference).
- :func:`judge_score`: the strategic-quality judge's 0/1/2 verdict scaled to [0, 1]; the judge
  reads what :func:`judge_messages` builds.
- MemEvolver's strategic quality is :math:`R_{evo} = r_{faithful} + r_{loc} + r_{op}`:
  :func:`faithful_reward` (the judge on the distilled experience against the trajectory),
  :func:`neighbourhood_similarity` (r_loc, appendix C.3.2: does the update SID point into a
  region that holds related experience? The best cosine similarity between the new payload and
  the live entries sharing the longest prefix with the update SID, times that prefix's depth
  over L - 1) and :func:`operation_reward` (``revise`` on an occupied SID,
  ``insert`` on an empty one).

Outcome channel: :func:`genmem.envs.scoring.contrastive_outcome` (Eq. 4), the same function and
bonus evaluation uses.

A part that could not be computed (the judge raised, the rollout crashed) is NaN, never 0: see
:mod:`genmem.training.rollouts`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from genmem.envs.base import Task
from genmem.errors import InvalidSID
from genmem.memory.data_block import data_block
from genmem.memory.sid import SIDSpec
from genmem.policies.prompts import FAITHFUL_RUBRIC, JUDGE_RUBRIC, judge_user_message

__all__ = [
    "FAITHFUL_RUBRIC",
    "JUDGE_RUBRIC",
    "JudgeVerdict",
    "faithful_reward",
    "format_reward",
    "judge_messages",
    "judge_score",
    "neighbourhood_similarity",
    "operation_reward",
    "parse_completion_sid",
    "sid_agreement_reward",
]

_JUDGE_CLIP = 1500
"""Characters of each graded text the judge reads."""


class JudgeVerdict(BaseModel):
    """The strategic-quality judge's structured verdict (0, 1 or 2)."""

    reason: str = Field(max_length=160, description="One sentence: why this score.")
    score: Literal[0, 1, 2] = Field(
        description="0 = no help or misleading, 1 = partly, 2 = useful."
    )


def judge_messages(rubric: str, task: Task, **texts: str) -> list[Any]:
    """The judge's system and user turns: the task, its reference, each text as a data block.

    ``texts`` maps a tag (``support``, ``run``, ``experience``) to stored, retrieved or
    model-written text; each is clipped and escaped by :func:`data_block`, so nothing in it can
    close its block or pose as the rubric.
    """
    from langchain_core.messages import HumanMessage, SystemMessage

    blocks = [data_block(tag, text[:_JUDGE_CLIP]) for tag, text in texts.items()]
    user = judge_user_message(task.query, task.reference, blocks)
    return [SystemMessage(rubric), HumanMessage(user)]


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


def neighbourhood_similarity(
    sid: Sequence[int], payload_vec: Any, bank: Any, encode: Callable[[list[str]], Any]
) -> float:
    """r_loc: how well ``sid``'s neighbourhood in ``bank`` matches the payload, in [0, 1].

    The neighbourhood is the live entries sharing the longest prefix with ``sid`` (at least one
    level; the entry at ``sid`` itself excluded). The reward is the best cosine similarity
    between the payload and those entries (clipped at 0), scaled by how deep the shared prefix
    is (``depth / (L - 1)``): a payload next to close siblings scores high, one dropped into an
    unrelated region scores low, an address with no neighbour sharing even its first code 0.
    """
    import numpy as np

    levels = len(sid)
    own = tuple(sid)
    for depth in range(levels - 1, 0, -1):
        near = [e for e in bank.entries(own[:depth]) if bank.sid(e.sid).codes != own]
        texts = [e.payload for e in near if e.payload.strip()]
        if texts:
            vecs = np.asarray(encode(texts), dtype=np.float64)
            p = np.asarray(payload_vec, dtype=np.float64)
            sims = vecs @ p / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(p) + 1e-12)
            return float(max(0.0, sims.max()) * depth / (levels - 1))
    return 0.0


def operation_reward(op: str | None, occupied: bool | None) -> float:
    """r_op: 1 for revise on an occupied SID or insert on an empty one, else 0."""
    if occupied is None or op not in ("insert", "revise"):
        return 0.0
    return 1.0 if (op == "revise") == occupied else 0.0
