"""Cooking experiences written by code: a procedure distilled from training plays, and the action
prior it gives over a later game's valid commands.

The paper has a model write every payload. A 135M model writes one-word payloads that the gate
refuses, and a procedure in its prompt barely moves its ranking, so cooking experiences are
written here by a template distiller instead (a named deviation; entries say ``writer:
"template"``). From one play of a training game (commands, observations, score changes, won or
lost, the recipe read from the cookbook) it keeps:

- the commands that raised the score, with the objects as roles (``take {food}``,
  ``cook {food} with {appliance}``, ``{verb} {food} with knife``), and the commands
  that made them possible (``open {place}`` before a take, ``take knife`` before a cut);
- a rule per recipe verb, with the cookbook line that justified it (``roast`` = ``cook
  {food} with oven``, from "roast the pork chop");
- for a lost play, the losing command as a role-level pitfall with the game's message.

The payload is a :class:`CookingProcedure`; its text (:meth:`CookingProcedure.render`) is what the
bank stores and parses back (:func:`parse_procedure`). :func:`procedure_prior` maps a procedure
onto a game's valid commands: a bonus for the next step, a penalty for a known pitfall, 0 for the
rest. Walkthroughs are played for a bank only from ``train`` games (:func:`cooking_seed_row`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from genmem.errors import GenMemError
from genmem.policies.experience_writer import ExperienceWriter

__all__ = [
    "MAX_TRIED",
    "NEXT_BONUS",
    "OTHER_BONUS",
    "PITFALL_PENALTY",
    "TRIED_PENALTY",
    "WRITER",
    "CookingExperienceError",
    "CookingProcedure",
    "CookingTrajectory",
    "Direction",
    "GameStep",
    "GameView",
    "HeldOutWalkthrough",
    "Pitfall",
    "Recipe",
    "TemplateStep",
    "VerbRule",
    "cooking_experience",
    "cooking_seed_row",
    "cooking_writer",
    "distill_procedure",
    "experience_prior",
    "losing_variants",
    "merge_procedures",
    "parse_procedure",
    "parse_recipe",
    "play_commands",
    "plays_of_run",
    "prior_ranks_first",
    "procedure_prior",
    "recipe_note",
    "step_of",
    "walkthrough_views",
]

WRITER = "template"
"""What a template-distilled entry records as its ``writer`` (a model-written one: ``model``)."""

NEXT_BONUS = 1.0
"""Prior for a command that is the procedure's next step (its first pending instance)."""
OTHER_BONUS = 0.5
"""Prior for another pending instance of the next step, or an unfamiliar place to open."""
PITFALL_PENALTY = -1.0
"""Prior for a command a pitfall of the procedure says loses the game."""
TRIED_PENALTY = -0.5
"""Prior for a command the plays tried without gain (a dead end), when nothing else scores it."""
MAX_TRIED = 16
"""Dead ends a procedure keeps (the first found)."""

_RECIPE_HEAD = "Recipe #1"
_LOST = "*** You lost"
_GAIN = re.compile(r"score has just gone up by (\w+) points?", re.IGNORECASE)
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_TAKE = re.compile(r"^take (?P<obj>.+?)(?: from (?P<src>.+))?$")
_OPEN = re.compile(r"^open (?P<obj>.+)$")
_WITH = re.compile(r"^(?P<verb>\w+) (?P<obj>.+?) with (?P<tool>.+)$")
_LEAVE = re.compile(r"^(?:drop (?P<a>.+)|put (?P<b>.+?) on .+|insert (?P<c>.+?) into .+)$")
_PLACEHOLDER = re.compile(r"\{(food|verb|appliance|place)\}")
_MEAL = "meal"


