"""MemEvolver's nodes called directly on states and a bank, without compiling a graph."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END
from langgraph.runtime import Runtime

from genmem.graph.evolver import EvolverConfig, EvolverNodes
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank, revise_reply

Q = "Pens cost $3 for 2. How much do 10 cost?"
OLD = "For rate problems, find the amount per unit first, then scale it."
NEW = "Rate problems: compute the unit price, scale it, and check the units of the answer."
TRAJECTORY = f"Task: {Q}\nsolver: 3 / 2 * 10 = 15\nAnswer: 15"
FAR = SID((40, 2, 2, 2))


def _nodes(chat: FakeChat, sids: list[SID] | None = None, **config: Any) -> EvolverNodes:
    cfg = EvolverConfig(**config) if config else None
    generator = FixedGenerator([A] if sids is None else sids)
    return EvolverNodes(chat, sid_generator=generator, config=cfg)


def _read(sid: SID = A, payload: str | None = OLD, **state: Any) -> dict[str, Any]:
    """A state after ``memory_lookup`` read ``sid`` (holding ``payload``, or empty)."""
    hits = [] if payload is None else [{"sid": str(sid), "payload": payload, "version": 1}]
    result = {"query": str(sid), "exact": payload is not None, "hits": hits}
    call = {"name": "memory_lookup", "args": {"sid_list": [str(sid)]}, "id": "evolver-lookup-1"}
    messages = [
        HumanMessage(Q),
        AIMessage("", tool_calls=[call]),
        ToolMessage("(entries)", tool_call_id="evolver-lookup-1", artifact=[result]),
    ]
    return {"query": Q, "trajectory": TRAJECTORY, "sid": str(sid), "messages": messages, **state}


def test_address_reads_the_proposed_slot(tmp_path) -> None:
    bank = open_bank(one_entry_bank(tmp_path, OLD))
    nodes = _nodes(FakeChat(responses=[]))
    out = nodes.address_in({"query": Q, "trajectory": TRAJECTORY}, bank, {})
    assert out["sid"] == str(A) and out["attempts"] == 0 and out["error"] is None
    assert out["messages"][-1].tool_calls[0]["args"] == {"sid_list": [str(A)]}
    assert nodes.after_address(out) == "lookup"


def test_no_proposed_sid_is_a_rejection_and_the_end(tmp_path) -> None:
    bank = open_bank(one_entry_bank(tmp_path, OLD))
    nodes = _nodes(FakeChat(responses=[]), sids=[])
    out = nodes.address_in({"query": Q, "trajectory": TRAJECTORY}, bank, {})
    assert out["sid"] is None and out["error"]["kind"] == "no_address"
    assert out["events"][0]["kind"] == "rejected"
    assert nodes.after_address(out) == END
    with pytest.raises(ValueError, match="'trajectory'"):
        nodes.address_in({"query": Q}, bank, {})


def test_a_failed_lookup_is_a_rejection() -> None:
    nodes = _nodes(FakeChat(responses=[]))
    out = nodes.decision_request({"query": Q, "sid": str(A), "messages": []})
    assert out["attempts"] == 1 and out["error"]["kind"] == "lookup_failed"


def test_a_valid_decision_is_applied_next() -> None:
    nodes = _nodes(FakeChat(responses=[revise_reply(NEW)]))
    ask = nodes.decision_request(_read())
    assert ask.schema is None and "holds an entry" in ask.asked[0].content
    out = nodes.decision_update(ask, ask.reply(nodes.chat), DEFAULT_SPEC)
    assert out["decision"]["op"] == "revise" and out["decision"]["payload"] == NEW
    assert out["error"] is None and out["attempts"] == 1
    assert nodes.after_decide(out) == "apply"


def test_a_rejected_decision_is_fed_back_while_retries_last() -> None:
    insert = json.dumps({"analysis": "a", "op": "insert", "sid": str(A), "payload": NEW})
    nodes = _nodes(FakeChat(responses=[insert]), max_retries=1)
    ask = nodes.decision_request(_read())
    out = nodes.decision_update(ask, ask.reply(nodes.chat), DEFAULT_SPEC)
    assert out["decision"] is None and out["error"]["kind"] == "wrong_op"
    assert "rejected" in out["messages"][-1].content
    assert nodes.after_decide(out) == "decide"
    # the second attempt's rejection is the last: nothing fed back, the run ends
    again = nodes.decision_request({**_read(), "attempts": 1})
    assert again.asked == []
    last = nodes.decision_update(again, AIMessage(insert), DEFAULT_SPEC)
    assert not isinstance(last["messages"][-1], HumanMessage)
    assert nodes.after_decide(last) == END
    assert not nodes.will_retry("version_conflict", 1)


def test_a_model_that_takes_schemas_is_asked_under_the_slots_schema() -> None:
    chat = FakeChat(structured=[{"analysis": "a", "op": "insert", "sid": str(FAR), "payload": NEW}])
    nodes = _nodes(chat, sids=[FAR])
    assert nodes.use_schema
    ask = nodes.decision_request(_read(FAR, payload=None))
    out = nodes.decision_update(ask, asyncio.run(ask.areply(chat)), DEFAULT_SPEC)
    assert out["decision"]["op"] == "insert" and out["decision"]["sid"] == str(FAR)
    [asked] = chat.asked
    assert asked.schema["properties"]["op"]["enum"] == ["insert"]
    assert asked.schema["properties"]["sid"]["enum"] == [str(FAR)]


def test_apply_writes_through_the_bank(tmp_path) -> None:
    url = one_entry_bank(tmp_path, OLD)
    nodes = _nodes(FakeChat(responses=[]))
    decision = {"analysis": "a", "op": "revise", "sid": str(A), "payload": NEW}
    state = {**_read(), "decision": decision, "attempts": 1}
    out = nodes.apply(state, Runtime(context={"bank_url": url}))
    assert out["error"] is None and out["events"][0]["kind"] == "applied"
    assert open_bank(url).get(A).payload == NEW
    # the same revision again is a stale compare-and-set: refused, nothing raised
    stale = asyncio.run(nodes.aapply(state, Runtime(context={"bank_url": url})))
    assert stale["error"]["kind"] == "version_conflict"
