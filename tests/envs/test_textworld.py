"""TextWorld: seeded, cached game generation and episodes played through the interactor tools.

Two tiny games are generated once for the module (about 2-3 s each: quest generation, the
Inform 7 compile, and one reset to record the opening observation).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

pytest.importorskip("textworld")

from genmem.envs.base import Task
from genmem.envs.textworld_env import (
    TextWorldConfig,
    TextWorldEnvironment,
    clean_feedback,
    generate_games,
    load_games,
)

SHAPE = {"seed": 7, "quest_length": 3, "world_size": 2, "nb_objects": 4}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> TextWorldConfig:
    cfg = TextWorldConfig(n_games=2, cache_dir=tmp_path_factory.mktemp("tw-cache"), **SHAPE)
    generate_games(cfg)
    return cfg


@pytest.fixture
def env(config: TextWorldConfig) -> TextWorldEnvironment:
    return TextWorldEnvironment(config)


def _tools(env: TextWorldEnvironment):
    reset, step = env.tools().interactor
    return reset, step


def _z8_body(path: Path) -> bytes:
    data = path.read_bytes()
    return data[:0x12] + data[0x18:]  # bytes 0x12-0x17 hold the compile date (serial number)


def test_same_seed_gives_the_same_games(config: TextWorldConfig, tmp_path: Path) -> None:
    first = load_games(config)
    again = TextWorldConfig(n_games=1, cache_dir=tmp_path, **SHAPE)  # a prefix of the set
    [path] = generate_games(again)
    [record] = load_games(again)
    assert record.walkthrough == first[0].walkthrough
    assert record.objective == first[0].objective
    assert record.intro == first[0].intro
    original = config.games_dir() / first[0].file
    assert _z8_body(path) == _z8_body(original)
    game_json = json.loads(path.with_suffix(".json").read_text())
    assert game_json == json.loads(original.with_suffix(".json").read_text())


def test_games_are_pick_and_place_quests_of_the_asked_length(config: TextWorldConfig) -> None:
    records = load_games(config)
    assert len(records) == 2
    assert len({r.seed for r in records}) == 2
    for r in records:
        assert len(r.walkthrough) == 3
        assert r.walkthrough[-1].startswith(("put ", "insert "))
        assert r.walkthrough[-2].startswith("take ")


def test_a_generated_set_is_read_from_the_cache(config: TextWorldConfig) -> None:
    manifest = config.games_dir() / "manifest.json"
    before = manifest.stat().st_mtime_ns
    paths = generate_games(config.model_copy(update={"max_steps": 5}))  # same games
    assert manifest.stat().st_mtime_ns == before
    assert all(p.is_file() and p.suffix == ".z8" for p in paths)
    assert config.model_copy(update={"seed": 8}).key() != config.key()


def test_processes_asking_for_one_set_at_once_build_it_once(tmp_path: Path) -> None:
    """Two processes (here threads: the lock is a file lock either way) that need the same set
    at the same time, as the shards of one eval do: one generates it, the other waits and reads
    the same games."""
    import threading
    import time

    from genmem.envs.textworld_env import GameRecord, cached_game_set

    cfg = TextWorldConfig(n_games=1, cache_dir=tmp_path, **SHAPE)
    calls: list[Path] = []

    def generate(folder: Path) -> list[GameRecord]:
        calls.append(folder)
        time.sleep(0.5)  # long enough that the other one asks while this one builds
        (folder / "g.z8").write_bytes(b"game")
        return [GameRecord(id="g", file="g.z8", seed=1, objective="o", intro="i", walkthrough=[])]

    got: list[list[GameRecord]] = []
    threads = [
        threading.Thread(target=lambda: got.append(cached_game_set(cfg, generate)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 2 and got[0] == got[1]
    assert [r.id for r in got[0]] == ["g"] and (cfg.games_dir() / "g.z8").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging left


def test_tasks_show_the_objective_and_first_room(env: TextWorldEnvironment) -> None:
    tasks = env.tasks()
    assert [t.id for t in env.tasks(limit=1)] == [tasks[0].id]
    for task, record in zip(tasks, env.games(), strict=True):
        assert task.query.startswith(record.objective)
        assert "-=" in task.query  # the room's title
        assert "$$" not in task.query  # no ASCII banner
        assert task.reference == record.walkthrough == env.walkthrough(task)
        assert Path(task.meta["game_file"]).is_file()


def test_the_walkthrough_through_the_tools_wins(env: TextWorldEnvironment) -> None:
    reset, step = _tools(env)
    assert (reset.name, step.name) == ("textworld_reset", "textworld_step")
    assert set(step.args) == {"command"}
    for task in env.tasks():
        env.start(task)
        opening = reset.invoke({})
        assert "Valid commands:" in opening
        replies = [step.invoke({"command": c}) for c in env.walkthrough(task)]
        assert "task is complete" in replies[-1]
        assert env.episode.steps == len(env.walkthrough(task))
        assert "episode is over" in step.invoke({"command": "look"})
        outcome = env.score(task, "whatever the agent answers")
        env.finish(task)
        left = round(1 - len(env.walkthrough(task)) / env.max_steps, 4)
        assert (outcome.score, outcome.success) == (1.0, True)
        assert outcome.metrics == {"success": 1.0, "budget_left": left}
        assert env.score(task, None).success  # still known after finish


def test_an_inadmissible_command_is_answered_and_uses_no_step(env: TextWorldEnvironment) -> None:
    _, step = _tools(env)
    task = env.tasks()[0]
    env.start(task)
    reply = step.invoke({"command": "fly to the moon"})
    assert "'fly to the moon' is not a valid command here" in reply
    assert "no step was used" in reply and "look" in reply
    assert env.episode.steps == 0
    assert "Valid commands:" in step.invoke({"command": "  LOOK. "})  # case, spaces, full stop
    assert env.episode.steps == 1
    env.finish(task)
    assert env.score(task, None).score == 0.0


def test_the_step_budget_ends_the_episode(config: TextWorldConfig) -> None:
    env = TextWorldEnvironment(config.model_copy(update={"max_steps": 2}))
    reset, step = _tools(env)
    task = env.tasks()[0]
    env.start(task)
    assert "1 of 2 steps used" in step.invoke({"command": "look"})
    last = step.invoke({"command": "inventory"})
    assert "step budget of 2 steps is used up" in last
    assert env.episode.done and env.episode.steps == 2
    walk = env.walkthrough(task)
    assert "episode is over" in step.invoke({"command": walk[0]})
    assert "episode is over" in reset.invoke({})
    assert env.episode.steps == 2
    assert env.score(task, None).score == 0.0
    env.finish(task)


def test_reset_restarts_the_game_but_keeps_the_steps(env: TextWorldEnvironment) -> None:
    reset, step = _tools(env)
    task = env.tasks()[1]
    env.start(task)
    walk = env.walkthrough(task)
    step.invoke({"command": walk[0]})
    reply = reset.invoke({})
    assert "1 of 30 steps used" in reply and reply.startswith(task.query.split("\n")[0])
    for command in walk:
        reply = step.invoke({"command": command})
    assert "won in 4 steps" in reply
    assert env.score(task, None).success
    env.finish(task)


def test_misuse_raises_with_the_fix(env: TextWorldEnvironment) -> None:
    _, step = _tools(env)
    with pytest.raises(RuntimeError, match=r"call env\.start"):
        step.invoke({"command": "look"})
    with pytest.raises(RuntimeError, match="has no episode"):
        env.score(Task(id="never-started", query="q"), None)
    with pytest.raises(ValidationError, match="world_size >= 2"):
        TextWorldConfig(world_size=1, quest_length=4)


def test_clean_feedback_drops_banner_prompt_and_restart_question() -> None:
    raw = (
        "\n\n   ________  __\n  |  \\$$$$$$\\ |  \\\n\nYour task: put the mug in the box.\n\n\n\n"
        "-= Kitchen =-\nA kitchen.\n\nWould you like to RESTART, RESTORE a saved game, QUIT or "
        "UNDO the last command?\n>                          -= Kitchen =-0/1"
    )
    assert clean_feedback(raw) == "Your task: put the mug in the box.\n\n-= Kitchen =-\nA kitchen."
