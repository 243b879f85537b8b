"""A LangChain chat model over a local transformers policy, with Hermes-style tool calls.

Small instruct models such as SmolLM2 have a plain ChatML template with no notion of tools, so
tools are described in the system turn and calls are read back from the reply in the Hermes
format that Qwen2.5 and vLLM's ``hermes`` parser also use::

    <tool_call>
    {"name": "memory_lookup", "arguments": {"sid_list": ["<SID_L1_3><SID_L2_0>..."]}}
    </tool_call>

Tool results go back to the model as a user turn wrapping each result in
``<tool_response>...</tool_response>``. When a specific tool is required (``tool_choice`` naming
it, or ``"any"`` with a single tool, which is how ``with_structured_output`` asks), the reply is
prefilled with the opening of that call so even a tiny model produces the right shape. A call
whose JSON does not parse becomes an ``invalid_tool_call`` with the reason, never an exception.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from genmem.policies.local import LocalPolicy, load_policy

if TYPE_CHECKING:
    from genmem.policies.choice_scoring import ChoiceLogProb

__all__ = [
    "DEFAULT_MAX_NEW_TOKENS",
    "ChatLocal",
    "HermesToolsMixin",
    "content_text",
    "forced_tool",
    "format_tools_block",
    "parse_tool_calls",
    "response_schema",
    "schema_output",
    "to_chat_messages",
]

DEFAULT_MAX_NEW_TOKENS = 256
"""Reply cap of a local model's calls when nobody sets one (a served model keeps its own)."""

_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)

_TOOLS_INTRO = (
    "# Tools\n\nYou can call the functions described below; their JSON schemas are listed "
    "between <tools> and </tools>:\n<tools>\n{tools}\n</tools>\n\nTo call a function, reply "
    'with a JSON object holding "name" and "arguments", wrapped in <tool_call></tool_call> '
    'tags:\n<tool_call>\n{{"name": "<function-name>", "arguments": {{"<arg>": "<value>"}}}}\n'
    "</tool_call>"
)


