"""TextWorld's cooking games (First TextWorld Problems): read the cookbook, cook the meal, eat it.

Games come from TextWorld's own cooking challenge (``textworld.challenges.tw_cooking``,
``textworld==1.7.0``), generated and compiled offline (a few seconds each) into the same cache as
the other TextWorld games (:func:`~genmem.envs.textworld_env.cached_game_set`), keyed by the config;
a larger set copies the games a smaller set of the same settings built
(:func:`~genmem.envs.textworld_env.family_games`). The goal is always the same; foods, rooms and
recipes change. TextWorld's ``split`` keeps foods and food preparations apart: ``valid`` and
``test`` games use foods (or ways of preparing the training foods) that no ``train`` game uses.

The game itself decides the outcome: eating the meal wins; a wrong appliance, a wrong cut,
cooking an ingredient twice or eating an ingredient loses. A lost game is a failure recorded as a
loss (the ``lost`` metric, and the verdict an agent may be told). The recipe, once read, is kept
in view as a note (:attr:`~genmem.envs.textworld_env.GameEpisode.notes`): the cookbook's text
leaves the observation on the next step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from genmem.envs.base import Outcome, Task
from genmem.envs.cooking_experience import cooking_seed_row, cooking_writer, experience_prior
from genmem.envs.textworld_env import (
    GameGenerationError,
    GameRecord,
    GameSetConfig,
    GameSetEnvironment,
    TextWorldGame,
    cached_game_set,
    compile_game_file,
    copy_game,
    family_games,
    game_seed,
)
from genmem.policies.experience_writer import ExperienceWriter

__all__ = [
    "CookingConfig",
    "CookingEnvironment",
    "CookingRecord",
    "cooking_game_id",
    "cooking_seed_rows",
    "load_cooking_games",
]

Split = Literal["train", "valid", "test"]

_RECIPE_HEAD = "Recipe #1"  # how the cookbook's text starts in the game


class CookingConfig(GameSetConfig):
    """Which cooking games to generate (TextWorld's cooking settings) and the episode budget."""

    challenge: ClassVar[str | None] = "tw-cooking"

    split: Split = Field(
        default="test",
        description="TextWorld's food split: 'train', 'valid' or 'test'; valid and test games "
        "use foods or preparations no train game uses.",
    )
    recipe: int = Field(
        default=2, ge=1, le=5, description="Ingredients in the recipe (all found in the house)."
    )
    rooms: Literal[1, 6, 9, 12] = Field(default=1, description="Rooms in the house.")
    open: bool = Field(default=True, description="Containers and doors start closed.")
    cook: bool = Field(
        default=True,
        description="Ingredients must be fried, roasted or grilled, as the recipe says.",
    )
    cut: bool = Field(
        default=True, description="Ingredients must be chopped, sliced or diced as the recipe says."
    )
    max_steps: int = Field(default=50, ge=1, description="Admissible commands per episode.")

    def settings(self) -> dict[str, Any]:
        """The settings TextWorld's ``tw_cooking.make`` takes for these games."""
        return {
            "recipe": self.recipe,
            "take": self.recipe,
            "go": self.rooms,
            "open": self.open,
            "cook": self.cook,
            "cut": self.cut,
            "drop": False,  # TextWorld builds no walkthrough for a limited inventory
            "recipe_seed": 0,
            "split": self.split,
        }


class CookingRecord(GameRecord):
    """One generated cooking game, as listed in the set's manifest."""

    split: Split
    recipe: str = Field(description="The cookbook's text.")
    ingredients: list[tuple[str, str, str]] = Field(
        description="(food, cooking, cutting) per ingredient, e.g. ('carrot', 'fried', 'diced')."
    )


def make_cooking_game(config: CookingConfig, seed: int) -> Any:
    """One cooking game (not compiled) from TextWorld's challenge, for ``seed``."""
    from textworld import GameOptions
    from textworld.challenges.tw_cooking.cooking import make

    options = GameOptions()
    options.seeds = seed
    return make(config.settings(), options)


def _winning_commands(path: Path, walkthrough: list[str]) -> tuple[str, list[str]]:
    """The opening observation, and the walkthrough's admissible commands, which win the game.

    TextWorld's walkthrough may repeat a command that does nothing then (``open fridge`` on an
    open fridge); an episode would not play it, so it is left out.
    """
    game = TextWorldGame(path)
    try:
        state = game.reset()
        intro, played = state.observation, []
        for command in walkthrough:
            if command in state.commands:
                state = game.step(command)
                played.append(command)
    finally:
        game.close()
    if not state.won:
        raise GameGenerationError(
            f"{path.name}: TextWorld's walkthrough {walkthrough} does not win the compiled game; "
            f"clear {path.parent.parent} and retry, or try another seed"
        )
    return intro, played


def cooking_game_id(config: CookingConfig, index: int) -> str:
    """Game ``index``'s id: its split, the settings without the set's size, and the index, so a
    larger set's first games keep a smaller set's ids (a run extends by ``--games``)."""
    return f"cook-{config.split}-{config.family_key()[:8]}-{index:03d}"


def _generate(config: CookingConfig, folder: Path) -> list[CookingRecord]:
    records = []
    built = family_games(config)  # a set of another size already holds these games
    for index in range(config.n_games):
        if index in built:
            source, record = built[index]
            copy_game(source, record, folder)
            game = CookingRecord.model_validate(record)
            records.append(game.model_copy(update={"id": cooking_game_id(config, index)}))
            continue
        seed = game_seed(config.seed, index, 0, family=f"cooking-{config.split}")
        game = make_cooking_game(config, seed)
        name = f"game_{index:03d}"
        compile_game_file(game, folder / f"{name}.z8")
        intro, walkthrough = _winning_commands(
            folder / f"{name}.z8", list(game.metadata["walkthrough"])
        )
        records.append(
            CookingRecord.of_game(
                game,
                folder / f"{name}.z8",
                id=cooking_game_id(config, index),
                seed=seed,
                intro=intro,
                walkthrough=walkthrough,
                split=config.split,
                recipe=game.metadata["recipe"].strip(),
                ingredients=[tuple(i) for i in game.metadata["ingredients"]],
            )
        )
    return records


def load_cooking_games(config: CookingConfig) -> list[CookingRecord]:
    """The config's cooking games, generated and compiled into the cache the first time.

    Args:
        config: Which games (split, recipe size, rooms, skills, seed, how many).

    Returns:
        Their records, in generation order; the same config gives the same games.
    """
    games = cached_game_set(config, lambda folder: _generate(config, folder), CookingRecord)
    # sets cached before the ids left out the set's size carry the old ids
    return [g.model_copy(update={"id": cooking_game_id(config, i)}) for i, g in enumerate(games)]


def cooking_seed_rows(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """The first ``n`` cooking-train games (the default difficulty) as seed rows
    (:func:`~genmem.envs.cooking_experience.cooking_seed_row`: a won and four lost plays)."""
    config = CookingConfig(split="train", n_games=n, seed=seed)
    folder = config.games_dir()
    return [cooking_seed_row(r, folder / r.file) for r in load_cooking_games(config)]


class CookingEnvironment(GameSetEnvironment):
    """TextWorld cooking games, one task per game: success is the game's won signal.

    A lost game (the game says so) is a failure reported as ``lost``; the recipe read from the
    cookbook stays in the episode's notes.
    """

    name = "cooking"
    experience_type = "sop"
    tool_prefix = "cooking"
    game_name = "cooking"
    metric_names = ("success", "lost", "budget_left")
    """``lost``: 1 when the game said it was lost (and was not won after a reset)."""
    config: CookingConfig

    def __init__(self, config: CookingConfig | None = None) -> None:
        super().__init__(config or CookingConfig())

    def _load(self) -> list[GameRecord]:
        return list(load_cooking_games(self.config))

    def _meta(self, record: GameRecord) -> dict[str, Any]:
        assert isinstance(record, CookingRecord)
        return {"split": record.split, "ingredients": [list(i) for i in record.ingredients]}

    def _keep(self, observation: str) -> str | None:
        """The cookbook's recipe, when ``observation`` shows it."""
        if _RECIPE_HEAD not in observation:
            return None
        return observation[observation.index(_RECIPE_HEAD) :].strip()

    def action_prior(
        self,
    ) -> Callable[[str, Sequence[str], Mapping[str, Any]], list[float] | None] | None:
        """A cooking procedure's templates and rules, read from the retrieved experience, as a
        bonus per valid command (:func:`~genmem.envs.cooking_experience.procedure_prior`)."""
        return experience_prior

    def experience_writer(self) -> ExperienceWriter | None:
        """The template distiller (:func:`~genmem.envs.cooking_experience.cooking_writer`): a
        run's plays as a procedure, inserted or merged with the stored one."""
        return cooking_writer()

    def score(self, task: Task, answer: str | None) -> Outcome:
        """Success as for every game, plus ``lost``: whether the game ended in a loss."""
        outcome = super().score(task, answer)
        lost = 1.0 if self.lost(task) else 0.0
        metrics = {"success": outcome.metrics["success"], "lost": lost}
        return outcome.model_copy(update={"metrics": metrics | outcome.metrics})

    def signal(self, outcome: Outcome) -> str | None:
        """The game's own verdict: ``success``, ``failure (the game was lost)`` or ``failure``."""
        if outcome.success:
            return "success"
        return "failure (the game was lost)" if outcome.metrics.get("lost") else "failure"
