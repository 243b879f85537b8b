"""MemEvolver subgraph: decisions, rejections and retries with fakes, then the real model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import StateGraph

from genmem.graph.evolver import EvolverConfig, build_evolver_graph
from genmem.graph.trajectory import StepRecord, Trajectory
from genmem.memory.bank import Bank
from genmem.memory.gate import check_payload
from genmem.memory.location import open_bank
from genmem.memory.sid import SID
from genmem.policies.backends import load_chat_model
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank

FAR = SID((40, 2, 2, 2))  # empty
OLD = "For rate problems, find the amount per unit first, then scale it."
NEW = "Rate problems: compute the unit price, scale it, and check the units of the answer."
TRAJECTORY = Trajectory(
    query="Pens cost $3 for 2. How much do 10 cost?",
    steps=[
        StepRecord(step=0, agent="coordinator", action="plan", thought="unit price first"),
        StepRecord(step=1, agent="solver", action="tool", observation="3 / 2 * 10 = 15"),
    ],
    answer="15",
    status="finished",
)


def _decision(op: str, payload: str, sid: SID | str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {"analysis": "unit price first worked", "op": op, "payload": payload}
    if sid is not None:
        body["sid"] = str(sid)
    return json.dumps({**body, **extra})


@pytest.fixture
def bank_url(tmp_path) -> str:
    return one_entry_bank(tmp_path, OLD)


@pytest.fixture
def bank(bank_url) -> Bank:
    return open_bank(bank_url)


def _graph(replies: list[str] | Any, sid: SID, **config: Any):
    chat = replies if not isinstance(replies, list) else FakeChat(responses=replies)
    cfg = EvolverConfig(**config) if config else None
    return build_evolver_graph(chat, sid_generator=FixedGenerator([sid]), config=cfg)


def _run(graph: StateGraph, url: str, **inputs: Any) -> dict[str, Any]:
    state = {"query": TRAJECTORY.query, "trajectory": TRAJECTORY.model_dump(), **inputs}
    return graph.compile().invoke(state, context={"bank_url": url})


def _assert_unchanged(bank: Bank, events_before: int) -> None:
    assert bank.stats().events == events_before
    entry = bank.get(A)
    assert entry is not None and entry.payload == OLD and entry.version == 1
    assert bank.get(FAR) is None


# -- writes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "sid", "payload", "reason"),
    [
        ("insert", FAR, "1234567890", "empty"),
        ("insert", FAR, "15,000,000,000,000 + 15,000,000,000,000", "symbols"),
        ("revise", A, "12_remn_12_remn_12_remn_12_remn_12_remn_12_remn", "repetition"),
        ("revise", A, "Use the <retrieved_memory> block to answer the task.", "markup"),
        ("insert", FAR, "Knead the dough gently and let it rise overnight.", "ungrounded"),
    ],
)
def test_the_gate_refuses_junk_and_the_bank_logs_why(bank_url, bank, op, sid, payload, reason):
    before = bank.stats().events
    out = _run(_graph([_decision(op, payload, sid)], sid), bank_url, outcome="success")
    assert out["update"] is None and out["error"]["kind"] == "gated"
    assert out["error"]["gate_reason"] == reason and out["error"]["output"] == payload
    assert [e["kind"] for e in out["events"]] == ["rejected"]
    assert out["events"][0]["reason"] == "gated"
    last = bank.events()[-1]
    assert (last.outcome, last.reason, last.op, last.sid) == ("rejected", reason, op, str(sid))
    assert bank.stats().events == before + 1 and bank.stats().rejections == {reason: 1}
    assert bank.get(A).payload == OLD and bank.get(A).version == 1 and bank.get(FAR) is None


def test_an_insert_that_copies_the_support_it_was_given_is_refused(bank_url, bank) -> None:
    given = TRAJECTORY.model_copy(update={"support": OLD}).model_dump()
    out = _run(_graph([_decision("insert", OLD, FAR)], FAR), bank_url, trajectory=given)
    assert out["error"]["kind"] == "gated" and out["error"]["gate_reason"] == "copied"
    assert bank.get(FAR) is None and bank.stats().rejections == {"copied": 1}
    out = _run(_graph([_decision("insert", NEW, FAR)], FAR), bank_url, trajectory=given)
    assert out["update"]["outcome"] == "inserted"  # its own words pass


def test_a_respelt_payload_is_kept_and_the_gate_can_be_turned_off(bank_url, bank) -> None:
    out = _run(_graph([_decision("revise", "  " + OLD.upper(), A)], A), bank_url)
    assert out["update"]["outcome"] == "retained" and bank.get(A).version == 1
    graph = _graph([_decision("insert", "1234567890", FAR)], FAR, gate=None)
    out = _run(graph, bank_url)
    assert out["update"]["outcome"] == "inserted" and bank.get(FAR).payload == "1234567890"


def test_insert_into_an_empty_slot(bank_url, bank) -> None:
    gen = FixedGenerator([FAR])
    chat = FakeChat(responses=[_decision("insert", NEW, FAR)])
    graph = build_evolver_graph(chat, sid_generator=gen)
    out = _run(graph, bank_url, outcome="success")
    assert out["sid"] == str(FAR)
    assert out["update"]["outcome"] == "inserted" and out["update"]["version_after"] == 1
    assert out["error"] is None and out["decision"]["op"] == "insert"
    assert [e["kind"] for e in out["events"]] == ["applied"]
    assert out["events"][0]["node"] == "mem_evolver" and out["events"][0]["outcome"] == "inserted"
    assert bank.get(FAR).payload == NEW
    last = bank.events()[-1]
    assert (last.seq, last.outcome, last.actor) == (out["update"]["seq"], "inserted", "mem_evolver")
    # The addressing policy read the rendered trajectory and the environment's outcome.
    assert "Trajectory:" in gen.calls[0] and "Outcome:\nsuccess" in gen.calls[0]
    assert "3 / 2 * 10 = 15" in gen.calls[0]
    # The lookup was a real tool call through ToolNode; the model was told the slot is empty.
    calls = [m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    assert len(calls) == 1 and calls[0].tool_calls[0]["args"] == {"sid_list": [str(FAR)]}
    assert any(isinstance(m, ToolMessage) for m in out["messages"])
    assert "is empty" in chat.prompts[0][-1].content
    # Neighbours that share a prefix are shown, but the slot itself was empty.
    assert all(h["match_depth"] < 4 for h in out["retrieved"])


def test_revise_an_occupied_slot(bank_url, bank) -> None:
    chat = FakeChat(responses=[_decision("revise", NEW, A)])
    out = _run(_graph(chat, A), bank_url)
    assert out["update"]["outcome"] == "revised"
    assert (out["update"]["version_before"], out["update"]["version_after"]) == (1, 2)
    assert bank.get(A).payload == NEW and bank.get(A).version == 2
    assert [v.payload for v in bank.history(A)] == [OLD, NEW]
    assert [h["sid"] for h in out["retrieved"]] == [str(A)]
    assert "version 1" in chat.prompts[0][-1].content


def test_same_text_is_a_retention(bank_url, bank) -> None:
    before = bank.stats().events
    out = _run(_graph([_decision("revise", OLD, A)], A), bank_url)
    assert out["update"]["outcome"] == "retained"
    assert bank.get(A).version == 1 and len(bank.history(A)) == 1
    assert bank.stats().events == before + 1  # a retention is logged, not versioned


def test_empty_revision_is_a_deletion(bank_url, bank) -> None:
    out = _run(_graph([_decision("revise", "", A)], A), bank_url)
    assert out["update"]["outcome"] == "deleted" and out["update"]["version_after"] is None
    assert bank.get(A) is None
    assert [v.deleted for v in bank.history(A)] == [False, True]


def test_blank_sid_means_the_slot_that_was_read(bank_url, bank) -> None:
    reply = "<think>new lesson</think>```json\n" + _decision("insert", NEW, "  ") + "\n```"
    out = _run(_graph([reply], FAR), bank_url)
    assert out["decision"]["sid"] == str(FAR) and out["update"]["outcome"] == "inserted"
    out = _run(_graph([_decision("revise", NEW)], A), bank_url)  # no sid key at all
    assert out["update"]["outcome"] == "revised"


def test_tool_calling_model_is_forced_to_the_decision_schema(bank_url, bank) -> None:
    args = json.loads(_decision("insert", NEW, FAR))
    chat = FakeChat(
        responses=[AIMessage("", tool_calls=[{"name": "EvolverDecision", "args": args, "id": "1"}])]
    )
    out = _run(_graph(chat, FAR), bank_url)
    # Through with_structured_output: one tool, the decision schema for this slot, forced.
    assert chat.bound[-1][1] in ("any", "EvolverDecision")
    assert "EvolverDecision" in chat.bound[-1][0][0]
    assert out["update"]["outcome"] == "inserted" and bank.get(FAR).payload == NEW


# -- rejections: nothing is written --------------------------------------------------------------


def test_invalid_json_is_rejected(bank_url, bank) -> None:
    before = bank.stats().events
    out = _run(_graph(['{"op": "revise", "payload": "unclosed'], A, max_retries=0), bank_url)
    assert out["update"] is None and out["decision"] is None
    assert out["error"]["kind"] == "invalid_output"
    assert out["error"]["output"] == '{"op": "revise", "payload": "unclosed'
    assert [(e["kind"], e["reason"]) for e in out["events"]] == [("rejected", "invalid_output")]
    _assert_unchanged(bank, before)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (_decision("upsert", NEW, A), "invalid_output"),
        (_decision("revise", NEW, A, confidence=0.9), "invalid_output"),
        ("I would revise the entry.", "invalid_output"),
        (_decision("insert", NEW, A), "wrong_op"),
        (_decision("revise", NEW, FAR), "sid_mismatch"),
        (_decision("revise", NEW, "<SID_L1_99><SID_L2_0><SID_L3_0><SID_L4_0>"), "invalid_sid"),
    ],
)
def test_invalid_decisions_on_an_occupied_slot(bank_url, bank, reply: str, kind: str) -> None:
    before = bank.stats().events
    out = _run(_graph([reply], A, max_retries=0), bank_url)
    assert out["error"]["kind"] == kind and out["update"] is None
    assert out["events"][-1]["kind"] == "rejected" and out["events"][-1]["reason"] == kind
    _assert_unchanged(bank, before)


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (_decision("revise", NEW, FAR), "wrong_op"),
        (_decision("insert", "   ", FAR), "empty_payload"),
        (_decision("insert", NEW, A), "sid_mismatch"),
    ],
)
def test_invalid_decisions_on_an_empty_slot(bank_url, bank, reply: str, kind: str) -> None:
    before = bank.stats().events
    out = _run(_graph([reply], FAR, max_retries=0), bank_url)
    assert out["error"]["kind"] == kind and out["update"] is None
    assert out["events"][-1]["op"] == json.loads(reply)["op"]
    _assert_unchanged(bank, before)


def test_malformed_tool_call_is_rejected(bank_url, bank) -> None:
    before = bank.stats().events
    bad = {"name": "EvolverDecision", "args": '{"op": "insert", "payl', "id": "1", "error": "x"}
    chat = FakeChat(responses=[AIMessage("", invalid_tool_calls=[bad])])
    out = _run(_graph(chat, FAR, max_retries=0), bank_url)
    assert out["error"]["kind"] == "invalid_output" and out["error"]["output"].startswith('{"op"')
    _assert_unchanged(bank, before)


def test_a_second_answer_after_the_error_is_fed_back(bank_url, bank) -> None:
    chat = FakeChat(responses=[_decision("insert", NEW, A), _decision("revise", NEW, A)])
    out = _run(_graph(chat, A, max_retries=1), bank_url)
    assert out["update"]["outcome"] == "revised" and out["error"] is None
    assert out["attempts"] == 2
    assert [(e["kind"], e["reason"]) for e in out["events"]] == [
        ("rejected", "wrong_op"),
        ("applied", None),
    ]
    feedback = chat.prompts[1][-1]
    assert isinstance(feedback, HumanMessage) and "rejected" in feedback.content
    assert "revise" in feedback.content and str(A) in feedback.content
    # The rejected reply went back as text: no tool call is left without its result.
    assert chat.prompts[1][-2].content == _decision("insert", NEW, A)
    assert bank.get(A).version == 2


def test_retries_run_out(bank_url, bank) -> None:
    before = bank.stats().events
    chat = FakeChat(responses=["no idea", "still no idea", "unused"])
    out = _run(_graph(chat, A, max_retries=1), bank_url)
    assert len(chat.prompts) == 2 and out["attempts"] == 2
    assert [e["kind"] for e in out["events"]] == ["rejected", "rejected"]
    assert out["error"]["kind"] == "invalid_output" and out["update"] is None
    _assert_unchanged(bank, before)


def test_read_only_snapshot_is_rejected(bank_url, bank, tmp_path) -> None:
    snap = bank.snapshot("snap")
    before = (bank.stats().events, snap.stats().events)
    url = f"sqlite:///{tmp_path}/bank.db?bank=gsm@snap"
    out = _run(_graph([_decision("revise", NEW, A)], A), url)
    assert out["decision"]["op"] == "revise" and out["update"] is None
    assert out["error"]["kind"] == "read_only_bank"
    assert out["events"][-1]["kind"] == "rejected" and out["events"][-1]["op"] == "revise"
    assert (bank.stats().events, snap.stats().events) == before
    assert snap.get(A).payload == OLD
    _assert_unchanged(bank, before[0])


def test_a_concurrent_write_wins_over_a_stale_revision(bank_url, bank) -> None:
    chat = FakeChat(responses=[_decision("revise", NEW, A)])
    chat.before = lambda: bank.revise(A, "written by another agent meanwhile")
    out = _run(_graph(chat, A), bank_url)
    assert out["error"]["kind"] == "version_conflict" and out["update"] is None
    assert bank.get(A).payload == "written by another agent meanwhile"


def test_no_address_means_no_lookup(bank_url, bank) -> None:
    chat = FakeChat(responses=["unused"])
    graph = build_evolver_graph(chat, sid_generator=FixedGenerator([]))
    out = _run(graph, bank_url)
    assert out["sid"] is None and out["error"]["kind"] == "no_address"
    assert not chat.prompts and not out.get("messages")


# -- bad input and configuration -----------------------------------------------------------------


def test_bad_input_raises(bank_url) -> None:
    graph = _graph(["unused"], A)
    with pytest.raises(ValueError, match="non-empty 'query'"):
        _run(graph, bank_url, query="  ")
    with pytest.raises(ValueError, match="'trajectory'"):
        _run(graph, bank_url, trajectory="")
    with pytest.raises(ValueError, match="'trajectory'"):
        graph.compile().invoke({"query": "q"}, context={"bank_url": bank_url})
    with pytest.raises(ValueError, match="not a Trajectory"):
        _run(graph, bank_url, trajectory={"steps": []})
    with pytest.raises(ValueError, match="'outcome'"):
        _run(graph, bank_url, outcome=1)


def test_text_trajectory_is_accepted(bank_url, bank) -> None:
    gen = FixedGenerator([FAR])
    graph = build_evolver_graph(
        FakeChat(responses=[_decision("insert", NEW, FAR)]), sid_generator=gen
    )
    out = _run(graph, bank_url, trajectory="coordinator planned; solver computed 15")
    assert out["update"]["outcome"] == "inserted"
    assert "solver computed 15" in gen.calls[0]


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="beam"):
        EvolverConfig(beam=0)
    with pytest.raises(ValueError, match="max_retries"):
        EvolverConfig(max_retries=-1)
    with pytest.raises(ValueError, match="allowed"):
        EvolverConfig(allowed="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="actor"):
        EvolverConfig(actor=" ")


def test_served_graph_is_compiled_bare_for_langgraph_dev() -> None:
    from genmem import served

    graph = served.mem_evolver()
    assert graph.store is None  # the server adds its store to each run
    assert set(graph.builder.nodes) == {"address", "lookup", "decide", "apply"}


# -- the real default model ----------------------------------------------------------------------


@pytest.mark.slow
def test_real_default_model_end_to_end(bank_url, bank) -> None:
    """A seeded case whose write is known to succeed: the default model revises the one entry.

    The addresser is the model's own constrained decoder limited to occupied slots, so it must
    read A; under the slot's JSON schema the decision can only be a revise of A, so the write
    goes through with the gate off. A regression anywhere on that path (addressing, lookup, the
    schema, the compare-and-set write) fails here instead of taking a "rejected" branch. With
    the gate on (the default), the same decision is either stored or, when the untrained model
    wrote junk, logged as the gate's rejection and nothing else changes.
    """
    before = bank.stats().events
    chat = load_chat_model("local", max_new_tokens=96)
    gated = build_evolver_graph(chat, config=EvolverConfig(max_retries=0, allowed="occupied"))
    out = _run(gated, bank_url, outcome="success")
    verdict = check_payload(out["decision"]["payload"], previous=OLD)
    if out["update"] is None:
        assert out["error"]["kind"] == "gated" and verdict.action == "reject"
        assert (bank.events()[-1].outcome, bank.events()[-1].reason) == (
            "rejected",
            out["error"]["gate_reason"],
        )
        assert len(bank.history(A)) == 1
    else:
        assert out["error"] is None and out["update"]["outcome"] in ("revised", "retained")
    before, version = bank.stats().events, bank.get(A).version
    config = EvolverConfig(max_retries=0, allowed="occupied", gate=None)
    graph = build_evolver_graph(chat, config=config)
    out = _run(graph, bank_url, outcome="success")
    assert out["sid"] == str(A) and out["error"] is None, out["error"]
    assert [e["kind"] for e in out["events"]] == ["applied"]
    assert out["decision"]["op"] == "revise" and out["decision"]["sid"] == str(A)
    assert out["update"]["sid"] == str(A) and out["update"]["version_before"] == version
    assert bank.stats().events == before + 1
    last = bank.events()[-1]
    assert (last.seq, last.outcome, last.actor) == (
        out["update"]["seq"],
        out["update"]["outcome"],
        "mem_evolver",
    )
    history = bank.history(A)
    assert history[0].payload == OLD and history[-1].payload == out["decision"]["payload"]
