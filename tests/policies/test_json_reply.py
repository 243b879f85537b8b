"""One request for schema-shaped JSON: the raw message, its text, the parsed object, the error."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, HumanMessage

from genmem.policies.json_reply import JsonReply, aask_json, accepts_json_schema, ask_json
from tests.fakes import FakeChat, TextJsonChat

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


def test_a_reply_that_parses_keeps_its_raw_message() -> None:
    chat = FakeChat(structured=[{"a": "x"}])
    reply = ask_json(chat, SCHEMA, [HumanMessage("hi")])
    assert reply.parsed == {"a": "x"} and reply.error is None
    assert isinstance(reply.raw, AIMessage) and reply.text == '{"a": "x"}'
    [asked] = chat.asked
    assert asked.schema == SCHEMA and asked.method == "json_schema"


def test_a_reply_that_does_not_parse_comes_back_with_the_error() -> None:
    reply = ask_json(TextJsonChat(responses=["no JSON here"]), SCHEMA, "hi")
    assert reply.parsed is None and reply.text == "no JSON here"
    assert isinstance(reply.error, OutputParserException)


def test_a_failed_call_raises() -> None:
    with pytest.raises(ValueError, match="cut off"):
        ask_json(FakeChat(structured=[ValueError("cut off")]), SCHEMA, "hi")


def test_a_model_without_schemas_is_told_apart() -> None:
    text_only = FakeChat(responses=["x"])
    assert not accepts_json_schema(text_only, SCHEMA)
    assert accepts_json_schema(FakeChat(structured=[]), SCHEMA)
    with pytest.raises(NotImplementedError):
        ask_json(text_only, SCHEMA, "hi")


def test_the_async_request_gives_the_same_reply() -> None:
    reply = asyncio.run(aask_json(TextJsonChat(responses=['{"a": "y"}']), SCHEMA, "hi"))
    assert reply == JsonReply(raw=reply.raw, text='{"a": "y"}', parsed={"a": "y"})


def test_a_model_that_drops_the_raw_message_is_named() -> None:
    with pytest.raises(TypeError, match="must honour include_raw"):
        JsonReply.of({"a": "x"})
