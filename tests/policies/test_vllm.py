"""vLLM chat backend without vLLM or a GPU: spec parsing, the ChatOpenAI client and the
``vllm serve`` command line."""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from genmem.errors import GenMemError, InvalidModelSpec, ModelUnavailable
from genmem.policies.vllm import (
    VLLMServerConfig,
    chat_model_from_vllm_spec,
    parse_vllm_spec,
    vllm_chat_model,
    vllm_serve_args,
)
from tests.policies._vllm_fakes import SPEC, A

# ---------------------------------------------------------------------------------------------
# spec parsing and config
# ---------------------------------------------------------------------------------------------


def test_spec_parses_url_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    config = parse_vllm_spec(SPEC)
    assert config.base_url == "http://localhost:8000/v1"
    assert config.model == "Qwen/Qwen2.5-7B-Instruct"
    assert config.api_key == "EMPTY"
    assert config.temperature == 0.0


@pytest.mark.parametrize(
    ("spec", "base_url"),
    [
        ("vllm:http://localhost:8000#m", "http://localhost:8000/v1"),
        ("vllm:http://localhost:8000/#m", "http://localhost:8000/v1"),
        ("vllm:https://gpu.example:443/v1/#m", "https://gpu.example:443/v1"),
        ("vllm:http://10.0.0.5:9000/proxy/v1#m", "http://10.0.0.5:9000/proxy/v1"),
    ],
)
def test_spec_normalises_base_url(spec: str, base_url: str) -> None:
    assert parse_vllm_spec(spec).base_url == base_url


def test_spec_api_key_from_env_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-local")
    config = parse_vllm_spec(SPEC, temperature=0.7, max_tokens=256, timeout=5.0)
    assert (config.api_key, config.temperature, config.max_tokens, config.timeout) == (
        "sk-local",
        0.7,
        256,
        5.0,
    )
    assert parse_vllm_spec(SPEC, api_key="other").api_key == "other"
    assert "sk-local" not in repr(config)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "http://localhost:8000/v1#m",  # no vllm: prefix
        "vllm:http://localhost:8000/v1",  # no '#'
        "vllm:http://localhost:8000/v1#",  # empty model
        "vllm:http://localhost:8000/v1#   ",  # blank model
        "vllm:localhost:8000/v1#m",  # no scheme
        "vllm:#m",  # no URL
        "vllm:ftp://host/v1#m",  # not http(s)
        "vllm:http:///v1#m",  # no host
        "vllm:http://host/v1?x=1#m",  # query
        "vllm:http://host/v1#Qwen 2.5",  # whitespace in the model name
    ],
)
def test_bad_spec_raises_typed_error(bad: str) -> None:
    with pytest.raises(InvalidModelSpec) as info:
        parse_vllm_spec(bad)
    err = info.value
    assert isinstance(err, GenMemError)
    assert isinstance(err, ValueError)
    assert err.spec == bad
    assert "vllm:" in str(err)


def test_spec_that_is_not_a_string() -> None:
    with pytest.raises(InvalidModelSpec):
        parse_vllm_spec(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs", [{"temperature": -0.1}, {"max_tokens": 0}, {"timeout": 0}, {"timeout": -1.0}]
)
def test_config_rejects_bad_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        VLLMServerConfig(base_url="http://h:1/v1", model="m", **kwargs)


def test_config_is_frozen() -> None:
    config = parse_vllm_spec(SPEC)
    with pytest.raises(AttributeError):
        config.model = "other"  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# chat model
# ---------------------------------------------------------------------------------------------


def test_chat_model_fields_without_network() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_core.language_models import BaseChatModel

    wrapper = chat_model_from_vllm_spec(SPEC, api_key="sk-x", max_tokens=64, timeout=7.0)
    assert isinstance(wrapper, BaseChatModel)
    assert wrapper.server == "http://localhost:8000/v1#Qwen/Qwen2.5-7B-Instruct"
    model = wrapper.inner  # the ChatOpenAI that talks to the server
    assert model.model_name == "Qwen/Qwen2.5-7B-Instruct"
    assert model.openai_api_base == "http://localhost:8000/v1"
    assert model.openai_api_key.get_secret_value() == "sk-x"
    assert model.max_tokens == 64
    assert model.request_timeout == 7.0
    assert model.temperature == 0.0
    assert model.use_responses_api is False
    assert model.max_retries == 0  # a loopback server: a retry only queues behind the first
    remote = chat_model_from_vllm_spec("vllm:http://gpu.example:8000/v1#m", max_retries=None)
    assert remote.inner.max_retries == 2


