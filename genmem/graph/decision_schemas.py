"""JSON schemas for the coordinator's constrained decisions, one small schema per stage.

A constrained decoder such as lm-format-enforcer handles one object schema well, but it merges
the members of a union, so a small model answering the whole ``CoordinatorDecision`` schema at
once can write the fields of two actions into one. Structured decisions are therefore taken in
two stages: first the thought and the *choice* (an action kind, with the stack operation folded
in for ``revise``), then the fields of that one action under its own schema. Only choices that
can succeed on the current stack are offered: no edits of an empty stack, and entry ids limited
to the ids on it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from genmem.graph.planner_actions import decision_json_schema
from genmem.policies.prompts import choice_prompt

__all__ = [
    "CHOICES",
    "THOUGHT_CHARS",
    "action_schema",
    "available_choices",
    "choice_prompt",
    "choice_schema",
    "coordinator_schema",
    "decision_from_stages",
]

CHOICES: dict[str, tuple[str, str | None]] = {
    "delegate": ("delegate", None),
    "plan": ("plan", None),
    "note": ("revise", "update"),
    "condense": ("revise", "condense"),
    "prune": ("revise", "prune"),
    "finish": ("finish", None),
}
"""Stage-one choices and the (action, op) each stands for."""

THOUGHT_CHARS = 80
"""Longest thought a constrained decision writes (a reason, not the solution)."""


def available_choices(stack_ids: Sequence[int]) -> list[str]:
    """The choices that make sense now: on an empty stack, only delegate or plan.

    Edits need entries, and the coordinator never answers itself, so it finishes only once
    something is on the stack.
    """
    if stack_ids:
        return list(CHOICES)
    return ["delegate", "plan"]


def choice_schema(choices: Sequence[str], thought_chars: int = THOUGHT_CHARS) -> dict[str, Any]:
    """Stage one: ``{"thought": ..., "action": <one of choices>}``, the thought first."""
    unknown = [c for c in choices if c not in CHOICES]
    if unknown or not choices:
        raise ValueError(f"choices must be a non-empty subset of {list(CHOICES)}; got {choices}")
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": thought_chars},
            "action": {"type": "string", "enum": list(choices)},
        },
        "required": ["thought", "action"],
        "additionalProperties": False,
    }


def action_schema(
    choice: str,
    agents: Sequence[str],
    max_field_chars: int = 200,
    stack_ids: Sequence[int] = (),
) -> dict[str, Any]:
    """Stage two: the schema of the one action ``choice`` stands for, with length caps."""
    if choice not in CHOICES:
        raise ValueError(f"unknown choice {choice!r}; use one of {list(CHOICES)}")
    kind, op = CHOICES[choice]
    defs = decision_json_schema(agents)["$defs"]
    name = {"plan": "PlanAction", "delegate": "DelegateAction", "revise": "ReviseAction"}.get(
        kind, "FinishAction"
    )
    schema = copy.deepcopy(defs[name])
    props = schema["properties"]
    props["action"] = {"type": "string", "enum": [kind]}
    if kind == "plan":
        props["steps"].update(minItems=1, maxItems=4)
        props["steps"]["items"] = {"type": "string", "minLength": 1, "maxLength": 80}
        order = ["action", "steps"]
    elif kind == "delegate":
        props["task"].update(minLength=1, maxLength=max_field_chars)
        order = ["action", "agent", "task"]
    elif kind == "finish":
        props["answer"].update(minLength=1, maxLength=min(max_field_chars, 200))
        order = ["action", "answer"]
    else:
        props["op"] = {"type": "string", "enum": [op]}
        props["content"].update(minLength=1, maxLength=min(max_field_chars, 240))
        if op == "update":
            del props["entries"]
            order = ["action", "op", "content"]
        else:
            if not stack_ids:
                raise ValueError(f"{choice!r} edits stack entries; the stack is empty")
            props["entries"] = {
                "type": "array",
                "items": {"type": "integer", "enum": list(stack_ids)},
                "minItems": 1,
                "maxItems": len(stack_ids),
            }
            order = ["action", "op", "entries", "content"]
    schema["required"] = order
    schema["properties"] = {k: props[k] for k in order}
    schema["additionalProperties"] = False
    return schema


def decision_from_stages(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """The ``CoordinatorDecision`` payload the two stages' parsed replies make together.

    A repeated id in ``entries`` is dropped (first mention kept): the token-level enforcer
    cannot express ``uniqueItems``, and naming an entry twice means naming it once.
    """
    entries = second.get("entries")
    if isinstance(entries, list):
        second = {**second, "entries": list(dict.fromkeys(entries))}
    return {"thought": first.get("thought", ""), "action": second}


def coordinator_schema(
    agents: Sequence[str], max_field_chars: int = 200, stack_ids: Sequence[int] | None = None
) -> dict[str, Any]:
    """The whole decision's JSON schema in one piece, with length caps and the thought first.

    For backends that constrain a union faithfully (e.g. vLLM's guided decoding), and to check
    whether a model accepts schemas at all. With ``stack_ids``, ``entries`` may only name those.
    """
    schema = copy.deepcopy(decision_json_schema(agents))
    schema["required"] = ["thought", "action"]
    schema["properties"]["thought"]["maxLength"] = THOUGHT_CHARS
    defs = schema["$defs"]
    steps = defs["PlanAction"]["properties"]["steps"]
    steps.update(maxItems=4)
    steps["items"]["maxLength"] = 80
    defs["DelegateAction"]["properties"]["task"]["maxLength"] = max_field_chars
    revise = defs["ReviseAction"]
    revise["properties"]["content"]["maxLength"] = min(max_field_chars, 240)
    revise["properties"]["entries"]["maxItems"] = 16
    revise["required"] = ["action", "op", "entries", "content"]
    if stack_ids is not None:
        if stack_ids:
            revise["properties"]["entries"]["items"] = {"type": "integer", "enum": list(stack_ids)}
        else:
            revise["properties"]["op"]["enum"] = ["update"]
            revise["properties"]["entries"]["maxItems"] = 0
    defs["FinishAction"]["properties"]["answer"]["maxLength"] = min(max_field_chars, 200)
    return schema
