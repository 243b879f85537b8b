"""vLLM backends: a chat model on a vLLM OpenAI-compatible server, and SID decoding through vLLM.

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
- Beam search asks the engine for ``2 * k`` log-probabilities per step, and ``--max-logprobs``
  (default 20) caps that, so ``k <= 10`` unless the server raises it.

:func:`vllm_serve_args` builds that command line for a policy directory.

Chat model
----------
:func:`chat_model_from_vllm_spec` reads ``vllm:<base_url>#<model>`` (e.g.
``vllm:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct``) and returns a
``langchain_openai.ChatOpenAI`` on the server's chat completions endpoint. ``bind_tools`` works
when the server runs with the tool-call flags above; ``with_structured_output(Schema,
method="json_schema")`` sends ``response_format={"type": "json_schema", ...}``, which vLLM
enforces with its grammar backend.

SID decoding
------------
:class:`VLLMServerSIDGenerator` (``/v1/completions`` over HTTP) and
:class:`VLLMOfflineSIDGenerator` (``vllm.LLM`` in this process) implement
:class:`~genmem.policies.types.SIDGenerator`. The prompt is the context passed through a
``prompt_builder`` (for a chat model, its chat template). ``max_tokens`` is ``L`` (plus an optional
margin): with the SID symbols in the tokenizer each level is one token. ``k=1`` is greedy decoding
constrained by the spec's regular expression; ``k>1`` is beam search of width ``k``. A candidate's
score is the sum of the log-probabilities of its SID tokens as vLLM reports them (from the raw
logits, before the grammar mask: not renormalised over valid SIDs). Results are sorted best
first, repeated SIDs dropped, and anything that is not exactly one SID of the spec is dropped and
counted in :class:`DecodeStats`.

The vLLM API followed is vLLM's ``main`` of 2026, which vLLM 0.31 is cut from (checked in the
source, not on a GPU): ``CompletionRequest`` in ``vllm/entrypoints/openai/completion/protocol.py``
(``structured_outputs``, ``use_beam_search``, ``n``, ``length_penalty``, ``logprobs``; the
``guided_*`` fields were removed in v0.12.0 per ``docs/features/structured_outputs.md``),
``StructuredOutputsParams``, ``SamplingParams`` and ``BeamSearchParams`` in
``vllm/sampling_params.py``, and ``LLM.beam_search`` in
``vllm/entrypoints/generate/beam_search/offline.py``.

Limitations:

- **Server beam search is unconstrained.** ``CompletionRequest.to_beam_search_params`` builds the
  beam parameters without the structured-output field (and without ``allowed_token_ids``, see
  vllm-project/vllm#47630), so the regex sent with a beam request is ignored by the server (adding
  it is vllm-project/vllm#36285, open). A policy trained on SIDs mostly returns valid beams; the
  rest are dropped and counted in ``stats.invalid``, so fewer than ``k`` candidates can come back.
- **Offline beam search is constrained** through ``BeamSearchParams.structured_outputs``
  (vllm-project/vllm#35022): each step keeps only the tokens the grammar allows.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from genmem.errors import InvalidModelOutput, InvalidModelSpec, ModelUnavailable
from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies.types import SIDCandidate

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "SPEC_PREFIX",
    "DecodeStats",
    "PromptBuilder",
    "VLLMOfflineSIDGenerator",
    "VLLMServerConfig",
    "VLLMServerSIDGenerator",
    "build_beam_search_kwargs",
    "build_completion_request",
    "build_sampling_kwargs",
    "chat_model_from_vllm_spec",
    "parse_beam_search_output",
    "parse_completion_response",
    "parse_generate_output",
    "parse_vllm_spec",
    "vllm_chat_model",
    "vllm_serve_args",
]

PromptBuilder = Callable[[str], str]
"""Turns a context into the exact prompt text the model completes (e.g. its chat template)."""

SPEC_PREFIX = "vllm:"
_SPEC_FORM = "vllm:<base_url>#<model>, e.g. vllm:http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct"
_CLIENT_HINT = 'pip install "genmem[vllm]" (it adds langchain-openai==1.6.6)'
_ENGINE_HINT = 'pip install "genmem[gpu]" (vllm==0.31.*, on a machine with a CUDA GPU)'
_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
_LOGPROBS = 1  # the sampled token's log-probability is always returned with it


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
    timeout: float = 120.0
    """Seconds to wait for one HTTP request."""

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
    """A ``ChatOpenAI`` on the server's chat completions endpoint (tool calls, JSON schema)."""
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
        # vLLM's tool-call parsers run on chat completions; keep LangChain off /v1/responses.
        "use_responses_api": False,
    }
    if http_client is not None:
        kwargs["http_client"] = http_client
    return ChatOpenAI(**kwargs)


