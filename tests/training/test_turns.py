"""The policy's text turns for whole-turn GRPO: what is recorded, masked, and sampled."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from genmem.policies.chat_local import to_chat_messages
from genmem.training.turns import PolicyTurnChat, TurnRecord, generation_model, trainer_sampler


@pytest.fixture(scope="module")
def policy() -> Any:
    from genmem.policies.local import load_policy

    return load_policy()


MESSAGES = [
    SystemMessage("You rewrite memory."),
    HumanMessage("Task:\n3 pens at $2?"),
    AIMessage("", tool_calls=[{"name": "memory_lookup", "args": {"sid_list": ["x"]}, "id": "1"}]),
    ToolMessage("memory_lookup results. [1] price of one first.", tool_call_id="1"),
]


def test_a_call_records_the_prompt_as_environment_and_the_reply_as_policy(policy) -> None:
    tok = policy.tokenizer
    reply_ids = tok("<answer>Multiply.</answer>", add_special_tokens=False)["input_ids"]
    seen: list[list[int]] = []

    def sampler(context: list[int], cap: int) -> tuple[list[int], list[float]]:
        seen.append(list(context))
        return [*reply_ids, tok.eos_token_id], [-0.5] * (len(reply_ids) + 1)

    sid_turn = [11, 12, tok.eos_token_id]
    record = TurnRecord(context=[1, 2, *sid_turn])
    chat = PolicyTurnChat(max_new_tokens=8)
    chat.begin(record, sampler, tok, part="rewrite")
    answer = chat.invoke(MESSAGES)
    chat.end()
    assert answer.content == "<answer>Multiply.</answer>"
    prompt = tok.apply_chat_template(
        to_chat_messages(MESSAGES), add_generation_prompt=True, tokenize=False
    )
    env_ids = tok("\n" + prompt, add_special_tokens=False)["input_ids"]
    # The reply was sampled right after the exact ids TRL will score before it.
    assert seen == [[1, 2, *sid_turn, *env_ids]]
    assert record.ids == [*env_ids, *reply_ids, tok.eos_token_id]
    assert record.mask == [0] * len(env_ids) + [1] * (len(reply_ids) + 1)
    assert record.logprobs == [0.0] * len(env_ids) + [-0.5] * (len(reply_ids) + 1)
    assert [(p["part"], p["trained"]) for p in record.parts] == [
        ("lookup", False),
        ("rewrite", True),
    ]
    assert "price of one first" in record.parts[0]["text"]
    with pytest.raises(RuntimeError, match="outside a rollout"):
        chat.invoke(MESSAGES)


def test_an_unfinished_turn_is_closed_by_the_environment(policy) -> None:
    tok = policy.tokenizer
    record = TurnRecord(context=[5, 6])  # an SID turn cut off before its end token
    chat = PolicyTurnChat()
    chat.begin(record, lambda ctx, cap: ([tok.eos_token_id], [0.0]), tok, part="decision")
    chat.invoke(MESSAGES)
    assert record.parts[0]["text"].startswith(f"{tok.eos_token}\n<|im_start|>system")
    assert record.mask[-1] == 1 and record.mask[0] == 0


def test_sampled_logprobs_are_what_the_model_gives_the_sampled_tokens(policy) -> None:
    """The sampler reports log_softmax(logits / T) of its tokens: what TRL recomputes."""
    import torch
    from accelerate import Accelerator

    tok = policy.tokenizer
    trainer = SimpleNamespace(
        processing_class=tok,
        model_wrapped=policy.model,
        accelerator=Accelerator(cpu=True),
        args=SimpleNamespace(ds3_gather_for_generation=True, gradient_checkpointing_kwargs=None),
        eos_token_ids=[tok.eos_token_id],
        temperature=0.7,
        top_p=1.0,
        top_k=0,
        min_p=None,
        repetition_penalty=1.0,
    )
    context = tok("<|im_start|>user\nName a fruit.<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    torch.manual_seed(0)
    with generation_model(trainer) as model:
        new, logprobs = trainer_sampler(trainer, model)(context, 6)
    assert 1 <= len(new) <= 6 and len(logprobs) == len(new)
    with torch.no_grad():
        logits = policy.model(torch.tensor([context + new])).logits[0].float()
    scored = torch.log_softmax(logits[len(context) - 1 : -1] / 0.7, dim=-1)
    expected = scored.gather(1, torch.tensor(new)[:, None])[:, 0]
    assert logprobs == pytest.approx(expected.tolist(), abs=2e-3)
