"""ChatServer: a server that does not honour tool calls or JSON schemas gets the text protocol,
with one warning per server and feature, and the failed request is sent again that way."""

from __future__ import annotations

import json
import warnings
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from genmem.policies.server_chat import ChatServer, TextProtocolWarning, json_object_text
from genmem.policies.vllm import chat_model_from_vllm_spec

pytest.importorskip("langchain_openai")

A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
CALL = "<tool_call>\n" + json.dumps({"name": "memory_lookup", "arguments": {"sid_list": [A]}})
CALL += "\n</tool_call>"
PICK = "Sure:\n```json\n" + json.dumps({"sid": A, "reason": "x"}) + "\n```"


def _reply(content: str, finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }  # fmt: skip


class _TextOnlyServer:
    """Answers like a server that ignores tools and response_format (or refuses tools)."""

    def __init__(self, refuse_tools: bool = False) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.refuse_tools = refuse_tools

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if self.refuse_tools and "tools" in body:
            return httpx.Response(400, json={"error": {"message": "tool_choice needs a parser"}})
        system = body["messages"][0]["content"] if body["messages"][0]["role"] == "system" else ""
        if "<tools>" in system:  # the text protocol: the model writes the call
            return httpx.Response(200, json=_reply(f"Let me look.\n{CALL}"))
        if "JSON schema" in system:
            return httpx.Response(200, json=_reply(PICK))
        return httpx.Response(200, json=_reply("I would look up memory for that."))


def _model(url: str, server: Any) -> ChatServer:
    client = httpx.Client(transport=httpx.MockTransport(server))
    return chat_model_from_vllm_spec(f"vllm:{url}#m", http_client=client)


def _lookup_tool() -> dict[str, Any]:
    return {"type": "function", "function": {"name": "memory_lookup", "description": "Read.",
            "parameters": {"type": "object", "properties": {"sid_list": {"type": "array",
            "items": {"type": "string"}}}, "required": ["sid_list"]}}}  # fmt: skip


@pytest.mark.parametrize("refuse", [False, True], ids=["ignores-tools", "refuses-tools"])
def test_a_required_tool_call_falls_back_to_the_text_protocol_once(refuse: bool) -> None:
    server = _TextOnlyServer(refuse_tools=refuse)
    model = _model(f"http://tools-{refuse}.test/v1", server)
    bound = model.bind_tools([_lookup_tool()], tool_choice="memory_lookup")
    with pytest.warns(TextProtocolWarning, match="does not honour tool calls"):
        first = bound.invoke("advice for apples?")
    assert [c["name"] for c in first.tool_calls] == ["memory_lookup"]
    assert first.tool_calls[0]["args"] == {"sid_list": [A]} and first.content == "Let me look."
    assert "tools" in server.bodies[0] and "tools" not in server.bodies[1]
    assert "Call the function memory_lookup now" in server.bodies[1]["messages"][0]["content"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: the second call goes straight to text
        second = bound.invoke("and for pears?")
    assert second.tool_calls and len(server.bodies) == 3 and "tools" not in server.bodies[2]
    assert model.text_protocol() == {"tools"}


class _Pick(BaseModel):
    sid: str
    reason: str


def test_an_ignored_json_schema_falls_back_and_the_reply_parses() -> None:
    server = _TextOnlyServer()
    model = _model("http://schema.test/v1", server)
    structured = model.with_structured_output(_Pick, method="json_schema", include_raw=True)
    with pytest.warns(TextProtocolWarning, match="does not honour JSON schemas"):
        out = structured.invoke("pick one")
    assert out["parsed"] == _Pick(sid=A, reason="x") and out["parsing_error"] is None
    assert server.bodies[0]["response_format"]["type"] == "json_schema"
    assert "response_format" not in server.bodies[1]
    assert '"required": ["sid", "reason"]' in server.bodies[1]["messages"][0]["content"]
    assert model.text_protocol() == {"schema"}  # tools were never asked for


def test_plain_chat_is_sent_as_it_is() -> None:
    server = _TextOnlyServer()
    reply = _model("http://plain.test/v1", server).invoke("hello")
    assert reply.content == "I would look up memory for that." and len(server.bodies) == 1
    assert "tools" not in server.bodies[0] and "response_format" not in server.bodies[0]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('Here: {"a": {"b": [1, 2]}} and more {"c": 3}', '{"a": {"b": [1, 2]}}'),
        ('{"a": 1', '{"a": 1'),  # nothing complete: the text, for the parser to refuse
        ('[1, 2] then {"k": "v"}', '{"k": "v"}'),
    ],
)
def test_json_object_text_cuts_the_first_object(text: str, want: str) -> None:
    assert json_object_text(text) == want


@pytest.mark.parametrize(
    ("cut", "falls_back"),
    [("I think the answer is that we should", True), ('{"sid": "<SID_L1_3>', False)],
    ids=["prose-to-the-cap", "json-cut-by-the-cap"],
)
def test_a_reply_cut_by_the_token_cap(cut: str, falls_back: bool) -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=_reply(cut if len(bodies) == 1 else PICK, "length"))

    model = _model(f"http://cut-{falls_back}.test/v1", handler)
    structured = model.with_structured_output(_Pick, method="json_schema", include_raw=True)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        out = structured.invoke("pick one")
    # Prose to the cap: the server ignored the schema, so the text protocol asks again. JSON cut
    # by the cap: the server kept to the schema; the cut reply is a parsing error, not a fallback.
    assert len(bodies) == (2 if falls_back else 1)
    assert any(w.category is TextProtocolWarning for w in said) is falls_back
    assert (out["parsed"] == _Pick(sid=A, reason="x")) is falls_back
    assert (out["parsing_error"] is not None) is not falls_back