def chat_model_from_vllm_spec(
    spec: str, *, http_client: httpx.Client | None = None, **overrides: Any
) -> BaseChatModel:
    """:func:`vllm_chat_model` for a ``vllm:<base_url>#<model>`` spec string."""
    return vllm_chat_model(parse_vllm_spec(spec, **overrides), http_client=http_client)


# --------------------------------------------------------------------------------------------
# SID decoding: pure request building and response parsing
# --------------------------------------------------------------------------------------------


@dataclass
class DecodeStats:
    """Running counts of what SID decoding got back from vLLM."""

    requests: int = 0
    """Decoding calls made (one per context)."""
    returned: int = 0
    """Sequences vLLM returned."""
    invalid: int = 0
    """Returned sequences that were not exactly one SID of the spec (dropped)."""
    duplicates: int = 0
    """Valid sequences that repeated a better-scored SID of the same call (dropped)."""

    @property
    def format_validity(self) -> float:
        """Share of returned sequences that were one valid SID (1.0 before any)."""
        return 1.0 if self.returned == 0 else 1.0 - self.invalid / self.returned

    def merge(self, other: DecodeStats) -> None:
        """Add ``other``'s counts to these."""
        self.requests += other.requests
        self.returned += other.returned
        self.invalid += other.invalid
        self.duplicates += other.duplicates


def _check_k(k: Any, spec: SIDSpec) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= spec.capacity:
        raise ValueError(
            f"k={k!r} must be an int from 1 to {spec.capacity} (the addresses of spec {spec})"
        )
    return k


def _max_tokens(spec: SIDSpec, margin: int) -> int:
    if isinstance(margin, bool) or not isinstance(margin, int) or margin < 0:
        raise ValueError(f"margin={margin!r} must be an int >= 0 (extra tokens beyond L)")
    return spec.levels + margin


def build_completion_request(
    prompt: str,
    *,
    model: str,
    spec: SIDSpec = DEFAULT_SPEC,
    k: int = 1,
    margin: int = 0,
) -> dict[str, Any]:
    """JSON body of one ``/v1/completions`` request decoding ``k`` SIDs for ``prompt``."""
    k = _check_k(k, spec)
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": _max_tokens(spec, margin),
        "n": k,
        "temperature": 0.0,
        # A server default from generation_config.json would also penalise SIDs in the prompt.
        "repetition_penalty": 1.0,
        "logprobs": _LOGPROBS,
        "structured_outputs": {"regex": spec.regex()},
    }
    if k > 1:
        # Rank beams by summed log-probability alone: all valid SIDs have the same length.
        body.update(use_beam_search=True, length_penalty=0.0)
    return body


def build_sampling_kwargs(spec: SIDSpec = DEFAULT_SPEC, *, margin: int = 0) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one regex-constrained greedy SID."""
    return {
        "n": 1,
        "temperature": 0.0,
        "repetition_penalty": 1.0,
        "max_tokens": _max_tokens(spec, margin),
        "logprobs": _LOGPROBS,
        "structured_outputs": {"regex": spec.regex()},
    }


def build_beam_search_kwargs(
    spec: SIDSpec = DEFAULT_SPEC, *, k: int, margin: int = 0
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.sampling_params.BeamSearchParams`` for ``k`` SIDs."""
    return {
        "beam_width": _check_k(k, spec),
        "max_tokens": _max_tokens(spec, margin),
        "temperature": 0.0,
        "length_penalty": 0.0,
        "structured_outputs": {"regex": spec.regex()},
    }


def _canonical(text: Any, spec: SIDSpec) -> str | None:
    """The SID ``text`` spells, or None; whitespace between tokens is a detokeniser artefact."""
    if not isinstance(text, str):
        return None
    compact = "".join(text.split())
    return compact if spec.is_valid(compact) else None


