"""Chat with an OpenAI-compatible server, falling back to the text protocol where it falls short.

vLLM started with a tool-call parser returns real tool calls and enforces JSON schemas; other
OpenAI-compatible servers (``transformers serve``, which ``genmem serve`` runs, or vLLM without
``--enable-auto-tool-choice``) ignore ``tools``/``response_format`` or refuse them. Every role of
every graph must still run there. :class:`ChatServer` sends a request natively first; when the
reply shows the server did not honour the feature (a forced tool call that came back as prose, a
reply that is not the JSON object asked for, a 400), it warns once for that server and feature and
from then on uses the text protocol that :class:`~genmem.policies.chat_local.ChatLocal` uses for
the embedded model: tools described in the system turn and calls read back in the Hermes
``<tool_call>`` format, the JSON schema stated in the system turn and the object cut out of the
reply. The request that failed natively is sent again that way, so no call is lost.
"""

from __future__ import annotations

import json
import threading
import warnings
from typing import Any, ClassVar, NamedTuple

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from genmem.policies.chat_local import (
    HermesToolsMixin,
    content_text,
    forced_tool,
    parse_tool_calls,
    response_schema,
    to_chat_messages,
)

__all__ = ["ChatServer", "TextProtocolWarning", "json_object_text"]

_FEATURES = {"tools": "tool calls", "schema": "JSON schemas"}


class TextProtocolWarning(RuntimeWarning):
    """A server did not honour tool calls or JSON schemas; GenMem uses the text protocol."""


def json_object_text(text: str) -> str:
    """The first complete JSON object in ``text`` (code fences and prose around it dropped)."""
    decoder = json.JSONDecoder()
    for start in (i for i, c in enumerate(text) if c == "{"):
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return text[start:end]
    return text.strip()


def _is_object_for(text: str, schema: dict[str, Any]) -> bool:
    """Whether ``text`` is a JSON object holding every key ``schema`` requires."""
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    return isinstance(obj, dict) and all(k in obj for k in schema.get("required", []))


class _Request(NamedTuple):
    """One chat call, split into what the server may or may not honour."""

    messages: list[BaseMessage]
    stop: list[str] | None
    tools: list[dict[str, Any]]
    choice: Any
    schema: dict[str, Any] | None
    kwargs: dict[str, Any]


class ChatServer(HermesToolsMixin):
    """An OpenAI-compatible chat model (``inner``) with the text protocol as its fallback."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: Any = Field(description="The server's LangChain chat model (a ChatOpenAI).")
    server: str = Field(description="Base URL and model: the key the fallbacks are kept under.")

    _fallbacks: ClassVar[dict[str, set[str]]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @property
    def _llm_type(self) -> str:
        return "genmem-server"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"server": self.server}

    def text_protocol(self) -> set[str]:
        """The features this server gets through the text protocol (``tools``, ``schema``)."""
        with self._lock:
            return set(self._fallbacks.get(self.server, ()))

    def _fall_back(self, feature: str, why: str) -> None:
        with self._lock:
            seen = self._fallbacks.setdefault(self.server, set())
            if feature in seen:
                return
            seen.add(feature)
        warnings.warn(
            f"{self.server} does not honour {_FEATURES[feature]} ({why}); GenMem states them in "
            "the prompt and parses the reply from now on",
            TextProtocolWarning,
            stacklevel=2,
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.pop("tools", None) or []
        choice = kwargs.pop("tool_choice", None)
        schema = response_schema(kwargs.pop("response_format", None))
        feature = "tools" if tools else "schema" if schema is not None else None
        req = _Request(messages, stop, tools, choice, schema, kwargs)
        if feature is None:
            return self._result(self.inner.invoke(messages, stop=stop, **kwargs))
        if feature not in self.text_protocol():
            reply, why = self._native(req)
            if why is None:
                return self._result(reply)
            self._fall_back(feature, why)
        return self._result(self._text(req))

    def _native(self, req: _Request) -> tuple[AIMessage | None, str | None]:
        """The server's own reply and, if it did not honour the feature, why not."""
        import openai

        messages, stop, tools, choice, schema, kwargs = req

        if tools:
            model = self.inner.bind_tools(tools, tool_choice=choice)
        else:
            fmt = {"name": str((schema or {}).get("title") or "reply"), "schema": schema}
            model = self.inner.bind(response_format={"type": "json_schema", "json_schema": fmt})
        try:
            reply = model.invoke(messages, stop=stop, **kwargs)
        except openai.BadRequestError as exc:
            return None, f"it refused the request: {str(exc)[:120]}"
        except openai.LengthFinishReasonError as exc:  # LangChain refuses a cut structured reply
            cut = exc.completion.choices[0].message.content or ""
            if cut.lstrip().startswith("{"):  # the server kept to JSON; the cap cut it short
                return AIMessage(content=cut), None
            return None, "the reply ran to the token cap in prose"
        text = content_text(reply.content)
        if tools:
            if forced_tool(tools, choice) and not reply.tool_calls:
                return reply, "a required tool call came back as text"
            if not reply.tool_calls and "<tool_call>" in text:
                return reply, "the reply wrote a tool call as text"
            return reply, None
        if not _is_object_for(text, schema or {}):
            return reply, "the reply is not the JSON object asked for"
        return reply, None

    def _text(self, req: _Request) -> AIMessage:
        """The reply through the text protocol: features stated in the prompt, parsed back."""
        messages, stop, tools, choice, schema, kwargs = req
        turns = to_chat_messages(messages, tools)
        forced = forced_tool(tools, choice) if tools else None
        ask = ""
        if forced:
            ask = f"Call the function {forced} now: reply with one <tool_call> and nothing else."
        elif schema is not None:
            ask = (
                "Reply with one JSON object and nothing else (no code fence), following this "
                f"JSON schema:\n{json.dumps(schema, ensure_ascii=False)}"
            )
        if ask and turns and turns[0]["role"] == "system":
            turns[0]["content"] += "\n\n" + ask
        elif ask:
            turns.insert(0, {"role": "system", "content": ask})
        kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
        prompt = [kinds[t["role"]](t["content"]) for t in turns]
        reply = self.inner.invoke(prompt, stop=stop, **kwargs)
        text = content_text(reply.content)
        meta = {
            "usage_metadata": reply.usage_metadata,
            "response_metadata": reply.response_metadata,
        }
        if tools:
            prose, calls, invalid = parse_tool_calls(text)
            return AIMessage(content=prose, tool_calls=calls, invalid_tool_calls=invalid, **meta)
        return AIMessage(content=json_object_text(text) if schema is not None else text, **meta)

    @staticmethod
    def _result(message: AIMessage) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=message)])
