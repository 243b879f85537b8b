"""StackPlanner's sub-agents: what the coordinator can delegate to, and their prompts.

A :class:`SubAgent` names a worker, describes it to the coordinator, and gives it tools and a
way to act (``tools``: write tool calls; ``rank``: score a game's valid commands,
:mod:`genmem.graph.ranked_actor`). :func:`default_subagents` is the shipped team; the shipped
prompts' text lives in :mod:`genmem.policies.prompts.subagents`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.tools import BaseTool

from genmem.graph.planner_actions import DEFAULT_AGENTS
from genmem.policies.choice_scoring import SCORE_RULES, ScoreRule
from genmem.policies.prompts import subagent_role_prompt

__all__ = ["ActionPrior", "SubAgent", "default_subagents", "subagent_prompt"]

ActionPrior = Callable[[str, Sequence[str], Mapping[str, Any]], "list[float] | None"]
"""``(experience, commands, view) -> bonus per command``: what a retrieved experience says of
each valid command now (``view``: the game's artifact: observation, notes, history), or None
when the experience is not one it reads. An environment gives it (a cooking procedure's
templates); the ranked actor adds ``prior_weight`` times it to the model's scores."""


@dataclass(frozen=True)
class SubAgent:
    """A sub-agent the coordinator can delegate to."""

    name: str
    description: str
    tools: tuple[BaseTool, ...] = ()
    prompt: str = ""
    """System prompt; empty uses the shipped prompt for the name (or a generic one)."""
    max_tool_calls: int = 8
    """Tool calls one delegation may make before it has to report."""
    act: Literal["tools", "rank"] = "tools"
    """``tools``: the model writes tool calls; ``rank``: it ranks a game's valid commands by
    likelihood and plays the best (:mod:`genmem.graph.ranked_actor`; local models only)."""
    score: ScoreRule = "mean"
    """How ``rank`` turns a command's log-probability into its rank
    (:func:`~genmem.policies.choice_scoring.rank_scores`)."""
    prior: ActionPrior | None = None
    """What a retrieved experience adds to ``rank``'s scores (None: nothing)."""
    prior_weight: float = 0.0
    """The weight of :attr:`prior`'s bonus (0: the prior is not used)."""

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,39}", self.name or ""):
            raise ValueError(f"sub-agent name {self.name!r}: use letters, digits, '_' or '-'")
        if not self.description.strip():
            raise ValueError(f"sub-agent {self.name!r} needs a description for the coordinator")
        if self.max_tool_calls < 1:
            raise ValueError(f"sub-agent {self.name!r}: max_tool_calls must be >= 1")
        if self.act not in ("tools", "rank"):
            raise ValueError(f"sub-agent {self.name!r}: act={self.act!r}; use 'tools' or 'rank'")
        if self.score not in SCORE_RULES:
            raise ValueError(f"sub-agent {self.name!r}: score={self.score!r}; use {SCORE_RULES}")
        if self.prior_weight < 0:
            raise ValueError(f"sub-agent {self.name!r}: prior_weight must be >= 0")
        if self.act == "rank" and not self.tools:
            raise ValueError(f"sub-agent {self.name!r}: act='rank' needs a game's tools")
        object.__setattr__(self, "tools", tuple(self.tools))


def subagent_prompt(agent: SubAgent) -> str:
    """The system prompt of ``agent``: its own, the shipped one for its name, or a generic one."""
    if agent.prompt:
        return agent.prompt
    return subagent_role_prompt(agent.name, agent.description, tools=bool(agent.tools))


def default_subagents(
    *,
    solver_tools: Sequence[BaseTool] = (),
    research_tools: Sequence[BaseTool] = (),
    interactor_tools: Sequence[BaseTool] = (),
    interactor: Literal["tools", "rank"] = "tools",
    rank_score: ScoreRule = "mean",
    interactor_prior: ActionPrior | None = None,
    prior_weight: float = 0.0,
) -> list[SubAgent]:
    """The shipped sub-agents: research and interactor when given tools; the solver unless the
    task is a game (interactor tools given).

    A game is played only through its interactor. With a solver in the team, the 135M
    coordinator of a cooking game delegated to it most turns, and each such turn wrote up to a
    whole reply of text that reached no game (minutes per episode on 2 cores).
    """
    agents = (
        []
        if interactor_tools
        else [SubAgent("solver", DEFAULT_AGENTS["solver"], tuple(solver_tools))]
    )
    if research_tools:
        agents.append(SubAgent("research", DEFAULT_AGENTS["research"], tuple(research_tools)))
    if interactor_tools:
        agents.append(
            SubAgent(
                "interactor",
                DEFAULT_AGENTS["interactor"],
                tuple(interactor_tools),
                "",
                30,
                act=interactor,
                score=rank_score,
                prior=interactor_prior,
                prior_weight=prior_weight,
            )
        )
    return agents