def _sid_logprob(tokens: Sequence[Any] | None, logprobs: Sequence[Any], sid: str) -> float:
    """Sum the log-probabilities of the tokens that spell ``sid``, leaving out what follows it.

    Without token strings every log-probability is summed. With them, summing stops once the
    tokens cover the SID's characters, so an end-of-sequence token after it does not count.
    """
    total = 0.0
    covered = 0
    for i, value in enumerate(logprobs):
        if tokens is not None and covered >= len(sid):
            break
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidModelOutput(
                f"token log-probability {value!r} at position {i} is not a number",
                output=repr(list(logprobs))[:500],
            )
        total += float(value)
        if tokens is not None and i < len(tokens):
            covered += len("".join(str(tokens[i]).split()))
    return total


def _rank(scored: list[tuple[float, str]], k: int, stats: DecodeStats) -> list[SIDCandidate]:
    """Best first (stable for ties), one entry per SID, at most ``k``."""
    order = sorted(range(len(scored)), key=lambda i: -scored[i][0])
    seen: set[str] = set()
    out: list[SIDCandidate] = []
    for i in order:
        score, sid = scored[i]
        if sid in seen:
            stats.duplicates += 1
            continue
        seen.add(sid)
        if len(out) < k:
            out.append(SIDCandidate(sid=sid, score=score))
    return out


def parse_completion_response(
    payload: Mapping[str, Any],
    spec: SIDSpec = DEFAULT_SPEC,
    k: int = 1,
    *,
    stats: DecodeStats | None = None,
) -> list[SIDCandidate]:
    """Ranked distinct SIDs from a ``/v1/completions`` response for one prompt."""
    stats = stats if stats is not None else DecodeStats()
    choices = payload.get("choices") if isinstance(payload, Mapping) else None
    if not isinstance(choices, list):
        raise InvalidModelOutput(
            "a vLLM completions response needs a 'choices' list; got "
            f"{type(payload).__name__} {str(payload)[:200]!r}",
            output=str(payload)[:500],
        )
    scored: list[tuple[float, str]] = []
    for choice in choices:
        stats.returned += 1
        sid = _canonical(choice.get("text") if isinstance(choice, Mapping) else None, spec)
        if sid is None:
            stats.invalid += 1
            continue
        logprobs = choice.get("logprobs")
        values = logprobs.get("token_logprobs") if isinstance(logprobs, Mapping) else None
        if not isinstance(values, list):
            raise InvalidModelOutput(
                "the vLLM completions response has no token_logprobs although the request asked "
                f"for logprobs={_LOGPROBS}; is base_url a vLLM server?",
                output=str(choice)[:500],
            )
        tokens = logprobs.get("tokens")
        score = _sid_logprob(tokens if isinstance(tokens, list) else None, values, sid)
        scored.append((score, sid))
    return _rank(scored, k, stats)


def parse_generate_output(
    output: Any, spec: SIDSpec = DEFAULT_SPEC, k: int = 1, *, stats: DecodeStats | None = None
) -> list[SIDCandidate]:
    """Ranked distinct SIDs from one ``vllm.RequestOutput`` of ``LLM.generate``."""
    stats = stats if stats is not None else DecodeStats()
    scored: list[tuple[float, str]] = []
    for completion in output.outputs:
        stats.returned += 1
        sid = _canonical(completion.text, spec)
        if sid is None:
            stats.invalid += 1
            continue
        steps = completion.logprobs
        if steps:
            ids = list(completion.token_ids)
            picked = [step[token] for step, token in zip(steps, ids, strict=False)]
            tokens = [getattr(p, "decoded_token", None) for p in picked]
            values = [p.logprob for p in picked]
            has_text = all(isinstance(t, str) for t in tokens)
            score = _sid_logprob(tokens if has_text else None, values, sid)
        elif completion.cumulative_logprob is not None:
            score = float(completion.cumulative_logprob)
        else:
            raise InvalidModelOutput(
                f"vLLM returned no log-probabilities for {completion.text!r} although "
                f"SamplingParams asked for logprobs={_LOGPROBS}",
                output=completion.text,
            )
        scored.append((score, sid))
    return _rank(scored, k, stats)


