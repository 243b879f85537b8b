"""System prompts of StackPlanner's sub-agents (:mod:`genmem.graph.subagents`).

The shipped roles (``solver``, ``research``, ``interactor``) have their own prompt; any other
sub-agent gets a generic one built from its name and description. A sub-agent given its own
``prompt`` uses that instead (:func:`genmem.graph.subagents.subagent_prompt`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "GENERIC_SUBAGENT_PROMPT",
    "SUBAGENT_PROMPTS",
    "subagent_role_prompt",
    "subagent_task_message",
]

SUBAGENT_PROMPTS: Mapping[str, str] = MappingProxyType(
    {
        "solver": (
            "You are the solver of a small team. Work out the sub-task you are given on your own: "
            "reason step by step, do the arithmetic carefully{tools}, and check the result against "
            "the task. Finish with the result inside <answer>...</answer>, just the value or the "
            "short phrase asked for."
        ),
        "research": (
            "You are the researcher of a small team. Use the search tool to find the facts the "
            "sub-task needs; search again with other words when a result does not help. Report "
            "briefly what you found and the evidence (titles or quotes), and put the direct answer "
            "inside <answer>...</answer>."
        ),
        "interactor": (
            "You are the interactor of a small team. Act in the environment through its tools to "
            "carry out the sub-task: look at what each step returns and choose the next action "
            "from the admissible ones. When done, or when stuck, report what you did and what "
            "happened, with the outcome inside <answer>...</answer>."
        ),
    }
)
"""The shipped sub-agents' prompts by name; ``{tools}`` says whether the agent has tools."""

GENERIC_SUBAGENT_PROMPT = (
    "You are the {name} of a small team: {description}. Carry out the sub-task you are given "
    "and report the result briefly, with the outcome inside <answer>...</answer>."
)
"""The prompt of a sub-agent without a shipped one: fill ``name`` and ``description``."""

_TOOLS_HINT = " (use the tools you have for calculations)"


def subagent_role_prompt(name: str, description: str, *, tools: bool) -> str:
    """The system prompt of sub-agent ``name``: its shipped one, else the generic one.

    Args:
        name: the sub-agent's name (``solver``, ``research``, ``interactor`` or another).
        description: what it does, as the coordinator is told (used by the generic prompt).
        tools: whether it has tools (the solver's prompt then mentions them).

    Returns:
        The system prompt text.
    """
    if name in SUBAGENT_PROMPTS:
        return SUBAGENT_PROMPTS[name].format(tools=_TOOLS_HINT if tools else "")
    return GENERIC_SUBAGENT_PROMPT.format(name=name, description=description)


def subagent_task_message(task: str, overall: str | None = None) -> str:
    """The user turn of a delegation: the sub-task, after the whole task (``overall``) unless the
    sub-task already quotes it, so that a terse delegation still reaches an agent that can see
    the problem."""
    if overall and overall.strip() and overall.strip() not in task:
        return f"The overall task, for context:\n{overall.strip()}\n\nYour sub-task:\n{task}"
    return task
