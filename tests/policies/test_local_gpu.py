"""Shared local loads on a CUDA GPU: placement, chat, choice scoring, SIDs (skipped without one)."""

from __future__ import annotations

import pytest
import torch
from langchain_core.messages import HumanMessage

from genmem.errors import InvalidDevice
from genmem.memory.sid import DEFAULT_SPEC
from genmem.policies import local
from genmem.policies.backends import capped_chat_model
from genmem.policies.local import load_policy
from genmem.policies.sid_decoding import TransformersSIDGenerator

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_a_local_chat_model_generates_on_the_gpu(monkeypatch) -> None:
    monkeypatch.delenv(local.INFERENCE_DEVICE_ENV, raising=False)
    monkeypatch.delenv(local.INFERENCE_DTYPE_ENV, raising=False)
    chat = capped_chat_model("local", 12)
    assert chat.policy.model.device == torch.device("cuda:0")
    assert chat.policy is load_policy()  # the judge, the teacher and the planner share it
    reply = chat.invoke([HumanMessage("Name one colour.")])
    assert reply.content.strip() and reply.usage_metadata["output_tokens"] > 0
    again = chat.invoke([HumanMessage("Name one colour, please.")])  # from the prefix cache
    assert again.content.strip()
    scores = chat.score_choices([HumanMessage("Is the sky blue?")], ["yes", "no"])
    assert len(scores) == 2 and all(s < 0 for s in scores)
    found = TransformersSIDGenerator(chat.policy, DEFAULT_SPEC).generate("Tom has 3 apples.", 5)
    assert len(found) == 5 and all(DEFAULT_SPEC.is_valid(c.sid) for c in found)


def test_cpu_keeps_a_local_model_off_the_gpu_and_int8_needs_it(monkeypatch) -> None:
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cpu")
    assert load_policy().model.device == torch.device("cpu")
    monkeypatch.setenv(local.INFERENCE_DEVICE_ENV, "cuda")
    with pytest.raises(InvalidDevice, match="GENMEM_DEVICE=cpu to keep int8"):
        load_policy(dtype="int8")