def parse_beam_search_output(
    output: Any,
    spec: SIDSpec = DEFAULT_SPEC,
    k: int = 1,
    *,
    decode: Callable[[list[int]], str],
    eos_token_id: int | None,
    stats: DecodeStats | None = None,
) -> list[SIDCandidate]:
    """Ranked distinct SIDs from one ``BeamSearchOutput`` of ``LLM.beam_search``.

    A beam's ``tokens`` include the prompt and its ``logprobs`` hold one entry per generated
    token, so the generated ids are the last ``len(logprobs)`` tokens. A final end-of-sequence
    token is removed, with its log-probability.
    """
    stats = stats if stats is not None else DecodeStats()
    scored: list[tuple[float, str]] = []
    for beam in output.sequences:
        stats.returned += 1
        steps = list(beam.logprobs or [])
        ids = list(beam.tokens[len(beam.tokens) - len(steps) :]) if steps else []
        score = float(beam.cum_logprob)
        if ids and eos_token_id is not None and ids[-1] == eos_token_id:
            ids.pop()
            eos = steps[-1].get(eos_token_id)
            if eos is not None:
                score -= float(eos.logprob)
        sid = _canonical(decode(ids), spec) if ids else None
        if sid is None:
            stats.invalid += 1
            continue
        scored.append((score, sid))
    return _rank(scored, k, stats)


# --------------------------------------------------------------------------------------------
# SID generators
# --------------------------------------------------------------------------------------------


def _identity(context: str) -> str:
    return context


def _check_contexts(contexts: Sequence[str]) -> list[str]:
    if isinstance(contexts, str):
        raise TypeError("generate_batch takes a sequence of contexts; use generate for one")
    out = list(contexts)
    for i, c in enumerate(out):
        if not isinstance(c, str):
            raise TypeError(f"context {i} is {type(c).__name__}, expected str")
    return out


