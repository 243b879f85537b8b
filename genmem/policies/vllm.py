"""vLLM as a chat backend: the server's location and chat model, and the ``vllm serve`` command.

Serving a model
---------------
Tool calling and structured outputs are features of the server. For Qwen2.5 instruct::

    vllm serve /models/Qwen2.5-7B-Instruct \\
        --served-model-name Qwen/Qwen2.5-7B-Instruct \\
        --dtype auto --max-model-len 8192 --gpu-memory-utilization 0.9 \\
        --enable-auto-tool-choice --tool-call-parser hermes \\
        --generation-config vllm

- ``--enable-auto-tool-choice --tool-call-parser hermes``: Qwen2.5 writes tool calls in the Hermes
  ``<tool_call>{...}</tool_call>`` format; without both flags the server refuses requests that
  carry ``tool_choice="auto"``, which is what LangChain's ``bind_tools`` sends.
- ``--generation-config vllm``: by default the server folds the model's ``generation_config.json``
  (Qwen ships ``repetition_penalty=1.05``, ``top_k=20``, ...) into every request's defaults; with
  ``vllm`` the settings GenMem sends are the only ones applied.
- SID beam search (:mod:`genmem.policies.vllm_sid`) asks the engine for ``2 * k``
  log-probabilities per step, and ``--max-logprobs`` (default 20) caps that, so ``k <= 10``
  unless the server raises it.

:func:`vllm_serve_args` builds that command line for a policy directory.

Chat model
----------
:func:`chat_model_from_vllm_spec` reads ``vllm:<base_url>#<model>`` (e.g.
``vllm:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct``) and returns a
``langchain_openai.ChatOpenAI`` on the server's chat completions endpoint. ``bind_tools`` works
when the server runs with the tool-call flags above; ``with_structured_output(Schema,
method="json_schema")`` sends ``response_format={"type": "json_schema", ...}``, which vLLM
enforces with its grammar backend.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from genmem.errors import InvalidModelSpec, ModelUnavailable

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "SPEC_PREFIX",
    "VLLMServerConfig",
    "chat_model_from_vllm_spec",
    "parse_vllm_spec",
    "vllm_chat_model",
    "vllm_serve_args",
]

SPEC_PREFIX = "vllm:"
_SPEC_FORM = "vllm:<base_url>#<model>, e.g. vllm:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct"
_CLIENT_HINT = 'pip install "genmem[vllm]" (it adds langchain-openai==1.6.6)'
_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")


# --------------------------------------------------------------------------------------------
# Server location and the chat model
# --------------------------------------------------------------------------------------------


def _default_api_key() -> str:
    return os.environ.get("VLLM_API_KEY") or "EMPTY"


def _normalize_base_url(url: Any, *, spec: Any = None) -> str:
    """Check ``url`` is an http(s) URL with a host; a bare host gets the ``/v1`` path."""
    shown = spec if spec is not None else url
    if not isinstance(url, str) or not url.strip():
        raise InvalidModelSpec(
            f"vLLM model spec {shown!r} has no server URL; write it as {_SPEC_FORM}", spec=shown
        )
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidModelSpec(
            f"vLLM server URL {url!r} in {shown!r} is not an http(s) URL with a host; write the "
            f"spec as {_SPEC_FORM}",
            spec=shown,
        )
    if parts.query or parts.fragment:
        raise InvalidModelSpec(
            f"vLLM server URL {url!r} in {shown!r} carries a query or fragment; give only the "
            "API root, e.g. http://localhost:8000/v1",
            spec=shown,
        )
    path = parts.path.rstrip("/") or "/v1"  # vLLM serves its OpenAI API under /v1 only
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass(frozen=True, kw_only=True)
class VLLMServerConfig:
    """Where a vLLM OpenAI-compatible server listens, which model it serves, how to call it."""

    base_url: str
    """Root of the OpenAI API, e.g. ``http://localhost:8000/v1`` (a bare host gets ``/v1``)."""
    model: str
    """Model name as served (``--served-model-name``), e.g. ``Qwen/Qwen2.5-7B-Instruct``."""
    api_key: str = field(default_factory=_default_api_key, repr=False)
    """The server's ``--api-key``: ``$VLLM_API_KEY``, else ``EMPTY`` (a server without a key
    accepts any)."""
    temperature: float = 0.0
    """Sampling temperature of the chat model (0 = greedy)."""
    max_tokens: int | None = 1024
    """Most tokens one chat reply may have; None lets the server fill the context window."""
    timeout: float = field(default_factory=lambda: _env_seconds(TIMEOUT_ENV, 120.0))
    """Seconds to wait for one HTTP request: ``$GENMEM_SERVER_TIMEOUT``, else 120."""
    max_retries: int | None = None
    """Retries of a failed request; None: none for a loopback server (a retry of a request that
    timed out there only queues more work behind the abandoned one), the client's default else."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "base_url", _normalize_base_url(self.base_url))
        if (
            not isinstance(self.model, str)
            or not self.model.strip()
            or any(c.isspace() for c in self.model)
        ):
            raise InvalidModelSpec(
                f"vLLM model name {self.model!r} is empty or has whitespace; give the name the "
                "server was started with (--served-model-name), e.g. Qwen/Qwen2.5-7B-Instruct",
                spec=self.model,
            )
        if not self.temperature >= 0:
            raise ValueError(f"temperature={self.temperature!r} must be >= 0 (0 = greedy)")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens={self.max_tokens!r} must be >= 1, or None")
        if not self.timeout > 0:
            raise ValueError(f"timeout={self.timeout!r} must be a positive number of seconds")
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError(f"max_retries={self.max_retries!r} must be >= 0, or None")


TIMEOUT_ENV = "GENMEM_SERVER_TIMEOUT"
"""Environment variable: seconds one request to a served chat model may take."""


def _env_seconds(name: str, default: float) -> float:
    """A positive number of seconds from the environment variable ``name``, else ``default``."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{name}={raw!r} must be a positive number of seconds")
    return value