def test_request_timeout_comes_from_the_environment(monkeypatch) -> None:
    from genmem.policies import vllm

    monkeypatch.delenv(vllm.TIMEOUT_ENV, raising=False)
    assert parse_vllm_spec(SPEC).timeout == 120.0
    monkeypatch.setenv(vllm.TIMEOUT_ENV, "900")
    assert parse_vllm_spec(SPEC).timeout == 900.0
    assert parse_vllm_spec(SPEC, timeout=5.0).timeout == 5.0
    for bad in ("soon", "0", "-3"):
        monkeypatch.setenv(vllm.TIMEOUT_ENV, bad)
        with pytest.raises(ValueError, match="GENMEM_SERVER_TIMEOUT"):
            parse_vllm_spec(SPEC)


def _chat_reply(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "Qwen/Qwen2.5-7B-Instruct",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def _recording_client(reply: dict[str, Any], seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=reply)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_chat_model_tool_call_round_trip() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_core.tools import tool

    @tool
    def memory_lookup(sid_list: list[str]) -> str:
        """Look up memory entries."""
        return ""

    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "memory_lookup", "arguments": json.dumps({"sid_list": [A]})},
    }
    seen: list[httpx.Request] = []
    client = _recording_client(
        _chat_reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"),
        seen,
    )
    model = chat_model_from_vllm_spec(SPEC, http_client=client).bind_tools([memory_lookup])
    reply = model.invoke("find advice")
    assert reply.tool_calls[0]["name"] == "memory_lookup"
    assert reply.tool_calls[0]["args"] == {"sid_list": [A]}
    assert str(seen[0].url) == "http://localhost:8000/v1/chat/completions"
    assert seen[0].headers["authorization"].startswith("Bearer ")
    body = json.loads(seen[0].content)
    assert body["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert body["tools"][0]["function"]["name"] == "memory_lookup"
    # The cap under both names: transformers serve reads max_tokens only and ignores the other.
    assert body["max_tokens"] == body["max_completion_tokens"] == 1024


class _Pick(BaseModel):
    sid: str
    reason: str


def test_chat_model_json_schema_structured_output() -> None:
    pytest.importorskip("langchain_openai")
    seen: list[httpx.Request] = []
    content = json.dumps({"sid": A, "reason": "closest"})
    client = _recording_client(_chat_reply({"role": "assistant", "content": content}), seen)
    model = vllm_chat_model(parse_vllm_spec(SPEC), http_client=client)
    out = model.with_structured_output(_Pick, method="json_schema").invoke("pick one")
    assert out == _Pick(sid=A, reason="closest")
    body = json.loads(seen[0].content)
    assert body["response_format"]["type"] == "json_schema"
    assert set(body["response_format"]["json_schema"]["schema"]["properties"]) == {
        "sid",
        "reason",
    }


def test_missing_langchain_openai_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_openai", None)
    with pytest.raises(ModelUnavailable, match=r"genmem\[vllm\]"):
        chat_model_from_vllm_spec(SPEC)


# ---------------------------------------------------------------------------------------------
# vllm serve command line
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def policy_dir(tmp_path):
    directory = tmp_path / "genmem-policy"
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    return directory


def _flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_serve_args_defaults(policy_dir) -> None:
    args = vllm_serve_args(policy_dir)
    assert args[:3] == ["vllm", "serve", str(policy_dir)]
    assert _flag(args, "--served-model-name") == "genmem-policy"
    assert _flag(args, "--tool-call-parser") == "hermes"
    assert "--enable-auto-tool-choice" in args
    assert _flag(args, "--max-model-len") == "4096"
    assert _flag(args, "--dtype") == "auto"
    assert _flag(args, "--gpu-memory-utilization") == "0.9"
    assert _flag(args, "--generation-config") == "vllm"
    assert "--max-logprobs" not in args and "--port" not in args
    assert all(isinstance(a, str) for a in args)


def test_serve_args_options(policy_dir) -> None:
    args = vllm_serve_args(
        policy_dir,
        served_model_name="Qwen/Qwen2.5-7B-Instruct",
        max_model_len=8192,
        dtype="bfloat16",
        gpu_memory_utilization=0.5,
        max_logprobs=40,
        port=8001,
    )
    assert _flag(args, "--served-model-name") == "Qwen/Qwen2.5-7B-Instruct"
    assert _flag(args, "--max-model-len") == "8192"
    assert _flag(args, "--dtype") == "bfloat16"
    assert _flag(args, "--gpu-memory-utilization") == "0.5"
    assert _flag(args, "--max-logprobs") == "40"
    assert _flag(args, "--port") == "8001"


def test_serve_args_need_a_model_directory(tmp_path) -> None:
    with pytest.raises(ModelUnavailable, match=r"config\.json"):
        vllm_serve_args(tmp_path / "missing")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_memory_utilization": 0.0},
        {"gpu_memory_utilization": 1.5},
        {"max_model_len": 0},
        {"dtype": "fp7"},
        {"max_logprobs": 0},
        {"port": 70000},
        {"served_model_name": "has space"},
    ],
)
def test_serve_args_reject_bad_settings(policy_dir, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        vllm_serve_args(policy_dir, **kwargs)