class VLLMServerSIDGenerator:
    """SIDs from a vLLM server's ``/v1/completions``: constrained greedy (k=1), beams (k>1).

    Each context is one HTTP request; a batch sends up to ``max_concurrency`` at once and the
    server batches them on the GPU. ``stats`` counts returned, invalid and duplicate sequences.
    """

    def __init__(
        self,
        config: VLLMServerConfig,
        *,
        spec: SIDSpec = DEFAULT_SPEC,
        prompt_builder: PromptBuilder | None = None,
        margin: int = 0,
        client: httpx.Client | None = None,
        max_concurrency: int = 8,
    ) -> None:
        _max_tokens(spec, margin)
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int):
            raise ValueError(f"max_concurrency={max_concurrency!r} must be an int >= 1")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency={max_concurrency!r} must be an int >= 1")
        self.config = config
        self._spec = spec
        self._prompt_builder = prompt_builder or _identity
        self._margin = margin
        self._own_client = client is None
        self._client = client if client is not None else httpx.Client()
        self._max_concurrency = max_concurrency
        self._stats = DecodeStats()
        self._lock = threading.Lock()

    @classmethod
    def from_spec(cls, spec_string: str, **kwargs: Any) -> VLLMServerSIDGenerator:
        """A generator for a ``vllm:<base_url>#<model>`` spec string."""
        return cls(parse_vllm_spec(spec_string), **kwargs)

    @property
    def spec(self) -> SIDSpec:
        """The address space the candidates belong to."""
        return self._spec

    @property
    def stats(self) -> DecodeStats:
        """A copy of the running decode counts."""
        with self._lock:
            return replace(self._stats)

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """Up to ``k`` distinct candidates for one context, best first."""
        return self.generate_batch([context], k)[0]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts (one list per context, in order)."""
        contexts = _check_contexts(contexts)
        _check_k(k, self._spec)
        prompts = [self._prompt_builder(c) for c in contexts]
        workers = min(self._max_concurrency, len(prompts))
        if workers <= 1:
            return [self._decode(p, k) for p in prompts]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda p: self._decode(p, k), prompts))

    def _decode(self, prompt: str, k: int) -> list[SIDCandidate]:
        body = build_completion_request(
            prompt, model=self.config.model, spec=self._spec, k=k, margin=self._margin
        )
        payload = self._post(body)
        stats = DecodeStats(requests=1)
        out = parse_completion_response(payload, self._spec, k, stats=stats)
        with self._lock:
            self._stats.merge(stats)
        return out

    def _post(self, body: dict[str, Any]) -> Any:
        url = f"{self.config.base_url}/completions"
        headers = {"Authorization": f"Bearer {self.config.api_key}"}
        try:
            response = self._client.post(
                url, json=body, headers=headers, timeout=self.config.timeout
            )
        except httpx.TransportError as exc:
            raise ModelUnavailable(
                f"cannot reach the vLLM server at {url} ({type(exc).__name__}: {exc}); start it "
                "with the command vllm_serve_args() builds, or fix base_url"
            ) from exc
        if response.status_code != 200:
            raise ModelUnavailable(
                f"the vLLM server at {url} answered HTTP {response.status_code}: "
                f"{response.text[:500]}"
            )
        try:
            return response.json()
        except ValueError as exc:
            raise InvalidModelOutput(
                f"the vLLM server at {url} answered with something that is not JSON",
                output=response.text[:500],
            ) from exc

    def close(self) -> None:
        """Close the HTTP client if this generator made it."""
        if self._own_client:
            self._client.close()

    def __enter__(self) -> VLLMServerSIDGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _import_sampling_params() -> tuple[Any, Any, Any]:
    """``(SamplingParams, BeamSearchParams, StructuredOutputsParams)`` from vLLM, imported now."""
    try:
        from vllm.sampling_params import (
            BeamSearchParams,
            SamplingParams,
            StructuredOutputsParams,
        )
    except ImportError as exc:
        raise ModelUnavailable(f"in-process vLLM decoding needs vLLM: {_ENGINE_HINT}") from exc
    return SamplingParams, BeamSearchParams, StructuredOutputsParams


class VLLMOfflineSIDGenerator:
    """SIDs from a ``vllm.LLM`` in this process: ``generate`` for k=1, ``beam_search`` for k>1.

    Both are constrained by the spec's regex (``structured_outputs``); beams that still do not
    spell one SID are dropped and counted in ``stats``.
    """

    def __init__(
        self,
        llm: Any,
        *,
        spec: SIDSpec = DEFAULT_SPEC,
        prompt_builder: PromptBuilder | None = None,
        margin: int = 0,
    ) -> None:
        _max_tokens(spec, margin)
        self.llm = llm
        self._spec = spec
        self._prompt_builder = prompt_builder or _identity
        self._margin = margin
        self._stats = DecodeStats()
        self._lock = threading.Lock()

    @classmethod
    def from_policy_dir(
        cls,
        path: str | Path,
        *,
        spec: SIDSpec = DEFAULT_SPEC,
        prompt_builder: PromptBuilder | None = None,
        margin: int = 0,
        **llm_kwargs: Any,
    ) -> VLLMOfflineSIDGenerator:
        """Load a policy directory into ``vllm.LLM`` (``llm_kwargs`` go to it) and wrap it."""
        _import_sampling_params()
        from vllm import LLM

        llm_kwargs.setdefault("generation_config", "vllm")
        return cls(
            LLM(model=str(path), **llm_kwargs),
            spec=spec,
            prompt_builder=prompt_builder,
            margin=margin,
        )

    @property
    def spec(self) -> SIDSpec:
        """The address space the candidates belong to."""
        return self._spec

    @property
    def stats(self) -> DecodeStats:
        """A copy of the running decode counts."""
        with self._lock:
            return replace(self._stats)

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        """Up to ``k`` distinct candidates for one context, best first."""
        return self.generate_batch([context], k)[0]

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts (one list per context, in order)."""
        contexts = _check_contexts(contexts)
        _check_k(k, self._spec)
        if not contexts:
            return []
        sampling_cls, beam_cls, structured_cls = _import_sampling_params()
        prompts = [{"prompt": self._prompt_builder(c)} for c in contexts]
        stats = DecodeStats(requests=len(prompts))
        if k == 1:
            kwargs = build_sampling_kwargs(self._spec, margin=self._margin)
            kwargs["structured_outputs"] = structured_cls(**kwargs["structured_outputs"])
            outputs = self.llm.generate(prompts, sampling_cls(**kwargs), use_tqdm=False)
            results = [parse_generate_output(o, self._spec, k, stats=stats) for o in outputs]
        else:
            kwargs = build_beam_search_kwargs(self._spec, k=k, margin=self._margin)
            kwargs["structured_outputs"] = structured_cls(**kwargs["structured_outputs"])
            outputs = self.llm.beam_search(prompts, beam_cls(**kwargs))
            tokenizer = self.llm.get_tokenizer()
            results = [
                parse_beam_search_output(
                    o,
                    self._spec,
                    k,
                    decode=tokenizer.decode,
                    eos_token_id=tokenizer.eos_token_id,
                    stats=stats,
                )
                for o in outputs
            ]
        if len(results) != len(prompts):
            raise InvalidModelOutput(
                f"vLLM returned {len(results)} outputs for {len(prompts)} prompts"
            )
        with self._lock:
            self._stats.merge(stats)
        return results


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
