"""SID decoding through vLLM without vLLM or a GPU: request building, response parsing from
canned vLLM-shaped payloads, and both SID generators against fakes."""

from __future__ import annotations

import ast
import dataclasses
import doctest
import inspect
import json
import re
import sys
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from genmem.errors import GenMemError, InvalidModelOutput, InvalidModelSpec, ModelUnavailable
from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies import vllm_sid
from genmem.policies.types import SIDCandidate, SIDGenerator
from genmem.policies.vllm_sid import (
    DEFAULT_MAX_BEAM_WIDTH,
    DecodeStats,
    VLLMOfflineSIDGenerator,
    VLLMServerSIDGenerator,
    build_beam_search_kwargs,
    build_completion_request,
    build_llm_kwargs,
    build_sampling_kwargs,
    parse_beam_search_output,
    parse_completion_response,
    parse_generate_output,
)
from tests.policies._vllm_fakes import SPEC, A

B = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_2>"
C = "<SID_L1_47><SID_L2_15><SID_L3_0><SID_L4_0>"
EOS = "<|im_end|>"


def _tokens(sid: str) -> list[str]:
    return re.findall(r"<SID_L\d+_\d+>", sid)


# ---------------------------------------------------------------------------------------------
# request building
# ---------------------------------------------------------------------------------------------


def test_request_k1_is_constrained_greedy() -> None:
    body = build_completion_request("Q: where?\nSID:", model="m", k=1)
    assert body["model"] == "m"
    assert body["prompt"] == "Q: where?\nSID:"
    assert body["max_tokens"] == 4
    assert body["n"] == 1
    assert body["temperature"] == 0.0
    assert body["logprobs"] >= 0
    assert body["structured_outputs"] == {"regex": DEFAULT_SPEC.regex()}
    assert "use_beam_search" not in body
    regex = body["structured_outputs"]["regex"]
    assert re.fullmatch(regex, A)
    assert not re.fullmatch(regex, "<SID_L1_48><SID_L2_0><SID_L3_0><SID_L4_0>")
    assert not re.fullmatch(regex, A + "<SID_L1_0>")
    json.dumps(body)  # sendable as is


def test_request_k5_uses_beam_search() -> None:
    body = build_completion_request("p", model="m", k=5, margin=2)
    assert body["use_beam_search"] is True
    assert body["n"] == 5
    assert body["length_penalty"] == 0.0
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 6
    assert body["structured_outputs"]["regex"] == DEFAULT_SPEC.regex()
    assert body["logprobs"] >= 0


def test_request_follows_the_spec() -> None:
    spec = SIDSpec((4, 4))
    body = build_completion_request("p", model="m", spec=spec)
    assert body["max_tokens"] == 2
    assert body["structured_outputs"]["regex"] == spec.regex()


@pytest.mark.parametrize("k", [0, -1, True, 2.0, DEFAULT_SPEC.capacity + 1])
def test_request_rejects_bad_k(k: Any) -> None:
    with pytest.raises(ValueError, match="k="):
        build_completion_request("p", model="m", k=k)


@pytest.mark.parametrize("margin", [-1, 1.5, True])
def test_request_rejects_bad_margin(margin: Any) -> None:
    with pytest.raises(ValueError, match="margin"):
        build_completion_request("p", model="m", margin=margin)


def test_offline_kwargs() -> None:
    greedy = build_sampling_kwargs(DEFAULT_SPEC, margin=1)
    assert greedy["temperature"] == 0.0
    assert greedy["max_tokens"] == 5
    assert greedy["structured_outputs"] == {"regex": DEFAULT_SPEC.regex()}
    beams = build_beam_search_kwargs(DEFAULT_SPEC, k=5)
    assert beams == {
        "beam_width": 5,
        "max_tokens": 4,
        "temperature": 0.0,
        "length_penalty": 0.0,
        "structured_outputs": {"regex": DEFAULT_SPEC.regex()},
    }
    with pytest.raises(ValueError):
        build_beam_search_kwargs(DEFAULT_SPEC, k=0)


