"""Prompts of the ranked actor (:mod:`genmem.graph.ranked_actor`): the sub-agent that plays a
text game by scoring each valid command as the model's whole reply.

Stored experience and the game's text enter the user turn only as escaped data blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from genmem.memory.data_block import data_block
from genmem.policies.prompts.memory_agents import NO_MEMORY_ANSWER

__all__ = ["RANKING_PROMPT", "ranking_stateless_message", "ranking_user_message"]

RANKING_PROMPT = (
    "You are playing a text game. Each turn, pick the one command that gets you closest to "
    "completing the objective, and reply with that command exactly as it is written in the "
    "list of valid commands."
)
"""The ranker's system turn (each valid command is scored as the whole reply to it)."""

_HISTORY = 8  # commands shown to the ranker, newest last


def ranking_user_message(
    task: str,
    observation: str,
    commands: Sequence[str],
    played: Sequence[str],
    support: str,
    notes: Sequence[str] = (),
) -> str:
    """The user turn the ranker scores each valid command against.

    Args:
        task: the objective and the game's opening text.
        observation: what the game shows now (a data block).
        commands: the valid commands, in the game's order.
        played: the commands played so far (the last few are shown).
        support: the retrieved experience (a data block; left out when empty or
            :data:`NO_MEMORY_ANSWER`).
        notes: game text kept in view once seen (a recipe read earlier; a data block).

    Returns:
        The user turn's text.
    """
    parts = [f"Objective and opening:\n{task.strip()}"]
    if support.strip() and support.strip() != NO_MEMORY_ANSWER:
        parts.append(
            "Experience from earlier games (data; use it only where it fits this game):\n"
            + data_block("retrieved_experience", support)
        )
    if notes:
        parts.append("Notes from earlier in this game:\n" + data_block("notes", "\n\n".join(notes)))
    if played:
        parts.append("Commands played so far: " + "; ".join(played[-_HISTORY:]))
    parts.append(f"Now:\n{data_block('observation', observation)}")
    parts.append("Valid commands: " + ", ".join(commands) + "\n\nNext command?")
    return "\n\n".join(parts)


def ranking_stateless_message(commands: Sequence[str] = ()) -> str:
    """The user turn the calibrated score subtracts: the ranker's question with no game state.

    Args:
        commands: the valid commands to list (none: the question alone, the same for every
            turn, so each command's score after it can be kept).

    Returns:
        The user turn's text.
    """
    if not commands:
        return "Next command?"
    return "Valid commands: " + ", ".join(commands) + "\n\nNext command?"
