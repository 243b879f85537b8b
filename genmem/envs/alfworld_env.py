"""ALFWorld: the text version of ALFRED household tasks, over the real ``alfworld`` package.

ALFWorld games are TextWorld PDDL games (``game.tw-pddl``) downloaded by ``alfworld-download``
into ``$ALFWORLD_DATA`` (default ``~/.cache/alfworld``). The list of solvable games of a split
comes from ALFWorld's own ``AlfredTWEnv`` (``get_environment('AlfredTWEnv')(config,
train_eval=...)``); each task's game is then played on its own with ``textworld.start`` and
ALFWorld's wrappers, so a task always maps to the same game. The episode rules (step budget,
admissible commands, success = the game's ``won`` signal) are those of
:class:`~genmem.envs.textworld_env.TextGameEnvironment`; the tools are ``alfworld_reset`` and
``alfworld_step``.

The six task types become ``task.meta["subtask"]`` (Pick, Look, Clean, Heat, Cool, Pick2), read
from the game's folder name, so evaluation reports success per subtask. Neither that parsing nor
the check for the package and its data needs ``alfworld`` installed; a missing piece raises
:class:`ALFWorldUnavailable` saying what to run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from genmem.envs.base import Task
from genmem.envs.textworld_env import (
    GameState,
    GymGame,
    TextGame,
    TextGameEnvironment,
    clean_feedback,
)
from genmem.errors import GenMemError

__all__ = [
    "ALFWORLD_PIN",
    "SUBTASKS",
    "ALFWorldConfig",
    "ALFWorldEnvironment",
    "ALFWorldUnavailable",
    "alfworld_data_dir",
    "alfworld_goal",
    "alfworld_subtask",
    "check_alfworld",
]

ALFWORLD_PIN = "alfworld==0.4.2"
"""The release this adapter is written against."""

SUBTASKS: dict[str, str] = {
    "pick_and_place_simple": "Pick",
    "look_at_obj_in_light": "Look",
    "pick_clean_then_place_in_recep": "Clean",
    "pick_heat_then_place_in_recep": "Heat",
    "pick_cool_then_place_in_recep": "Cool",
    "pick_two_obj_and_place": "Pick2",
}
"""ALFRED task type (the game folder's name up to the first '-') -> subtask name."""

_TASK_TYPE_IDS = {name: i for i, name in enumerate(SUBTASKS, start=1)}  # AlfredTWEnv's TASK_TYPES
_SPLITS = {
    "train": "train",
    "valid_seen": "eval_in_distribution",
    "valid_unseen": "eval_out_of_distribution",
}
_JSON_DIR = "json_2.1.1"
_GOAL = re.compile(r'Your task is to: ([^"\n]*?)\.?"')


class ALFWorldUnavailable(GenMemError, RuntimeError):
    """The ``alfworld`` package, its PDDL backend or its downloaded data is missing."""

    def __init__(self, message: str, *, missing: list[str], fix: str) -> None:
        super().__init__(message)
        self.missing = missing
        self.fix = fix


def alfworld_subtask(game_file: str | Path) -> str:
    """The subtask (Pick, Look, Clean, Heat, Cool, Pick2) of a game, from its folder names.

    e.g. ``.../valid_unseen/pick_clean_then_place_in_recep-Lettuce-None-DiningTable-10/
    trial_T2019.../game.tw-pddl`` -> ``Clean``.
    """
    for part in reversed(Path(game_file).parts):
        name = part.split("-", 1)[0]
        if name in SUBTASKS:
            return SUBTASKS[name]
    raise ValueError(
        f"{str(game_file)!r} names no ALFWorld task type: one of its folders must start with "
        f"{', '.join(SUBTASKS)} followed by '-'"
    )


def alfworld_goal(game_file: str | Path) -> str:
    """The goal of a ``game.tw-pddl`` file (what follows 'Your task is to:' in its grammar)."""
    data = json.loads(Path(game_file).read_text(encoding="utf-8"))
    found = _GOAL.search(str(data.get("grammar", "")))
    if found is None:
        raise ValueError(
            f"{str(game_file)!r} holds no 'Your task is to: ...' goal in its grammar; "
            "regenerate the game files with alfworld-download -f"
        )
    return found.group(1).strip()


def alfworld_data_dir(data_dir: str | Path | None = None) -> Path:
    """``data_dir``, else ``$ALFWORLD_DATA``, else ``~/.cache/alfworld`` (ALFWorld's default)."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    return Path(os.environ.get("ALFWORLD_DATA") or Path.home() / ".cache" / "alfworld")


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_alfworld(data_dir: str | Path | None = None, split: str = "valid_unseen") -> Path:
    """The ALFWorld data folder, once the package, its PDDL planner and the data are there.

    Raises:
        ALFWorldUnavailable: naming what is missing and the command that installs it.
    """
    missing = [m for m in ("alfworld", "textworld", "fast_downward") if not _installed(m)]
    if missing:
        fix = f"pip install {ALFWORLD_PIN}"
        raise ALFWorldUnavailable(
            f"ALFWorld needs the Python module(s) {', '.join(missing)}, which are not installed. "
            f"Run `{fix}` (it pulls textworld[pddl], whose fast-downward-textworld is built "
            "from source: cmake and a C++ compiler are needed), then `alfworld-download` to "
            "fetch the games.",
            missing=missing,
            fix=fix,
        )
    root = alfworld_data_dir(data_dir)
    needed = [
        root / "logic" / "alfred.pddl",
        root / "logic" / "alfred.twl2",
        root / _JSON_DIR / split,
    ]
    absent = [str(p) for p in needed if not p.exists()]
    if absent:
        fix = f"ALFWORLD_DATA={root} alfworld-download"
        raise ALFWorldUnavailable(
            f"ALFWorld data is missing under {root}: {', '.join(absent)}. Run `{fix}` "
            "(it downloads the ALFRED game files, about 2 GB unpacked), or point "
            "ALFWorldConfig.data_dir / $ALFWORLD_DATA at the folder that holds them.",
            missing=absent,
            fix=fix,
        )
    return root


class ALFWorldConfig(BaseModel):
    """Which ALFWorld games, and how long an episode may run."""

    model_config = ConfigDict(frozen=True)

    split: Literal["train", "valid_seen", "valid_unseen"] = Field(
        default="valid_unseen",
        description="valid_unseen (134 games, the usual test set), valid_seen (140) or train.",
    )
    subtasks: tuple[str, ...] = Field(
        default=tuple(SUBTASKS.values()),
        description="Subtasks to keep, among Pick, Look, Clean, Heat, Cool, Pick2.",
    )
    max_steps: int = Field(default=50, ge=1, description="Admissible commands per episode.")
    data_dir: Path | None = Field(
        default=None, description="ALFWorld's data folder; default $ALFWORLD_DATA."
    )

    @model_validator(mode="after")
    def _check_subtasks(self) -> ALFWorldConfig:
        unknown = [s for s in self.subtasks if s not in SUBTASKS.values()]
        if unknown or not self.subtasks:
            raise ValueError(
                f"subtasks={self.subtasks!r}: give at least one, each one of "
                f"{', '.join(SUBTASKS.values())}"
            )
        return self

    def alfred_config(self) -> dict[str, Any]:
        """The config dict ``AlfredTWEnv`` reads (what ALFWorld's base_config.yaml holds)."""
        root = alfworld_data_dir(self.data_dir)
        json_dir = root / _JSON_DIR
        by_name = {v: k for k, v in SUBTASKS.items()}
        return {
            "dataset": {
                "data_path": str(json_dir / "train"),
                "eval_id_data_path": str(json_dir / "valid_seen"),
                "eval_ood_data_path": str(json_dir / "valid_unseen"),
                "num_train_games": -1,
                "num_eval_games": -1,
            },
            "logic": {
                "domain": str(root / "logic" / "alfred.pddl"),
                "grammar": str(root / "logic" / "alfred.twl2"),
            },
            "env": {
                "type": "AlfredTWEnv",
                "goal_desc_human_anns_prob": 0.0,
                "task_types": [_TASK_TYPE_IDS[by_name[s]] for s in self.subtasks],
                "domain_randomization": False,
                "regen_game_files": False,
                "expert_type": "handcoded",
            },
            "general": {"training_method": "dagger"},
            "dagger": {"training": {"max_nb_steps_per_episode": self.max_steps}},
            "rl": {"training": {"max_nb_steps_per_episode": self.max_steps}},
        }


class _ALFWorldGame(GymGame):
    """One ALFWorld game played with textworld and ALFWorld's name demangler."""

    def __init__(self, game_file: Path) -> None:
        import textworld
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

        infos = textworld.EnvInfos(won=True, lost=True, admissible_commands=True)
        wrappers = [AlfredDemangler(shuffle=False), AlfredInfos]
        self._env = textworld.start(str(game_file), request_infos=infos, wrappers=wrappers)

    @staticmethod
    def _state(state: Any) -> GameState:
        commands = [c for c in state.admissible_commands or () if c != "help"]
        return GameState(
            observation=clean_feedback(state.feedback),
            commands=tuple(commands),
            won=bool(state.won),
            lost=bool(state.get("lost")),
        )


class ALFWorldEnvironment(TextGameEnvironment):
    """ALFWorld games of one split, one task per game, in a fixed (sorted) order.

    The task's query is the game's goal ('Your task is to: ...'); the first observation from
    ``alfworld_reset`` or the start shows the room. ``meta["subtask"]`` is Pick/Look/Clean/Heat/
    Cool/Pick2 and ``meta["game_file"]`` the game.
    """

    name = "alfworld"
    experience_type = "sop"
    tool_prefix = "alfworld"
    game_name = "ALFWorld household"

    def __init__(self, config: ALFWorldConfig | None = None) -> None:
        self.config = config or ALFWorldConfig()
        super().__init__(max_steps=self.config.max_steps)
        self._files: list[Path] | None = None

    def game_files(self) -> list[Path]:
        """The split's solvable games of the chosen subtasks, as ``AlfredTWEnv`` lists them."""
        if self._files is None:
            root = check_alfworld(self.config.data_dir, self.config.split)
            from alfworld.agents.environment import get_environment

            alfred_env = get_environment("AlfredTWEnv")(
                self.config.alfred_config(), train_eval=_SPLITS[self.config.split]
            )
            files = sorted(Path(f) for f in alfred_env.game_files)
            if not files:
                raise ALFWorldUnavailable(
                    f"no solvable ALFWorld games of {self.config.subtasks} in the "
                    f"{self.config.split} split under {root}; rerun `alfworld-download -f`",
                    missing=[str(root / _JSON_DIR / self.config.split)],
                    fix="alfworld-download -f",
                )
            self._files = files
        return list(self._files)

    def tasks(self, limit: int | None = None) -> list[Task]:
        """One task per game; id = the split and the game's two folder names."""
        files = self.game_files()
        if limit is not None:
            files = files[:limit]
        tasks = []
        for path in files:
            goal = alfworld_goal(path)
            tasks.append(
                Task(
                    id="/".join((self.config.split, *path.parent.parts[-2:])),
                    query=f"Your task is to: {goal}.",
                    reference=goal,
                    meta={
                        "subtask": alfworld_subtask(path),
                        "task_type": path.parent.parent.name.split("-", 1)[0],
                        "game_file": str(path),
                    },
                )
            )
        return tasks

    def _open(self, task: Task) -> TextGame:
        check_alfworld(self.config.data_dir, self.config.split)
        return _ALFWorldGame(Path(task.meta["game_file"]))
