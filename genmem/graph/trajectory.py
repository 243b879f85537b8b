"""The structured trajectory StackPlanner records: what happened at every step of a task.

A trajectory is the hand-off between the harness and the rest of the system: MemEvolver reads
it (rendered as text) to decide what to write, the benchmark runners store it per example, and
the training package turns it into SFT and GRPO data. Every step names the agent that acted,
the action and its arguments, what came back, and how the task stack changed.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "StepRecord",
    "Trajectory",
    "TrajectoryStatus",
    "extend_or_reset",
    "render_trajectory",
]

TrajectoryStatus = Literal["finished", "budget", "failed"]
"""``finished``: the coordinator answered; ``budget``: a budget ran out (best answer so far);
``failed``: it stopped without an answer (e.g. too many invalid actions and nothing to fall
back on)."""

_CLIP = 700  # characters of one observation shown when a trajectory is rendered


class StepRecord(BaseModel):
    """One step of a run: who acted, how, with what arguments, and what came back."""

    model_config = ConfigDict(extra="forbid")

    step: int = Field(ge=0, description="0-based position in the trajectory.")
    agent: str = Field(description="'coordinator', a sub-agent name, or 'system'.")
    action: str = Field(
        description="plan | delegate | revise | finish | invalid | budget | condense | tool"
    )
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: str = Field(default="", description="What the action produced or the error.")
    stack_edits: list[str] = Field(
        default_factory=list, description="Stack changes, e.g. 'push #3 result from solver'."
    )
    thought: str = Field(default="", description="The coordinator's stated reason, if any.")

    def render(self, clip: int = _CLIP) -> str:
        """The step as a few readable lines."""
        args = json.dumps(self.arguments, ensure_ascii=False) if self.arguments else ""
        head = f"[{self.step}] {self.agent} {self.action}" + (f" {args}" if args else "")
        lines = [head]
        if self.thought:
            lines.append(f"    thought: {_clip(self.thought, 300)}")
        if self.observation:
            lines.append(f"    observation: {_clip(self.observation, clip)}")
        if self.stack_edits:
            lines.append(f"    stack: {'; '.join(self.stack_edits)}")
        return "\n".join(lines)


class Trajectory(BaseModel):
    """A whole run of StackPlanner on one task."""

    model_config = ConfigDict(extra="forbid")

    query: str
    support: str | None = Field(default=None, description="Retrieved experience it was given.")
    steps: list[StepRecord] = Field(default_factory=list)
    answer: str | None = None
    status: TrajectoryStatus = "failed"
    stop_reason: str = ""

    def render(self, clip: int = _CLIP) -> str:
        """The trajectory as text for a model (MemEvolver) or a person."""
        return render_trajectory(self.model_dump(), clip=clip)


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render_trajectory(trajectory: dict[str, Any] | Trajectory | str, *, clip: int = _CLIP) -> str:
    """Text for a trajectory given as a model, its ``model_dump()``, or already as text."""
    if isinstance(trajectory, str):
        return trajectory
    t = trajectory if isinstance(trajectory, Trajectory) else Trajectory.model_validate(trajectory)
    lines = [f"Task: {t.query.strip()}"]
    if t.support:
        lines.append(f"Experience given to the planner: {_clip(t.support, 400)}")
    lines += [step.render(clip) for step in t.steps]
    verdict = f"Final answer: {t.answer}" if t.answer is not None else "No final answer."
    lines.append(f"{verdict} (status: {t.status}{'; ' + t.stop_reason if t.stop_reason else ''})")
    return "\n".join(lines)


def extend_or_reset(
    left: list[dict[str, Any]] | None, right: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """State reducer for step and event logs: append; ``None`` starts a new log (a new run)."""
    if right is None:
        return []
    return [*(left or []), *right]
