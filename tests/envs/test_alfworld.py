"""ALFWorld: subtask parsing, the missing-package/data errors, and episodes over a fake game.

The ``alfworld`` package is not needed: the adapter's parsing and absence checks are plain
Python, and the episode rules are checked with a scripted game in place of a real one. One
test runs ALFWorld's own game listing on a fake data tree where the package is installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from genmem.envs import alfworld_env
from genmem.envs.alfworld_env import (
    ALFWorldConfig,
    ALFWorldEnvironment,
    ALFWorldUnavailable,
    alfworld_goal,
    alfworld_subtask,
    check_alfworld,
)
from genmem.envs.base import Task
from genmem.envs.textworld_env import GameState
from genmem.errors import GenMemError

TRIAL = "trial_T20190909_044715_250790"


@pytest.mark.parametrize(
    ("folder", "subtask"),
    [
        ("pick_and_place_simple-Pencil-None-Shelf-308", "Pick"),
        ("look_at_obj_in_light-CD-None-DeskLamp-308", "Look"),
        ("pick_clean_then_place_in_recep-Lettuce-None-DiningTable-10", "Clean"),
        ("pick_heat_then_place_in_recep-Egg-None-Fridge-13", "Heat"),
        ("pick_cool_then_place_in_recep-Apple-None-Microwave-19", "Cool"),
        ("pick_two_obj_and_place-SoapBar-None-GarbageCan-424", "Pick2"),
    ],
)
def test_subtask_comes_from_the_game_folder(folder: str, subtask: str) -> None:
    path = Path("/data/json_2.1.1/valid_unseen") / folder / TRIAL / "game.tw-pddl"
    assert alfworld_subtask(path) == subtask
    assert alfworld_subtask(str(path)) == subtask


def test_an_unknown_task_type_is_refused() -> None:
    with pytest.raises(ValueError, match="names no ALFWorld task type"):
        alfworld_subtask(f"/data/pick_and_place_with_movable_recep-Spoon-Pan-Table-4/{TRIAL}/g")


def _game_file(folder: Path, goal: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    grammar = 'grammar :: """{"task": [{"rhs": "Your task is to: ' + goal + '."}]}"""'
    path = folder / "game.tw-pddl"
    path.write_text(json.dumps({"solvable": True, "grammar": grammar, "pddl_problem": ""}))
    (folder / "traj_data.json").write_text(
        json.dumps({"task_type": folder.parent.name.split("-")[0]})
    )
    return path


def test_the_goal_is_read_from_the_game_grammar(tmp_path: Path) -> None:
    path = _game_file(tmp_path / "g", "put a clean lettuce in diningtable")
    assert alfworld_goal(path) == "put a clean lettuce in diningtable"
    path.write_text(json.dumps({"grammar": "no goal"}))
    with pytest.raises(ValueError, match="alfworld-download -f"):
        alfworld_goal(path)


def test_a_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alfworld_env, "_installed", lambda module: module == "textworld")
    with pytest.raises(ALFWorldUnavailable) as caught:
        check_alfworld()
    error = caught.value
    assert isinstance(error, GenMemError) and isinstance(error, RuntimeError)
    assert error.missing == ["alfworld", "fast_downward"]
    assert error.fix == "pip install alfworld==0.4.2"
    assert "`pip install alfworld==0.4.2`" in str(error) and "alfworld-download" in str(error)
    with pytest.raises(ALFWorldUnavailable, match="pip install alfworld"):
        ALFWorldEnvironment().tasks()


def test_missing_data_says_where_and_what_to_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(alfworld_env, "_installed", lambda module: True)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(ALFWorldUnavailable) as caught:
        check_alfworld()
    error = caught.value
    assert error.fix == f"ALFWORLD_DATA={tmp_path} alfworld-download"
    assert f"`{error.fix}`" in str(error)
    assert str(tmp_path / "logic" / "alfred.pddl") in error.missing
    assert str(tmp_path / "json_2.1.1" / "valid_unseen") in error.missing

    for name in ("alfred.pddl", "alfred.twl2"):
        (tmp_path / "logic").mkdir(exist_ok=True)
        (tmp_path / "logic" / name).write_text("")
    (tmp_path / "json_2.1.1" / "valid_unseen").mkdir(parents=True)
    assert check_alfworld() == tmp_path
    with pytest.raises(ALFWorldUnavailable, match="valid_seen"):
        check_alfworld(tmp_path, "valid_seen")


def test_config_maps_subtasks_to_alfworld_task_types(tmp_path: Path) -> None:
    config = ALFWorldConfig(subtasks=("Look", "Pick2"), data_dir=tmp_path)
    alfred = config.alfred_config()
    assert alfred["env"]["task_types"] == [2, 6]
    assert alfred["dataset"]["eval_ood_data_path"] == str(tmp_path / "json_2.1.1/valid_unseen")
    assert alfred["logic"]["domain"] == str(tmp_path / "logic/alfred.pddl")
    with pytest.raises(ValidationError, match="Pick2"):
        ALFWorldConfig(subtasks=("Slice",))


class _ScriptedGame:
    """Two rooms' worth of ALFWorld: go to the fridge, take the apple, win on 'cool'."""

    def __init__(self) -> None:
        self.played: list[str] = []

    def _state(self) -> GameState:
        won = self.played[-1:] == ["cool apple 1 with fridge 1"]
        lost = self.played[-1:] == ["throw apple 1"]
        commands = ("go to fridge 1", "look", "take apple 1 from countertop 1")
        if "take apple 1 from countertop 1" in self.played:
            commands = ("cool apple 1 with fridge 1", "look", "throw apple 1")
        return GameState(f"You did {self.played[-1:]}.", commands, won=won, lost=lost)

    def reset(self) -> GameState:
        self.played = []
        return self._state()

    def step(self, command: str) -> GameState:
        self.played.append(command)
        return self._state()

    def close(self) -> None:
        pass


