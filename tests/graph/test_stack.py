"""The StackPlanner core without a model: the task-memory stack, its budget, coordinator actions."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from genmem.errors import GenMemError
from genmem.graph.planner_actions import (
    ACTION_NAMES,
    DEFAULT_AGENTS,
    REVISE_OPS,
    CoordinatorDecision,
    DelegateAction,
    FinishAction,
    InvalidAction,
    PlanAction,
    ReviseAction,
    action_schema_text,
    decision_json_schema,
    parse_action,
    parse_decision,
)
from genmem.graph.stack import (
    InvalidStackEdit,
    StackBudgetConfig,
    StackEntry,
    TaskStack,
    approx_tokens,
    default_summarize,
)

AGENTS = tuple(DEFAULT_AGENTS)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- helpers ----------------------------------------------------------------------------------


def _stack(n_results: int = 4, *, plan: bool = True) -> TaskStack:
    stack = TaskStack()
    if plan:
        stack = stack.push("plan", "1. look it up\n2. compute")
    for i in range(n_results):
        stack = stack.push("result", f"finding {i}", agent="research", task=f"question {i}")
    return stack


def _accounted(stack: TaskStack) -> set[int]:
    """Every id the stack still shows, live or recorded in a replacing entry."""
    return {i for e in stack.entries for i in (e.id, *e.replaces)}


def _check_invariants(stack: TaskStack) -> None:
    ids = stack.ids
    assert len(set(ids)) == len(ids)
    assert all(0 < i < stack.next_id for i in ids)
    # nothing vanishes: every id ever handed out is live or recorded where it was replaced
    assert _accounted(stack) == set(range(1, stack.next_id))
    assert TaskStack.model_validate_json(stack.model_dump_json()) == stack
    assert TaskStack.model_validate(json.loads(json.dumps(stack.model_dump()))) == stack


# --- entries and pushing ----------------------------------------------------------------------


def test_push_hands_out_increasing_ids_and_leaves_the_old_stack_alone() -> None:
    empty = TaskStack()
    one = empty.push("plan", "1. do it")
    two = one.push("result", "done", agent="solver", task="do it")
    assert empty.size == 0 and one.size == 1 and len(two) == 2
    assert two.ids == (1, 2) and two.next_id == 3
    assert two.top == StackEntry(id=2, kind="result", content="done", agent="solver", task="do it")
    assert two.current_plan is not None and two.current_plan.id == 1
    assert empty.top is None and empty.current_plan is None


def test_the_stack_is_immutable() -> None:
    stack = _stack(1)
    with pytest.raises(ValidationError):
        stack.next_id = 99  # type: ignore[misc]
    with pytest.raises(ValidationError):
        stack.entries[0].content = "changed"  # type: ignore[misc]


@pytest.mark.parametrize("kind", ["summary", "failure", "bogus"])
def test_push_refuses_kinds_that_only_edits_create(kind: str) -> None:
    stack = _stack(1)
    with pytest.raises(InvalidStackEdit, match="condense and prune") as info:
        stack.push(kind, "text")  # type: ignore[arg-type]
    assert info.value.op == "push"


@pytest.mark.parametrize("content", ["", "   \n\t"])
def test_push_refuses_empty_content(content: str) -> None:
    with pytest.raises(InvalidStackEdit, match="empty content"):
        _stack(1).push("note", content)


def test_get_and_span() -> None:
    stack = _stack(4)  # ids 1..5
    assert stack.get(3).content == "finding 1"
    assert stack.span(2, 4) == (2, 3, 4) and stack.span(4, 2) == (2, 3, 4)
    with pytest.raises(InvalidStackEdit, match="#9 is not on the stack"):
        stack.get(9)
    condensed = stack.condense([2, 3], "first two findings")  # summary #6 sits where #2 was
    assert condensed.ids == (1, 6, 4, 5)
    assert condensed.span(1, 4) == (1, 6, 4)


# --- condense ---------------------------------------------------------------------------------


def test_condense_puts_one_summary_in_place_of_the_run() -> None:
    stack = _stack(4)
    out = stack.condense([3, 2, 4], "  findings 0-2 agree  ")
    assert out.ids == (1, 6, 5) and out.next_id == 7
    summary = out.get(6)
    assert summary.kind == "summary" and summary.content == "findings 0-2 agree"
    assert summary.replaces == (2, 3, 4)
    assert stack.ids == (1, 2, 3, 4, 5)  # the original is untouched
    _check_invariants(out)


def test_condensing_a_summary_records_what_it_stood_for() -> None:
    out = _stack(4).condense([2, 3], "a").condense([6, 4], "b")
    assert out.get(7).replaces == (2, 3, 4, 6)
    assert "[#7 summary of #2-#4, #6]" in out.render()
    _check_invariants(out)


def test_condense_accepts_a_single_entry_and_a_range() -> None:
    stack = _stack(4)
    assert stack.condense([3], "short").get(6).replaces == (3,)
    assert stack.condense(range(2, 5), "three").get(6).replaces == (2, 3, 4)


@pytest.mark.parametrize(
    ("ids", "summary", "message"),
    [
        ([2, 4], "s", r"unbroken run.*#3 sit between"),
        ([2, 9], "s", r"#9 not on the stack \(ids on the stack: #1-#5\)"),
        ([], "s", "at least one entry id"),
        ([2, 2], "s", "more than once"),
        ([2, 3], "", "non-empty summary"),
        ([2, 3], "  \n ", "non-empty summary"),
        (["2"], "s", "as integers"),
    ],
)
def test_bad_condense_raises_and_changes_nothing(ids: list, summary: str, message: str) -> None:
    stack = _stack(4)
    before = stack.model_dump()
    with pytest.raises(InvalidStackEdit, match=message) as info:
        stack.condense(ids, summary)
    assert info.value.op == "condense"
    assert isinstance(info.value, GenMemError) and isinstance(info.value, ValueError)
    assert stack.model_dump() == before


# --- prune ------------------------------------------------------------------------------------


def test_prune_leaves_a_one_line_failure_note() -> None:
    stack = _stack(4)
    out = stack.prune([3, 4], "searched the wrong city;\n  no population figure found")
    assert out.ids == (1, 2, 6, 5)
    note = out.get(6)
    assert note.kind == "failure" and note.replaces == (3, 4)
    assert note.content == "searched the wrong city; no population figure found"
    _check_invariants(out)


def test_prune_may_drop_entries_that_are_not_adjacent() -> None:
    out = _stack(4).prune([2, 4], "both lookups timed out")
    assert out.ids == (1, 6, 3, 5) and out.get(6).replaces == (2, 4)


@pytest.mark.parametrize(
    ("ids", "note", "message"),
    [
        ([7], "x", "not on the stack"),
        ([], "x", "at least one entry id"),
        ([2], "", "one-line note"),
        ([2], " \n ", "one-line note"),
    ],
)
def test_bad_prune_raises_and_changes_nothing(ids: list, note: str, message: str) -> None:
    stack = _stack(4)
    before = stack.model_dump_json()
    with pytest.raises(InvalidStackEdit, match=message):
        stack.prune(ids, note)
    assert stack.model_dump_json() == before


def test_edits_on_an_empty_stack_say_it_is_empty() -> None:
    with pytest.raises(InvalidStackEdit, match="the stack is empty"):
        TaskStack().condense([1], "s")


# --- revise actions ---------------------------------------------------------------------------


def test_revise_applies_each_op() -> None:
    stack = _stack(3)
    noted = stack.revise(ReviseAction(action="revise", op="update", content="check units"))
    assert noted.top is not None and noted.top.kind == "note"
    condensed = stack.revise(
        ReviseAction(action="revise", op="condense", entries=[2, 3], content="both agree")
    )
    assert condensed.get(5).kind == "summary"
    pruned = stack.revise(ReviseAction(action="revise", op="prune", entries=[4], content="dead"))
    assert pruned.get(5).kind == "failure"
    with pytest.raises(InvalidStackEdit):
        stack.revise(ReviseAction(action="revise", op="condense", entries=[2, 4], content="x"))


# --- auto-condense ----------------------------------------------------------------------------


def test_auto_condense_keeps_the_plan_and_the_newest_entries() -> None:
    stack = _stack(10)  # plan #1, results #2..#11
    out = stack.auto_condense(6)
    assert out.size <= 6
    assert out.entries[0].id == 1 and out.current_plan is not None
    assert out.ids[-3:] == (9, 10, 11)
    assert out.get(12).replaces == tuple(range(2, 9))
    assert "#2 result (research): finding 0" in out.get(12).content
    _check_invariants(out)


def test_auto_condense_does_nothing_within_the_limit() -> None:
    stack = _stack(3)
    assert stack.auto_condense(4) is stack


def test_auto_condense_with_the_plan_in_the_middle() -> None:
    stack = _stack(4, plan=False).push("plan", "new plan")
    for i in range(4):
        stack = stack.push("result", f"later {i}")
    out = stack.auto_condense(4, keep_recent=1)
    assert out.size == 4
    assert [e.kind for e in out.entries] == ["summary", "plan", "summary", "result"]
    _check_invariants(out)


def test_auto_condense_uses_the_given_summarizer() -> None:
    seen: list[list[int]] = []

    def summarize(entries: list[StackEntry]) -> str:
        seen.append([e.id for e in entries])
        return f"{len(entries)} entries"

    out = _stack(8).auto_condense(5, summarize, keep_recent=2)
    assert seen == [[2, 3, 4, 5, 6, 7]]
    assert out.get(10).content == "6 entries"


@pytest.mark.parametrize("bad", ["", "   ", None])
def test_auto_condense_checks_the_summarizer_output(bad: str | None) -> None:
    stack = _stack(8)
    with pytest.raises(InvalidStackEdit, match="summarizer returned"):
        stack.auto_condense(5, lambda entries: bad)  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize(
    ("max_entries", "keep_recent", "message"),
    [(3, None, "max_entries=3"), (True, None, "max_entries=True"), (6, 4, "keep_recent=4")],
)
def test_auto_condense_rejects_settings_that_cannot_fit(
    max_entries: int, keep_recent: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        _stack(8).auto_condense(max_entries, keep_recent=keep_recent)


def test_default_summarize_is_deterministic_and_bounded() -> None:
    entries = list(_stack(30).entries)
    text = default_summarize(entries)
    assert text == default_summarize(entries) and len(text) <= 600
    assert default_summarize(entries, max_chars=100).startswith("#1 plan")


# --- render -----------------------------------------------------------------------------------


def test_render_shows_ids_oldest_first() -> None:
    stack = _stack(2).push("note", "line one\nline two")
    text = stack.render()
    assert text.splitlines() == [
        "[#1 plan] 1. look it up",
        "  2. compute",
        "[#2 result from research | task: question 0] finding 0",
        "[#3 result from research | task: question 1] finding 1",
        "[#4 note] line one",
        "  line two",
    ]
    assert TaskStack().render() == "(the stack is empty)"


def test_render_within_a_budget_keeps_the_plan_and_newest() -> None:
    stack = _stack(20)
    text = stack.render(max_chars=250)
    assert len(text) <= 250
    assert text.startswith("[#1 plan]")
    assert "[#21 result" in text and "older entries hidden)" in text
    assert "[#2 result" not in text


def test_render_with_a_tiny_budget_still_fits() -> None:
    stack = _stack(3).push("result", "x" * 500)
    text = stack.render(max_chars=40)
    assert len(text) <= 40 and text.startswith("[#5 result")
    with pytest.raises(ValueError, match="max_chars=0"):
        stack.render(max_chars=0)


# --- serialisation and corrupt state ----------------------------------------------------------


def test_round_trips_through_langgraph_serializer() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    serde = JsonPlusSerializer()
    stack = _stack(3).condense([2, 3], "s").prune([4], "failed")
    assert serde.loads_typed(serde.dumps_typed(stack)) == stack
    as_dict = stack.model_dump(mode="json")
    assert serde.loads_typed(serde.dumps_typed(as_dict)) == as_dict


@pytest.mark.parametrize(
    "payload",
    [
        {"entries": [{"id": 1, "kind": "note", "content": "a"}], "next_id": 1},
        {
            "entries": [
                {"id": 1, "kind": "note", "content": "a"},
                {"id": 1, "kind": "note", "content": "b"},
            ],
            "next_id": 3,
        },
        {"entries": [{"id": 2, "kind": "summary", "content": "s", "replaces": [2]}], "next_id": 3},
        {"entries": [{"id": 2, "kind": "summary", "content": "s"}], "next_id": 3},
        {"entries": [{"id": 1, "kind": "note", "content": "a", "replaces": [3]}], "next_id": 4},
        {
            "entries": [{"id": 2, "kind": "failure", "content": "a\nb", "replaces": [1]}],
            "next_id": 3,
        },
        {"entries": [{"id": 1, "kind": "note", "content": " "}], "next_id": 2},
        {"entries": [], "next_id": 1, "extra": True},
    ],
)
def test_corrupt_state_is_rejected(payload: dict) -> None:
    with pytest.raises(ValidationError):
        TaskStack.model_validate(payload)


# --- property tests ---------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_CONTENT = _TEXT.filter(lambda s: s.strip())


@st.composite
def _edit_runs(draw: st.DrawFn) -> list[tuple[str, TaskStack]]:
    """A run of valid edits: (operation, stack after it), starting from ("start", empty)."""
    stack = TaskStack()
    run = [("start", stack)]
    for _ in range(draw(st.integers(1, 25))):
        op = draw(st.sampled_from(["push", "push", "condense", "prune", "auto"]))
        if op == "push" or stack.size == 0:
            op = "push"
            kind = draw(st.sampled_from(["plan", "result", "note"]))
            stack = stack.push(kind, draw(_CONTENT), agent=draw(st.sampled_from([None, *AGENTS])))
        elif op == "condense":
            lo = draw(st.integers(0, stack.size - 1))
            hi = draw(st.integers(lo, stack.size - 1))
            stack = stack.condense(stack.ids[lo : hi + 1], draw(_CONTENT))
        elif op == "prune":
            ids = draw(st.lists(st.sampled_from(stack.ids), min_size=1, unique=True))
            stack = stack.prune(ids, draw(_CONTENT))
        else:
            stack = stack.auto_condense(draw(st.integers(4, 8)))
        run.append((op, stack))
    return run


def _edit_sequences() -> st.SearchStrategy[list[TaskStack]]:
    return _edit_runs().map(lambda run: [stack for _, stack in run])


@PROPERTY
@given(_edit_runs())
def test_valid_edits_keep_ids_unique_and_lose_nothing(run: list[tuple[str, TaskStack]]) -> None:
    for (_, before), (op, after) in itertools.pairwise(run):
        _check_invariants(after)
        if op == "auto":  # one summary per condensed run, or nothing when it already fits
            assert after.next_id - before.next_id in (0, 1, 2)
        else:
            assert after.next_id == before.next_id + 1  # exactly one new id per edit
        fresh = range(before.next_id, after.next_id)
        assert set(after.ids) - set(before.ids) == set(fresh)  # new entries get new, larger ids
        for gone in set(before.ids) - set(after.ids):
            # each removed entry is recorded by an entry that replaced it
            assert any(gone in after.get(i).replaces for i in fresh)


@PROPERTY
@given(_edit_sequences(), st.integers(4, 10))
def test_auto_condense_always_fits_and_keeps_the_plan(
    stacks: list[TaskStack], max_entries: int
) -> None:
    stack = stacks[-1]
    out = stack.auto_condense(max_entries)
    assert out.size <= max_entries
    _check_invariants(out)
    plan = stack.current_plan
    if plan is not None:
        assert out.current_plan == plan
    if out is not stack:
        assert out.top == stack.top  # the newest entry survives


@PROPERTY
@given(_edit_sequences(), st.integers(1, 400))
def test_render_never_exceeds_its_budget(stacks: list[TaskStack], max_chars: int) -> None:
    stack = stacks[-1]
    full = stack.render()
    text = stack.render(max_chars)
    assert len(text) <= max_chars
    if len(full) <= max_chars:
        assert text == full
    elif stack.top is not None and max_chars > len(stack.top.header()):
        assert stack.top.header() in text  # the newest entry is always shown


@PROPERTY
@given(_edit_sequences(), st.data())
def test_invalid_edits_change_nothing(stacks: list[TaskStack], data: st.DataObject) -> None:
    stack = stacks[-1]
    before = stack.model_dump_json()
    unknown = data.draw(st.integers(stack.next_id, stack.next_id + 50))
    with pytest.raises(InvalidStackEdit):
        stack.prune([*stack.ids[:1], unknown], "x")
    with pytest.raises(InvalidStackEdit):
        stack.condense([unknown], "x")
    if stack.size:
        with pytest.raises(InvalidStackEdit):
            stack.condense(stack.ids[:1], data.draw(st.sampled_from(["", " ", "\n"])))
    if stack.size >= 3:
        with pytest.raises(InvalidStackEdit, match="unbroken run"):
            stack.condense([stack.ids[0], stack.ids[-1]], "x")
    assert stack.model_dump_json() == before


# --- budget -----------------------------------------------------------------------------------


def test_budget_defaults_and_frozen_keyword_only() -> None:
    budget = StackBudgetConfig()
    assert budget.max_entries >= 4 and budget.max_invalid_actions >= 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.max_steps = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        StackBudgetConfig(5)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_steps": 0}, r"max_steps=0 is too small: use >= 1"),
        ({"max_entries": 3}, r"max_entries=3 is too small; the stack keeps.*use >= 4"),
        ({"max_tokens": -5}, r"max_tokens=-5"),
        ({"max_invalid_actions": -1}, r"max_invalid_actions=-1"),
        ({"max_steps": 2.5}, r"max_steps=2.5 must be an int"),
        ({"max_entries": True}, r"max_entries=True must be an int"),
    ],
)
def test_budget_rejects_bad_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        StackBudgetConfig(**kwargs)


def test_budget_says_which_limit_was_hit() -> None:
    budget = StackBudgetConfig(max_steps=5, max_tokens=100, max_invalid_actions=2)
    assert budget.exceeded(steps=4, tokens=99, invalid_actions=2) is None
    assert "max_steps=5" in (budget.exceeded(steps=5, tokens=0, invalid_actions=0) or "")
    assert "max_tokens=100" in (budget.exceeded(steps=0, tokens=100, invalid_actions=0) or "")
    assert "3 invalid" in (budget.exceeded(steps=0, tokens=0, invalid_actions=3) or "")
    assert StackBudgetConfig(max_invalid_actions=0).exceeded(steps=0, tokens=0, invalid_actions=1)


def test_approx_tokens_is_chars_over_four_rounded_up() -> None:
    assert [approx_tokens("x" * n) for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


# --- parsing actions --------------------------------------------------------------------------

FINISH = '{"action": "finish", "answer": "42"}'
DELEGATE = '{"action": "delegate", "agent": "research", "task": "find the 2020 census count"}'


def test_parses_clean_json() -> None:
    assert parse_action(FINISH, agents=AGENTS) == FinishAction(action="finish", answer="42")
    action = parse_action(DELEGATE, agents=AGENTS)
    assert isinstance(action, DelegateAction) and action.agent == "research"


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{FINISH}\n```",
        f"```\n{FINISH}\n```",
        f"Here is my decision:\n```json\n{FINISH}\n```\nThat is all.",
        f"I have enough evidence. {FINISH} Done.",
        f"Think {{briefly}} first, then: {FINISH}",
        f"  \n{FINISH}\n  ",
    ],
)
def test_parses_fenced_and_prose_wrapped_json(text: str) -> None:
    assert parse_action(text, agents=AGENTS) == FinishAction(action="finish", answer="42")


def test_braces_inside_strings_do_not_confuse_extraction() -> None:
    text = 'ok: {"action": "finish", "answer": "use {x} and \\"}\\" here"} trailing }'
    action = parse_action(text, agents=AGENTS)
    assert isinstance(action, FinishAction) and action.answer == 'use {x} and "}" here'


def test_parses_the_decision_form_and_a_flat_thought() -> None:
    nested = parse_decision('{"thought": "need facts", "action": ' + DELEGATE + "}", agents=AGENTS)
    assert nested.thought == "need facts" and isinstance(nested.action, DelegateAction)
    flat = parse_decision('{"thought": "done", "action": "finish", "answer": "7"}', agents=AGENTS)
    assert flat == CoordinatorDecision(
        thought="done", action=FinishAction(action="finish", answer="7")
    )
    assert parse_decision(FINISH, agents=AGENTS).thought == ""


def test_accepts_dicts_and_models_without_mutating_them() -> None:
    raw = {"thought": "t", "action": {"action": "Finish", "answer": " 1 "}}
    snapshot = json.dumps(raw)
    decision = parse_decision(raw, agents=AGENTS)
    assert decision.action == FinishAction(action="finish", answer="1")
    assert json.dumps(raw) == snapshot
    assert parse_decision(decision, agents=AGENTS) == decision
    assert parse_action(decision.action, agents=AGENTS) == decision.action


def test_forgiving_forms_small_models_write() -> None:
    plan = parse_action('{"action": "plan", "steps": "find x\\n\\ncompute y"}', agents=AGENTS)
    assert isinstance(plan, PlanAction) and plan.steps == ["find x", "compute y"]
    assert plan.text() == "1. find x\n2. compute y"
    delegate = parse_action(
        '{"action": " DELEGATE ", "agent": "Solver", "task": "add 2 and 3"}', agents=AGENTS
    )
    assert isinstance(delegate, DelegateAction) and delegate.agent == "solver"
    revise = parse_action(
        '{"action": "revise", "op": "prune", "entries": ["#3", 4], "content": "x"}', agents=AGENTS
    )
    assert isinstance(revise, ReviseAction) and revise.entries == [3, 4]
    single = parse_action(
        '{"action": "revise", "op": "condense", "entries": 5, "content": "s"}', agents=AGENTS
    )
    assert isinstance(single, ReviseAction) and single.entries == [5]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "the reply is empty"),
        ("I will now finish.", "holds no JSON object"),
        ('{"action": "finish", "answer": "4', "never closed"),
        ("{'action': 'finish', 'answer': '4'}", "not valid JSON"),
        ('{"action": "finish", "answer": "4",}', "not valid JSON"),
        ("[" + FINISH + "]", "JSON list, not an object"),
        ("42", "JSON int, not an object"),
    ],
)
def test_garbage_raises_invalid_action(text: str, fragment: str) -> None:
    with pytest.raises(InvalidAction, match=fragment) as info:
        parse_action(text, agents=AGENTS)
    err = info.value
    assert isinstance(err, GenMemError) and isinstance(err, ValueError)
    assert str(err).startswith("invalid coordinator action:")
    assert err.output == text


def test_non_object_input_raises_invalid_action() -> None:
    with pytest.raises(InvalidAction, match="got int"):
        parse_action(3, agents=AGENTS)  # type: ignore[arg-type]


def test_unknown_agent_names_the_field_and_the_choices() -> None:
    text = '{"action": "delegate", "agent": "browser", "task": "open the page"}'
    with pytest.raises(InvalidAction) as info:
        parse_action(text, agents=AGENTS)
    err = info.value
    assert err.field == "agent" and err.allowed == AGENTS
    assert "'browser'" in str(err) and "research, solver, interactor" in str(err)
    # the same agent is fine when it is available
    assert parse_action(text, agents=[*AGENTS, "browser"]).agent == "browser"  # type: ignore[union-attr]
    # and an agent of the default set is refused when it is not
    with pytest.raises(InvalidAction, match="use one of: solver"):
        parse_action(DELEGATE, agents=["solver"])


def test_extra_fields_are_refused_with_the_allowed_ones() -> None:
    with pytest.raises(InvalidAction) as info:
        parse_action('{"action": "finish", "answer": "1", "confidence": 0.9}', agents=AGENTS)
    assert info.value.field == "confidence"
    assert info.value.allowed == ("action", "answer")
    assert "'confidence' is not allowed in a 'finish' action" in str(info.value)
    with pytest.raises(InvalidAction, match="'mood' is not allowed in the reply") as outer:
        parse_decision(
            {"thought": "t", "mood": "good", "action": json.loads(FINISH)}, agents=AGENTS
        )
    assert outer.value.allowed == ("thought", "action")


@pytest.mark.parametrize(
    ("obj", "field", "fragment"),
    [
        ({"action": "stop", "answer": "1"}, "action", "'stop'; it must be one of: plan, delegate"),
        ({"action": ["finish"], "answer": "1"}, "action", "it must be one of: plan, delegate"),
        ({"answer": "1"}, "action", "'action' field is missing"),
        ({"action": "finish"}, "answer", "'answer' is missing from the 'finish' action"),
        ({"action": "finish", "answer": "  "}, "answer", "'answer' is empty"),
        ({"action": "delegate", "agent": "solver", "task": ""}, "task", "'task' is empty"),
        ({"action": "plan", "steps": []}, "steps", "'steps'"),
        ({"action": "plan", "steps": ["a", " "]}, "steps", "'steps' is empty"),
        (
            {"action": "revise", "op": "delete", "entries": [1], "content": "x"},
            "op",
            "it must be one of: update, condense, prune",
        ),
        (
            {"action": "revise", "op": "update", "entries": [1], "content": "x"},
            "entries",
            "must be empty for op 'update'",
        ),
        ({"action": "revise", "op": "prune", "content": "x"}, "entries", "needs the ids"),
        (
            {"action": "revise", "op": "condense", "entries": [2, 2], "content": "x"},
            "entries",
            "lists an id twice",
        ),
        (
            {"action": "revise", "op": "condense", "entries": [0], "content": "x"},
            "entries",
            "positive integers",
        ),
        (
            {"action": "revise", "op": "condense", "entries": ["two"], "content": "x"},
            "entries",
            "valid integer",
        ),
        ({"thought": 5, "action": {"action": "finish", "answer": "1"}}, "thought", "string"),
    ],
)
def test_invalid_actions_name_the_field(obj: dict, field: str, fragment: str) -> None:
    with pytest.raises(InvalidAction, match=fragment) as info:
        parse_action(json.dumps(obj), agents=AGENTS)
    assert info.value.field == field
    assert "Reply with one JSON object, e.g. {" in str(info.value)
    assert info.value.problems


def test_the_allowed_values_come_with_enum_errors() -> None:
    with pytest.raises(InvalidAction) as info:
        parse_action('{"action": "ask"}', agents=AGENTS)
    assert info.value.allowed == ACTION_NAMES
    with pytest.raises(InvalidAction) as op:
        parse_action('{"action": "revise", "op": "drop", "content": "x"}', agents=AGENTS)
    assert op.value.allowed == REVISE_OPS


@pytest.mark.parametrize("agents", [[], [""], [3]])
def test_agents_must_be_given(agents: list) -> None:
    with pytest.raises(ValueError, match="non-empty collection of agent names"):
        parse_action(FINISH, agents=agents)


_ACTIONS = st.one_of(
    st.builds(
        PlanAction, action=st.just("plan"), steps=st.lists(_CONTENT.map(str.strip), min_size=1)
    ),
    st.builds(
        DelegateAction,
        action=st.just("delegate"),
        agent=st.sampled_from(AGENTS),
        task=_CONTENT.map(str.strip),
    ),
    st.builds(
        ReviseAction,
        action=st.just("revise"),
        op=st.sampled_from(["condense", "prune"]),
        entries=st.lists(st.integers(1, 999), min_size=1, max_size=5, unique=True),
        content=_CONTENT.map(str.strip),
    ),
    st.builds(FinishAction, action=st.just("finish"), answer=_CONTENT.map(str.strip)),
)
_PROSE = st.text(alphabet=st.sampled_from("abc xyz.,:;!?\n"), max_size=30)


@PROPERTY
@given(_ACTIONS, _PROSE, _PROSE, st.sampled_from(["bare", "fenced", "prose", "decision"]))
def test_any_valid_action_survives_every_accepted_wrapping(
    action: PlanAction | DelegateAction | ReviseAction | FinishAction,
    before: str,
    after: str,
    form: str,
) -> None:
    body = json.dumps(action.model_dump(), ensure_ascii=form == "bare")
    text = {
        "bare": body,
        "fenced": f"{before}\n```json\n{body}\n```\n{after}",
        "prose": f"{before} {body} {after}",
        "decision": json.dumps({"thought": before, "action": action.model_dump()}),
    }[form]
    assert parse_action(text, agents=AGENTS) == action


# --- prompt text and schema -------------------------------------------------------------------


def test_schema_text_lists_every_action_and_agent() -> None:
    text = action_schema_text(AGENTS)
    for name in ACTION_NAMES:
        assert f'"action": "{name}"' in text
    for op in REVISE_OPS:
        assert f'"op": "{op}"' in text
    for name, role in DEFAULT_AGENTS.items():
        assert f"- {name}: {role}" in text


def test_schema_text_takes_custom_agents() -> None:
    text = action_schema_text({"solver": "does arithmetic", "browser": "opens pages"})
    assert "- solver: does arithmetic" in text and "- browser: opens pages" in text
    assert "research" not in text
    assert "    - shell\n" in action_schema_text(["shell", "research"])


def test_json_schema_limits_agents_and_forbids_extras() -> None:
    schema = decision_json_schema(["solver", "research"])
    defs = schema["$defs"]
    assert defs["DelegateAction"]["properties"]["agent"]["enum"] == ["solver", "research"]
    for name in ("PlanAction", "DelegateAction", "ReviseAction", "FinishAction"):
        assert defs[name]["additionalProperties"] is False
        assert all(p.get("description") for p in defs[name]["properties"].values())
    assert schema["additionalProperties"] is False
    # the class-level schema is not changed by the per-call enum
    assert (
        "enum"
        not in CoordinatorDecision.model_json_schema()["$defs"]["DelegateAction"]["properties"][
            "agent"
        ]
    )


def test_render_cuts_the_newest_entry_short_rather_than_skip_it_when_it_is_the_plan() -> None:
    # Found by hypothesis: the newest entry was the plan, did not fit beside the gap marker, and
    # was skipped as if it were an older plan, so an older entry was shown instead.
    stack = TaskStack().push("plan", "00000000").push("plan", "000000\x1e\x850")
    text = stack.render(41)
    assert len(text) <= 41 and text.startswith(stack.top.header())
