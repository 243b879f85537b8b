"""TextWorld household games: seeded pick-and-place quests played through two interactor tools.

Games are generated with TextWorld's own generator (``textworld==1.7.0``) and compiled offline
with the Inform 7 tools its wheel ships. Each quest ends with putting an object on a supporter or
into a container (the last action is ``put`` or ``insert``, the one before it a ``take``); longer
quests add opening a container or door and walking between rooms before that. A config's games
are generated once into a cache folder keyed by the config's hash, so the same seed gives the same
games (and walkthroughs) on every machine; a ``manifest.json`` written last marks a finished set.

The episode machinery here (:class:`GameEpisode`, :class:`TextGameEnvironment`) is shared with
ALFWorld, itself a TextWorld game: a step budget, admissible-command checking (an inadmissible
command is answered with the valid ones and uses no step), and a clear "episode over" reply.
Success is the game's own ``won`` signal; the final answer text is ignored.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import uuid
import warnings
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, Self, TypeVar

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, ConfigDict, Field, model_validator

from genmem.envs.base import Environment, EnvTools, Outcome, Task
from genmem.errors import GenMemError

__all__ = [
    "GameEpisode",
    "GameGenerationError",
    "GameRecord",
    "GameSetConfig",
    "GameSetEnvironment",
    "GameState",
    "GymGame",
    "TextGame",
    "TextGameEnvironment",
    "TextWorldConfig",
    "TextWorldEnvironment",
    "TextWorldGame",
    "cached_game_set",
    "clean_feedback",
    "compile_game_file",
    "game_seed",
    "game_tools",
    "generate_games",
    "load_games",
]

GENERATOR_VERSION = 1
"""Bumped whenever generation changes what a seed produces (it is part of the cache key)."""

_MAX_TRIES = 25
_MANIFEST = "manifest.json"


class GameGenerationError(GenMemError, RuntimeError):
    """No quest of the asked shape could be generated, or the games could not be compiled."""

    def __init__(self, message: str, *, config: Any = None) -> None:
        super().__init__(message)
        self.config = config


# --------------------------------------------------------------------------------------------
# The episode: one game, a step budget, admissible commands, model-facing text.


@dataclass(frozen=True)
class GameState:
    """What a game says after a reset or a step."""

    observation: str
    commands: tuple[str, ...]
    """The admissible commands in this state."""
    won: bool = False
    lost: bool = False
    score: int | None = None
    """The game's score so far, where the game keeps one (TextWorld's games do)."""


class TextGame(Protocol):
    """A loaded text game: the only three calls an episode makes."""

    def reset(self) -> GameState: ...

    def step(self, command: str) -> GameState: ...

    def close(self) -> None: ...


_PROMPT_LINE = re.compile(r"\n>[^\n]*\s*\Z")  # the z-machine prompt with its right-aligned status
_BANNER_CHARS = frozenset(" _|\\/$<>")
_GAME_OVER_PROMPT = (
    "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?"
)


def clean_feedback(text: str) -> str:
    """A game's feedback without the ASCII banner, the prompt/status line and blank-line runs."""
    text = _PROMPT_LINE.sub("", text or "").replace(_GAME_OVER_PROMPT, "")
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if not line or not set(line) <= _BANNER_CHARS]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _normalise(command: str) -> str:
    return " ".join((command or "").lower().split()).rstrip(".!")