@pytest.mark.parametrize("k", [1, 3])
def test_request_does_not_add_a_second_bos(k: int) -> None:
    # The prompt is chat-templated text holding any BOS already; vLLM 0.31's CompletionRequest
    # defaults add_special_tokens to True and would prepend another.
    body = build_completion_request("<s>[INST] q [/INST]", model="m", k=k)
    assert body["add_special_tokens"] is False


# ---------------------------------------------------------------------------------------------
# vLLM engine arguments
# ---------------------------------------------------------------------------------------------


def test_llm_kwargs_default_to_what_beam_search_needs() -> None:
    kwargs = build_llm_kwargs()
    assert kwargs == {
        "generation_config": "vllm",
        "structured_outputs_config": {"backend": "xgrammar"},
        "max_logprobs": 2 * DEFAULT_MAX_BEAM_WIDTH,
    }
    assert DEFAULT_MAX_BEAM_WIDTH == 50
    assert build_llm_kwargs(max_beam_width=8)["max_logprobs"] == 16
    assert doctest.testmod(vllm_sid).failed == 0


def test_llm_kwargs_keep_valid_caller_values() -> None:
    given = {
        "gpu_memory_utilization": 0.5,
        "generation_config": "auto",
        "structured_outputs_config": {"backend": "guidance", "disable_any_whitespace": True},
        "max_logprobs": 256,
    }
    kwargs = build_llm_kwargs(given, max_beam_width=50)
    assert kwargs == given
    assert given["max_logprobs"] == 256  # the caller's mapping is not changed
    assert build_llm_kwargs({"max_logprobs": -1})["max_logprobs"] == -1  # vLLM: no cap
    # A config without a backend gets one; the caller's other keys stay.
    partial = build_llm_kwargs({"structured_outputs_config": {"reasoning_parser": "qwen3"}})
    assert partial["structured_outputs_config"] == {
        "reasoning_parser": "qwen3",
        "backend": "xgrammar",
    }
    config = SimpleNamespace(backend="xgrammar")  # a vllm.config.StructuredOutputsConfig
    assert (
        build_llm_kwargs({"structured_outputs_config": config})["structured_outputs_config"]
        is config
    )


@pytest.mark.parametrize(
    "config",
    [{"backend": "auto"}, SimpleNamespace(backend="auto"), {"backend": "fast"}],
    ids=["dict", "config-object", "unknown"],
)
def test_llm_kwargs_reject_a_backend_beam_search_cannot_use(config: Any) -> None:
    with pytest.raises(InvalidModelSpec, match=r"backend=.*'backend': 'xgrammar'") as info:
        build_llm_kwargs({"structured_outputs_config": config})
    assert isinstance(info.value, GenMemError) and isinstance(info.value, ValueError)
    assert info.value.spec in ("auto", "fast")


@pytest.mark.parametrize("value", [20, 99, 0, -2, None, True, "100"])
def test_llm_kwargs_reject_max_logprobs_below_twice_the_beam(value: Any) -> None:
    with pytest.raises(InvalidModelSpec, match=r"max_logprobs=.*max_logprobs >= 100") as info:
        build_llm_kwargs({"max_logprobs": value}, max_beam_width=50)
    assert isinstance(info.value, ValueError)
    assert info.value.spec == value


@pytest.mark.parametrize("width", [0, -1, True, 2.5])
def test_llm_kwargs_reject_a_bad_max_beam_width(width: Any) -> None:
    with pytest.raises(ValueError, match="max_beam_width"):
        build_llm_kwargs(max_beam_width=width)


# ---------------------------------------------------------------------------------------------
# builders against vLLM 0.31.0's own classes: recorded shapes here, the real classes below
# ---------------------------------------------------------------------------------------------

