"""SID decoding through vLLM: a server's ``/v1/completions``, or ``vllm.LLM`` in this process.

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

The server is the one :mod:`genmem.policies.vllm` describes: a
:class:`~genmem.policies.vllm.VLLMServerConfig` says where it is, and
:func:`~genmem.policies.vllm.vllm_serve_args` builds its command line (``--max-logprobs`` bounds
``k``).

The vLLM API followed is vLLM 0.31.0's released source (read, not run on a GPU):
``CompletionRequest`` in ``vllm/entrypoints/openai/completion/protocol.py`` (``structured_outputs``,
``use_beam_search``, ``n``, ``length_penalty``, ``logprobs``, ``add_special_tokens``; the
``guided_*`` fields were removed in v0.12.0), ``StructuredOutputsParams``, ``SamplingParams`` and
``BeamSearchParams`` in ``vllm/sampling_params.py``, ``LLM`` in ``vllm/entrypoints/llm.py``, and
``LLM.beam_search`` in ``vllm/entrypoints/generate/beam_search/offline.py``.

The prompt is already chat-templated, so it holds the BOS token wherever the template puts one:
vLLM must not add another. The server request says ``add_special_tokens: false`` (vLLM's default
is true); in this process the prompt is tokenised here without special tokens and handed to vLLM
as token ids (``LLM.beam_search`` has no tokenisation argument and would add them).

``LLM.beam_search`` asks the engine for ``2 * k`` log-probabilities at each step, which vLLM caps
at ``max_logprobs`` (default 20), and compiles the regex with the engine's structured-output
backend, which it cannot resolve from ``"auto"`` (the default). :func:`build_llm_kwargs` sets
both.

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

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from genmem.errors import InvalidModelOutput, InvalidModelSpec, ModelUnavailable
from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies.types import SIDCandidate
from genmem.policies.vllm import VLLMServerConfig, parse_vllm_spec

__all__ = [
    "DEFAULT_MAX_BEAM_WIDTH",
    "DecodeStats",
    "PromptBuilder",
    "VLLMOfflineSIDGenerator",
    "VLLMServerSIDGenerator",
    "build_beam_search_kwargs",
    "build_completion_request",
    "build_llm_kwargs",
    "build_sampling_kwargs",
    "parse_beam_search_output",
    "parse_completion_response",
    "parse_generate_output",
]

PromptBuilder = Callable[[str], str]
"""Turns a context into the exact prompt text the model completes (e.g. its chat template)."""

_ENGINE_HINT = 'pip install "genmem[gpu]" (vllm==0.31.0, on a machine with a CUDA GPU)'
_LOGPROBS = 1  # the sampled token's log-probability is always returned with it

DEFAULT_MAX_BEAM_WIDTH = 50
"""Widest beam an in-process engine is built for unless the caller says otherwise."""

# The backends LLM.beam_search can build a grammar with (vLLM 0.31.0,
# vllm/entrypoints/generate/beam_search/offline.py, _init_beam_search_structured_output); it
# raises "Unsupported structured output backend: auto" for the engine's default.
_BEAM_BACKENDS = ("xgrammar", "guidance", "outlines", "lm-format-enforcer")
_BEAM_BACKEND = "xgrammar"


# --------------------------------------------------------------------------------------------
# Pure request building and response parsing
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
        # The prompt is chat-templated text that already holds any BOS; vLLM's default (true)
        # would add a second one.
        "add_special_tokens": False,
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


def _check_max_beam_width(max_beam_width: Any) -> int:
    if (
        isinstance(max_beam_width, bool)
        or not isinstance(max_beam_width, int)
        or max_beam_width < 1
    ):
        raise ValueError(
            f"max_beam_width={max_beam_width!r} must be an int >= 1 (the largest k the engine "
            "will be asked for)"
        )
    return max_beam_width


def _structured_outputs_config(value: Any) -> Any:
    """The caller's structured-output engine config, with a backend beam search can use."""
    if value is None:
        return {"backend": _BEAM_BACKEND}
    if isinstance(value, Mapping):
        backend = value.get("backend", _BEAM_BACKEND)
        value = {**value, "backend": backend}
    else:  # a vllm.config.StructuredOutputsConfig
        backend = getattr(value, "backend", None)
    if backend not in _BEAM_BACKENDS:
        raise InvalidModelSpec(
            f"structured_outputs_config backend={backend!r} cannot constrain vLLM's offline beam "
            f"search, which needs one of {_BEAM_BACKENDS} named explicitly (it raises "
            f"'Unsupported structured output backend' for 'auto'); pass "
            f"structured_outputs_config={{'backend': {_BEAM_BACKEND!r}}} or leave it out",
            spec=backend,
        )
    return value


def _max_logprobs(value: Any, max_beam_width: int) -> int:
    """The caller's ``max_logprobs`` if beam search of ``max_beam_width`` fits under it."""
    needed = 2 * max_beam_width
    if value is not None and not isinstance(value, bool) and isinstance(value, int):
        if value == -1 or value >= needed:  # -1: vLLM's "no cap"
            return value
    raise InvalidModelSpec(
        f"max_logprobs={value!r} cannot serve beam search: vLLM asks for 2 x k "
        f"log-probabilities at each step, {needed} for max_beam_width={max_beam_width}; pass an "
        f"int max_logprobs >= {needed} (or -1 for no cap), leave it out, or lower max_beam_width",
        spec=value,
    )


