"""ChatLocal: message rendering and tool-call parsing, then the real default model."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, Field

from genmem.policies.chat_local import (
    ChatLocal,
    forced_tool,
    format_tools_block,
    parse_tool_calls,
    to_chat_messages,
)

SID = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
LOOKUP = {
    "type": "function",
    "function": {
        "name": "memory_lookup",
        "description": "Look up an SID.",
        "parameters": {
            "type": "object",
            "properties": {"sid_list": {"type": "array", "items": {"type": "string"}}},
            "required": ["sid_list"],
        },
    },
}


def test_parse_valid_call_and_prose() -> None:
    call = json.dumps({"name": "memory_lookup", "arguments": {"sid_list": [SID]}})
    text = f"Let me look.\n<tool_call>\n{call}\n</tool_call>"
    prose, calls, invalid = parse_tool_calls(text)
    assert prose == "Let me look."
    assert invalid == []
    assert len(calls) == 1
    assert calls[0]["name"] == "memory_lookup"
    assert calls[0]["args"] == {"sid_list": [SID]}
    assert calls[0]["id"].startswith("call_")


def test_parse_several_calls_unclosed_last_and_string_arguments() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
        '<tool_call>{"name": "b", "parameters": {"y": 2}}'
    )
    _, calls, invalid = parse_tool_calls(text)
    assert [(c["name"], c["args"]) for c in calls] == [("a", {"x": 1}), ("b", {"y": 2})]
    assert invalid == []
    assert calls[0]["id"] != calls[1]["id"]


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ('{"name": "memory_lookup", "arguments": {"sid_list": [', "memory_lookup"),
        ('["not", "an", "object"]', None),
        ('{"arguments": {}}', None),
        ('{"name": "x", "arguments": [1, 2]}', "x"),
    ],
)
def test_parse_malformed_call_becomes_invalid_tool_call(body: str, name: str | None) -> None:
    prose, calls, invalid = parse_tool_calls(f"hm <tool_call>{body}</tool_call>")
    assert prose == "hm"
    assert calls == []
    assert len(invalid) == 1
    assert invalid[0]["name"] == name
    assert invalid[0]["args"] == body
    assert "not JSON of the form" in invalid[0]["error"]


def test_no_tool_call_is_all_prose() -> None:
    assert parse_tool_calls("  just text ") == ("just text", [], [])


def test_messages_render_tools_calls_and_results() -> None:
    msgs = [
        SystemMessage("be brief"),
        HumanMessage("task"),
        AIMessage(
            "", tool_calls=[{"name": "memory_lookup", "args": {"sid_list": [SID]}, "id": "1"}]
        ),
        ToolMessage("first", tool_call_id="1"),
        ToolMessage("second", tool_call_id="2"),
        HumanMessage([{"type": "text", "text": "more"}]),
    ]
    out = to_chat_messages(msgs, [LOOKUP])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "user"]
    assert out[0]["content"].startswith("be brief\n\n# Tools")
    assert json.dumps(LOOKUP) in out[0]["content"]
    call = json.loads(
        out[2]["content"].removeprefix("<tool_call>\n").removesuffix("\n</tool_call>")
    )
    assert call == {"name": "memory_lookup", "arguments": {"sid_list": [SID]}}
    # consecutive tool results share one user turn
    assert out[3]["content"] == (
        "<tool_response>\nfirst\n</tool_response>\n<tool_response>\nsecond\n</tool_response>"
    )
    assert out[4]["content"] == "more"
    assert all(set(m) == {"role", "content"} for m in out)


def test_tools_without_system_message_get_one() -> None:
    out = to_chat_messages([HumanMessage("hi")], [LOOKUP])
    assert out[0] == {"role": "system", "content": format_tools_block([LOOKUP])}


def test_forced_tool_resolution() -> None:
    two = [LOOKUP, {**LOOKUP, "function": {**LOOKUP["function"], "name": "other"}}]
    assert forced_tool([LOOKUP], "any") == "memory_lookup"
    assert forced_tool(two, "any") is None
    assert forced_tool(two, "other") == "other"
    assert forced_tool(two, {"type": "function", "function": {"name": "other"}}) == "other"
    assert forced_tool(two, "auto") is None
    assert forced_tool(two, None) is None


# -- the real embedded model -----------------------------------------------------------------


class Verdict(BaseModel):
    """A judgement."""

    score: int = Field(description="0, 1 or 2")
    reason: str = Field(max_length=80)


@pytest.mark.slow
def test_real_model_chat_and_tool_calls(default_policy) -> None:
    chat = ChatLocal.from_policy(default_policy, max_new_tokens=24)
    reply = chat.invoke([HumanMessage("Say hello in one short sentence.")])
    assert isinstance(reply.content, str) and reply.content.strip()
    assert reply.usage_metadata["output_tokens"] <= 24
    assert reply.response_metadata["finish_reason"] in ("stop", "length")
    # temperature 0 is greedy: the same prompt gives the same reply (evolution reuses control
    # runs on that ground)
    assert chat.temperature == 0
    memo = default_policy.replies
    assert memo is not None
    hits = memo.hits
    again = chat.invoke([HumanMessage("Say hello in one short sentence.")])
    assert again.content == reply.content and memo.hits == hits + 1  # answered from the memo
    memo.clear()
    assert chat.invoke([HumanMessage("Say hello in one short sentence.")]).content == reply.content
    # sampled replies are never memoised
    counts = (memo.hits, memo.misses)
    ChatLocal.from_policy(default_policy, max_new_tokens=4, temperature=0.7).invoke("Hi")
    assert (memo.hits, memo.misses) == counts

    # a pinned tool: the reply is a call to it (or a malformed one, reported, never raised)
    forced = chat.bind_tools([LOOKUP], tool_choice="memory_lookup").invoke("Find memory for: 2+2")
    names = [c["name"] for c in forced.tool_calls] + [c["name"] for c in forced.invalid_tool_calls]
    assert names and set(names) == {"memory_lookup"}

    # structured output is decoded under the JSON schema, so a bounded schema always parses
    structured = ChatLocal.from_policy(default_policy, max_new_tokens=48).with_structured_output(
        Verdict, include_raw=True
    )
    out = structured.invoke("Rate 'use a calculator' for 'What is 17*23?'")
    assert set(out) == {"raw", "parsed", "parsing_error"}
    assert out["parsing_error"] is None
    assert isinstance(out["parsed"], Verdict)
    assert out["raw"].response_metadata["finish_reason"] == "stop"


@pytest.mark.slow
def test_real_model_stop_sequence(default_policy) -> None:
    chat = ChatLocal.from_policy(default_policy, max_new_tokens=40)
    reply = chat.invoke("Count from 1 to 10 separated by commas.", stop=["5"])
    assert "5" not in reply.content
    assert reply.response_metadata["finish_reason"] == "stop"