# Field names and annotations of CompletionRequest, SamplingParams, BeamSearchParams,
# StructuredOutputsParams, StructuredOutputsConfig, LLM.__init__ and EngineArgs as released in
# vLLM 0.31.0; each entry names its source file (e.g. vllm/entrypoints/openai/completion/
# protocol.py, vllm/sampling_params.py, vllm/entrypoints/llm.py, vllm/engine/arg_utils.py).
RECORDED = json.loads((Path(__file__).parent / "vllm_0_31_0_fields.json").read_text())
FIELDS: dict[str, dict[str, str]] = {
    name: entry["fields"] for name, entry in RECORDED["classes"].items()
}
# What vllm.LLM(**kwargs) takes: its named parameters, then EngineArgs through **kwargs.
FIELDS["LLM(**kwargs)"] = {**FIELDS["EngineArgs"], **FIELDS["LLM"]}


def _split(annotation: str, sep: str) -> list[str]:
    """Split at ``sep`` outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(annotation):
        depth += (ch in "[(") - (ch in "])")
        if ch == sep and depth == 0:
            parts.append(annotation[start:i].strip())
            start = i + 1
    return [*parts, annotation[start:].strip()]


def _accepts(annotation: str, value: Any) -> bool:
    """Whether ``value`` fits a recorded annotation (a union of the forms vLLM uses)."""
    for part in _split(annotation, "|"):
        part = RECORDED["aliases"].get(part, part)
        if part.startswith("Annotated["):
            ok = _accepts(_split(part[len("Annotated[") : -1], ",")[0], value)
        elif part.startswith("Literal["):
            ok = value in ast.literal_eval(part[len("Literal") :])
        elif part in FIELDS:
            ok = isinstance(value, Mapping) and not _shape_errors(value, part)
        elif part.startswith(("dict[", "list[")):
            ok = isinstance(value, dict if part.startswith("dict") else list)
        else:
            ok = {
                "None": value is None,
                "bool": isinstance(value, bool),
                "int": isinstance(value, int) and not isinstance(value, bool),
                "float": isinstance(value, int | float) and not isinstance(value, bool),
                "str": isinstance(value, str),
            }.get(part, False)
        if ok:
            return True
    return False


def _shape_errors(kwargs: Mapping[str, Any], cls: str) -> list[str]:
    """What in ``kwargs`` the recorded ``cls`` does not accept (empty when all of it fits)."""
    fields = FIELDS[cls]
    errors = [f"{cls} has no field {key!r}" for key in kwargs if key not in fields]
    return errors + [
        f"{cls}.{key}: {fields[key]} does not take {value!r}"
        for key, value in kwargs.items()
        if key in fields and not _accepts(fields[key], value)
    ]


def test_recorded_shapes_catch_what_vllm_would_not_take() -> None:
    assert RECORDED["vllm"] == "0.31.0"
    assert _shape_errors({"n": 2, "structured_outputs": {"regex": "a"}}, "CompletionRequest") == []
    assert _shape_errors({"guided_regex": "a"}, "CompletionRequest")  # removed in vLLM 0.12
    assert _shape_errors({"n": True}, "CompletionRequest")
    assert _shape_errors({"structured_outputs": {"regexp": "a"}}, "CompletionRequest")
    assert _shape_errors({"backend": "fast"}, "StructuredOutputsConfig")
    assert _shape_errors({"max_logprob": 100}, "LLM(**kwargs)")


def _builder_outputs() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("CompletionRequest", build_completion_request("p", model="m", k=1, margin=1)),
        ("CompletionRequest", build_completion_request("p", model="m", k=5)),
        ("SamplingParams", build_sampling_kwargs(DEFAULT_SPEC, margin=1)),
        ("BeamSearchParams", build_beam_search_kwargs(DEFAULT_SPEC, k=5)),
    ]


@pytest.mark.parametrize(("cls", "kwargs"), _builder_outputs())
def test_builders_emit_only_recorded_vllm_fields(cls: str, kwargs: dict[str, Any]) -> None:
    assert _shape_errors(kwargs, cls) == []
    assert _shape_errors(kwargs["structured_outputs"], "StructuredOutputsParams") == []


def test_llm_kwargs_are_recorded_vllm_arguments() -> None:
    kwargs = build_llm_kwargs({"gpu_memory_utilization": 0.5})
    assert _shape_errors({"model": "/policy", **kwargs}, "LLM(**kwargs)") == []
    config = kwargs["structured_outputs_config"]
    assert _shape_errors(config, "StructuredOutputsConfig") == []
    assert config["backend"] != "auto"


def test_builders_fit_the_installed_vllm_classes() -> None:
    vllm = pytest.importorskip("vllm")
    from vllm.config import StructuredOutputsConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.sampling_params import BeamSearchParams, SamplingParams, StructuredOutputsParams

    real = {
        "CompletionRequest": set(CompletionRequest.model_fields),
        "SamplingParams": set(SamplingParams.__struct_fields__),
        "BeamSearchParams": set(BeamSearchParams.__struct_fields__),
        "StructuredOutputsParams": {f.name for f in dataclasses.fields(StructuredOutputsParams)},
        "LLM(**kwargs)": set(inspect.signature(vllm.LLM.__init__).parameters)
        | {f.name for f in dataclasses.fields(EngineArgs)},
    }
    if vllm.__version__ == RECORDED["vllm"]:  # the recording is that release's
        for cls, names in real.items():
            assert set(FIELDS[cls]) <= names, cls
    for text in ("p", "<s>[INST] q [/INST]"):
        for k in (1, 5):
            body = build_completion_request(text, model="m", k=k)
            assert set(body) <= real["CompletionRequest"]  # extra keys would only be logged
            request = CompletionRequest(**body)
            assert request.add_special_tokens is False
            assert request.structured_outputs.regex == DEFAULT_SPEC.regex()
            assert request.use_beam_search is (k > 1)
    for cls, params in (
        (SamplingParams, build_sampling_kwargs(DEFAULT_SPEC)),
        (BeamSearchParams, build_beam_search_kwargs(DEFAULT_SPEC, k=5)),
    ):
        built = cls(
            **{
                **params,
                "structured_outputs": StructuredOutputsParams(**params["structured_outputs"]),
            }
        )
        assert built.structured_outputs.regex == DEFAULT_SPEC.regex()
    kwargs = build_llm_kwargs()
    assert set(kwargs) <= real["LLM(**kwargs)"]
    assert StructuredOutputsConfig(**kwargs["structured_outputs_config"]).backend == "xgrammar"
    defaults = {f.name: f.default for f in dataclasses.fields(EngineArgs)}
    assert defaults["max_logprobs"] < kwargs["max_logprobs"] == 100  # vLLM's 20 fits k <= 10


# ---------------------------------------------------------------------------------------------
# response parsing (payloads shaped like vLLM's CompletionResponse)
# ---------------------------------------------------------------------------------------------


def _choice(index: int, tokens: list[str], logprobs: list[float], eos: bool = False) -> dict:
    text = "".join(tokens)
    if eos:  # the stop token is scored but not part of the text
        tokens, logprobs = [*tokens, EOS], [*logprobs, -3.0]
    offsets, pos = [], 0
    for t in tokens:
        offsets.append(pos)
        pos += len(t) if t != EOS else 0
    return {
        "index": index,
        "text": text,
        "logprobs": {
            "text_offset": offsets,
            "token_logprobs": logprobs,
            "tokens": tokens,
            "top_logprobs": [{t: lp} for t, lp in zip(tokens, logprobs, strict=True)],
        },
        "finish_reason": "stop" if eos else "length",
        "stop_reason": None,
    }


def _payload(*choices: dict) -> dict:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": "m",
        "choices": list(choices),
        "usage": {"prompt_tokens": 9, "completion_tokens": 4 * len(choices), "total_tokens": 0},
    }


def test_parse_sorts_by_summed_logprob_dedupes_and_drops_invalid() -> None:
    payload = _payload(
        _choice(0, _tokens(B), [-0.1, -0.2, -0.3, -0.9]),  # -1.5
        _choice(1, _tokens(A), [-0.1, -0.2, -0.3, -0.1]),  # -0.7 (best)
        _choice(2, ["<SID_L1_3>", "<SID_L2_0>", "hello", "<SID_L4_1>"], [-0.01] * 4),
        _choice(3, _tokens(A), [-0.5, -0.5, -0.5, -0.5]),  # A again, worse
        _choice(4, _tokens(C), [-1.0, -1.0, -1.0, -1.0]),  # -4.0
    )
    stats = DecodeStats()
    out = parse_completion_response(payload, DEFAULT_SPEC, k=5, stats=stats)
    assert [c.sid for c in out] == [A, B, C]
    assert [c.score for c in out] == pytest.approx([-0.7, -1.5, -4.0])
    assert all(isinstance(c, SIDCandidate) for c in out)
    assert (stats.returned, stats.invalid, stats.duplicates) == (5, 1, 1)
    assert stats.format_validity == pytest.approx(0.8)


def test_parse_cuts_to_k() -> None:
    payload = _payload(
        _choice(0, _tokens(A), [-1.0] * 4),
        _choice(1, _tokens(B), [-2.0] * 4),
        _choice(2, _tokens(C), [-0.5] * 4),
    )
    assert [c.sid for c in parse_completion_response(payload, DEFAULT_SPEC, k=2)] == [C, A]


def test_parse_leaves_the_stop_token_out_of_the_score() -> None:
    payload = _payload(_choice(0, _tokens(A), [-0.25] * 4, eos=True))
    [only] = parse_completion_response(payload, DEFAULT_SPEC, k=1)
    assert only.sid == A
    assert only.score == pytest.approx(-1.0)


def test_parse_accepts_spaces_between_tokens() -> None:
    choice = _choice(0, _tokens(A), [-0.1] * 4)
    choice["text"] = " " + " ".join(_tokens(A)) + "\n"
    [only] = parse_completion_response(_payload(choice), DEFAULT_SPEC)
    assert only.sid == A


def test_parse_drops_a_prefix_and_trailing_text() -> None:
    stats = DecodeStats()
    short = _choice(0, _tokens(A)[:3], [-0.1] * 3)
    long = _choice(1, [*_tokens(A), "<SID_L1_0>"], [-0.1] * 5)
    prose = _choice(2, ["The", " answer"], [-0.1, -0.1])
    out = parse_completion_response(_payload(short, long, prose), DEFAULT_SPEC, 3, stats=stats)
    assert out == []
    assert (stats.returned, stats.invalid) == (3, 3)
    assert stats.format_validity == 0.0


def test_parse_checks_against_the_given_spec() -> None:
    small = SIDSpec((4, 4))
    payload = _payload(
        _choice(0, ["<SID_L1_3>", "<SID_L2_1>"], [-0.1, -0.1]),
        _choice(1, _tokens(A), [-0.1] * 4),  # valid for the default spec, not this one
    )
    stats = DecodeStats()
    out = parse_completion_response(payload, small, k=2, stats=stats)
    assert [c.sid for c in out] == ["<SID_L1_3><SID_L2_1>"]
    assert stats.invalid == 1


@pytest.mark.parametrize("payload", [{}, {"choices": None}, [], "oops"])
def test_parse_rejects_a_payload_without_choices(payload: Any) -> None:
    with pytest.raises(InvalidModelOutput):
        parse_completion_response(payload, DEFAULT_SPEC)


def test_parse_requires_logprobs_on_valid_choices() -> None:
    choice = _choice(0, _tokens(A), [-0.1] * 4)
    choice["logprobs"] = None
    with pytest.raises(InvalidModelOutput, match="logprobs"):
        parse_completion_response(_payload(choice), DEFAULT_SPEC)


# ---------------------------------------------------------------------------------------------
# server generator over a mock HTTP transport
# ---------------------------------------------------------------------------------------------

Handler = Callable[[httpx.Request], httpx.Response]


def _server(handler: Handler, **kwargs: Any) -> VLLMServerSIDGenerator:
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return VLLMServerSIDGenerator.from_spec(SPEC, client=client, **kwargs)


def test_server_generator_posts_completions_and_ranks() -> None:
    seen: list[dict[str, Any]] = []
    urls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        urls.append(str(request.url))
        body = json.loads(request.content)
        seen.append(body)
        return httpx.Response(
            200,
            json=_payload(
                _choice(0, _tokens(B), [-1.0] * 4),
                _choice(1, _tokens(A), [-0.5] * 4),
                _choice(2, ["oops"], [-0.1]),
            ),
        )

    gen = _server(handler, prompt_builder=lambda ctx: f"<|user|>{ctx}<|assistant|>")
    assert isinstance(gen, SIDGenerator)
    out = gen.generate("how to add units", k=3)
    assert [c.sid for c in out] == [A, B]
    assert urls == ["http://localhost:8000/v1/completions"]
    assert seen[0]["prompt"] == "<|user|>how to add units<|assistant|>"
    assert seen[0]["use_beam_search"] is True and seen[0]["n"] == 3
    stats = gen.stats
    assert (stats.requests, stats.returned, stats.invalid) == (1, 3, 1)


def test_server_generator_batch_keeps_order() -> None:
    by_prompt = {"a": A, "b": B, "c": C}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        assert body["n"] == 1 and "use_beam_search" not in body
        sid = by_prompt[body["prompt"]]
        return httpx.Response(200, json=_payload(_choice(0, _tokens(sid), [-0.1] * 4)))

    gen = _server(handler, max_concurrency=3)
    out = gen.generate_batch(["a", "b", "c", "a"])
    assert [[c.sid for c in cands] for cands in out] == [[A], [B], [C], [A]]
    assert gen.stats.requests == 4
    assert gen.generate_batch([]) == []


def test_server_generator_sends_the_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-secret")
    auth: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        auth.append(request.headers["authorization"])
        return httpx.Response(200, json=_payload(_choice(0, _tokens(A), [-0.1] * 4)))

    _server(handler).generate("x")
    assert auth == ["Bearer sk-secret"]


def test_server_unreachable_is_model_unavailable() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(ModelUnavailable, match="cannot reach"):
        _server(handler).generate("x")


def test_server_error_status_is_reported() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "max_logprobs exceeded"}})

    with pytest.raises(ModelUnavailable, match=r"400.*max_logprobs"):
        _server(handler).generate("x", k=2)


def test_server_generator_validates_arguments() -> None:
    gen = _server(lambda r: httpx.Response(500))
    with pytest.raises(ValueError, match="k="):
        gen.generate("x", k=0)
    with pytest.raises(TypeError):
        gen.generate_batch("not a list")
    with pytest.raises(ValueError, match="max_concurrency"):
        _server(lambda r: httpx.Response(500), max_concurrency=0)


# ---------------------------------------------------------------------------------------------
# offline generator against a fake vllm module
# ---------------------------------------------------------------------------------------------


class _Params:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class _SamplingParams(_Params):
    pass


class _BeamSearchParams(_Params):
    pass


class _StructuredOutputsParams(_Params):
    pass


VOCAB = {i: t for i, t in enumerate(DEFAULT_SPEC.tokens(), start=100)}
IDS = {t: i for i, t in VOCAB.items()}
EOS_ID = 2
VOCAB[EOS_ID] = EOS
PROMPT_IDS = [11, 12, 13]


def _lp(logprob: float, token: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(logprob=logprob, rank=1, decoded_token=token)


def _beam(sid: str, per_token: float, eos: bool = False, text: str | None = None) -> Any:
    ids = [IDS[t] for t in _tokens(sid)] if text is None else [7]
    if eos:
        ids.append(EOS_ID)
    steps = [{i: _lp(per_token), 99: _lp(-9.0)} for i in ids]
    if eos:
        steps[-1][EOS_ID] = _lp(-4.0)
    cum = per_token * (len(ids) - int(eos)) + (-4.0 if eos else 0.0)
    return SimpleNamespace(tokens=PROMPT_IDS + ids, logprobs=steps, cum_logprob=cum, text=None)


BOS_ID = 1


def _char_ids(text: str) -> list[int]:
    return [1000 + ord(ch) for ch in text]


class _Tokenizer:
    """Adds a BOS by default, as Llama-style tokenizers do."""

    eos_token_id = EOS_ID

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return [BOS_ID] * add_special_tokens + _char_ids(text)

    def decode(self, ids: list[int]) -> str:
        return "".join(VOCAB.get(i, "junk") for i in ids)


class _FakeLLM:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, Any]] = []

    def get_tokenizer(self) -> _Tokenizer:
        return _Tokenizer()

    def generate(self, prompts: list[dict], params: Any, *, use_tqdm: bool = True) -> list:
        self.calls.append(("generate", prompts, params))
        outs = []
        for n, _ in enumerate(prompts):
            sid = [A, B][n % 2]
            ids = [IDS[t] for t in _tokens(sid)]
            completion = SimpleNamespace(
                text=sid,
                token_ids=ids,
                logprobs=[{i: _lp(-0.2, VOCAB[i])} for i in ids],
                cumulative_logprob=-0.8,
            )
            outs.append(SimpleNamespace(outputs=[completion]))
        return outs

    def beam_search(self, prompts: list[dict], params: Any) -> list:
        self.calls.append(("beam_search", prompts, params))
        beams = [_beam(B, -0.5), _beam(A, -0.1, eos=True), _beam(A, -0.3), _beam(A, 0, text="x")]
        return [SimpleNamespace(sequences=beams) for _ in prompts]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    package = types.ModuleType("vllm")
    package.__path__ = []  # type: ignore[attr-defined]
    package.LLM = lambda **kwargs: SimpleNamespace(init_kwargs=kwargs)  # type: ignore[attr-defined]
    params = types.ModuleType("vllm.sampling_params")
    params.SamplingParams = _SamplingParams  # type: ignore[attr-defined]
    params.BeamSearchParams = _BeamSearchParams  # type: ignore[attr-defined]
    params.StructuredOutputsParams = _StructuredOutputsParams  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", package)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", params)
    return package


def test_offline_k1_uses_generate_with_regex(fake_vllm: types.ModuleType) -> None:
    llm = _FakeLLM()
    gen = VLLMOfflineSIDGenerator(llm, prompt_builder=lambda c: f"[{c}]")
    assert isinstance(gen, SIDGenerator)
    out = gen.generate_batch(["one", "two"], k=1)
    assert [[c.sid for c in cands] for cands in out] == [[A], [B]]
    assert out[0][0].score == pytest.approx(-0.8)
    kind, prompts, params = llm.calls[0]
    assert kind == "generate"
    # Token ids encoded without special tokens: vLLM would add a BOS to text prompts.
    assert prompts == [
        {"prompt_token_ids": _char_ids("[one]")},
        {"prompt_token_ids": _char_ids("[two]")},
    ]
    assert isinstance(params, _SamplingParams)
    assert params.kwargs["temperature"] == 0.0 and params.kwargs["max_tokens"] == 4
    structured = params.kwargs["structured_outputs"]
    assert isinstance(structured, _StructuredOutputsParams)
    assert structured.kwargs == {"regex": DEFAULT_SPEC.regex()}


def test_offline_k_gt_1_uses_constrained_beam_search(fake_vllm: types.ModuleType) -> None:
    llm = _FakeLLM()
    gen = VLLMOfflineSIDGenerator(llm)
    [out] = gen.generate_batch(["ctx"], k=3)
    # A+EOS scores 4 * -0.1 once the stop token is removed; the -0.3 copy of A is a duplicate.
    assert [c.sid for c in out] == [A, B]
    assert [c.score for c in out] == pytest.approx([-0.4, -2.0])
    kind, prompts, params = llm.calls[0]
    assert kind == "beam_search" and prompts == [{"prompt_token_ids": _char_ids("ctx")}]
    assert isinstance(params, _BeamSearchParams)
    assert params.kwargs["beam_width"] == 3
    assert params.kwargs["max_tokens"] == 4
    assert params.kwargs["structured_outputs"].kwargs == {"regex": DEFAULT_SPEC.regex()}
    stats = gen.stats
    assert (stats.requests, stats.returned, stats.invalid, stats.duplicates) == (1, 4, 1, 1)


def test_offline_from_policy_dir_builds_llm(fake_vllm: types.ModuleType, tmp_path) -> None:
    gen = VLLMOfflineSIDGenerator.from_policy_dir(tmp_path, gpu_memory_utilization=0.5)
    # LLM.beam_search rejects the default backend "auto" and asks for 2 x 50 logprobs at k=50.
    assert gen.llm.init_kwargs == {
        "model": str(tmp_path),
        "gpu_memory_utilization": 0.5,
        "generation_config": "vllm",
        "structured_outputs_config": {"backend": "xgrammar"},
        "max_logprobs": 100,
    }
    assert _shape_errors(gen.llm.init_kwargs, "LLM(**kwargs)") == []
    assert gen.max_beam_width == 50
    wide = VLLMOfflineSIDGenerator.from_policy_dir(tmp_path, max_beam_width=64, max_logprobs=-1)
    assert wide.llm.init_kwargs["max_logprobs"] == -1 and wide.max_beam_width == 64


def test_offline_from_policy_dir_refuses_a_beam_breaking_engine(
    fake_vllm: types.ModuleType, tmp_path
) -> None:
    with pytest.raises(InvalidModelSpec, match="max_logprobs=20"):
        VLLMOfflineSIDGenerator.from_policy_dir(tmp_path, max_logprobs=20)
    with pytest.raises(InvalidModelSpec, match="backend='auto'"):
        VLLMOfflineSIDGenerator.from_policy_dir(
            tmp_path, structured_outputs_config={"backend": "auto"}
        )


def test_offline_k_wider_than_the_engine_raises(fake_vllm: types.ModuleType) -> None:
    llm = _FakeLLM()
    gen = VLLMOfflineSIDGenerator(llm, max_beam_width=4)
    with pytest.raises(ValueError, match=r"k=5 .*max_beam_width=5"):
        gen.generate("ctx", k=5)
    assert llm.calls == []
    assert [c.sid for c in gen.generate("ctx", k=4)] == [A, B]


def test_offline_without_vllm_names_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", None)
    with pytest.raises(ModelUnavailable, match=r"genmem\[gpu\]"):
        VLLMOfflineSIDGenerator.from_policy_dir(tmp_path)
    with pytest.raises(ModelUnavailable, match=r"genmem\[gpu\]"):
        VLLMOfflineSIDGenerator(_FakeLLM()).generate("x")


def test_parse_generate_output_falls_back_to_cumulative_logprob() -> None:
    completion = SimpleNamespace(
        text=A, token_ids=[1, 2, 3, 4], logprobs=None, cumulative_logprob=-2
    )
    [only] = parse_generate_output(SimpleNamespace(outputs=[completion]), DEFAULT_SPEC)
    assert only.score == -2.0
    completion.cumulative_logprob = None
    with pytest.raises(InvalidModelOutput):
        parse_generate_output(SimpleNamespace(outputs=[completion]), DEFAULT_SPEC)


def test_parse_beam_output_counts_an_empty_beam_as_invalid() -> None:
    empty = SimpleNamespace(tokens=PROMPT_IDS, logprobs=[], cum_logprob=0.0)
    stats = DecodeStats()
    out = parse_beam_search_output(
        SimpleNamespace(sequences=[empty]),
        DEFAULT_SPEC,
        2,
        decode=_Tokenizer().decode,
        eos_token_id=EOS_ID,
        stats=stats,
    )
    assert out == [] and stats.invalid == 1
