"""TextWorld's cooking games: generated offline and cached, split as TextWorld splits its foods,
won by the walkthrough, lost (and recorded as a loss) by cooking twice, the recipe kept in view.

One tiny train game (one ingredient, one room) is generated once for the session (conftest's
``cooking_config``); the split test makes two more games without compiling them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("textworld")

from genmem.cli import main
from genmem.envs.benches import BENCHES, BenchOptions, bench_tasks, open_bench
from genmem.envs.cooking import (
    CookingConfig,
    CookingEnvironment,
    cooking_game_id,
    load_cooking_games,
    make_cooking_game,
)

SPLITS = ("train", "valid", "test")


@pytest.fixture
def env(cooking_config: CookingConfig) -> CookingEnvironment:
    return CookingEnvironment(cooking_config)


def test_generation_is_cached_and_deterministic(cooking_config: CookingConfig) -> None:
    manifest = cooking_config.games_dir() / "manifest.json"
    before = manifest.stat().st_mtime_ns
    [record] = load_cooking_games(cooking_config.model_copy(update={"max_steps": 5}))
    assert manifest.stat().st_mtime_ns == before  # read back, not generated again
    assert record.split == "train" and record.recipe.startswith("Recipe #1")
    assert record.walkthrough[-2:] == ["prepare meal", "eat meal"]
    again = make_cooking_game(cooking_config, record.seed)  # the same seed, the same game
    assert [tuple(i) for i in again.metadata["ingredients"]] == record.ingredients
    assert again.metadata["recipe"].strip() == record.recipe
    keys = {cooking_config.model_copy(update={"split": s}).key() for s in SPLITS}
    assert len(keys) == 3 and cooking_config.model_copy(update={"cut": True}).key() not in keys
    # a game's id names its settings and index, not the set's size: a larger set's first
    # games are the same tasks (an evaluation extends by --games and resumes)
    larger = cooking_config.model_copy(update={"n_games": 150})
    assert record.id == cooking_game_id(cooking_config, 0) == cooking_game_id(larger, 0)
    assert larger.key() != cooking_config.key()  # the folders differ; the games do not
    assert cooking_game_id(cooking_config.model_copy(update={"cut": True}), 0) != record.id


def test_valid_and_test_games_use_no_food_preparation_of_the_train_split(
    cooking_config: CookingConfig,
) -> None:
    from textworld.challenges.tw_cooking.cooking import FOOD_PREPARATIONS_SPLITS

    seed = load_cooking_games(cooking_config)[0].seed
    train = FOOD_PREPARATIONS_SPLITS["train"]
    found = {}
    for split in ("valid", "test"):
        game = make_cooking_game(cooking_config.model_copy(update={"split": split}), seed)
        found[split] = [tuple(i) for i in game.metadata["ingredients"]]
        for food, cooking, cutting in found[split]:
            assert (cooking, cutting) not in train.get(food, []), (split, food)
    assert found["valid"] != found["test"] != load_cooking_games(cooking_config)[0].ingredients


def test_the_walkthrough_wins_and_the_recipe_stays_in_the_notes(env: CookingEnvironment) -> None:
    reset, step = env.tools().interactor
    assert (reset.name, step.name) == ("cooking_reset", "cooking_step")
    [task] = env.tasks()
    assert task.query.startswith("You are hungry!") and task.meta["split"] == "train"
    env.start(task)
    walk = env.walkthrough(task)
    read = walk.index("examine cookbook")
    for n, command in enumerate(walk):
        message = step.invoke({"name": step.name, "args": {"command": command}, "id": "1",
                               "type": "tool_call"})  # fmt: skip
        notes = message.artifact["notes"]
        assert bool(notes and notes[0].startswith("Recipe #1")) == (n >= read), command
    assert "task is complete" in message.content
    outcome = env.score(task, None)
    env.finish(task)
    assert outcome.success and outcome.metrics == {
        "success": 1.0,
        "lost": 0.0,
        "budget_left": round(1 - len(walk) / env.max_steps, 4),
    }
    assert env.signal(outcome) == "success"


def test_cooking_an_ingredient_twice_loses_and_is_recorded_as_a_loss(
    env: CookingEnvironment,
) -> None:
    _, step = env.tools().interactor
    [task] = env.tasks()
    env.start(task)
    walk = env.walkthrough(task)
    cook = next(c for c in walk if c.startswith("cook "))
    for command in walk[: walk.index(cook) + 1]:
        step.invoke({"command": command})
    reply = step.invoke({"command": cook})
    assert "You lost" in reply and "The game is lost" in reply
    env.finish(task)
    outcome = env.score(task, None)
    assert not outcome.success and outcome.metrics["lost"] == 1.0
    assert env.signal(outcome) == "failure (the game was lost)"


def test_the_three_benches_are_listed_and_open_their_split(capsys) -> None:
    names = [f"cooking-{s}" for s in SPLITS]
    assert set(names) <= set(BENCHES)
    assert main(["benches"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert all("success" in listed[n] and "lost" in listed[n] for n in names)
    options = BenchOptions(games=3, cooking_recipe=1, cooking_rooms=6, cooking_cut="false")
    for name, split in zip(names, SPLITS, strict=True):
        env = open_bench(name, options)
        assert isinstance(env, CookingEnvironment) and env.config.split == split
        assert (env.config.recipe, env.config.rooms, env.config.cut) == (1, 6, False)
        assert bench_tasks(name, options) == 3
    with pytest.raises(ValueError, match="1, 6, 9 or 12 rooms"):
        BenchOptions(cooking_rooms=4)


def test_a_larger_set_copies_the_games_a_smaller_one_built(
    cooking_config: CookingConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import genmem.envs.cooking as cooking

    shutil.copytree(cooking_config.games_dir(), tmp_path / cooking_config.key())
    smaller = cooking_config.model_copy(update={"cache_dir": tmp_path})
    [first] = load_cooking_games(smaller)
    made: list[int] = []
    real = cooking.make_cooking_game

    def counted(config: CookingConfig, seed: int) -> object:
        made.append(seed)
        return real(config, seed)

    monkeypatch.setattr(cooking, "make_cooking_game", counted)
    larger = smaller.model_copy(update={"n_games": 2})
    games = load_cooking_games(larger)
    assert len(games) == 2 and len(made) == 1 and made[0] == games[1].seed  # game 0 was copied
    assert games[0] == first
    copied = larger.games_dir() / games[0].file
    assert copied.read_bytes() == (smaller.games_dir() / first.file).read_bytes()
    # a set of other settings is not of the family: nothing is copied from it
    other = larger.model_copy(update={"cut": True, "n_games": 1})
    assert cooking.family_games(other) == {}