class CookingExperienceError(GenMemError, ValueError):
    """A play or a payload the cooking distiller cannot read (no recipe, not a procedure)."""

    def __init__(self, message: str, *, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


class HeldOutWalkthrough(CookingExperienceError):
    """A valid or test game's walkthrough was asked for a bank; only train games seed one."""


# --- the recipe ---------------------------------------------------------------------------


class Direction(BaseModel):
    """One line of the recipe's directions: ``roast the pork chop`` or ``prepare meal``."""

    model_config = ConfigDict(frozen=True)

    verb: str
    ingredient: str | None = None
    line: str


class Recipe(BaseModel):
    """The cookbook's recipe: its ingredients (in order) and its directions."""

    model_config = ConfigDict(frozen=True)

    ingredients: tuple[str, ...]
    directions: tuple[Direction, ...]

    def of(self, ingredient: str) -> list[Direction]:
        """The directions that name ``ingredient``, in the recipe's order."""
        return [d for d in self.directions if d.ingredient == ingredient]


def parse_recipe(note: str) -> Recipe:
    """The recipe in a cookbook's text (the note an episode keeps once the cookbook is read).

    Raises:
        CookingExperienceError: the text holds no ``Ingredients:`` and ``Directions:`` lists.
    """
    lines = [line.strip() for line in note.splitlines()]
    if "Ingredients:" not in lines or "Directions:" not in lines:
        raise CookingExperienceError(
            f"not a cookbook recipe (no 'Ingredients:' and 'Directions:' lines): {note[:80]!r}; "
            "pass the text the game shows after 'examine cookbook'",
            value=note,
        )
    start, middle = lines.index("Ingredients:"), lines.index("Directions:")
    ingredients = tuple(line.lower() for line in lines[start + 1 : middle] if line)
    directions = []
    for line in lines[middle + 1 :]:
        if not line or line.startswith("---"):
            continue
        text = line.lower()
        verb, _, rest = text.partition(" ")
        food = rest.removeprefix("the ")
        directions.append(
            Direction(verb=verb, ingredient=food if food in ingredients else None, line=text)
        )
    return Recipe(ingredients=ingredients, directions=tuple(directions))


def recipe_note(observations: Iterable[str]) -> str | None:
    """The cookbook's text from the first observation that shows it, else None."""
    for text in observations:
        if _RECIPE_HEAD in text:
            return text[text.index(_RECIPE_HEAD) :].strip()
    return None


# --- a play -------------------------------------------------------------------------------


class GameStep(BaseModel):
    """One command of a play and what the game answered."""

    command: str
    observation: str
    score: int | None = Field(default=None, description="The game's score after the command.")


class CookingTrajectory(BaseModel):
    """One play of a cooking game: what a distiller reads."""

    game: str = Field(description="The game's id.")
    split: Literal["train", "valid", "test"]
    steps: list[GameStep]
    won: bool
    lost: bool

    def gains(self) -> list[int]:
        """How much each step raised the score (from the scores, else the game's message)."""
        gains, last = [], 0
        for step in self.steps:
            if step.score is not None:
                gains.append(step.score - last)
                last = step.score
            else:
                m = _GAIN.search(step.observation)
                word = m.group(1).lower() if m else "0"
                gains.append(_NUMBERS.get(word, int(word) if word.isdigit() else 0))
        return gains

    def note(self) -> str | None:
        """The recipe the play read, if it read one."""
        return recipe_note(s.observation for s in self.steps)


def play_commands(
    game_file: str | Path, commands: Sequence[str], *, game: str, split: str
) -> CookingTrajectory:
    """Play ``commands`` in a compiled cooking game from its start, until the game ends.

    Args:
        game_file: The compiled game (``.z8``).
        commands: What to play, in order; a command the game does not admit is still sent.
        game: The game's id, recorded in the trajectory.
        split: The game's food split, recorded in the trajectory.
    """
    from genmem.envs.textworld_env import TextWorldGame

    played = TextWorldGame(Path(game_file))
    try:
        state = played.reset()
        steps = []
        for command in commands:
            state = played.step(command)
            steps.append(
                GameStep(command=command, observation=state.observation, score=state.score)
            )
            if state.won or state.lost:
                break
    finally:
        played.close()
    return CookingTrajectory(
        game=game,
        split=split,
        steps=steps,
        won=state.won,
        lost=state.lost,  # type: ignore[arg-type]
    )


# --- the procedure ------------------------------------------------------------------------


class TemplateStep(BaseModel):
    """One step of a procedure: a command with its objects as roles."""

    model_config = ConfigDict(frozen=True)

    template: str = Field(description="e.g. 'cook {food} with {appliance}'.")
    kind: Literal["scored", "prerequisite", "recipe"] = Field(
        description="'scored': it raised the score; 'prerequisite': it made a scored step "
        "possible; 'recipe': it showed the recipe."
    )
    enables: str | None = Field(default=None, description="The step a prerequisite is for.")


class VerbRule(BaseModel):
    """What a recipe verb means as a command, and the cookbook line that showed it."""

    model_config = ConfigDict(frozen=True)

    verb: str = Field(description="The recipe's verb: 'roast'.")
    command: str = Field(description="The command it needs: 'cook {food} with oven'.")
    line: str = Field(description="The cookbook line it was read from: 'roast the pork chop'.")


class Pitfall(BaseModel):
    """A command that lost a training play, with the game's message."""

    model_config = ConfigDict(frozen=True)

    template: str = Field(description="The losing command with roles.")
    kind: Literal["again", "wrong", "always"] = Field(
        description="'again': the same step done a second time; 'wrong': the step with another "
        "appliance or cut than the recipe's rule (or, with ``verb``, this appliance or cut for "
        "that recipe verb); 'always': the command itself."
    )
    message: str = Field(description="What the game said, ingredient as a role.")
    verb: str | None = Field(
        default=None,
        description="The recipe verb the command went against when no rule for it was known "
        "('roast' for 'cook {food} with stove'): the command loses for foods the recipe says "
        "to prepare that way.",
    )


class CookingProcedure(BaseModel):
    """A cooking procedure distilled by code from plays (the template writer): training
    walkthroughs for a seed bank, the agent's own games online."""

    model_config = ConfigDict(frozen=True)

    steps: tuple[TemplateStep, ...]
    rules: tuple[VerbRule, ...] = ()
    pitfalls: tuple[Pitfall, ...] = ()
    places: tuple[str, ...] = Field(default=(), description="Where ingredients were taken from.")
    won: int = Field(default=0, ge=0, description="Won plays it was distilled from.")
    lost: int = Field(default=0, ge=0, description="Lost plays it was distilled from.")
    tried: tuple[str, ...] = Field(
        default=(),
        description="Commands (with roles) the plays tried that never raised the score and are "
        "no step: dead ends a later play may skip ('examine {food}', 'look'). Taking and "
        "opening are never dead ends: they may be what a step not found yet needs.",
    )

    def rule(self, verb: str) -> VerbRule | None:
        """The rule of a recipe verb, if the procedure knows it."""
        return next((r for r in self.rules if r.verb == verb), None)

    def render(self) -> str:
        """The procedure as the short text a bank stores and a small model reads."""
        steps = []
        for s in self.steps:
            if s.kind == "recipe":
                steps.append(f"{s.template} (shows the recipe)")
            elif s.kind == "prerequisite":
                steps.append(f"{s.template} (before {s.enables})")
            else:
                steps.append(s.template)
        plays = ", ".join(
            f"{n} {what}" for n, what in ((self.won, "won"), (self.lost, "lost")) if n
        )
        places = f"; {{place}} = where food was ({', '.join(self.places)})" if self.places else ""
        lines = [
            f"{_HEAD} from {plays or 'no'} plays.",
            f"Steps: {' > '.join(steps)}.",
            "Roles: {food} = each recipe ingredient; {verb} = its cut in the recipe; "
            f"{{appliance}} = as the rules say{places}.",
        ]
        if self.rules:
            rules = "; ".join(f'{r.verb} = {r.command} ("{r.line}")' for r in self.rules)
            lines.append(f"Rules: {rules}.")
        if self.pitfalls:
            lines.append(f"Pitfalls: {'; '.join(_pitfall_text(p) for p in self.pitfalls)}.")
        if self.tried:
            lines.append(f"Tried without gain: {'; '.join(self.tried)}.")
        return "\n".join(lines)


_HEAD = "Cooking procedure, code-written"
_QUALIFIER = {"again": " a second time", "wrong": " against the rules", "always": ""}


def _pitfall_text(p: Pitfall) -> str:
    qualifier = f" where the recipe says {p.verb}" if p.verb else _QUALIFIER[p.kind]
    return f'{p.template}{qualifier} lost ("{p.message}")'


_STEP_TEXT = re.compile(r"^(?P<t>.+?)(?: \((?:(?P<recipe>shows the recipe)|before (?P<en>.+))\))?$")
_RULE_TEXT = re.compile(r'^(?P<verb>\S+) = (?P<cmd>.+?) \("(?P<line>[^"]*)"\)$')
_PITFALL_TEXT = re.compile(
    r"^(?P<t>.+?)(?P<q> a second time| against the rules| where the recipe says (?P<v>\w+))?"
    r' lost \("(?P<m>[^"]*)"\)$'
)
_PLAYS = re.compile(r"(\d+) (won|lost)\b")
_NUMBERED = re.compile(r"^\[\d+\]\s+")
"""How a slot holding several experiences numbers them (``concat_consolidate``)."""


def parse_procedure(text: str) -> CookingProcedure:
    """The procedure a payload renders (several rendered procedures joined, or numbered as a
    slot holding several experiences shows them: merged into one).

    Raises:
        CookingExperienceError: the text holds no ``Steps:`` line of a rendered procedure.
    """
    parts: list[CookingProcedure] = []
    current: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = _NUMBERED.sub("", raw.strip())  # "[2] Cooking procedure...": a slot's second
        if line.startswith(_HEAD):
            if current is not None:
                parts.append(_procedure(current))
            counts = {what: int(n) for n, what in _PLAYS.findall(line)}
            current = {"steps": [], "rules": [], "pitfalls": [], "places": [], "tried": []}
            current |= counts
        elif current is None:
            continue
        elif line.startswith("Steps: "):
            for item in _items(line, "Steps: ", " > "):
                m = _STEP_TEXT.match(item)
                assert m is not None  # the pattern matches any non-empty text
                kind = "recipe" if m["recipe"] else "prerequisite" if m["en"] else "scored"
                current["steps"].append(
                    TemplateStep(template=m["t"], kind=kind, enables=m["en"])  # type: ignore[arg-type]
                )
        elif line.startswith("Roles: ") and line.endswith(").") and "{place} = " in line:
            current["places"] = line[line.rindex("(") + 1 : -2].split(", ")
        elif line.startswith("Rules: "):
            for item in _items(line, "Rules: ", "; "):
                if m := _RULE_TEXT.match(item):
                    current["rules"].append(
                        VerbRule(verb=m["verb"], command=m["cmd"], line=m["line"])
                    )
        elif line.startswith("Tried without gain: "):
            current["tried"] = _items(line, "Tried without gain: ", "; ")
        elif line.startswith("Pitfalls: "):
            for item in _items(line, "Pitfalls: ", "; "):
                if m := _PITFALL_TEXT.match(item):
                    kind = {" a second time": "again", " against the rules": "wrong"}.get(
                        m["q"] or "", "wrong" if m["v"] else "always"
                    )
                    current["pitfalls"].append(
                        Pitfall(template=m["t"], kind=kind, message=m["m"], verb=m["v"])  # type: ignore[arg-type]
                    )
    if current is not None:
        parts.append(_procedure(current))
    if not parts or not any(p.steps for p in parts):
        raise CookingExperienceError(
            f"not a rendered cooking procedure (no 'Steps:' line): {text[:80]!r}; pass a payload "
            "the template distiller wrote (CookingProcedure.render)",
            value=text,
        )
    return merge_procedures(parts)


def _items(line: str, head: str, sep: str) -> list[str]:
    return [i for i in line.removeprefix(head).removesuffix(".").split(sep) if i]


def _procedure(fields: dict[str, Any]) -> CookingProcedure:
    return CookingProcedure(
        steps=tuple(fields["steps"]),
        rules=tuple(fields["rules"]),
        pitfalls=tuple(fields["pitfalls"]),
        places=tuple(fields["places"]),
        tried=tuple(fields["tried"]),
        won=fields.get("won", 0),
        lost=fields.get("lost", 0),
    )


def merge_procedures(procedures: Sequence[CookingProcedure]) -> CookingProcedure:
    """One procedure from several: steps in first-seen order, rules by verb (first kept),
    pitfalls and places without repeats, play counts added."""

    def unique(items: Iterable[Any], key: Any = lambda x: x) -> tuple[Any, ...]:
        seen, out = set(), []
        for item in items:
            if key(item) not in seen:
                seen.add(key(item))
                out.append(item)
        return tuple(out)

    steps: list[TemplateStep] = []
    for proc in procedures:
        for i, step in enumerate(proc.steps):
            if any(s.template == step.template for s in steps):
                continue
            # a step the first procedures lack goes right after the step it follows there
            before = proc.steps[i - 1].template if i else None
            at = next((j + 1 for j, s in enumerate(steps) if s.template == before), len(steps))
            steps.insert(at if before is not None else 0, step)
    return CookingProcedure(
        steps=tuple(steps),
        rules=unique((r for p in procedures for r in p.rules), key=lambda r: r.verb),
        pitfalls=unique(
            (x for p in procedures for x in p.pitfalls), key=lambda x: (x.template, x.kind, x.verb)
        ),
        places=unique(x for p in procedures for x in p.places),
        tried=tuple(
            t
            for t in unique(x for p in procedures for x in p.tried)
            if not any(s.template == t for s in steps)  # a step since: no dead end
        )[:MAX_TRIED],
        won=sum(p.won for p in procedures),
        lost=sum(p.lost for p in procedures),
    )


# --- the distiller ------------------------------------------------------------------------


def distill_procedure(
    trajectory: CookingTrajectory, rules: Iterable[VerbRule] = ()
) -> CookingProcedure:
    """The procedure one play shows: its scored steps and their prerequisites as roles, the rule
    of each recipe verb it used (with the cookbook line), and for a lost play the losing command.

    Args:
        trajectory: A play of a cooking game that read the cookbook.
        rules: Verb rules known from other plays of the same game (a lost play may end before
            it carried out the recipe line its losing command went against).

    Raises:
        CookingExperienceError: the play never showed the recipe (nothing can be written as
            roles without it).
    """
    note = trajectory.note()
    if note is None:
        raise CookingExperienceError(
            f"game {trajectory.game}: the play never showed the recipe ('examine cookbook'), so "
            "its commands cannot be written as roles; distil plays that read the cookbook",
            value=trajectory.game,
        )
    recipe = parse_recipe(note)
    commands = [s.command.strip().lower() for s in trajectory.steps]
    gains = trajectory.gains()
    steps: list[TemplateStep] = []
    known = {r.verb: r for r in rules}
    found: dict[str, VerbRule] = {}
    places: list[str] = []

    def add(step: TemplateStep, before: str | None = None) -> None:
        if any(s.template == step.template for s in steps):
            return
        at = next((i for i, s in enumerate(steps) if s.template == before), len(steps))
        steps.insert(at, step)

    reader = next(i for i, s in enumerate(trajectory.steps) if _RECIPE_HEAD in s.observation)
    add(TemplateStep(template=_roles(commands[reader], recipe)[0], kind="recipe"))
    for i, command in enumerate(commands):
        if gains[i] <= 0:
            continue
        template, rule = _roles(
            command, recipe, trajectory.steps[i].observation, (known | found).values()
        )
        if rule is not None:
            found.setdefault(rule.verb, rule)
        add(TemplateStep(template=template, kind="scored"))
        for j in _prerequisites(commands, i):
            need = _roles(commands[j], recipe)[0]
            add(TemplateStep(template=need, kind="prerequisite", enables=template), template)
        if (m := _TAKE.match(command)) and m["obj"] in recipe.ingredients and m["src"]:
            if m["src"] not in places:
                places.append(m["src"])
    pitfalls = []
    if trajectory.lost and trajectory.steps:
        pitfalls.append(_pitfall(commands, trajectory.steps[-1].observation, recipe, known | found))
    useful = {s.template for s in steps}
    tried: list[str] = []
    for i, command in enumerate(commands[: -1 if trajectory.lost else None]):
        if _TAKE.match(command) or _OPEN.match(command):
            continue  # may be the prerequisite of a step no play has found yet (a tool, a door)
        template = _roles(command, recipe)[0]
        if gains[i] <= 0 and template not in useful and template not in tried:
            tried.append(template)
    return CookingProcedure(
        steps=tuple(steps),
        rules=tuple(found.values()),
        pitfalls=tuple(pitfalls),
        places=tuple(places),
        tried=tuple(tried[:MAX_TRIED]),
        won=int(trajectory.won),
        lost=int(trajectory.lost),
    )


def _inflections(verb: str) -> set[str]:
    forms = {verb, f"{verb}s", f"{verb}d", f"{verb}ed", f"{verb}{verb[-1:]}ed"}
    if verb.endswith("y"):
        forms.add(f"{verb[:-1]}ied")
    return forms


def _direction(recipe: Recipe, food: str, verb: str, observation: str) -> Direction | None:
    """The recipe line a command on ``food`` carried out: its verb is the command's, or the game
    answered with one of its forms (``cook ... with oven`` -> "You roasted ...")."""
    words = set(re.findall(r"[a-z]+", observation.lower()))
    lines = recipe.of(food)
    return next((d for d in lines if d.verb == verb), None) or next(
        (d for d in lines if _inflections(d.verb) & words), None
    )


def _roles(
    command: str, recipe: Recipe, observation: str = "", rules: Iterable[VerbRule] = ()
) -> tuple[str, VerbRule | None]:
    """``command`` with its objects as roles, and the verb rule it shows (when it carries out a
    recipe line). A command that carries out no line of the recipe takes its roles from a rule
    of the same form (``cook X with stove`` for a roast: ``cook {food} with
    {appliance}``)."""
    if (m := _TAKE.match(command)) and m["obj"] in recipe.ingredients:
        return "take {food}", None
    if m := _TAKE.match(command):
        return f"take {m['obj']}", None  # a tool (the knife) is the same object in every game
    if (m := _OPEN.match(command)) and m["obj"] not in recipe.ingredients:
        return "open {place}", None
    if (m := _WITH.match(command)) and m["obj"] in recipe.ingredients:
        line = _direction(recipe, m["obj"], m["verb"], observation)
        if line is None:
            for r in rules:
                if r.command == f"{r.verb} {{food}} with {m['tool']}":
                    return f"{{verb}} {{food}} with {m['tool']}", None
                if r.command.startswith(f"{m['verb']} {{food}} with "):
                    return f"{m['verb']} {{food}} with {{appliance}}", None
            return f"{m['verb']} {{food}} with {m['tool']}", None
        if line.verb == m["verb"]:  # the recipe's verb is the command's: a cut with the knife
            return (
                f"{{verb}} {{food}} with {m['tool']}",
                VerbRule(verb=line.verb, command=f"{line.verb} {{food}} with {m['tool']}",
                         line=line.line),
            )  # fmt: skip
        return (
            f"{m['verb']} {{food}} with {{appliance}}",
            VerbRule(verb=line.verb, command=f"{m['verb']} {{food}} with {m['tool']}",
                     line=line.line),
        )  # fmt: skip
    for food in recipe.ingredients:
        if re.search(rf"\b{re.escape(food)}\b", command):
            return re.sub(rf"\b{re.escape(food)}\b", "{food}", command), None
    return command, None


def _prerequisites(commands: Sequence[str], i: int) -> list[int]:
    """Earlier unscored commands that step ``i`` needed: opening where it takes from, taking
    the tool it uses (the latest such command before it)."""
    needs = []
    if (m := _TAKE.match(commands[i])) and m["src"]:
        needs.append(f"open {m['src']}")
    if m := _WITH.match(commands[i]):
        needs.append(f"take {m['tool']}")
    found = []
    for need in needs:
        for j in range(i - 1, -1, -1):
            if commands[j] == need or commands[j].startswith(f"{need} from "):
                found.append(j)
                break
    return found


def _pitfall(
    commands: Sequence[str], message: str, recipe: Recipe, rules: dict[str, VerbRule]
) -> Pitfall:
    """The losing (last) command as a pitfall: done again, against a rule, or bad in itself."""
    last = commands[-1]
    template, _ = _roles(last, recipe, "", rules.values())
    food = next((f for f in recipe.ingredients if re.search(rf"\b{re.escape(f)}\b", last)), None)
    text = message.split(_LOST)[0].strip() or message.strip()
    if food is not None:
        text = re.sub(rf"\b{re.escape(food)}\b", "{food}", text)
    text = " ".join(text.replace('"', "'").replace(";", ",").split())[:120]
    kind: Literal["again", "wrong", "always"] = "always"
    if food is not None:
        earlier = [
            c
            for c in commands[:-1]
            if food in c and _roles(c, recipe, "", rules.values())[0] == template
        ]
        right = {
            r.command.replace("{food}", food)
            for d in recipe.of(food)
            if (r := rules.get(d.verb)) is not None
        }
        if earlier:
            kind = "again"
        elif _WITH.match(last) and right and last not in right:
            kind = "wrong"
        elif (m := _WITH.match(last)) and not right and (line := _line_for(recipe, food, m)):
            # no rule known for the verb: this appliance or cut loses for it (not in general)
            return Pitfall(
                template=f"{m['verb']} {{food}} with {m['tool']}",
                kind="wrong",
                message=text,
                verb=line.verb,
            )
    return Pitfall(template=template, kind=kind, message=text)


_CUT_VERBS = frozenset({"slice", "dice", "chop"})
"""The recipe verbs a knife carries out (TextWorld's cooking games); the others need heat."""


def _line_for(recipe: Recipe, food: str, command: re.Match[str]) -> Direction | None:
    """The recipe line of ``food`` that a ``<verb> <food> with <tool>`` command was an attempt
    at: a cut line for the knife, else a line that needs heat."""
    knife = command["tool"] == "knife" or command["verb"] in _CUT_VERBS
    lines = [d for d in recipe.of(food) if (d.verb in _CUT_VERBS) == knife]
    return lines[0] if lines else None


# --- the action prior ---------------------------------------------------------------------


@dataclass(frozen=True)
class GameView:
    """What the prior reads of the episode so far."""

    played: Sequence[str] = ()
    """The commands played, in order."""
    notes: Sequence[str] = ()
    """The game text the episode keeps in view (the recipe, once the cookbook was read)."""


@dataclass(frozen=True)
class _Instance:
    """One concrete command a step asks for in this game."""

    pattern: re.Pattern[str]
    food: str | None
    done: bool


def _pattern(
    template: str, food: str | None = None, verb: str | Sequence[str] | None = None
) -> re.Pattern[str]:
    """The commands a template names for ``food`` and a recipe verb (or any of several); other
    roles match anything."""
    verbs = [verb] if isinstance(verb, str) else list(verb or ())
    fills = {
        "food": re.escape(food) if food is not None else None,
        "verb": "(?:" + "|".join(map(re.escape, verbs)) + ")" if verbs else None,
        "appliance": None,
        "place": None,
    }
    out, at = [], 0
    for m in _PLACEHOLDER.finditer(template):
        out.append(re.escape(template[at : m.start()]))
        out.append(fills[m.group(1)] or ".+")
        at = m.end()
    out.append(re.escape(template[at:]))
    body = "".join(out)
    if template.startswith("take "):
        body += "(?: from .+)?"
    return re.compile(body)


def step_of(procedure: CookingProcedure, recipe: Recipe, command: str) -> TemplateStep | None:
    """The step of ``procedure`` that ``command`` carries out in a game of ``recipe``, if any."""
    c = command.strip().lower()
    for step in procedure.steps:
        for food in recipe.ingredients if "{food}" in step.template else (None,):
            if _pattern(step.template, food).fullmatch(c):
                return step
    return None


def _held(played: Sequence[str]) -> set[str]:
    """What the played commands leave in the inventory (taken, not dropped or put away)."""
    held: set[str] = set()
    for command in played:
        if m := _TAKE.match(command):
            held.add(m["obj"])
        elif m := _LEAVE.match(command):
            held.discard(m["a"] or m["b"] or m["c"])
        elif command == "prepare meal":
            held.add(_MEAL)
    return held


def _instances(
    step: TemplateStep, procedure: CookingProcedure, recipe: Recipe, played: Sequence[str]
) -> list[_Instance]:
    """The concrete commands ``step`` asks for in this game, in the recipe's order."""
    roles = set(_PLACEHOLDER.findall(step.template))
    if "food" not in roles:
        pattern = _pattern(step.template)
        return [_Instance(pattern, None, any(pattern.fullmatch(c) for c in played))]
    held = _held(played)
    out = []
    for food in recipe.ingredients:
        if roles & {"verb", "appliance"}:
            out.extend(_recipe_plan(procedure, recipe, food, played).get(step.template, []))
            continue
        pattern = _pattern(step.template, food)
        done = (
            food in held
            if step.template.startswith("take ")
            else any(pattern.fullmatch(c) for c in played)
        )
        out.append(_Instance(pattern, food, done))
    return out


def _recipe_plan(
    procedure: CookingProcedure, recipe: Recipe, food: str, played: Sequence[str]
) -> dict[str, list[_Instance]]:
    """The commands that carry out ``food``'s recipe lines, by the step they belong to.

    A verb with a rule gives its exact command, in the step whose form it has. Verbs no training
    play showed go to the steps no known verb of this food took, as any command of the step's
    form; when there are fewer such verbs than steps, those steps are all done once as many of
    them were played as there are verbs (one line of the recipe per way of preparing a food).
    """
    steps = [
        s
        for s in procedure.steps
        if s.kind == "scored" and {"verb", "appliance"} & set(_PLACEHOLDER.findall(s.template))
    ]
    plan: dict[str, list[_Instance]] = {}
    unknown = []
    for line in recipe.of(food):
        rule = procedure.rule(line.verb)
        if rule is None:
            unknown.append(line.verb)
            continue
        command = rule.command.replace("{food}", food)
        for s in steps:
            if _pattern(s.template, food, line.verb).fullmatch(command):
                plan.setdefault(s.template, []).append(
                    _Instance(re.compile(re.escape(command)), food, command in played)
                )
                break
    free = [s for s in steps if s.template not in plan]
    if unknown and free:
        patterns = {s.template: _pattern(s.template, food, unknown) for s in free}
        matched = {t: any(p.fullmatch(c) for c in played) for t, p in patterns.items()}
        all_done = sum(matched.values()) >= len(unknown)
        for t, p in patterns.items():
            plan[t] = [_Instance(p, food, matched[t] or all_done)]
    return plan


def procedure_prior(
    procedure: CookingProcedure, commands: Sequence[str], state: GameView
) -> list[float]:
    """An additive bonus per valid command from a procedure: :data:`NEXT_BONUS` for the next
    step's first pending command, :data:`OTHER_BONUS` for its other pending commands (and for
    opening a place no training play took food from), :data:`PITFALL_PENALTY` for a command a
    pitfall says loses (a second cook, a cook against the recipe's rule, eating an ingredient),
    0 for the rest.

    The next step is the procedure's first scored step with a command still to play in this
    game (the recipe, read from ``state.notes``, fills the roles). When its first pending
    command is not valid now (the fridge is closed, the knife not in hand), the steps that were
    its prerequisites get the bonus instead.

    Args:
        procedure: The distilled procedure (:func:`parse_procedure` reads one from a payload).
        commands: The game's valid commands now.
        state: The commands played so far and the notes kept (the recipe).

    Returns:
        One float per command, in order.
    """
    valid = [c.strip().lower() for c in commands]
    played = [c.strip().lower() for c in state.played]
    note = recipe_note(state.notes)
    scores = [0.0] * len(valid)
    if note is None:  # roles cannot be filled yet: only the step that shows the recipe helps
        for step in procedure.steps:
            if step.kind == "recipe":
                for k, c in enumerate(valid):
                    scores[k] = NEXT_BONUS if _pattern(step.template).fullmatch(c) else scores[k]
        _tried_penalty(procedure, (None,), valid, scores)
        return scores
    recipe = parse_recipe(note)
    for step in procedure.steps:
        if step.kind != "scored":
            continue
        pending = [i for i in _instances(step, procedure, recipe, played) if not i.done]
        if not pending:
            continue
        first, *rest = pending
        hits = [k for k, c in enumerate(valid) if first.pattern.fullmatch(c)]
        for k in hits:
            scores[k] = NEXT_BONUS
        for k, c in enumerate(valid):
            if not hits or k not in hits:
                if any(i.pattern.fullmatch(c) for i in rest):
                    scores[k] = max(scores[k], OTHER_BONUS)
        if not hits:
            _prerequisite_bonus(procedure, step, valid, played, scores)
        break
    _pitfall_penalty(procedure, recipe, valid, played, scores)
    _tried_penalty(procedure, recipe.ingredients, valid, scores)
    return scores


def _tried_penalty(
    procedure: CookingProcedure,
    foods: Sequence[str | None],
    valid: Sequence[str],
    scores: list[float],
) -> None:
    """:data:`TRIED_PENALTY` for a dead end of the procedure that nothing else scored."""
    patterns = [
        _pattern(t, food) for t in procedure.tried for food in (foods if "{food}" in t else [None])
    ]
    for k, c in enumerate(valid):
        if scores[k] == 0 and any(p.fullmatch(c) for p in patterns):
            scores[k] = TRIED_PENALTY


def walkthrough_views(
    game_file: str | Path, commands: Sequence[str]
) -> list[tuple[str, tuple[str, ...], GameView]]:
    """Teacher forcing: before each of ``commands`` (a walkthrough), the command, the game's
    valid commands then, and the view a prior reads (the commands before it, the recipe once
    read). The commands are played in the compiled game in order."""
    from genmem.envs.textworld_env import TextWorldGame

    game = TextWorldGame(Path(game_file))
    out: list[tuple[str, tuple[str, ...], GameView]] = []
    try:
        state, played, notes = game.reset(), [], []
        for command in commands:
            out.append((command, tuple(state.commands), GameView(tuple(played), tuple(notes))))
            state = game.step(command)
            played.append(command)
            if not notes and (note := recipe_note([state.observation])):
                notes.append(note)
    finally:
        game.close()
    return out


def prior_ranks_first(
    procedure: CookingProcedure, views: Sequence[tuple[str, Sequence[str], GameView]]
) -> int:
    """How many of the ``views``' commands (:func:`walkthrough_views`) the procedure's prior
    alone ranks first among the valid commands: the highest bonus, above 0, shared with none."""
    first = 0
    for command, valid, view in views:
        prior = procedure_prior(procedure, valid, view)
        best = max(prior)
        mine = prior[list(valid).index(command)]
        first += mine == best and best > 0 and prior.count(best) == 1
    return first


def _prerequisite_bonus(
    procedure: CookingProcedure,
    step: TemplateStep,
    valid: Sequence[str],
    played: Sequence[str],
    scores: list[float],
) -> None:
    held = _held(played)
    for need in procedure.steps:
        if need.kind != "prerequisite" or need.enables != step.template:
            continue
        pattern = _pattern(need.template)
        for k, c in enumerate(valid):
            if not pattern.fullmatch(c):
                continue
            if (m := _TAKE.match(c)) and m["obj"] in held:
                continue  # a tool already in hand
            if not m and c in played:
                continue  # a place opened before (a tool dropped may be taken again)
            familiar = "{place}" not in need.template or (
                (m := _OPEN.match(c)) is not None and m["obj"] in procedure.places
            )
            scores[k] = max(scores[k], NEXT_BONUS if familiar else OTHER_BONUS)


def _pitfall_penalty(
    procedure: CookingProcedure,
    recipe: Recipe,
    valid: Sequence[str],
    played: Sequence[str],
    scores: list[float],
) -> None:
    for pitfall in procedure.pitfalls:
        foods: Sequence[str | None] = recipe.ingredients if "{food}" in pitfall.template else [None]
        for food in foods:
            pattern = _pattern(pitfall.template, food)
            if pitfall.kind == "again":
                if not any(pattern.fullmatch(c) for c in played):
                    continue
            elif pitfall.verb is not None:
                if food is None or pitfall.verb not in {d.verb for d in recipe.of(food)}:
                    continue  # this food is not prepared that way: the command may be right
                rule = procedure.rule(pitfall.verb)
                for k, c in enumerate(valid):
                    if pattern.fullmatch(c) and (
                        rule is None or c != rule.command.replace("{food}", food)
                    ):
                        scores[k] = PITFALL_PENALTY
                continue
            elif pitfall.kind == "wrong":
                right = {
                    r.command.replace("{food}", food or "")
                    for d in (recipe.of(food) if food else [])
                    if (r := procedure.rule(d.verb)) is not None
                }
                right = {c for c in right if pattern.fullmatch(c)}
                if not right:
                    continue  # no rule says which one is right: nothing is known to be wrong
                for k, c in enumerate(valid):
                    if pattern.fullmatch(c) and c not in right:
                        scores[k] = PITFALL_PENALTY
                continue
            for k, c in enumerate(valid):
                if pattern.fullmatch(c):
                    scores[k] = PITFALL_PENALTY


# --- seed experiences from training games --------------------------------------------------


def losing_variants(walkthrough: Sequence[str]) -> list[list[str]]:
    """Plays that lose a game on purpose, from its winning commands: cooking an ingredient a
    second time, cooking it with another appliance, eating it once cooked, cutting it another
    way. A variant ends with its losing command; the game decides whether it loses."""
    walk = [c.strip().lower() for c in walkthrough]
    variants = []
    cook = next((i for i, c in enumerate(walk) if c.startswith("cook ")), None)
    if cook is not None and (m := _WITH.match(walk[cook])):
        other = next(a for a in ("stove", "oven", "bbq") if a != m["tool"])
        variants.append([*walk[: cook + 1], walk[cook]])
        variants.append([*walk[:cook], f"cook {m['obj']} with {other}"])
        variants.append([*walk[: cook + 1], f"eat {m['obj']}"])
    cut = next(
        (i for i, c in enumerate(walk) if (m := _WITH.match(c)) and m["tool"] == "knife"), None
    )
    if cut is not None and (m := _WITH.match(walk[cut])):
        other = next(v for v in ("slice", "dice", "chop") if v != m["verb"])
        variants.append([*walk[:cut], f"{other} {m['obj']} with knife"])
    return variants


def cooking_seed_row(record: Any, game_file: str | Path) -> dict[str, Any]:
    """A training game as a seed row: its opening, and the won play of its walkthrough with the
    plays of :func:`losing_variants` that the game did end in a loss.

    Args:
        record: The game's :class:`~genmem.envs.cooking.CookingRecord`.
        game_file: Its compiled game.

    Raises:
        HeldOutWalkthrough: the game is not a ``train`` game (a valid or test game's
            walkthrough never reaches a bank).
    """
    if record.split != "train":
        raise HeldOutWalkthrough(
            f"game {record.id} is a {record.split} game: only cooking-train walkthroughs seed a "
            "bank (valid and test games are held out)",
            value=record.id,
        )
    won = play_commands(game_file, record.walkthrough, game=record.id, split=record.split)
    if not won.won:
        raise CookingExperienceError(
            f"game {record.id}: its walkthrough did not win when replayed", value=record.id
        )
    lost = []
    for commands in losing_variants(record.walkthrough):
        play = play_commands(game_file, commands, game=record.id, split=record.split)
        if play.lost:
            lost.append(play.model_dump())
    return {
        "id": record.id,
        "question": record.intro,
        "answer": {"won": [won.model_dump()], "lost": lost},
        "goal": record.objective,
    }


def cooking_experience(question: str, answer: Any) -> str:
    """The template distiller's payload for one seed row: the procedure of its won play merged
    with the pitfalls of its lost ones, rendered."""
    won = [distill_procedure(CookingTrajectory.model_validate(t)) for t in answer.get("won", [])]
    rules = [r for p in won for r in p.rules]
    lost = [
        distill_procedure(CookingTrajectory.model_validate(t), rules)
        for t in answer.get("lost", [])
    ]
    return merge_procedures([*won, *lost]).render()


def experience_prior(
    experience: str, commands: Sequence[str], view: Mapping[str, Any]
) -> list[float] | None:
    """:func:`procedure_prior` for a ranking interactor: the procedure read from a retrieved
    experience's text, the game read from the episode's view (``history``, ``notes``).

    Args:
        experience: the retrieved text (one or more rendered procedures).
        commands: the valid commands offered now.
        view: the episode's view (:meth:`~genmem.envs.textworld_env.GameEpisode.view`).

    Returns:
        The bonus per command, or None when the text holds no rendered procedure (a
        model-written entry, another family's experience): such text acts only as text.
    """
    try:
        procedure = parse_procedure(experience)
    except CookingExperienceError:
        return None
    state = GameView(played=tuple(view.get("history", ())), notes=tuple(view.get("notes", ())))
    return procedure_prior(procedure, commands, state)


# --- the agent's own games: MemEvolver's template writer ------------------------------------

_EPISODE_TAILS = ("\n\nValid commands: ", "\n\nThe episode is over", "\n\nThe game is lost after")
_NOT_PLAYED = "is not a valid command here"
_MIN_USEFUL = 2
"""Template steps a run's procedure needs besides reading the cookbook to be worth storing."""


def _game_text(observation: str) -> str:
    """What the game said, without what the episode adds (valid commands, budget, verdict)."""
    for tail in _EPISODE_TAILS:
        observation = observation.split(tail)[0]
    return observation.strip()


def plays_of_run(trajectory: Mapping[str, Any], *, game: str = "run") -> list[CookingTrajectory]:
    """The plays of a cooking game in a StackPlanner trajectory (a ``Trajectory.model_dump()``):
    the interactor's ``*_step`` calls in order, a new play after each ``*_reset`` and after a
    loss (a ``*_resume`` of a game in progress goes on with the same one). Commands the game
    refused are left out.

    Args:
        trajectory: The run's trajectory.
        game: The id the plays record.
    """
    plays: list[list[GameStep]] = [[]]
    for step in trajectory.get("steps") or []:
        args = step.get("arguments") or {}
        tool = str(args.get("tool") or "")
        if step.get("action") != "tool" or not tool:
            continue
        if tool.endswith("_reset") and plays[-1]:
            plays.append([])
        command = (args.get("args") or {}).get("command") if tool.endswith("_step") else None
        observation = str(step.get("observation") or "")
        if not isinstance(command, str) or _NOT_PLAYED in observation:
            continue
        plays[-1].append(GameStep(command=command, observation=_game_text(observation)))
        if _LOST in observation:  # a lost game goes on only from its start (reset or resume)
            plays.append([])
    out = []
    for steps in plays:
        if not steps:
            continue
        won = "*** The End ***" in steps[-1].observation
        lost = _LOST in steps[-1].observation and not won
        out.append(CookingTrajectory(game=game, split="test", steps=steps, won=won, lost=lost))
    return out


def _distil_run(query: str, trajectory: dict[str, Any] | str, outcome: str | None) -> str | None:
    """The template payload of one run: its plays that read the cookbook, distilled and merged;
    None when the run shows too little (no recipe read, or nothing scored and nothing lost)."""
    del query, outcome  # the plays carry the game's own verdict
    if not isinstance(trajectory, Mapping):
        return None
    procedures: list[CookingProcedure] = []
    for play in plays_of_run(trajectory):
        rules = [r for p in procedures for r in p.rules]
        try:
            procedures.append(distill_procedure(play, rules))
        except CookingExperienceError:
            continue  # a play that never read the recipe has nothing to write as roles
    if not procedures:
        return None
    merged = merge_procedures(procedures)
    if len(merged.steps) <= _MIN_USEFUL and not merged.pitfalls and not merged.tried:
        return None
    return merged.render()


def _merge_texts(stored: str, new: str) -> str | None:
    try:
        return merge_procedures([parse_procedure(stored), parse_procedure(new)]).render()
    except CookingExperienceError:
        return None  # the stored entry is not a procedure (another writer's): no merge


def cooking_writer() -> ExperienceWriter:
    """MemEvolver's template writer for cooking games: a run's plays distilled into a procedure
    (:func:`distill_procedure`), merged with a stored procedure on request."""
    return ExperienceWriter(name=WRITER, distil=_distil_run, merge=_merge_texts)
