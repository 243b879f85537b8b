"""The StackPlanner coordinator's actions: what it may do at one step, as validated objects.

At every step the coordinator answers with exactly one action. The four kinds form a pydantic
discriminated union on the field ``action``; a :class:`CoordinatorDecision` wraps one of them
together with a short ``thought``. The field descriptions are written for the model: they become
the JSON schema that a chat model fills through structured output or tool calling.

Small models often wrap their JSON in a code fence or in prose, so :func:`parse_decision` and
:func:`parse_action` accept a bare JSON object, one inside a fenced block, or the first balanced
``{...}`` found in surrounding text, and nothing else. Whatever does not validate raises
:class:`InvalidAction`, whose message names the offending field and the values that are allowed,
so the graph can hand it back to the coordinator as an observation to correct.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Collection, Iterator, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from genmem.errors import GenMemError
from genmem.policies.prompts import ACTIONS_PROMPT

__all__ = [
    "ACTION_NAMES",
    "DEFAULT_AGENTS",
    "REVISE_OPS",
    "CoordinatorDecision",
    "DelegateAction",
    "FinishAction",
    "InvalidAction",
    "PlanAction",
    "PlannerAction",
    "ReviseAction",
    "action_schema_text",
    "decision_json_schema",
    "parse_action",
    "parse_decision",
]

ACTION_NAMES: tuple[str, ...] = ("plan", "delegate", "revise", "finish")
"""The values of the ``action`` field, in the order prompts list them."""

REVISE_OPS: tuple[str, ...] = ("update", "condense", "prune")
"""The values of a ``revise`` action's ``op`` field."""

DEFAULT_AGENTS: Mapping[str, str] = MappingProxyType(
    {
        "research": "looks things up with a search tool and reports back briefly, citing evidence",
        "solver": "reasons and calculates on its own, without tools, from what the task states",
        "interactor": "acts in the environment through its action tools and reports what happened",
    }
)
"""The sub-agents StackPlanner ships with and what each is for (names are what ``agent`` takes)."""

_OUTPUT_LIMIT = 2000  # characters of the raw reply kept on an InvalidAction


class InvalidAction(GenMemError, ValueError):
    """A coordinator reply that is not one valid action; the message says how to fix it."""

    def __init__(
        self,
        message: str,
        *,
        output: str | None = None,
        field: str | None = None,
        allowed: tuple[str, ...] | None = None,
        problems: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message)
        self.output = output
        self.field = field
        self.allowed = allowed
        self.problems = problems


class _FieldProblem(ValueError):
    """Raised inside validators so the bad field's allowed values reach InvalidAction."""

    def __init__(
        self, message: str, *, field: str | None = None, allowed: tuple[str, ...] | None = None
    ) -> None:
        super().__init__(message)
        self.field = field
        self.allowed = allowed