def _task() -> Task:
    folder = "pick_cool_then_place_in_recep-Apple-None-Microwave-19"
    return Task(
        id=f"valid_unseen/{folder}/{TRIAL}",
        query="Your task is to: cool some apple and put it in microwave.",
        meta={"subtask": "Cool", "game_file": f"/d/{folder}/{TRIAL}/game.tw-pddl"},
    )


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ALFWorldEnvironment:
    env = ALFWorldEnvironment(ALFWorldConfig(max_steps=3))
    monkeypatch.setattr(env, "_open", lambda task: _ScriptedGame())
    return env


def test_an_episode_is_won_through_the_alfworld_tools(scripted: ALFWorldEnvironment) -> None:
    reset, step = scripted.tools().interactor
    assert (reset.name, step.name) == ("alfworld_reset", "alfworld_step")
    task = _task()
    scripted.start(task)
    assert "take apple 1 from countertop 1" in reset.invoke({})
    reply = step.invoke({"command": "cool apple 1 with fridge 1"})
    assert "not a valid command" in reply and scripted.episode.steps == 0
    step.invoke({"command": "take apple 1 from countertop 1"})
    assert "task is complete" in step.invoke({"command": "cool apple 1 with fridge 1"})
    outcome = scripted.score(task, None)
    scripted.finish(task)
    assert outcome.success and outcome.metrics["success"] == 1.0
    assert 0 < outcome.metrics["budget_left"] < 1


def test_the_alfworld_step_budget_ends_the_episode(scripted: ALFWorldEnvironment) -> None:
    _, step = scripted.tools().interactor
    task = _task()
    scripted.start(task)
    for _ in range(3):
        reply = step.invoke({"command": "look"})
    assert "step budget of 3 steps is used up" in reply
    assert "episode is over" in step.invoke({"command": "take apple 1 from countertop 1"})
    assert scripted.episode.steps == 3
    scripted.finish(task)
    assert scripted.score(task, "the apple is cool").score == 0.0


def test_a_lost_game_can_be_reset_while_steps_remain(scripted: ALFWorldEnvironment) -> None:
    reset, step = scripted.tools().interactor
    task = _task()
    scripted.start(task)
    step.invoke({"command": "take apple 1 from countertop 1"})
    reply = step.invoke({"command": "throw apple 1"})
    assert "game is lost after 2 steps" in reply and "1 steps left" in reply
    assert "take apple 1 from countertop 1" in reset.invoke({})
    assert not scripted.episode.lost and scripted.episode.steps == 2
    assert "step budget of 3 steps is used up" in step.invoke({"command": "look"})
    assert not scripted.score(task, None).success
    scripted.finish(task)


def test_alfworld_lists_its_games_from_a_data_tree(tmp_path: Path) -> None:
    pytest.importorskip("alfworld")
    pytest.importorskip("fast_downward")
    import alfworld.info

    (tmp_path / "logic").mkdir()
    for name, source in (
        ("alfred.pddl", alfworld.info.ALFRED_PDDL_PATH),
        ("alfred.twl2", alfworld.info.ALFRED_TWL2_PATH),
    ):
        (tmp_path / "logic" / name).write_text(Path(source).read_text())
    split = tmp_path / "json_2.1.1" / "valid_unseen"
    _game_file(split / "look_at_obj_in_light-CD-None-DeskLamp-308" / TRIAL, "look at cd")
    _game_file(split / "pick_heat_then_place_in_recep-Egg-None-Fridge-13" / TRIAL, "heat egg")
    env = ALFWorldEnvironment(ALFWorldConfig(data_dir=tmp_path))
    tasks = env.tasks()
    assert [t.meta["subtask"] for t in tasks] == ["Look", "Heat"]
    assert tasks[0].query == "Your task is to: look at cd."
    assert tasks[0].id == f"valid_unseen/look_at_obj_in_light-CD-None-DeskLamp-308/{TRIAL}"
