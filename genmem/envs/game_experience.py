"""Experiences from won TextWorld training games: the winning commands and their general form.

A seed entry for a game is written from the game's objective and the walkthrough that wins it
(training games only; the test games' walkthroughs never reach a bank). It states the plan in
general terms, with the objects as roles (the object, where it lies, where it goes), then the
commands that won this one game as an example, a check and the usual mistakes. A later game
shares the plan and the command syntax, not the names.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["game_steps", "textworld_experience", "textworld_seed_rows"]

_TAKE = re.compile(r"^take (?P<obj>.+?)(?: from (?P<src>.+))?$")
_PLACE = re.compile(r"^(?P<verb>put|insert) (?P<obj>.+?) (?:on|into) (?P<dst>.+)$")
_OPEN = re.compile(r"^(?P<verb>open|unlock) (?P<what>.+?)(?: with .+)?$")
_GO = re.compile(r"^go (?P<way>\w+)$")


def game_steps(walkthrough: list[str]) -> list[str]:
    """Each winning command in general terms (the object, its place and its target as roles)."""
    steps = []
    for command in walkthrough:
        c = command.strip().lower()
        if m := _TAKE.match(c):
            where = " from the place it lies on or in" if m["src"] else " from the floor"
            steps.append(f"take the object the objective names{where}")
        elif m := _PLACE.match(c):
            prep = "on the surface" if m["verb"] == "put" else "into the container"
            steps.append(f"{m['verb']} the object {prep} the objective names")
        elif m := _OPEN.match(c):
            steps.append(f"{m['verb']} the container or door that is in the way")
        elif _GO.match(c):
            steps.append("walk to the room where the object or its target is")
        else:
            steps.append(f"do what the objective asks next ({c.split()[0] if c else 'act'})")
    return steps


def textworld_experience(objective: str, walkthrough: list[str]) -> str:
    """The experience of one won training game (its objective and winning commands)."""
    plan = "; ".join(f"{i}. {s}" for i, s in enumerate(game_steps(walkthrough), 1))
    return "\n".join(
        [
            "Kind of task: a household text game; move one object to a place the objective names.",
            f"Plan that won: {plan}.",
            f"Example, a game whose objective was '{_objective_line(objective)}': the winning "
            f"commands were {'; '.join(walkthrough)}.",
            "Check: the game says the objective is complete right after the last command.",
            "Pitfalls: look, inventory and examine use a step and change nothing; a command "
            "must be written exactly as one of the valid commands.",
        ]
    )


def _objective_line(objective: str) -> str:
    """The objective in one line, without TextWorld's greeting."""
    text = " ".join(objective.split()).split(" -= ")[0]
    for cue in ("objective is to ", "task is to ", "goal is to ", "mission is to "):
        at = text.lower().find(cue)
        if at >= 0:
            return text[at + len(cue) :].rstrip(". ")[:300]
    return text[:300]


def textworld_seed_rows(n: int, *, seed: int) -> list[dict[str, Any]]:
    """``n`` TextWorld training games as ``{id, question, answer}`` (opening, walkthrough)."""
    from genmem.envs.textworld_env import TextWorldConfig, load_games

    games = load_games(TextWorldConfig(n_games=n, seed=seed))
    rows = []
    for g in games:
        rows.append(
            {"id": g.id, "question": g.intro, "answer": list(g.walkthrough), "goal": g.objective}
        )
    return rows