def _non_empty(value: str, field: str) -> str:
    """Strip ``value`` and refuse an empty result."""
    text = value.strip()
    if not text:
        raise _FieldProblem(f"'{field}' is empty; write the text it asks for", field=field)
    return text


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanAction(_Action):
    """Lay out, or redo, the ordered steps for the work that remains."""

    action: Literal["plan"] = Field(description='Always "plan".')
    steps: list[str] = Field(
        min_length=1,
        description=(
            "The remaining work as short ordered steps, one sub-goal per item. This replaces any "
            "earlier plan, so list everything still to do."
        ),
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _lines_to_steps(cls, value: Any) -> Any:
        # A small model often writes the plan as one multi-line string.
        if isinstance(value, str):
            return [line for line in value.splitlines() if line.strip()]
        return value

    @field_validator("steps")
    @classmethod
    def _steps_not_blank(cls, value: list[str]) -> list[str]:
        return [_non_empty(step, "steps") for step in value]

    def text(self) -> str:
        """The steps as a numbered list, one per line."""
        return "\n".join(f"{i}. {step}" for i, step in enumerate(self.steps, 1))


class DelegateAction(_Action):
    """Hand one sub-task to a sub-agent; its report is pushed onto the task stack."""

    action: Literal["delegate"] = Field(description='Always "delegate".')
    agent: str = Field(
        description=(
            "Which sub-agent does the work: one of the agent names listed in the instructions."
        )
    )
    task: str = Field(
        description=(
            "The sub-task, stated so that it can be done without seeing anything else: include "
            "every name, number and constraint it needs and say what to report back."
        )
    )

    @field_validator("agent")
    @classmethod
    def _known_agent(cls, value: str, info: ValidationInfo) -> str:
        name = value.strip()
        agents = (info.context or {}).get("agents")
        if agents is None:
            return _non_empty(name, "agent")
        allowed = tuple(agents)
        for candidate in allowed:
            if candidate.lower() == name.lower():
                return candidate
        raise _FieldProblem(
            f"'agent' is {value!r}, which is not an available agent; use one of: "
            + ", ".join(allowed),
            field="agent",
            allowed=allowed,
        )

    @field_validator("task")
    @classmethod
    def _task_not_blank(cls, value: str) -> str:
        return _non_empty(value, "task")


class ReviseAction(_Action):
    """Edit the task stack: add a note, condense a run of entries, or prune a failed branch."""

    action: Literal["revise"] = Field(description='Always "revise".')
    op: Literal["update", "condense", "prune"] = Field(
        description=(
            '"update" pushes a note of your own; "condense" replaces adjacent entries with one '
            'summary; "prune" drops the entries of a failed attempt and leaves a one-line note '
            "saying what failed."
        )
    )
    entries: list[int] = Field(
        default_factory=list,
        description=(
            "Ids of the stack entries to edit (the #numbers in the stack). Leave empty for "
            '"update"; for "condense" list every entry of one unbroken run.'
        ),
    )
    content: str = Field(
        description=(
            'The note for "update", the summary for "condense" (keep every fact still needed), or '
            'for "prune" one line on what was tried and why it failed.'
        )
    )

    @field_validator("entries", mode="before")
    @classmethod
    def _coerce_ids(cls, value: Any) -> Any:
        # Accept one id, and ids written the way the stack shows them ("#3").
        items = value if isinstance(value, list | tuple) else [value]
        out = []
        for item in items:
            if isinstance(item, str) and re.fullmatch(r"\s*#?\s*\d+\s*", item):
                item = int(item.strip().lstrip("#"))
            out.append(item)
        return out

    @field_validator("entries")
    @classmethod
    def _ids_valid(cls, value: list[int]) -> list[int]:
        bad = [i for i in value if i < 1]
        if bad:
            raise _FieldProblem(
                f"'entries' holds {bad}; entry ids are positive integers", field="entries"
            )
        if len(set(value)) != len(value):
            raise _FieldProblem(
                f"'entries' lists an id twice ({value}); list each id once", field="entries"
            )
        return value

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        return _non_empty(value, "content")

    @model_validator(mode="after")
    def _entries_fit_op(self) -> ReviseAction:
        if self.op == "update" and self.entries:
            raise _FieldProblem(
                "'entries' must be empty for op 'update' (it only adds a note); to edit existing "
                "entries use op 'condense' or 'prune'",
                field="entries",
            )
        if self.op != "update" and not self.entries:
            raise _FieldProblem(
                f"'entries' is empty; op {self.op!r} needs the ids of the entries to edit",
                field="entries",
            )
        return self


class FinishAction(_Action):
    """Stop and give the final answer to the whole task."""

    action: Literal["finish"] = Field(description='Always "finish".')
    answer: str = Field(
        description="The final answer to the original task, in the form the task asks for."
    )

    @field_validator("answer")
    @classmethod
    def _answer_not_blank(cls, value: str) -> str:
        return _non_empty(value, "answer")


PlannerAction = Annotated[
    PlanAction | DelegateAction | ReviseAction | FinishAction, Field(discriminator="action")
]
"""One coordinator action; the ``action`` field says which kind."""

_ACTION_ADAPTER: TypeAdapter[PlannerAction] = TypeAdapter(PlannerAction)
_MODELS: dict[str, type[_Action]] = {
    "plan": PlanAction,
    "delegate": DelegateAction,
    "revise": ReviseAction,
    "finish": FinishAction,
}


class CoordinatorDecision(BaseModel):
    """The coordinator's reply at one step: a brief thought and exactly one action."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    thought: str = Field(
        default="",
        description="One or two sentences on why this action is the right next step.",
    )
    action: PlannerAction = Field(description="The single action to take now.")


# --- parsing ---------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)


def _match_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` that closes the ``{`` at ``start`` (strings respected), or None."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _unreadable(problem: str, text: str) -> InvalidAction:
    """An InvalidAction for a reply whose JSON object cannot be found or read."""
    return InvalidAction(f"invalid coordinator action: {problem}", output=text[:_OUTPUT_LIMIT])


def _balanced_objects(text: str) -> Iterator[str]:
    """Top-level balanced ``{...}`` spans, left to right; stops at one that never closes."""
    start = text.find("{")
    while start != -1:
        end = _match_brace(text, start)
        if end is None:
            raise _unreadable(
                "the reply opens a JSON object with '{' that is never closed (was it cut off?); "
                "reply with one complete JSON object",
                text,
            )
        yield text[start : end + 1]
        start = text.find("{", end + 1)


def _extract_object(text: str) -> dict[str, Any]:
    """The JSON object in a reply: the whole text, a fenced block, or the first ``{...}``."""
    stripped = text.strip()
    if not stripped:
        raise _unreadable("the reply is empty; reply with one JSON object", text)
    try:
        whole = json.loads(stripped)
    except json.JSONDecodeError:
        pass
    else:
        if isinstance(whole, dict):
            return whole
        raise _unreadable(
            f"the reply is a JSON {type(whole).__name__}, not an object; reply with one JSON "
            'object such as {"action": "finish", "answer": "..."}',
            text,
        )
    for block in _FENCE.findall(text):
        try:
            value = json.loads(block.strip())
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    first_error: json.JSONDecodeError | None = None
    for span in _balanced_objects(text):
        try:
            value = json.loads(span)
        except json.JSONDecodeError as exc:
            first_error = first_error or exc
            continue
        if isinstance(value, dict):
            return value
    if first_error is not None:
        raise _unreadable(
            f"the reply contains '{{...}}' but it is not valid JSON ({first_error.msg} at "
            f"character {first_error.pos}); use double quotes around keys and strings and no "
            "trailing commas",
            text,
        )
    raise _unreadable(
        "the reply holds no JSON object; reply with one JSON object such as "
        '{"action": "finish", "answer": "..."}',
        text,
    )


def _fields(tag: str | None) -> tuple[str, ...]:
    model = _MODELS.get(tag or "")
    return tuple(model.model_fields) if model else ()


def _example(tag: str | None) -> str:
    examples = {
        "plan": '{"action": "plan", "steps": ["...", "..."]}',
        "delegate": '{"action": "delegate", "agent": "...", "task": "..."}',
        "revise": '{"action": "revise", "op": "condense", "entries": [2, 3], "content": "..."}',
        "finish": '{"action": "finish", "answer": "..."}',
    }
    return examples.get(tag or "", examples["finish"])


def _describe(error: Mapping[str, Any], tag: str | None) -> tuple[str, str, tuple[str, ...] | None]:
    """(field, sentence, allowed values) for one pydantic error, worded for the model."""
    loc = [part for part in error["loc"] if isinstance(part, str)]
    if loc and loc[0] in _MODELS:
        loc = loc[1:]  # the union member's tag
    field = loc[-1] if loc else "action"
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "union_tag_invalid":
        return (
            "action",
            f"'action' is {ctx.get('tag')!r}; it must be one of: {', '.join(ACTION_NAMES)}",
            ACTION_NAMES,
        )
    if kind == "union_tag_not_found" or (kind == "missing" and field == "action"):
        return (
            "action",
            f"the 'action' field is missing; add it with one of: {', '.join(ACTION_NAMES)}",
            ACTION_NAMES,
        )
    fields = _fields(tag)
    if kind == "extra_forbidden":
        where = f"a {tag!r} action" if tag else "the reply"
        allowed = fields if tag else ("thought", "action")
        return (
            field,
            f"field {field!r} is not allowed in {where}; its fields are: {', '.join(allowed)}",
            allowed,
        )
    if kind == "missing":
        return (
            field,
            f"field {field!r} is missing from the {tag!r} action; its fields are: "
            + ", ".join(fields),
            fields or None,
        )
    if kind == "literal_error" and field == "op":
        return (
            "op",
            f"'op' is {error.get('input')!r}; it must be one of: {', '.join(REVISE_OPS)}",
            REVISE_OPS,
        )
    if kind == "value_error" and isinstance(ctx.get("error"), _FieldProblem):
        problem = ctx["error"]
        return problem.field or field, str(problem), problem.allowed
    got = repr(error.get("input"))
    if len(got) > 80:
        got = got[:77] + "..."
    return field, f"field {field!r}: {error['msg'].lower()} (got {got})", None


def _invalid(exc: ValidationError, tag: str | None, output: str | None) -> InvalidAction:
    described = [_describe(err, tag) for err in exc.errors()]
    problems = tuple(sentence for _, sentence, _ in described)
    field, _, allowed = described[0]
    message = (
        "invalid coordinator action: "
        + "; ".join(problems)
        + f". Reply with one JSON object, e.g. {_example(tag)}"
    )
    return InvalidAction(message, output=output, field=field, allowed=allowed, problems=problems)


def _check_agents(agents: Collection[str]) -> tuple[str, ...]:
    names = tuple(agents)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ValueError(f"agents must be a non-empty collection of agent names; got {agents!r}")
    return names


def parse_decision(
    obj_or_json_text: str | Mapping[str, Any] | BaseModel, *, agents: Collection[str]
) -> CoordinatorDecision:
    """Validate a coordinator reply (text, dict or model) into a :class:`CoordinatorDecision`.

    A reply may be the decision form ``{"thought": ..., "action": {...}}`` or a bare action
    object (a ``thought`` key beside its fields is taken as the thought). ``agents`` are the
    names a ``delegate`` action may use, matched case-insensitively.

    Raises:
        InvalidAction: the reply holds no JSON object or the object is not one valid action.
    """
    names = _check_agents(agents)
    output: str | None = None
    if isinstance(obj_or_json_text, str):
        output = obj_or_json_text[:_OUTPUT_LIMIT]
        data: Any = _extract_object(obj_or_json_text)
    elif isinstance(obj_or_json_text, BaseModel):
        data = obj_or_json_text.model_dump()
    elif isinstance(obj_or_json_text, Mapping):
        data = copy.deepcopy(dict(obj_or_json_text))
    else:
        raise _unreadable(
            f"expected a JSON object or its text, got {type(obj_or_json_text).__name__}; reply "
            "with one JSON object",
            repr(obj_or_json_text),
        )
    nested = isinstance(data.get("action"), Mapping)
    body = dict(data["action"]) if nested else data
    if nested:
        outer = {key: value for key, value in data.items() if key != "action"}
    else:
        outer = {"thought": body.pop("thought")} if "thought" in body else {}
    tag = body.get("action")
    if isinstance(tag, str):
        tag = body["action"] = tag.strip().lower()
    tag = tag if isinstance(tag, str) and tag in _MODELS else None
    context = {"agents": names}
    try:
        action = _ACTION_ADAPTER.validate_python(body, context=context)
    except ValidationError as exc:
        raise _invalid(exc, tag, output) from None
    try:
        return CoordinatorDecision.model_validate({**outer, "action": action})
    except ValidationError as exc:  # a bad thought or a stray key beside the action
        raise _invalid(exc, None, output) from None


def parse_action(
    obj_or_json_text: str | Mapping[str, Any] | BaseModel, *, agents: Collection[str]
) -> PlannerAction:
    """Validate a coordinator reply into one action (see :func:`parse_decision`)."""
    return parse_decision(obj_or_json_text, agents=agents).action


# --- prompt text and schema ------------------------------------------------------------------


def _agent_lines(agents: Collection[str] | Mapping[str, str]) -> list[str]:
    names = _check_agents(agents)
    described = agents if isinstance(agents, Mapping) else {}
    lines = []
    for name in names:
        role = described.get(name) or DEFAULT_AGENTS.get(name)
        lines.append(f"    - {name}: {role}" if role else f"    - {name}")
    return lines


def action_schema_text(agents: Collection[str] | Mapping[str, str]) -> str:
    """A compact description of the four actions and the agents, for the coordinator's prompt.

    ``agents`` is a collection of names or a mapping of name to role; the shipped agents'
    roles (:data:`DEFAULT_AGENTS`) fill in for names given without one.
    """
    return ACTIONS_PROMPT.format(agents="\n".join(_agent_lines(agents)))


def decision_json_schema(agents: Collection[str]) -> dict[str, Any]:
    """The JSON schema of :class:`CoordinatorDecision` with ``agent`` limited to ``agents``."""
    names = _check_agents(agents)
    schema = CoordinatorDecision.model_json_schema()
    schema["$defs"]["DelegateAction"]["properties"]["agent"]["enum"] = list(names)
    return schema
