"""Two-stage constrained decisions: the schemas, and the planner driving a schema-taking model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from genmem.graph.decision_schemas import (
    CHOICES,
    action_schema,
    available_choices,
    choice_schema,
    coordinator_schema,
    decision_from_stages,
)
from genmem.graph.planner_actions import parse_decision
from genmem.graph.stack import StackBudgetConfig
from genmem.graph.stackplanner import StackPlannerConfig, build_stackplanner_graph
from tests.fakes import FakeChat

Q = "A pen costs $2. How much do 3 pens cost?"


def test_choices_on_an_empty_stack_are_delegate_or_plan() -> None:
    assert available_choices([]) == ["delegate", "plan"]
    assert available_choices([1, 2]) == list(CHOICES)


def test_choice_schema_puts_the_thought_first() -> None:
    schema = choice_schema(["delegate", "finish"])
    assert schema["required"] == ["thought", "action"]
    assert schema["properties"]["action"]["enum"] == ["delegate", "finish"]
    assert schema["properties"]["thought"]["maxLength"] == 80
    with pytest.raises(ValueError, match="non-empty subset"):
        choice_schema(["fly"])
    with pytest.raises(ValueError, match="non-empty subset"):
        choice_schema([])


def test_action_schemas_fix_kind_and_op_and_bound_every_field() -> None:
    note = action_schema("note", ["solver"], 100, [1])
    assert note["required"] == ["action", "op", "content"] and "entries" not in note["properties"]
    assert note["properties"]["op"]["enum"] == ["update"]
    prune = action_schema("prune", ["solver"], 100, [3, 4])
    assert prune["properties"]["entries"]["items"]["enum"] == [3, 4]
    assert prune["properties"]["entries"]["minItems"] == 1
    delegate = action_schema("delegate", ["solver", "research"], 100)
    assert delegate["properties"]["agent"]["enum"] == ["solver", "research"]
    assert delegate["properties"]["task"]["maxLength"] == 100
    assert action_schema("finish", ["solver"], 500)["properties"]["answer"]["maxLength"] == 200
    assert action_schema("plan", ["solver"])["properties"]["steps"]["maxItems"] == 4
    for choice in CHOICES:
        assert action_schema(choice, ["solver"], 100, [1])["additionalProperties"] is False
    with pytest.raises(ValueError, match="stack is empty"):
        action_schema("condense", ["solver"], 100, [])
    with pytest.raises(ValueError, match="unknown choice"):
        action_schema("jump", ["solver"])


def test_stages_make_a_decision_the_parser_accepts() -> None:
    first = {"thought": "drop the failed try", "action": "prune"}
    second = {"action": "revise", "op": "prune", "entries": [2], "content": "guessed; wrong"}
    decision = parse_decision(decision_from_stages(first, second), agents=["solver"])
    assert decision.thought == "drop the failed try" and decision.action.entries == [2]


def test_one_piece_schema_limits_entries_to_the_stack() -> None:
    schema = coordinator_schema(["solver"], 100, [1, 2])
    entries = schema["$defs"]["ReviseAction"]["properties"]["entries"]
    assert entries["items"]["enum"] == [1, 2]
    empty = coordinator_schema(["solver"], 100, [])["$defs"]["ReviseAction"]["properties"]
    assert empty["op"]["enum"] == ["update"] and empty["entries"]["maxItems"] == 0


def test_planner_takes_structured_decisions_in_two_stages() -> None:
    lead = FakeChat(
        responses=["unused"],
        structured=[
            {"thought": "solver first", "action": "delegate"},
            {"action": "delegate", "agent": "solver", "task": "3 pens at $2?"},
            {"thought": "it reported 6", "action": "finish"},
            {"action": "finish", "answer": "6"},
        ],
    )
    sub = FakeChat(responses=["2*3 = 6 <answer>6</answer>"])
    app = build_stackplanner_graph(lead, subagent_model=sub).compile()
    out = app.invoke({"query": Q})
    assert out["answer"] == "6" and out["status"] == "finished"
    schemas = [asked.schema for asked in lead.asked]
    assert schemas[0]["properties"]["action"]["enum"] == ["delegate", "plan"]  # empty stack
    assert schemas[1]["properties"]["action"]["enum"] == ["delegate"]
    assert schemas[2]["properties"]["action"]["enum"] == list(CHOICES)  # a report is on it
    assert schemas[3]["properties"]["answer"]["maxLength"] == 200
    # stage two sees stage one's reply and an instruction for the chosen action
    follow = lead.asked[1].messages
    assert isinstance(follow[-2], AIMessage) and '"delegate"' in follow[-2].content
    assert isinstance(follow[-1], HumanMessage) and "delegation" in follow[-1].content
    # the short prompt: the schemas carry the format, so no JSON examples to copy
    assert "Example" not in follow[0].content and "note:" in follow[0].content
    steps = out["trajectory"]["steps"]
    assert [s["action"] for s in steps] == ["delegate", "finish"]
    assert steps[0]["thought"] == "solver first"


def test_one_stage_when_configured() -> None:
    decision = {"thought": "t", "action": {"action": "delegate", "agent": "solver", "task": Q}}
    lead = FakeChat(responses=["unused"], structured=[decision])
    sub = FakeChat(responses=["<answer>6</answer>"])
    cfg = StackPlannerConfig(two_stage=False, budget=StackBudgetConfig(max_steps=1))
    out = (
        build_stackplanner_graph(lead, subagent_model=sub, config=cfg)
        .compile()
        .invoke({"query": Q})
    )
    schema, _, messages = lead.asked[0]
    assert "$defs" in schema and "Example" in messages[0].content
    assert out["answer"] == "6" and out["status"] == "budget"


def test_subagent_sees_the_overall_task_when_the_delegation_is_terse() -> None:
    lead = FakeChat(
        responses=["unused"],
        structured=[
            {"thought": "go", "action": "delegate"},
            {"action": "delegate", "agent": "solver", "task": "compute it"},
        ],
    )
    sub = FakeChat(responses=["it is 6"])
    cfg = StackPlannerConfig(budget=StackBudgetConfig(max_steps=1))
    out = (
        build_stackplanner_graph(lead, subagent_model=sub, config=cfg)
        .compile()
        .invoke({"query": Q})
    )
    seen = [str(messages[-1].content) for messages in sub.prompts]
    assert Q in seen[0] and seen[0].endswith("compute it")
    # no report stated an answer: the latest report's last line stands, no fallback run
    assert out["answer"] == "it is 6" and len(seen) == 1
    assert "latest report" in out["trajectory"]["stop_reason"]


def test_stages_drop_a_repeated_entry_id() -> None:
    first = {"thought": "merge", "action": "prune"}
    second = {"action": "revise", "op": "prune", "entries": [5, 2, 5], "content": "x"}
    assert decision_from_stages(first, second)["action"]["entries"] == [5, 2]
    assert second["entries"] == [5, 2, 5]  # the stage reply itself is left as it was


def test_a_cut_off_first_stage_without_an_action_is_an_invalid_decision() -> None:
    """A reply truncated at the token cap may parse as JSON with no "action": no crash."""
    lead = FakeChat(
        responses=["unused"],
        structured=[
            {"thought": "I will first"},  # cut off before its "action"
            {"thought": "solver", "action": "delegate"},
            {"action": "delegate", "agent": "solver", "task": "3 pens at $2?"},
            {"thought": "done", "action": "finish"},
            {"action": "finish", "answer": "6"},
        ],
    )
    sub = FakeChat(responses=["<answer>6</answer>"])
    out = build_stackplanner_graph(lead, subagent_model=sub).compile().invoke({"query": Q})
    assert out["answer"] == "6" and out["status"] == "finished"
    assert len(lead.asked) == 5  # the unreadable first stage was asked again, not followed up