def _is_loopback(base_url: str) -> bool:
    """Whether ``base_url`` points at this machine."""
    host = urlsplit(base_url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def parse_vllm_spec(spec: str, **overrides: Any) -> VLLMServerConfig:
    """Read ``vllm:<base_url>#<model>`` into a :class:`VLLMServerConfig` (``overrides`` win)."""
    if not isinstance(spec, str) or not spec.startswith(SPEC_PREFIX):
        raise InvalidModelSpec(
            f"{spec!r} is not a vLLM model spec: it must start with {SPEC_PREFIX!r}; write it "
            f"as {_SPEC_FORM}",
            spec=spec,
        )
    body = spec[len(SPEC_PREFIX) :]
    url, sep, model = body.partition("#")
    if not sep:
        raise InvalidModelSpec(
            f"vLLM model spec {spec!r} has no '#' between the server URL and the model name; "
            f"write it as {_SPEC_FORM}",
            spec=spec,
        )
    model = model.strip()
    if not model:
        raise InvalidModelSpec(
            f"vLLM model spec {spec!r} names no model after '#'; write it as {_SPEC_FORM}",
            spec=spec,
        )
    base_url = _normalize_base_url(url, spec=spec)
    try:
        return VLLMServerConfig(base_url=base_url, model=model, **overrides)
    except InvalidModelSpec as exc:
        raise InvalidModelSpec(f"{exc} (in spec {spec!r})", spec=spec) from None


def vllm_chat_model(
    config: VLLMServerConfig, *, http_client: httpx.Client | None = None
) -> BaseChatModel:
    """A ``ChatOpenAI`` on the server's chat completions endpoint, in a :class:`ChatServer`.

    The wrapper sends tool calls and JSON schemas natively and falls back to the text protocol
    (with one warning) for a server that does not honour them.
    """
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise ModelUnavailable(
            f"the vLLM chat model needs the langchain-openai package: {_CLIENT_HINT}"
        ) from exc
    kwargs: dict[str, Any] = {
        "model": config.model,
        "base_url": config.base_url,
        "api_key": config.api_key,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "timeout": config.timeout,
        "max_retries": (0 if _is_loopback(config.base_url) else 2)
        if config.max_retries is None
        else config.max_retries,
        # vLLM's tool-call parsers run on chat completions; keep LangChain off /v1/responses.
        "use_responses_api": False,
    }
    if config.max_tokens is not None:
        # LangChain sends the cap as OpenAI's newer max_completion_tokens, which vLLM reads and
        # other servers (transformers serve) ignore, generating to their own limit; send both.
        kwargs["extra_body"] = {"max_tokens": config.max_tokens}
    if http_client is not None:
        kwargs["http_client"] = http_client
    from genmem.policies.server_chat import ChatServer

    server = f"{config.base_url}#{config.model}"
    return ChatServer(inner=ChatOpenAI(**kwargs), server=server)


def chat_model_from_vllm_spec(
    spec: str, *, http_client: httpx.Client | None = None, **overrides: Any
) -> BaseChatModel:
    """:func:`vllm_chat_model` for a ``vllm:<base_url>#<model>`` spec string."""
    return vllm_chat_model(parse_vllm_spec(spec, **overrides), http_client=http_client)


# --------------------------------------------------------------------------------------------
# Serving a policy directory
# --------------------------------------------------------------------------------------------


def vllm_serve_args(
    policy_dir: str | Path,
    *,
    served_model_name: str | None = None,
    max_model_len: int = 4096,
    dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
    tool_call_parser: str = "hermes",
    max_logprobs: int | None = None,
    port: int | None = None,
) -> list[str]:
    """The ``vllm serve`` command line (argv list) that serves a policy directory for GenMem."""
    directory = Path(policy_dir)
    if not (directory / "config.json").is_file():
        raise ModelUnavailable(
            f"{directory} is not a model directory (no config.json); pass a directory written by "
            "save_policy/save_pretrained"
        )
    if isinstance(max_model_len, bool) or not isinstance(max_model_len, int) or max_model_len < 1:
        raise ValueError(f"max_model_len={max_model_len!r} must be an int >= 1 (tokens)")
    if dtype not in _DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one vLLM accepts; use one of {_DTYPES}")
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(
            f"gpu_memory_utilization={gpu_memory_utilization!r} must be a fraction in (0, 1]"
        )
    name = served_model_name or directory.resolve().name
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"served_model_name={name!r} must be non-empty, without whitespace")
    args = [
        "vllm",
        "serve",
        str(directory),
        "--served-model-name",
        name,
        "--dtype",
        dtype,
        "--max-model-len",
        str(max_model_len),
        "--gpu-memory-utilization",
        str(gpu_memory_utilization),
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        tool_call_parser,
        "--generation-config",
        "vllm",
    ]
    if max_logprobs is not None:
        if isinstance(max_logprobs, bool) or not isinstance(max_logprobs, int) or max_logprobs < 1:
            raise ValueError(f"max_logprobs={max_logprobs!r} must be an int >= 1")
        args += ["--max-logprobs", str(max_logprobs)]
    if port is not None:
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError(f"port={port!r} must be an int from 1 to 65535")
        args += ["--port", str(port)]
    return args
