"""StackPlanner's coordinator nodes called directly on states, without compiling a graph."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.runtime import Runtime

from genmem.graph.stack import StackBudgetConfig, TaskStack
from genmem.graph.stackplanner import Coordinator, StackPlannerConfig
from genmem.graph.subagents import SubAgent
from tests.fakes import FakeChat

Q = "A pen costs $2. How much do 3 pens cost?"
SOLVER = SubAgent(name="solver", description="reasoning and calculation")


def _coordinator(
    lead: FakeChat | None = None, sub: FakeChat | None = None, **config: Any
) -> Coordinator:
    return Coordinator(
        lead or FakeChat(responses=["unused"]),
        [SOLVER],
        worker=sub or FakeChat(responses=["2*3 = 6 <answer>6</answer>"]),
        config=StackPlannerConfig(**config),
    )


def _decision(action: str, **fields: Any) -> dict[str, Any]:
    return {"thought": "t", "action": {"action": action, **fields}}


def _stack(*reports: str) -> dict[str, Any]:
    stack = TaskStack()
    for report in reports:
        stack = stack.push("result", report, agent="solver", task="part")
    return stack.model_dump()


def test_validate_counts_an_invalid_reply_and_records_it() -> None:
    node = _coordinator()
    out = node.validate({"reply": "I think we should add", "n_steps": 2, "invalid_streak": 1})
    assert out["decision"] is None and out["invalid_streak"] == 2 and out["n_steps"] == 3
    assert out["observation"].startswith("Your last reply was not a valid action:")
    [step] = out["steps"]
    assert (step["agent"], step["action"]) == ("coordinator", "invalid")
    assert step["arguments"] == {"reply": "I think we should add"}
    # an agent the team does not have is invalid too, and the error names the team
    wizard = node.validate({"parsed": _decision("delegate", agent="wizard", task="x")})
    assert wizard["decision"] is None and "solver" in wizard["observation"]


def test_validate_takes_the_parsed_decision_and_resets_the_streak() -> None:
    node = _coordinator()
    out = node.validate({"parsed": _decision("finish", answer="6"), "invalid_streak": 2})
    assert out["decision"]["action"] == {"action": "finish", "answer": "6"}
    assert out["invalid_streak"] == 0 and out["n_steps"] == 1
    text = node.validate({"reply": json.dumps(_decision("finish", answer="7"))})
    assert text["decision"]["action"]["answer"] == "7"


def test_routing_after_execute_stops_at_the_budget() -> None:
    node = _coordinator(budget=StackBudgetConfig(max_steps=3, max_tokens=500))
    assert node.after_execute({"n_steps": 2, "tokens": 10}) == "prepare"
    assert node.after_execute({"n_steps": 3, "tokens": 10}) == "finalize"
    assert node.after_execute({"n_steps": 1, "tokens": 500}) == "finalize"
    assert node.after_execute({"n_steps": 1, "answer": "6"}) == "finalize"
    # the run's own budget (from its context) wins over the config's
    assert node.after_execute({"n_steps": 3, "budget": {"max_steps": 5}}) == "prepare"


def test_routing_after_validate() -> None:
    node = _coordinator(budget=StackBudgetConfig(max_steps=5, max_invalid_actions=1))
    assert node.after_validate({"decision": _decision("finish", answer="6")}) == "execute"
    assert node.after_validate({"decision": None, "invalid_streak": 1}) == "prepare"
    assert node.after_validate({"decision": None, "invalid_streak": 2}) == "finalize"


def test_finalize_picks_the_report_answer() -> None:
    node = _coordinator(budget=StackBudgetConfig(max_steps=2), fallback_solver=False)
    state = {"query": Q, "n_steps": 2, "best_answer": "6", "stack": _stack("... 6"), "steps": []}
    out = node.finalize(state)
    assert out["answer"] == "6" and out["status"] == "budget"
    assert out["stop_reason"].startswith("step budget used up")
    # no report stated an answer: the latest report's last line
    state = {**state, "best_answer": None, "stack": _stack("first", "so\nit is 6 pens")}
    out = node.finalize(state)
    assert out["answer"] == "it is 6 pens" and "latest report's last line" in out["stop_reason"]
    # a finished run keeps its answer
    out = node.finalize({"query": Q, "answer": "6", "steps": []})
    assert (out["answer"], out["status"], out["stop_reason"]) == ("6", "finished", "")
    assert out["trajectory"]["answer"] == "6"


def test_finalize_gives_an_unanswered_task_to_the_solver() -> None:
    sub = FakeChat(responses=["so it is <answer>6</answer>"])
    node = _coordinator(sub=sub, budget=StackBudgetConfig(max_steps=1))
    out = node.finalize({"query": Q, "n_steps": 1, "stack": _stack(), "steps": []})
    assert out["answer"] == "6" and out["status"] == "budget"
    assert [(s["agent"], s["action"]) for s in out["steps"]] == [("solver", "fallback")]
    assert "the solver took the whole task as a fallback" in out["stop_reason"]
    assert sub.texts(system=False) == [Q]


def test_execute_delegates_and_pushes_the_report() -> None:
    node = _coordinator()
    state = {
        "query": Q,
        "stack": _stack(),
        "steps": [],
        "decision": _decision("delegate", agent="solver", task="3 pens at $2?"),
    }
    out = node.execute(state)
    assert out["best_answer"] == "6"
    assert out["observation"] == "push #1 result from solver (it reports: 6)"
    [step] = out["steps"]
    assert step["stack_edits"] == ["push #1 result from solver"]
    assert "<answer>6</answer>" in step["observation"]
    assert TaskStack.model_validate(out["stack"]).top.content.endswith("<answer>6</answer>")


def test_execute_reports_a_bad_stack_edit_as_an_observation() -> None:
    node = _coordinator()
    state = {
        "query": Q,
        "stack": _stack(),
        "steps": [],
        "decision": _decision("revise", op="prune", entries=[9], content="gone"),
    }
    out = node.execute(state)
    assert "stack" not in out and out["observation"].startswith("The stack edit failed")


def test_prepare_starts_fresh_and_condenses_a_full_stack() -> None:
    node = _coordinator()
    fresh = node.prepare({"query": Q}, Runtime(context={"max_steps": 7}))
    assert fresh["budget"]["max_steps"] == 7 and fresh["n_steps"] == 0
    system, user = fresh["messages"]
    assert isinstance(system, SystemMessage) and system.content == node.system
    assert "Step 1 of at most 7" in user.content
    full = {"query": Q, "stack": _stack(*[f"r{i}" for i in range(6)]), "steps": []}
    out = node.prepare({**full, "budget": {**fresh["budget"], "max_entries": 4}}, Runtime())
    assert TaskStack.model_validate(out["stack"]).size <= 4
    assert out["steps"][0]["action"] == "condense"
    with pytest.raises(ValueError, match="non-empty 'query'"):
        node.prepare({"query": " "}, Runtime())


def test_decide_in_text_counts_the_tokens() -> None:
    reply = json.dumps(_decision("finish", answer="6"))
    node = _coordinator(FakeChat(responses=[reply]))
    assert not node.structured
    out = node.decide({"messages": [HumanMessage("go")], "tokens": 5})
    assert out["reply"] == reply and out["parsed"] is None and out["tokens"] > 5


def test_decide_in_two_stages_merges_the_kind_and_its_fields() -> None:
    second = {"action": "finish", "answer": "6"}  # the field stage's schema repeats the kind
    lead = FakeChat(structured=[{"thought": "t", "action": "finish"}, second])
    node = _coordinator(lead)
    assert node.structured
    out = node.decide({"messages": [HumanMessage("go")], "stack": _stack()})
    assert out["parsed"] == _decision("finish", answer="6")
    assert len(lead.asked) == 2 and isinstance(lead.asked[1].messages[-2], AIMessage)
    assert out["reply"] == '{"thought": "t", "action": "finish"}\n' + json.dumps(second)
    # a first stage without its action is an unreadable decision: no second call
    cut = FakeChat(structured=[{"thought": "t"}])
    out = _coordinator(cut).decide({"messages": [HumanMessage("go")], "stack": _stack()})
    assert out["parsed"] is None and len(cut.asked) == 1


def test_a_team_needs_distinct_agents() -> None:
    with pytest.raises(ValueError, match="at least one sub-agent"):
        Coordinator(FakeChat(responses=["x"]), [])
    with pytest.raises(ValueError, match="distinct"):
        Coordinator(FakeChat(responses=["x"]), [SOLVER, SOLVER])
