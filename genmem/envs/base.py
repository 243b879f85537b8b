"""The one interface every task family implements: tasks, the agents' tools, and scoring.

An :class:`Environment` loads :class:`Task` records, hands StackPlanner the tools its
sub-agents need (``solver``, ``research``, ``interactor``), and turns an answer (or, for
interactive environments, the episode's own success signal) into an :class:`Outcome`.

Interactive environments keep one episode per task: the runner calls :meth:`Environment.start`
before the graph runs and :meth:`Environment.finish` after it, and the tools act on that
episode; such an environment sets :attr:`Environment.concurrent_tasks` to False and is run
one task at a time. The others may run several tasks at once (``--concurrency``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from genmem.policies.experience_writer import ExperienceWriter

__all__ = ["EnvTools", "Environment", "Outcome", "Task"]


class Task(BaseModel):
    """One task: what the agent is asked, and what scoring needs (never shown to the agent)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(description="Stable id, unique within its environment.")
    query: str = Field(description="The task as the agent sees it.")
    reference: Any = Field(default=None, description="Gold answer(s) for scoring; hidden.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Subtask, game file, ...")


class Outcome(BaseModel):
    """How a task went: the headline score in [0, 1], success, and the benchmark's metrics."""

    score: float = Field(ge=0.0, le=1.0)
    success: bool
    metrics: dict[str, float] = Field(default_factory=dict, description="e.g. f1, em, reward.")


@dataclass(frozen=True)
class EnvTools:
    """The tools an environment gives each sub-agent role (empty: the role is not offered)."""

    solver: Sequence[BaseTool] = field(default_factory=tuple)
    research: Sequence[BaseTool] = field(default_factory=tuple)
    interactor: Sequence[BaseTool] = field(default_factory=tuple)


class Environment(ABC):
    """A task family: load tasks, give tools, score."""

    name: str = "env"
    """Short name used in result files and tables."""
    metric_names: tuple[str, ...] = ("score",)
    """The metrics :meth:`score` reports, in table order."""
    experience_type: str = "reasoning"
    """What its experiences teach: ``reasoning``, ``factual`` (QA) or ``sop`` (interactive)."""
    outcome_observable: bool = False
    """Whether the agent itself can observe how a run went (a game's won flag, a shop's
    reward). False when only a comparison with the hidden reference could tell: then no agent
    may be told the outcome (:meth:`signal` gives None)."""
    concurrent_tasks: bool = True
    """Whether several tasks may run at once on this instance. False when :meth:`start` and
    :meth:`finish` hold the one open episode that the tools act on (games, a shop)."""

    @abstractmethod
    def tasks(self, limit: int | None = None) -> list[Task]:
        """The tasks, in a fixed order (the first ``limit`` of them)."""

    def tools(self) -> EnvTools:
        """The tools for StackPlanner's sub-agents (none by default)."""
        return EnvTools()

    def start(self, task: Task) -> None:  # noqa: B027 - optional hook
        """Begin the episode for ``task`` (interactive environments reset here)."""

    def finish(self, task: Task) -> None:  # noqa: B027 - optional hook
        """End the episode for ``task`` (release what :meth:`start` opened)."""

    @abstractmethod
    def score(self, task: Task, answer: str | None) -> Outcome:
        """Score the final ``answer`` (interactive environments read their episode instead)."""

    def action_prior(
        self,
    ) -> Callable[[str, Sequence[str], Mapping[str, Any]], list[float] | None] | None:
        """What a retrieved experience says of each valid command, for a ranking interactor:
        ``(experience, commands, view) -> bonus per command`` (None where the experience is not
        one it reads), or None when this environment has no such reading (this base)."""
        return None

    def experience_writer(self) -> ExperienceWriter | None:
        """Code that writes MemEvolver's payloads for this environment's runs (one of its
        candidates is written), or None when the model writes them (this base)."""
        return None

    def signal(self, outcome: Outcome) -> str | None:
        """What an agent may be told of a run's ``outcome``: the environment's own verdict.

        ``"success"`` / ``"failure"`` when :attr:`outcome_observable`, else None: a score
        against a reference is for evaluation only and never reaches an agent (MemEvolver's
        prompt included).
        """
        if not self.outcome_observable:
            return None
        return "success" if outcome.success else "failure"
