"""JSON-schema constrained decoding: schema handling, and random walks under the constraint."""

from __future__ import annotations

import json
import random
from typing import Any, Literal

import pytest
import torch
from pydantic import BaseModel, Field

from genmem.graph.decision_schemas import (
    CHOICES,
    action_schema,
    choice_schema,
    decision_from_stages,
)
from genmem.graph.planner_actions import parse_decision
from genmem.policies.structured import json_schema_prefix_fn, normalize_schema, schema_of


class Pick(BaseModel):
    """A small structured reply."""

    reason: str = Field(max_length=30)
    ok: bool
    # no bare integers: the enforcer's number grammar lets an integer field take "-9.87e+224";
    # the planner's schemas bound theirs with enums
    level: Literal[1, 2, 3]


def test_schema_of_models_and_dicts() -> None:
    assert schema_of(Pick)["required"] == ["reason", "ok", "level"]
    raw = {"type": "object", "properties": {}}
    copied = schema_of(raw)
    assert copied == raw and copied is not raw
    with pytest.raises(TypeError, match="JSON-schema dict or a pydantic model"):
        schema_of(42)  # type: ignore[arg-type]


def test_normalize_turns_one_of_into_any_of_everywhere() -> None:
    schema = {"oneOf": [{"oneOf": [{"type": "string"}]}], "discriminator": {"propertyName": "a"}}
    assert normalize_schema(schema) == {"anyOf": [{"anyOf": [{"type": "string"}]}]}


_ASCII: dict[int, set[int]] = {}


def _ascii_ids(tokenizer: Any) -> set[int]:
    if id(tokenizer) not in _ASCII:
        vocab = range(len(tokenizer))
        _ASCII[id(tokenizer)] = {i for i in vocab if tokenizer.decode([i]).isascii()}
    return _ASCII[id(tokenizer)]


def _walk(tokenizer: Any, schema: dict[str, Any] | type, seed: int, limit: int = 400) -> str:
    """Pick random allowed ASCII tokens until the constraint allows only the end token.

    ASCII only: random byte-fallback tokens can split a character across tokens, which the
    enforcer's per-token decoding cannot follow; models writing English JSON do not do that.
    """
    rng = random.Random(seed)
    ascii_ids = _ascii_ids(tokenizer)
    prompt = torch.tensor(tokenizer.encode("Reply:", add_special_tokens=False))
    allowed = json_schema_prefix_fn(tokenizer, schema, len(prompt))
    sequence = prompt
    for _ in range(limit):
        ids = allowed(0, sequence)
        assert ids, "the constraint left no token to pick"
        if ids == [tokenizer.eos_token_id]:
            return tokenizer.decode(sequence[len(prompt) :].tolist())
        pick = rng.choice([i for i in ids if i in ascii_ids and i != tokenizer.eos_token_id])
        sequence = torch.cat([sequence, torch.tensor([pick])])
    raise AssertionError(f"no end within {limit} tokens: {tokenizer.decode(sequence.tolist())!r}")


@pytest.mark.slow
def test_random_walks_under_a_model_schema_always_parse(default_policy) -> None:
    tok = default_policy.tokenizer
    for seed in range(3):
        text = _walk(tok, Pick, seed)
        assert list(json.loads(text, strict=False)) == [
            "reason",
            "ok",
            "level",
        ]  # in "required" order
        assert text.endswith("}")  # the reply ends where the object closes
        assert "\n\n" not in text and "   " not in text
        data = json.loads(text, strict=False)
        assert len(data["reason"]) <= 31  # the enforcer can overshoot a maxLength by one
        Pick.model_validate({**data, "reason": data["reason"][:30]})


@pytest.mark.slow
@pytest.mark.parametrize("choice", list(CHOICES))
def test_two_stage_decisions_are_always_valid(default_policy, choice: str) -> None:
    tok = default_policy.tokenizer
    first = json.loads(_walk(tok, choice_schema([choice]), seed=1), strict=False)
    assert list(first) == ["thought", "action"] and first["action"] == choice
    schema = action_schema(choice, ["solver", "research"], 60, [2, 5])
    second = json.loads(_walk(tok, schema, seed=2), strict=False)
    decision = parse_decision(decision_from_stages(first, second), agents=["solver", "research"])
    kind, op = CHOICES[choice]
    assert decision.action.action == kind
    assert getattr(decision.action, "op", None) == op
    assert set(getattr(decision.action, "entries", [])) <= {2, 5}
