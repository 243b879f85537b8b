"""The closed-loop GenMem graph: modes, scoring, the event log and the bank, with fakes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from pydantic import Field

from genmem.graph.loop import build_genmem_graph
from genmem.memory.location import open_bank
from tests.graph._banks import A, one_entry_bank, revise_reply
from tests.graph.test_retriever import FixedGenerator

Q = "Pens cost $2 each. How much do 3 pens cost?"


def _act(action: str, **fields: Any) -> str:
    return json.dumps({"thought": "t", "action": {"action": action, **fields}})


class RecordingFake(FakeListChatModel):
    """A FakeListChatModel that keeps every prompt it was given."""

    prompts: list[str] = Field(default_factory=list)

    def _call(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return super()._call(messages, stop, run_manager, **kwargs)


RETRIEVE = ["<answer>Price of one, times the count.</answer>"]
EXECUTE = [_act("delegate", agent="solver", task="3 pens at $2"), "<answer>6</answer>"]
FINISH = [_act("finish", answer="6")]


@pytest.fixture
def bank_url(tmp_path) -> str:
    return one_entry_bank(tmp_path, "Find the price of one item first.")


def _app(responses: list[str], **kwargs: Any):
    chat = RecordingFake(responses=responses)
    graph = build_genmem_graph(
        chat,
        sid_generator=FixedGenerator([A]),
        scorer=lambda answer, ref: float(answer == ref),
        **kwargs,
    )
    return chat, graph.compile()


def test_evolve_mode_retrieves_executes_and_writes(bank_url) -> None:
    chat, app = _app([*RETRIEVE, *EXECUTE, *FINISH, revise_reply("One item's price, times count.")])
    out = app.invoke({"query": Q, "reference": "6"}, context={"bank_url": bank_url})
    assert out["sid"] == str(A) and out["support"] == "Price of one, times the count."
    assert out["answer"] == "6" and out["score"] == 1.0 and out["outcome"] == "success"
    assert out["update"]["outcome"] == "revised" and out["update_sid"] == str(A)
    assert [e["node"] for e in out["events"]] == ["mem_retriever", "stackplanner", "mem_evolver"]
    bank = open_bank(bank_url)
    assert len(bank.history(A)) == 2 and bank.get(A).actor == "mem_evolver"
    # The reference is used for scoring only: no prompt ever contains it.
    assert not any("reference" in p.lower() for p in chat.prompts)
    evolver_prompt = chat.prompts[-1]
    assert "success" in evolver_prompt and "[0] coordinator delegate" in evolver_prompt


def test_read_only_mode_never_writes(bank_url) -> None:
    _, app = _app([*RETRIEVE, *EXECUTE, *FINISH])
    before = open_bank(bank_url).stats().events
    out = app.invoke({"query": Q, "mode": "read_only"}, context={"bank_url": bank_url})
    assert out["answer"] == "6" and out["sid"] == str(A)
    assert out.get("update") is None and out["outcome"] is None
    assert [e["node"] for e in out["events"]] == ["mem_retriever", "stackplanner"]
    assert open_bank(bank_url).stats().events == before


def test_no_memory_mode_runs_the_planner_alone(bank_url) -> None:
    chat, app = _app([*EXECUTE, *FINISH])
    out = app.invoke({"query": Q, "mode": "no_memory"}, context={"bank_url": bank_url})
    assert out["answer"] == "6" and out.get("sid") is None and out.get("support") is None
    assert [e["node"] for e in out["events"]] == ["stackplanner"]
    assert not any("\n</retrieved_experience>" in p for p in chat.prompts)


def test_invalid_evolver_output_changes_nothing(bank_url) -> None:
    _, app = _app([*RETRIEVE, *EXECUTE, *FINISH, "not json at all"])
    before = open_bank(bank_url).stats().events
    out = app.invoke({"query": Q}, context={"bank_url": bank_url})
    assert out["update"] is None and out["evolve_error"]["kind"] == "invalid_output"
    assert out["events"][-1]["kind"] == "rejected"
    assert open_bank(bank_url).stats().events == before


def test_environment_outcome_overrides_scoring(bank_url) -> None:
    _, app = _app([*RETRIEVE, *EXECUTE, *FINISH], success_threshold=0.5)
    out = app.invoke(
        {"query": Q, "mode": "read_only", "reference": "7", "outcome": "success"},
        context={"bank_url": bank_url},
    )
    assert out["score"] == 0.0 and out["outcome"] == "success"


def test_bad_input(bank_url) -> None:
    _, app = _app(["x"])
    with pytest.raises(ValueError, match="non-empty 'query'"):
        app.invoke({"query": ""}, context={"bank_url": bank_url})
    with pytest.raises(ValueError, match="mode='write'"):
        app.invoke({"query": Q, "mode": "write"}, context={"bank_url": bank_url})
    with pytest.raises(ValueError, match="success_threshold"):
        build_genmem_graph(FakeListChatModel(responses=["x"]), success_threshold=0)
