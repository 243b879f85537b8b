"""TextWorld experiences: the winning plan in general terms, one game's commands as an example."""

from __future__ import annotations

import pytest

from genmem.envs.game_experience import game_steps, textworld_experience
from genmem.experiments.seed_bank import SeedBankConfig

OPENING = (
    "Welcome to TextWorld! Your first objective is to pick up the printer from the shelf in "
    "the study. After that, sit the printer on the bookshelf.\n\n-= Study =-\nYou are in a study."
)


def test_each_command_becomes_a_step_with_roles_not_names() -> None:
    steps = game_steps(
        ["go north", "open chest", "take key from chest", "take apple", "insert key into box"]
    )
    assert steps == [
        "walk to the room where the object or its target is",
        "open the container or door that is in the way",
        "take the object the objective names from the place it lies on or in",
        "take the object the objective names from the floor",
        "insert the object into the container the objective names",
    ]
    assert all(name not in " ".join(steps) for name in ("chest", "key", "apple", "box"))


def test_the_experience_holds_the_plan_the_objective_and_the_winning_commands() -> None:
    text = textworld_experience(OPENING, ["take printer from shelf", "put printer on bookshelf"])
    assert "1. take the object" in text and "2. put the object on the surface" in text
    assert "'pick up the printer from the shelf in the study. After that, sit" in text
    assert "Study" not in text and "Welcome" not in text  # the room and the greeting stay out
    assert "take printer from shelf; put printer on bookshelf" in text


def test_a_textworld_bank_is_written_from_walkthroughs_only() -> None:
    with pytest.raises(ValueError, match="--distill abstract"):
        SeedBankConfig(source="textworld", distill="model")
    assert SeedBankConfig(source="textworld", distill="abstract").key().startswith("textworld-")
