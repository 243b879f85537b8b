"""Asking a chat model for one reply in a JSON schema, with the raw message kept.

Every caller that wants schema-shaped JSON from a chat model (the StackPlanner coordinator's
decisions, MemEvolver's update decisions, the cold-start pipeline's records, the seed bank's
lessons) asks through :func:`ask_json`: LangChain's ``with_structured_output(schema,
method="json_schema", include_raw=True)``, whose reply comes back as a :class:`JsonReply`
holding the raw message, its text, the parsed object and the parser's error. What a caller
does with a reply that did not parse (count it as an invalid action, parse the text leniently,
retry) stays the caller's.

This is the chat-model side of structured output. How a local model is made to write JSON that
fits a schema token by token is :mod:`genmem.policies.structured`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from genmem.policies.chat_local import content_text

__all__ = ["JsonReply", "aask_json", "accepts_json_schema", "ask_json", "json_schema_runnable"]

Schema = dict[str, Any] | type
"""A JSON schema, or a pydantic model class whose schema it is."""


@dataclass(frozen=True)
class JsonReply:
    """One reply to a request for schema-shaped JSON."""

    raw: BaseMessage | None
    """The model's message as it came back (its usage metadata counts the tokens)."""
    text: str
    """The message's text ("" when there is none)."""
    parsed: Any | None
    """The reply parsed in the schema's shape (a dict, or the pydantic model), None when the
    parser failed (see :attr:`error`)."""
    error: BaseException | None = None
    """Why the reply did not parse, else None."""

    @classmethod
    def of(cls, out: Any) -> JsonReply:
        """The reply from ``with_structured_output(..., include_raw=True)``'s output."""
        if not isinstance(out, dict) or "raw" not in out:
            raise TypeError(
                f"with_structured_output(include_raw=True) returned {type(out).__name__} "
                "without a 'raw' message; the chat model must honour include_raw"
            )
        raw = out.get("raw")
        text = content_text(getattr(raw, "content", "")) or ""
        return cls(raw=raw, text=text, parsed=out.get("parsed"), error=out.get("parsing_error"))


def json_schema_runnable(chat: BaseChatModel, schema: Schema) -> Runnable[LanguageModelInput, Any]:
    """``chat`` bound to answer in ``schema`` (raw message kept).

    Args:
        chat: The chat model.
        schema: A JSON schema, or a pydantic model class.

    Returns:
        The runnable whose output :meth:`JsonReply.of` reads.

    Raises:
        NotImplementedError: The model takes no JSON schema (some raise ValueError or TypeError).
    """
    return chat.with_structured_output(schema, method="json_schema", include_raw=True)


def accepts_json_schema(chat: BaseChatModel, schema: Schema) -> bool:
    """Whether ``chat`` takes a JSON schema for its reply (constrained or structured output).

    Args:
        chat: The chat model.
        schema: A schema of the kind the caller will ask with.

    Returns:
        False when binding the schema raises NotImplementedError, ValueError or TypeError.
    """
    try:
        json_schema_runnable(chat, schema)
    except (NotImplementedError, ValueError, TypeError):
        return False
    return True


def ask_json(chat: BaseChatModel, schema: Schema, messages: LanguageModelInput) -> JsonReply:
    """Ask ``chat`` for one reply in ``schema``.

    A reply that does not parse comes back with ``parsed=None`` and the parser's ``error``; an
    error of the call itself (the model failed, the schema was refused) is raised.

    Args:
        chat: The chat model.
        schema: A JSON schema, or a pydantic model class.
        messages: The conversation to answer.

    Returns:
        The raw message, its text, the parsed object (or None) and the parser's error.

    Example:
        >>> from langchain_core.language_models import FakeListChatModel
        >>> from langchain_core.runnables import RunnableLambda
        >>> class Fake(FakeListChatModel):
        ...     def with_structured_output(self, schema, **kw):
        ...         return RunnableLambda(lambda m: {"raw": self.invoke(m), "parsed": {"a": 1}})
        >>> reply = ask_json(Fake(responses=['{"a": 1}']), {"type": "object"}, "hi")
        >>> reply.text, reply.parsed, reply.error
        ('{"a": 1}', {'a': 1}, None)
    """
    return JsonReply.of(json_schema_runnable(chat, schema).invoke(messages))


async def aask_json(chat: BaseChatModel, schema: Schema, messages: LanguageModelInput) -> JsonReply:
    """:func:`ask_json` through the model's ``ainvoke`` (same arguments, same reply)."""
    return JsonReply.of(await json_schema_runnable(chat, schema).ainvoke(messages))