class GameEpisode:
    """One task's episode over a :class:`TextGame`.

    Only admissible commands reach the game, and each uses one of ``max_steps`` steps (a reset
    does not give them back). Once the game is won or the steps are spent, every call answers
    that the episode is over; a lost game can be reset while steps remain. Winning is final.
    """

    def __init__(
        self,
        game: TextGame,
        *,
        max_steps: int,
        tool_prefix: str,
        keep: Callable[[str], str | None] | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.game = game
        self.max_steps = max_steps
        self.tool_prefix = tool_prefix
        self.steps = 0
        """Admissible commands played so far (rejected ones are not counted)."""
        self.won = False
        self.lost = False
        self.history: list[str] = []
        """The commands played, in order, across resets."""
        self.losses = 0
        """Times the game said it was lost (a lost game can be reset while steps remain)."""
        self.keep = keep
        """Picks, from an observation, the text worth keeping in view (None: nothing)."""
        self.notes: list[str] = []
        """What :attr:`keep` picked so far, oldest first, without repeats; kept across resets."""
        self.id = uuid.uuid4().hex
        """Names this episode (an agent that takes over an episode in progress knows it by it)."""
        self._state: GameState | None = None
        self._fresh = False  # no step since the last reset: a reset need not restart

    @property
    def done(self) -> bool:
        """True once the game is won or lost or the step budget is spent."""
        return self.won or self.lost or self.steps >= self.max_steps

    def begin(self) -> str:
        """Reset the game at the start of the episode and return the opening observation."""
        self._state = self.game.reset()
        self._fresh = True
        self._note(self._state.observation)
        return self._state.observation

    def reset(self) -> str:
        """Restart the game (the steps used stay used); the opening observation and commands."""
        if self.won or self.steps >= self.max_steps:
            return self._over_message()
        if self._state is None or not self._fresh:
            self.begin()
            self.lost = False
        assert self._state is not None
        return (
            f"{self._state.observation}\n\n{self._commands_line()} "
            f"({self._budget()}; a reset does not give steps back)"
        )

    def resume(self) -> str:
        """Where the game stands, without using a step: the observation and the valid commands.

        An agent that takes over an episode in progress (a later delegation) goes on from here;
        a lost game restarts as :meth:`reset` does, and a finished episode says it is over.
        """
        if self.won or self.steps >= self.max_steps:
            return self._over_message()
        if self._state is None or self.lost:
            return self.reset()
        return f"{self._state.observation}\n\n{self._commands_line()} ({self._budget()})"

    def step(self, command: str) -> str:
        """Play one command: the observation and the valid commands, or why nothing happened."""
        if self.done:
            return self._over_message()
        if self._state is None:
            self.begin()
        assert self._state is not None
        wanted = _normalise(command)
        match = next((c for c in self._state.commands if _normalise(c) == wanted), None)
        if match is None:
            shown = (command or "").strip() or "(empty)"
            return (
                f"'{shown}' is not a valid command here, so nothing happened and no step was "
                f"used ({self._budget()}). Retry {self.tool_prefix}_step with one of these, "
                f"written exactly: {self._commands_list()}."
            )
        self._state = self.game.step(match)
        self._fresh = False
        self.steps += 1
        self.history.append(match)
        self.won = self.won or self._state.won
        self.lost = self._state.lost and not self.won
        self.losses += self.lost
        self._note(self._state.observation)
        if self.done:
            return f"{self._state.observation}\n\n{self._over_message()}"
        return f"{self._state.observation}\n\n{self._commands_line()} ({self._budget()})"

    def close(self) -> None:
        """Release the game."""
        self.game.close()

    def view(self) -> dict[str, Any]:
        """What an agent may read of the episode now: observation, valid commands, done, won,
        the notes kept from earlier observations (game text) and the commands played so far."""
        state = self._state
        return {
            "observation": state.observation if state else "",
            "commands": [] if self.done or state is None else list(state.commands),
            "done": self.done,
            "won": self.won,
            "notes": list(self.notes),
            "history": list(self.history),
            "episode": self.id,
        }

    def _note(self, observation: str) -> None:
        note = self.keep(observation) if self.keep is not None else None
        if note and note not in self.notes:
            self.notes.append(note)

    def _budget(self) -> str:
        return f"{self.steps} of {self.max_steps} steps used"

    def _commands_list(self) -> str:
        return ", ".join(self._state.commands) if self._state else "(none)"

    def _commands_line(self) -> str:
        return f"Valid commands: {self._commands_list()}."

    def _over_message(self) -> str:
        if self.lost and not self.won and self.steps < self.max_steps:
            return (
                f"The game is lost after {self.steps} steps. Call {self.tool_prefix}_reset to "
                f"start over ({self.max_steps - self.steps} steps left), or stop and report."
            )
        if self.won:
            why = f"the task is complete (won in {self.steps} steps)"
        else:
            why = f"the step budget of {self.max_steps} steps is used up; the task is not complete"
        return (
            f"The episode is over: {why}. Do not call {self.tool_prefix}_step or "
            f"{self.tool_prefix}_reset again; stop and report what happened."
        )


class _StepInput(BaseModel):
    command: str = Field(
        description="One command, written exactly as in the list of valid commands, "
        "e.g. 'take apple from table'."
    )


def game_tools(
    episode: Callable[[], GameEpisode], *, prefix: str, game: str
) -> tuple[BaseTool, BaseTool]:
    """The ``<prefix>_reset`` and ``<prefix>_step`` tools over the episode ``episode()`` returns.

    Each returns its text and, as the tool message's artifact, :meth:`GameEpisode.view` (the
    valid commands in a structured form, for agents that choose among them). The reset tool's
    ``metadata["resume"]`` gives the same pair for :meth:`GameEpisode.resume` (the game where it
    stands, no step used): code that takes over an episode in progress calls it instead of a
    restart; no model sees it.
    """

    def resume() -> tuple[str, dict[str, Any]]:
        text = episode().resume()
        return text, episode().view()

    def reset() -> tuple[str, dict[str, Any]]:
        text = episode().reset()
        return text, episode().view()

    def step(command: str) -> tuple[str, dict[str, Any]]:
        text = episode().step(command)
        return text, episode().view()

    reset_tool = StructuredTool.from_function(
        func=reset,
        name=f"{prefix}_reset",
        description=(
            f"Restart the {game} game from its beginning and see the opening observation and "
            "the valid commands. Steps already used stay used."
        ),
        response_format="content_and_artifact",
        metadata={"resume": resume},
    )
    step_tool = StructuredTool.from_function(
        func=step,
        name=f"{prefix}_step",
        description=(
            f"Play one command in the {game} game; get what happens and the commands valid "
            "next. Only a listed command is played; anything else is answered with the list."
        ),
        args_schema=_StepInput,
        response_format="content_and_artifact",
    )
    return reset_tool, step_tool


class TextGameEnvironment(Environment):
    """An interactive text game per task: reset/step interactor tools, success = the won signal.

    Subclasses say how a task's game is opened (:meth:`_open`); the runner calls :meth:`start`
    before the graph runs and :meth:`finish` after it. :meth:`score` reads the episode.
    """

    metric_names = ("success", "budget_left")
    """``budget_left``: the share of the step budget left when the game was won (0 if not),
    which tells a quick win from one found by trying everything."""
    tool_prefix = "game"
    outcome_observable = True  # the episode itself says whether it was won
    concurrent_tasks = False  # the tools act on the one open episode
    game_name = "text"

    def __init__(self, *, max_steps: int) -> None:
        self.max_steps = max_steps
        self._task_id: str | None = None
        self._episode: GameEpisode | None = None
        self._won: dict[str, bool] = {}
        self._left: dict[str, float] = {}
        self._lost: dict[str, bool] = {}

    @abstractmethod
    def _open(self, task: Task) -> TextGame:
        """Load ``task``'s game."""

    def _keep(self, observation: str) -> str | None:
        """The part of ``observation`` to keep in view on later turns (this base: none)."""
        return None

    @property
    def episode(self) -> GameEpisode:
        """The episode of the task last started (for the tools, tests and demos)."""
        if self._episode is None:
            raise RuntimeError(
                f"no {self.name} episode is open: call env.start(task) before the agent uses "
                f"the {self.tool_prefix}_* tools"
            )
        return self._episode

    def tools(self) -> EnvTools:
        """``<prefix>_reset`` and ``<prefix>_step`` for the interactor."""
        tools = game_tools(lambda: self.episode, prefix=self.tool_prefix, game=self.game_name)
        return EnvTools(interactor=tools)

    def start(self, task: Task) -> None:
        """Open ``task``'s game and reset it (closing any episode still open)."""
        self._close_episode()
        episode = GameEpisode(
            self._open(task),
            max_steps=self.max_steps,
            tool_prefix=self.tool_prefix,
            keep=self._keep,
        )
        episode.begin()
        self._task_id, self._episode = task.id, episode
        self._won.pop(task.id, None)

    def finish(self, task: Task) -> None:
        """Record the episode's result and close its game."""
        self._close_episode()

    def _close_episode(self) -> None:
        if self._episode is None:
            return
        if self._task_id is not None:
            self._won[self._task_id] = self._episode.won
            self._left[self._task_id] = self._budget_left(self._episode)
            self._lost[self._task_id] = self._ended_lost(self._episode)
        episode, self._episode, self._task_id = self._episode, None, None
        episode.close()

    def won(self, task: Task) -> bool:
        """Whether ``task``'s episode (open or finished) was won."""
        if self._episode is not None and self._task_id == task.id:
            return self._episode.won
        if task.id in self._won:
            return self._won[task.id]
        raise RuntimeError(
            f"task {task.id!r} has no episode: call env.start(task) before the graph runs; "
            "score it before or after env.finish(task)"
        )

    def lost(self, task: Task) -> bool:
        """Whether ``task``'s episode (open or finished) lost its game and never won it after."""
        if self._episode is not None and self._task_id == task.id:
            return self._ended_lost(self._episode)
        self.won(task)  # raises the same error for a task never started
        return self._lost.get(task.id, False)

    @staticmethod
    def _ended_lost(episode: GameEpisode) -> bool:
        return episode.losses > 0 and not episode.won

    @staticmethod
    def _budget_left(episode: GameEpisode) -> float:
        if not episode.won:
            return 0.0
        return round(1.0 - episode.steps / episode.max_steps, 4)

    def score(self, task: Task, answer: str | None) -> Outcome:
        """1.0 when the game was won in the task's episode (``answer`` is ignored)."""
        success = self.won(task)
        value = 1.0 if success else 0.0
        if self._episode is not None and self._task_id == task.id:
            left = self._budget_left(self._episode)
        else:
            left = self._left.get(task.id, 0.0)
        return Outcome(
            score=value, success=success, metrics={"success": value, "budget_left": left}
        )


# --------------------------------------------------------------------------------------------
# TextWorld: generation and the environment.


class GameSetConfig(BaseModel):
    """A seeded set of generated TextWorld games, how long an episode may run, and the cache.

    Subclasses add the fields that shape their games; all of them but ``max_steps`` and
    ``cache_dir`` go into :meth:`key`.
    """

    model_config = ConfigDict(frozen=True)

    challenge: ClassVar[str | None] = None
    """The TextWorld challenge the games come from (part of the key); None: genmem's own."""

    n_games: int = Field(default=10, ge=1, description="Games (tasks) in the set.")
    seed: int = Field(default=0, ge=0, description="Seed of the set; game i has its own seed.")
    max_steps: int = Field(default=30, ge=1, description="Admissible commands per episode.")
    cache_dir: Path | None = Field(
        default=None,
        description="Where generated sets are kept; default: genmem's cache_root()/textworld.",
    )

    def key(self) -> str:
        """Hash of everything that decides the games (not ``max_steps`` nor ``cache_dir``)."""
        return self._hash({"max_steps", "cache_dir"})

    def family_key(self) -> str:
        """:meth:`key` without ``n_games``: game i is the same game in a set of any size (its seed
        is drawn from the set's seed and i alone), so an id built on this names the game, and a
        larger set's first games keep the ids a smaller set gave them."""
        return self._hash({"max_steps", "cache_dir", "n_games"})

    def _hash(self, exclude: set[str]) -> str:
        import textworld

        spec = self.model_dump(exclude=exclude)
        spec |= {"textworld": textworld.__version__, "generator": GENERATOR_VERSION}
        if self.challenge is not None:
            spec["challenge"] = self.challenge
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def games_dir(self) -> Path:
        """The folder this config's games live in."""
        if self.cache_dir is not None:
            root = Path(self.cache_dir)
        else:
            from genmem.policies.local import cache_root

            root = cache_root() / "textworld"
        return root / self.key()


class TextWorldConfig(GameSetConfig):
    """Which TextWorld pick-and-place games to generate and how long an episode may run."""

    quest_length: int = Field(
        default=2,
        ge=1,
        le=5,
        description="Actions in the winning walkthrough: 1 put/insert, 2 take + put, "
        "3+ adds opening or walking before.",
    )
    world_size: int = Field(default=2, ge=1, le=10, description="Rooms in each game.")
    nb_objects: int = Field(
        default=6, ge=1, le=30, description="Objects in each game, quest objects included."
    )
    goal: Literal["detailed", "brief"] = Field(
        default="detailed",
        description="'detailed': the objective lists every step (as in TextWorld's own "
        "games); 'brief': it names only the final placement, so the steps must be found.",
    )

    @model_validator(mode="after")
    def _check_shape(self) -> TextWorldConfig:
        if self.world_size == 1 and self.quest_length > 3:
            raise ValueError(
                f"quest_length={self.quest_length} needs more than one room (world_size=1 "
                "allows at most open, take and put); use world_size >= 2 or quest_length <= 3"
            )
        return self


class GameRecord(BaseModel):
    """One generated game, as listed in the set's manifest."""

    id: str
    file: str = Field(description="The compiled game, relative to the set's folder.")
    seed: int = Field(description="The TextWorld seed this game was generated from.")
    objective: str
    intro: str = Field(description="The opening observation (objective and first room).")
    walkthrough: list[str]

    @classmethod
    def of_game(
        cls,
        game: Any,
        path: Path,
        *,
        id: str,
        seed: int,
        intro: str,
        walkthrough: Sequence[str],
        **extra: Any,
    ) -> Self:
        """The record of TextWorld ``game`` compiled to ``path`` (``extra``: a subclass's fields).

        Args:
            game: The generated game (its ``objective`` is recorded).
            path: Where it was compiled; the record keeps the file name.
            id: The game's id.
            seed: The TextWorld seed it came from.
            intro: The opening observation.
            walkthrough: Commands that win it.
            **extra: Fields of a subclass (``CookingRecord``'s recipe...).
        """
        return cls(
            id=id,
            file=path.name,
            seed=seed,
            objective=game.objective,
            intro=intro,
            walkthrough=list(walkthrough),
            **extra,
        )


def game_seed(seed: int, index: int, attempt: int, *, family: str = "textworld") -> int:
    """The TextWorld seed of game ``index`` of a ``family``'s set seeded ``seed`` (its
    ``attempt``-th try)."""
    digest = hashlib.sha256(f"genmem-{family}/{seed}/{index}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _make_game(config: TextWorldConfig, seed: int) -> Any:
    """One pick-and-place game (not compiled); raises QuestGenerationError when none fits."""
    from textworld import GameOptions
    from textworld.generator import make_grammar, make_quest, make_world
    from textworld.generator.game import Game

    options = GameOptions()
    options.seeds = seed
    options.nb_rooms = config.world_size
    options.nb_objects = config.nb_objects
    options.quest_length = config.quest_length
    options.grammar.theme = "house"
    options.grammar.only_last_action = config.goal == "brief"
    rngs = options.rngs
    world = make_world(options.nb_rooms, nb_objects=0, rngs=rngs)
    rules = options.kb.rules
    # Backward chaining from the goal: depth 0 is the last action of the walkthrough.
    before = rules.get_matching("take.*", "open/c", "open/d", "go/.*")
    options.chaining.rules_per_depth = [
        rules.get_matching("put", "insert"),
        rules.get_matching("take.*"),
    ] + [before] * max(0, config.quest_length - 2)
    options.chaining.backward = True
    options.chaining.create_variables = True
    options.chaining.rng = rngs["quest"]
    options.chaining.restricted_types = {"r", "d"}
    quests = make_quest(world, options)
    placed = sum(1 for e in world.entities if e.type not in {"r", "d", "I", "P"})
    if config.nb_objects > placed:
        world.populate(config.nb_objects - placed, rng=rngs["objects"])
    game = Game(world, make_grammar(options.grammar, rng=rngs["grammar"]), quests)
    game.metadata["uuid"] = options.uuid
    return game


def compile_game_file(game: Any, path: Path) -> None:
    """Compile a generated TextWorld ``game`` to ``path`` (``.z8``), keeping only it and its
    ``.json`` beside it."""
    from textworld import GameOptions
    from textworld.generator import compile_game

    options = GameOptions()
    options.path = str(path)
    options.force_recompile = True
    compile_game(game, options)
    for extra in path.parent.glob(f"{path.stem}.*"):
        if extra.suffix not in {".z8", ".json"}:
            extra.unlink()


def _generate(config: TextWorldConfig, folder: Path) -> list[GameRecord]:
    from textworld.generator.chaining import QuestGenerationError

    records = []
    for index in range(config.n_games):
        for attempt in range(_MAX_TRIES):
            seed = game_seed(config.seed, index, attempt)
            try:
                game = _make_game(config, seed)
            except QuestGenerationError:
                continue
            if len(game.walkthrough or []) == config.quest_length:
                break
        else:
            raise GameGenerationError(
                f"no quest of length {config.quest_length} fits a world of "
                f"{config.world_size} room(s) and {config.nb_objects} object(s) after "
                f"{_MAX_TRIES} seeds (game {index} of seed {config.seed}); use a larger "
                "world_size or nb_objects, or a shorter quest_length",
                config=config,
            )
        name = f"game_{index:03d}"
        compile_game_file(game, folder / f"{name}.z8")
        opening = TextWorldGame(folder / f"{name}.z8", policy=True)
        try:
            state = opening.reset()
            policy = list(opening.policy)
        finally:
            opening.close()
        if policy != list(game.walkthrough):
            raise GameGenerationError(
                f"game {name} of seed {config.seed}: its walkthrough {game.walkthrough} does "
                f"not match the compiled game's plan {policy}; clear {folder.parent} and retry",
                config=config,
            )
        records.append(
            GameRecord.of_game(
                game,
                folder / f"{name}.z8",
                id=f"tw-{config.key()[:8]}-{index:03d}",
                seed=seed,
                intro=state.observation,
                walkthrough=game.walkthrough,
            )
        )
    return records


RecordT = TypeVar("RecordT", bound=GameRecord)


def cached_game_set(
    config: GameSetConfig,
    generate: Callable[[Path], Sequence[GameRecord]],
    record: type[RecordT] = GameRecord,  # type: ignore[assignment]
) -> list[RecordT]:
    """A set's games, read from its cache folder, or generated into it by ``generate(folder)``
    the first time (in a staging folder renamed into place, the manifest written last).

    Args:
        config: The set; its :meth:`GameSetConfig.games_dir` is the cache folder.
        generate: Writes the games into the folder it is given and returns their records.
        record: The record type the manifest is read back as.

    Returns:
        The records, in generation order.
    """
    folder = config.games_dir()
    manifest = folder / _MANIFEST
    if not manifest.is_file():
        from filelock import FileLock

        folder.parent.mkdir(parents=True, exist_ok=True)
        # One builder per set: another process (the other shard of an eval, a test worker)
        # waits for its games instead of generating the same ones beside it.
        with FileLock(str(folder) + ".lock"):
            if not manifest.is_file():
                _build_set(config, generate, folder)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    return [record.model_validate(g) for g in data["games"]]


def _build_set(
    config: GameSetConfig, generate: Callable[[Path], Sequence[GameRecord]], folder: Path
) -> None:
    """Generate a set in a staging folder and rename it into place, the manifest written last."""
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        records = generate(staging)
        spec = config.model_dump(mode="json", exclude={"cache_dir", "max_steps"})
        payload = {"config": spec, "games": [r.model_dump() for r in records]}
        (staging / _MANIFEST).write_text(json.dumps(payload, indent=1), encoding="utf-8")
        try:
            staging.rename(folder)
        except OSError:  # a set left by a process that held no lock (an older release)
            if not (folder / _MANIFEST).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def family_games(config: GameSetConfig) -> dict[int, tuple[Path, dict[str, Any]]]:
    """Games already built for a set of ``config``'s family (same settings, another size):
    index -> (its folder, its manifest record). Game i depends on the set's seed and i alone
    (:meth:`GameSetConfig.family_key`), so a larger set can copy a smaller one's games instead of
    generating them again. Only complete sets count (their manifest is written last), and only
    those whose folder name is their own key (same TextWorld and generator versions)."""
    found: dict[int, tuple[Path, dict[str, Any]]] = {}
    root = config.games_dir().parent
    if not root.is_dir():
        return found
    for manifest in sorted(root.glob(f"*/{_MANIFEST}")):
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            other = type(config).model_validate(
                data["config"] | {"cache_dir": config.cache_dir, "max_steps": config.max_steps}
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # another kind of set, or a manifest of an older layout
        if other.family_key() != config.family_key() or other.key() != manifest.parent.name:
            continue
        for index, game in enumerate(data["games"]):
            found.setdefault(index, (manifest.parent, game))
    return found


def copy_game(source: Path, record: dict[str, Any], folder: Path) -> None:
    """Copy one built game (its ``.z8`` and ``.json``) from ``source`` into ``folder``."""
    stem = Path(record["file"]).stem
    for suffix in (".z8", ".json"):
        path = source / f"{stem}{suffix}"
        if path.is_file():
            shutil.copy2(path, folder / path.name)


def load_games(config: TextWorldConfig) -> list[GameRecord]:
    """The config's games, generating and compiling them into the cache the first time."""
    return cached_game_set(config, lambda folder: _generate(config, folder))


def generate_games(config: TextWorldConfig) -> list[Path]:
    """The config's compiled game files (``.z8``), generated on first use; same seed, same games."""
    folder = config.games_dir()
    return [folder / g.file for g in load_games(config)]


class GymGame:
    """A :class:`TextGame` over a textworld env whose ``step`` returns ``(state, score, done)``.

    Subclasses open the env as ``_env`` and turn its state into a :class:`GameState` in
    ``_state``; TextWorld's own games and ALFWorld's share the rest.
    """

    _env: Any

    def _state(self, state: Any) -> GameState:
        raise NotImplementedError

    def reset(self) -> GameState:
        """Start the game over; its opening state."""
        return self._state(self._env.reset())

    def step(self, command: str) -> GameState:
        """Play ``command``; the state after it."""
        state, _score, _done = self._env.step(command)
        return self._state(state)

    def close(self) -> None:
        """Release the game."""
        self._env.close()


class TextWorldGame(GymGame):
    """A compiled TextWorld game run with jericho, as a :class:`TextGame`."""

    def __init__(self, path: Path, *, policy: bool = False) -> None:
        import textworld

        infos = textworld.EnvInfos(
            admissible_commands=True,
            won=True,
            lost=True,
            objective=True,
            score=True,
            policy_commands=policy,
        )
        with warnings.catch_warnings():  # jericho's "not fully supported": TextWorld tracks
            warnings.filterwarnings("ignore", message=".*is not fully supported")  # state itself
            self._env = textworld.start(str(path), request_infos=infos)
        self.policy: list[str] = []

    def _state(self, state: Any) -> GameState:
        self.policy = list(state.get("policy_commands") or [])
        observation = clean_feedback(state.feedback)
        objective = state.get("objective")
        if objective and objective in observation:  # drop the welcome text before it
            observation = observation[observation.index(objective) :]
        return GameState(
            observation=observation,
            commands=tuple(state.admissible_commands or ()),
            won=bool(state.won),
            lost=bool(state.lost),
            score=state.get("score"),
        )


class GameSetEnvironment(TextGameEnvironment):
    """The games of a generated, cached set (:class:`GameSetConfig`), one task per game.

    The task's query is the game's opening observation; its reference is the walkthrough (never
    shown to the agent; :meth:`score` reads the game's ``won`` signal). Subclasses say how the
    set is loaded (:meth:`_load`) and what a task's ``meta`` adds (:meth:`_meta`).
    """

    def __init__(self, config: GameSetConfig) -> None:
        self.config = config
        super().__init__(max_steps=config.max_steps)
        self._games: dict[str, GameRecord] | None = None

    @abstractmethod
    def _load(self) -> list[GameRecord]:
        """The set's records, generated into the cache on first use."""

    def _meta(self, record: GameRecord) -> dict[str, Any]:
        """What a task's ``meta`` holds beyond the game file and seed (this base: nothing)."""
        return {}

    def games(self) -> list[GameRecord]:
        """The generated games, in order (generated on first use)."""
        if self._games is None:
            self._games = {g.id: g for g in self._load()}
        return list(self._games.values())

    def tasks(self, limit: int | None = None) -> list[Task]:
        """One task per game, in generation order."""
        games = self.games()[:limit] if limit is not None else self.games()
        folder = self.config.games_dir()
        return [
            Task(
                id=g.id,
                query=g.intro,
                reference=list(g.walkthrough),
                meta={"game_file": str(folder / g.file), "seed": g.seed, **self._meta(g)},
            )
            for g in games
        ]

    def walkthrough(self, task: Task) -> list[str]:
        """The commands that win ``task``'s game from its start."""
        return list(self._record(task).walkthrough)

    def _record(self, task: Task) -> GameRecord:
        self.games()
        assert self._games is not None
        if task.id not in self._games:
            raise KeyError(f"task {task.id!r} is not one of this {self.game_name} set's games")
        return self._games[task.id]

    def _open(self, task: Task) -> TextGame:
        return TextWorldGame(self.config.games_dir() / self._record(task).file)


class TextWorldEnvironment(GameSetEnvironment):
    """Seeded TextWorld pick-and-place games, one task per game.

    The task's query is the game's objective and opening observation; its reference is the
    walkthrough (never shown to the agent; :meth:`score` reads the game's ``won`` signal).
    """

    name = "textworld"
    experience_type = "sop"
    tool_prefix = "textworld"
    game_name = "TextWorld"
    config: TextWorldConfig

    def __init__(self, config: TextWorldConfig | None = None) -> None:
        super().__init__(config or TextWorldConfig())

    def _load(self) -> list[GameRecord]:
        return load_games(self.config)

    def _meta(self, record: GameRecord) -> dict[str, Any]:
        return {"quest_length": len(record.walkthrough)}
