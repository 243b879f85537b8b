"""The closed-loop GenMem graph: modes, scoring, the event log and the bank, with fakes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from genmem.graph.loop import build_genmem_graph
from genmem.memory.location import open_bank
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank, revise_reply

Q = "Pens cost $2 each. How much do 3 pens cost?"


def _act(action: str, **fields: Any) -> str:
    return json.dumps({"thought": "t", "action": {"action": action, **fields}})


RETRIEVE = ["<answer>Price of one, times the count.</answer>"]
EXECUTE = [_act("delegate", agent="solver", task="3 pens at $2"), "<answer>6</answer>"]
FINISH = [_act("finish", answer="6")]


@pytest.fixture
def bank_url(tmp_path) -> str:
    return one_entry_bank(tmp_path, "Find the price of one item first.")


def _app(responses: list[str], **kwargs: Any):
    chat = FakeChat(responses=responses)
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
    assert out["answer"] == "6" and out["score"] == 1.0 and out["outcome"] is None
    assert out["update"]["outcome"] == "revised" and out["update_sid"] == str(A)
    assert [e["node"] for e in out["events"]] == ["mem_retriever", "stackplanner", "mem_evolver"]
    bank = open_bank(bank_url)
    assert len(bank.history(A)) == 2 and bank.get(A).actor == "mem_evolver"
    # The reference is used for scoring only: no prompt ever contains it, nor a verdict from it.
    assert not any("reference" in p.lower() for p in chat.texts())
    evolver_prompt = chat.texts()[-1]
    assert "[0] coordinator delegate" in evolver_prompt
    assert "Outcome" not in evolver_prompt and "success" not in evolver_prompt


@pytest.mark.parametrize("reference", ["6", "7391"])
def test_no_prompt_sees_the_reference_or_a_verdict_from_it(bank_url, reference) -> None:
    """Issue 18 item 2: a score against the gold answer is for evaluation only."""
    chat, app = _app([*RETRIEVE, *EXECUTE, *FINISH, revise_reply("One item's price, times count.")])
    out = app.invoke({"query": Q, "reference": reference}, context={"bank_url": bank_url})
    assert out["score"] == float(reference == "6") and out["outcome"] is None
    assert len(chat.prompts) == 5 and out["update"]["outcome"] == "revised"
    for prompt, given in zip(chat.texts(), chat.texts(system=False), strict=True):
        if reference != "6":  # '6' is the agents' own answer, so it is in their prompts
            assert reference not in prompt
        assert not re.search(r"\b(success|succeeded|failure|failed|correct|wrong)\b", given)
        assert "Outcome" not in prompt


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
    assert not any("\n</retrieved_experience>" in p for p in chat.texts())


def test_invalid_evolver_output_changes_nothing(bank_url) -> None:
    _, app = _app([*RETRIEVE, *EXECUTE, *FINISH, "not json at all"])
    before = open_bank(bank_url).stats().events
    out = app.invoke({"query": Q}, context={"bank_url": bank_url})
    assert out["update"] is None and out["evolve_error"]["kind"] == "invalid_output"
    assert out["events"][-1]["kind"] == "rejected"
    assert open_bank(bank_url).stats().events == before


def test_a_given_outcome_reaches_memevolver_whatever_the_score(bank_url) -> None:
    chat, app = _app([*RETRIEVE, *EXECUTE, *FINISH, revise_reply("Price of one, times count.")])
    out = app.invoke(
        {"query": Q, "reference": "7", "outcome": "success"}, context={"bank_url": bank_url}
    )
    assert out["score"] == 0.0 and out["outcome"] == "success"
    assert "Outcome:\nsuccess" in chat.texts()[-1]


def test_the_environments_own_verdict_reaches_memevolver(bank_url) -> None:
    seen: list[str | None] = []

    def observer(answer: str | None) -> str:
        seen.append(answer)
        return "failure"

    chat, app = _app(
        [*RETRIEVE, *EXECUTE, *FINISH, revise_reply("Price of one, times count.")],
        observer=observer,
    )
    out = app.invoke({"query": Q, "reference": "6"}, context={"bank_url": bank_url})
    assert seen == ["6"] and out["score"] == 1.0 and out["outcome"] == "failure"
    assert "Outcome:\nfailure" in chat.texts()[-1]


def test_bad_input(bank_url) -> None:
    _, app = _app(["x"])
    with pytest.raises(ValueError, match="non-empty 'query'"):
        app.invoke({"query": ""}, context={"bank_url": bank_url})
    with pytest.raises(ValueError, match="mode='write'"):
        app.invoke({"query": Q, "mode": "write"}, context={"bank_url": bank_url})