def response_schema(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema a ``response_format`` asks for (OpenAI shapes or a bare schema)."""
    if response_format is None:
        return None
    if not isinstance(response_format, dict):
        raise ValueError(f"response_format must be a dict, got {type(response_format).__name__}")
    if response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema", response_format)
        schema = inner.get("schema")
        if not isinstance(schema, dict):
            raise ValueError("response_format of type json_schema needs a 'schema' object")
        return schema
    if response_format.get("type") == "json_object":
        return {"type": "object"}
    return response_format


def format_tools_block(tools: Sequence[dict[str, Any]]) -> str:
    """The system-prompt section that describes ``tools`` (OpenAI tool dicts)."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return _TOOLS_INTRO.format(tools=lines)


def content_text(content: Any) -> str:
    """Plain text of a message content (a string or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return str(content)
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _render_call(call: dict[str, Any]) -> str:
    body = json.dumps({"name": call["name"], "arguments": call["args"]}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"


def to_chat_messages(
    messages: Sequence[BaseMessage], tools: Sequence[dict[str, Any]] = ()
) -> list[dict[str, str]]:
    """LangChain messages as chat-template dicts, tools described in the system turn."""
    out: list[dict[str, str]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append({"role": "system", "content": content_text(message.content)})
        elif isinstance(message, ToolMessage):
            block = f"<tool_response>\n{content_text(message.content)}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("_tool") == "1":
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool": "1"})
        elif isinstance(message, AIMessage):
            text = content_text(message.content)
            calls = [_render_call(c) for c in message.tool_calls]
            out.append({"role": "assistant", "content": "\n".join([text, *calls]).strip()})
        elif isinstance(message, HumanMessage):
            out.append({"role": "user", "content": content_text(message.content)})
        else:
            out.append({"role": "user", "content": content_text(message.content)})
    for item in out:
        item.pop("_tool", None)
    if tools:
        block = format_tools_block(tools)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{block}"
        else:
            out.insert(0, {"role": "system", "content": block})
    return out


def _parse_call(body: str) -> tuple[str, dict[str, Any]]:
    """Name and arguments of one call body; ValueError says what is wrong."""
    obj = json.loads(body)  # json.JSONDecodeError is a ValueError
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ValueError('expected a JSON object with a string "name"')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        args = json.loads(args)
    if not isinstance(args, dict):
        raise ValueError('"arguments" must be a JSON object')
    return obj["name"], args


def parse_tool_calls(text: str) -> tuple[str, list[Any], list[Any]]:
    """Split a reply into its prose, its valid tool calls and its malformed ones."""
    calls, invalid = [], []
    for match in _CALL.finditer(text):
        body = match.group(1).strip()
        call_id = f"call_{uuid.uuid4().hex[:16]}"
        try:
            name, args = _parse_call(body)
        except ValueError as exc:
            guess = re.search(r'"name"\s*:\s*"([^"]+)"', body)
            invalid.append(
                invalid_tool_call(
                    name=guess.group(1) if guess else None,
                    args=body,
                    id=call_id,
                    error='tool call is not JSON of the form {"name": ..., "arguments": {...}}: '
                    f"{exc}",
                )
            )
            continue
        calls.append(tool_call(name=name, args=args, id=call_id))
    return _CALL.sub("", text).strip(), calls, invalid


def forced_tool(tools: Sequence[dict[str, Any]], tool_choice: Any) -> str | None:
    """Name of the tool a reply must call, if ``tool_choice`` pins one down."""
    names = [t["function"]["name"] for t in tools]
    if isinstance(tool_choice, dict):
        tool_choice = tool_choice.get("function", {}).get("name")
    if tool_choice in ("any", "required", True) and len(names) == 1:
        return names[0]
    if isinstance(tool_choice, str) and tool_choice in names:
        return tool_choice
    return None


def schema_output(
    model: BaseChatModel, schema: dict[str, Any] | type, include_raw: bool
) -> Runnable[LanguageModelInput, Any]:
    """``model`` bound to ``response_format`` json_schema, its reply parsed (LangChain's shapes)."""
    from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
    from langchain_core.runnables import RunnableMap, RunnablePassthrough

    from genmem.policies.structured import schema_of

    bound = model.bind(response_format={"type": "json_schema", "schema": schema_of(schema)})
    is_model = isinstance(schema, type) and issubclass(schema, BaseModel)
    parser = PydanticOutputParser(pydantic_object=schema) if is_model else JsonOutputParser()
    if not include_raw:
        return bound | parser
    parse = RunnablePassthrough.assign(
        parsed=lambda x: parser.invoke(x["raw"]), parsing_error=lambda _: None
    )
    fallback = RunnablePassthrough.assign(parsed=lambda _: None)
    with_error = parse.with_fallbacks([fallback], exception_key="parsing_error")
    return RunnableMap(raw=bound) | with_error


class HermesToolsMixin(BaseChatModel):
    """``bind_tools`` and JSON-schema ``with_structured_output`` for models whose ``_generate``
    reads ``tools``/``tool_choice``/``response_format`` from its keyword arguments."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (any form LangChain converts to OpenAI tool schemas)."""
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type,
        *,
        method: str = "json_schema",
        include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """Replies that follow ``schema``: ``response_format`` json_schema by default.

        ``method="json_schema"`` binds the schema as ``response_format`` (ChatLocal constrains
        decoding to it); ``"function_calling"`` asks through a forced tool call instead.
        """
        if method != "json_schema":
            return super().with_structured_output(
                schema, include_raw=include_raw, method=method, **kwargs
            )
        return schema_output(self, schema, include_raw)


class ChatLocal(HermesToolsMixin):
    """Chat with a local transformers policy directory (default: the embedded SmolLM2)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model_path: str | None = Field(
        default=None, description="Policy directory; None means the embedded default model."
    )
    max_new_tokens: int = Field(
        default=DEFAULT_MAX_NEW_TOKENS, ge=1, description="Reply length cap in tokens."
    )
    temperature: float = Field(default=0.0, ge=0.0, description="0 decodes greedily.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    repetition_penalty: float = Field(default=1.0, gt=0.0)

    _policy: LocalPolicy | None = PrivateAttr(default=None)

    @classmethod
    def from_policy(cls, policy: LocalPolicy, **kwargs: Any) -> ChatLocal:
        """A chat model over an already loaded policy (shared, not copied)."""
        model = cls(model_path=str(policy.path) if policy.path else None, **kwargs)
        model._policy = policy
        return model

    @property
    def policy(self) -> LocalPolicy:
        """The loaded policy (loaded on first use)."""
        if self._policy is None:
            self._policy = load_policy(self.model_path)
        return self._policy

    @property
    def _llm_type(self) -> str:
        return "genmem-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path or "default",
            "max_new_tokens": self.max_new_tokens,
            "temperature": self.temperature,
        }

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.pop("tools", None) or []
        forced = forced_tool(tools, kwargs.pop("tool_choice", None))
        schema = response_schema(kwargs.pop("response_format", None))
        policy = self.policy
        tok = policy.tokenizer
        prompt = tok.apply_chat_template(
            to_chat_messages(messages, tools), add_generation_prompt=True, tokenize=False
        )
        prefill = f'<tool_call>\n{{"name": "{forced}", "arguments": ' if forced else ""
        if schema is not None and (tools or stop):
            raise ValueError("response_format cannot be combined with tools or stop strings")
        text, n_in, n_out, finish = self._complete(prompt + prefill, stop, schema)
        reply = prefill + text
        if forced and "</tool_call>" not in reply:
            reply += "\n</tool_call>"
        prose, calls, invalid = parse_tool_calls(reply) if tools else (reply.strip(), [], [])
        message = AIMessage(
            content=prose,
            tool_calls=calls,
            invalid_tool_calls=invalid,
            usage_metadata={
                "input_tokens": n_in,
                "output_tokens": n_out,
                "total_tokens": n_in + n_out,
            },
            response_metadata={
                "model_name": policy.info.base_model,
                "finish_reason": finish,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def score_choices(self, messages: Sequence[BaseMessage], choices: Sequence[str]) -> list[float]:
        """Mean per-token log-probability of each choice as the whole assistant reply."""
        from genmem.policies.choice_scoring import rank_scores

        return rank_scores("mean", self.choice_logprobs(messages, choices))

    def choice_logprobs(
        self, messages: Sequence[BaseMessage], choices: Sequence[str]
    ) -> list[ChoiceLogProb]:
        """Each choice's summed log-probability as the whole assistant reply, and its tokens."""
        from genmem.policies.choice_scoring import choice_logprobs

        prompt = self.policy.tokenizer.apply_chat_template(
            to_chat_messages(messages), add_generation_prompt=True, tokenize=False
        )
        return choice_logprobs(self.policy, prompt, choices)

    def _complete(
        self, prompt: str, stop: list[str] | None, schema: dict[str, Any] | None = None
    ) -> tuple[str, int, int, str]:
        """Generate after ``prompt``; returns text, prompt tokens, new tokens, finish reason."""
        policy = self.policy
        tok = policy.tokenizer
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
        # A schema-constrained reply must be able to close its JSON: give it room.
        max_new = self.max_new_tokens if schema is None else max(self.max_new_tokens, 640)
        memo = policy.replies if self.temperature == 0 else None
        # everything the greedy reply depends on; the vocabulary grows when SID tokens are added
        key = (prompt, tuple(stop or ()), json.dumps(schema, sort_keys=True), max_new)
        key += (self.repetition_penalty, len(tok))
        cached = memo.get(key) if memo is not None else None
        if cached is not None:
            text, n_new = cached
        else:
            text, n_new = self._decode(enc, stop, schema, max_new)
            if memo is not None:
                memo.put(key, (text, n_new))
        finish = "length" if n_new >= max_new else "stop"
        for s in stop or ():
            cut = text.find(s)
            if cut >= 0:
                text, finish = text[:cut], "stop"
        return text, int(enc["input_ids"].shape[1]), n_new, finish

    def _decode(
        self, enc: Any, stop: list[str] | None, schema: dict[str, Any] | None, max_new: int
    ) -> tuple[str, int]:
        """Run ``generate`` on the encoded prompt; returns the reply text and its token count."""
        import torch

        policy = self.policy
        tok = policy.tokenizer
        sample = self.temperature > 0
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": max_new,
            "do_sample": sample,
            "pad_token_id": tok.pad_token_id,
            "repetition_penalty": self.repetition_penalty,
        }
        if sample:
            gen_kwargs.update(temperature=self.temperature, top_p=self.top_p)
        if stop:
            gen_kwargs.update(stop_strings=list(stop), tokenizer=tok)
        if schema is not None:
            from genmem.policies.structured import json_schema_prefix_fn

            n_prompt = int(enc["input_ids"].shape[1])
            gen_kwargs["prefix_allowed_tokens_fn"] = json_schema_prefix_fn(tok, schema, n_prompt)
        from genmem.policies.prefix_cache import cache_owner

        prefixes = policy.prefixes
        with policy.lock, torch.inference_mode():
            runner = policy.runner
            enc = enc.to(runner.device)  # a shared load sits on the GPU where there is one
            if prefixes is None:
                out = runner.generate(**enc, **gen_kwargs)
            else:  # start from the cache of a prompt that began the same way
                ids = enc["input_ids"][0].tolist()
                owner = cache_owner(runner, tok)
                past = prefixes.take(ids, owner)
                if past is not None:
                    gen_kwargs["past_key_values"] = past
                result = runner.generate(**enc, **gen_kwargs, return_dict_in_generate=True)
                prefixes.put(ids, result.past_key_values, owner)
                out = result.sequences
        new = out[0, enc["input_ids"].shape[1] :]
        return tok.decode(new, skip_special_tokens=True), len(new)
