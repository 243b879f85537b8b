"""Model specs: which backend a spec string names, and per-role models."""

from __future__ import annotations

import pytest

from genmem.errors import InvalidModelSpec, ModelUnavailable
from genmem.policies.backends import ROLES, RoleModels, load_chat_model
from genmem.policies.chat_local import ChatLocal
from tests.fakes import FakeChat


def test_local_specs_are_lazy_chat_local() -> None:
    model = load_chat_model("local", max_new_tokens=7)
    assert isinstance(model, ChatLocal)
    assert model.model_path is None and model.max_new_tokens == 7
    assert model._policy is None  # nothing loaded yet
    assert load_chat_model("local:/some/dir").model_path == "/some/dir"


def test_model_objects_pass_through() -> None:
    fake = FakeChat(responses=["x"])
    assert load_chat_model(fake) is fake


@pytest.mark.parametrize("spec", ["", "   ", "local:"])
def test_empty_specs(spec: str) -> None:
    with pytest.raises(InvalidModelSpec):
        load_chat_model(spec)


def test_unknown_provider_is_a_typed_error() -> None:
    with pytest.raises((InvalidModelSpec, ModelUnavailable), match="spec 'nonsense-provider:x'"):
        load_chat_model("nonsense-provider:x")


def test_missing_provider_package_says_install() -> None:
    # langchain knows the provider, but its package is not installed here
    with pytest.raises(ModelUnavailable, match="provider package"):
        load_chat_model("anthropic:claude-sonnet-4-5")


def test_vllm_spec_goes_to_the_vllm_backend() -> None:
    pytest.importorskip("langchain_openai")
    model = load_chat_model("vllm:http://127.0.0.1:8000/v1#Qwen/Qwen2.5-7B-Instruct")
    assert type(model).__name__ == "ChatServer" and type(model.inner).__name__ == "ChatOpenAI"


def test_role_models_share_models_per_spec() -> None:
    roles = RoleModels(evolver="local:/tmp/evolver", options={"local": {"max_new_tokens": 9}})
    assert roles.spec_for("retriever") == "local"
    assert roles.spec_for("evolver") == "local:/tmp/evolver"
    assert roles.model("lead") is roles.model("judge")
    assert roles.model("lead").max_new_tokens == 9
    assert roles.model("evolver") is not roles.model("lead")
    assert set(ROLES) == {"retriever", "lead", "subagent", "evolver", "judge"}
    with pytest.raises(InvalidModelSpec, match="unknown role"):
        roles.spec_for("critic")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RoleModels(planner="local")  # type: ignore[call-arg]


def test_local_chat_loads_go_on_the_device_the_setting_resolves(monkeypatch) -> None:
    """The judge, the teacher and the planner (``local`` specs) load on the resolved device."""
    from genmem.policies import local
    from genmem.policies.backends import capped_chat_model

    seen = []

    def fake_load(directory, dtype, device, shared=False):
        seen.append(device)
        return local.LocalPolicy(model=None, tokenizer=None, info=local.PolicyInfo(base_model="x"))

    monkeypatch.setattr(local, "_CACHE", {})
    monkeypatch.setattr(local, "_load", fake_load)
    monkeypatch.setattr(local, "inference_device", lambda: "cuda:3")
    judge = capped_chat_model("local", 8)
    assert judge.policy is capped_chat_model("local", 16).policy
    assert seen == ["cuda:3"]