def build_llm_kwargs(
    llm_kwargs: Mapping[str, Any] | None = None,
    *,
    max_beam_width: int = DEFAULT_MAX_BEAM_WIDTH,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for SID decoding: ``llm_kwargs`` plus what beams need.

    Added where the caller left them out: ``generation_config="vllm"`` (only GenMem's sampling
    settings apply), ``structured_outputs_config={"backend": "xgrammar"}`` (offline beam search
    cannot resolve ``"auto"``), and ``max_logprobs=2 * max_beam_width`` (beam search asks for
    that many log-probabilities per step). A caller's value wins unless it would break beam
    search: backend ``"auto"`` or a ``max_logprobs`` under ``2 * max_beam_width`` (other than
    -1, no cap) raise :class:`~genmem.errors.InvalidModelSpec`.

    Example:
        >>> kwargs = build_llm_kwargs({"gpu_memory_utilization": 0.5}, max_beam_width=8)
        >>> kwargs["max_logprobs"], kwargs["structured_outputs_config"]
        (16, {'backend': 'xgrammar'})
    """
    max_beam_width = _check_max_beam_width(max_beam_width)
    kwargs = dict(llm_kwargs or {})
    kwargs.setdefault("generation_config", "vllm")
    kwargs["structured_outputs_config"] = _structured_outputs_config(
        kwargs.get("structured_outputs_config")
    )
    kwargs["max_logprobs"] = _max_logprobs(
        kwargs.get("max_logprobs", 2 * max_beam_width), max_beam_width
    )
    return kwargs


def _token_prompt(prompt: str, tokenizer: Any) -> dict[str, Any]:
    """A ``vllm.TokensPrompt`` for chat-templated text: no special tokens added to it."""
    return {"prompt_token_ids": list(tokenizer.encode(prompt, add_special_tokens=False))}


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


class _CountingGenerator:
    """What both vLLM generators share: their spec, decode counts, and single-context calls."""

    addresser = "generative"
    """What outputs say chose the SID."""

    _spec: SIDSpec
    _stats: DecodeStats
    _lock: threading.Lock

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
        raise NotImplementedError


class VLLMServerSIDGenerator(_CountingGenerator):
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


class VLLMOfflineSIDGenerator(_CountingGenerator):
    """SIDs from a ``vllm.LLM`` in this process: ``generate`` for k=1, ``beam_search`` for k>1.

    Both are constrained by the spec's regex (``structured_outputs``); beams that still do not
    spell one SID are dropped and counted in ``stats``. Prompts go to vLLM as token ids, encoded
    without special tokens. An ``llm`` built by hand needs what :func:`build_llm_kwargs` sets;
    :meth:`from_policy_dir` builds one with it.
    """

    def __init__(
        self,
        llm: Any,
        *,
        spec: SIDSpec = DEFAULT_SPEC,
        prompt_builder: PromptBuilder | None = None,
        margin: int = 0,
        max_beam_width: int | None = None,
    ) -> None:
        _max_tokens(spec, margin)
        if max_beam_width is not None:
            _check_max_beam_width(max_beam_width)
        self.llm = llm
        self.max_beam_width = max_beam_width
        """Largest ``k`` the engine was built for (None: not known here, vLLM checks it)."""
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
        max_beam_width: int = DEFAULT_MAX_BEAM_WIDTH,
        **llm_kwargs: Any,
    ) -> VLLMOfflineSIDGenerator:
        """Load a policy directory into ``vllm.LLM`` and wrap it.

        ``llm_kwargs`` go to ``vllm.LLM`` through :func:`build_llm_kwargs`, which sizes the
        engine for beams up to ``max_beam_width`` wide.
        """
        kwargs = build_llm_kwargs(llm_kwargs, max_beam_width=max_beam_width)
        _import_sampling_params()
        from vllm import LLM

        return cls(
            LLM(model=str(path), **kwargs),
            spec=spec,
            prompt_builder=prompt_builder,
            margin=margin,
            max_beam_width=max_beam_width,
        )

    def generate_batch(self, contexts: Sequence[str], k: int = 1) -> list[list[SIDCandidate]]:
        """:meth:`generate` for several contexts (one list per context, in order)."""
        contexts = _check_contexts(contexts)
        _check_k(k, self._spec)
        if self.max_beam_width is not None and k > self.max_beam_width:
            raise ValueError(
                f"k={k} is wider than max_beam_width={self.max_beam_width}, the beam this "
                "generator's vLLM engine was sized for (vLLM asks for 2 x k log-probabilities a "
                f"step); build it with from_policy_dir(..., max_beam_width={k})"
            )
        if not contexts:
            return []
        sampling_cls, beam_cls, structured_cls = _import_sampling_params()
        tokenizer = self.llm.get_tokenizer()
        prompts = [_token_prompt(self._prompt_builder(c), tokenizer) for c in contexts]
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
