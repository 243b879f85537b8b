"""MemRetriever's nodes called directly on states and a bank, without compiling a graph."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from genmem.graph.retriever import RetrieverConfig, RetrieverNodes
from genmem.memory.bank import Bank
from genmem.memory.location import open_bank
from genmem.memory.sid import SID
from genmem.policies.prompts import NO_MEMORY_ANSWER
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank

Q = "Pens cost $3 for 2. How much do 10 cost?"
ENTRY = "For rate problems, find the amount per unit first, then scale it."
FAR = SID((40, 2, 2, 2))


@pytest.fixture
def bank(tmp_path) -> Bank:
    return open_bank(one_entry_bank(tmp_path, ENTRY))


def _looked_up(*hits: dict[str, Any]) -> dict[str, Any]:
    """A state after ``memory_lookup`` answered with ``hits``."""
    call = {"name": "memory_lookup", "args": {"sid_list": [str(A)]}, "id": "lookup-1"}
    return {
        "query": Q,
        "messages": [
            HumanMessage(Q),
            AIMessage("", tool_calls=[call]),
            ToolMessage("(entries)", tool_call_id="lookup-1", artifact=[{"hits": list(hits)}]),
        ],
    }


def test_address_calls_the_lookup_with_the_chosen_sid(bank) -> None:
    gen = FixedGenerator([A, FAR])
    nodes = RetrieverNodes(FakeChat(responses=[]), sid_generator=gen)
    out = nodes.address_in({"query": Q}, bank, {})
    assert out["sid"] == str(A) and out["ranked"] == [str(A)]
    system, task, call = out["messages"]
    assert isinstance(system, SystemMessage) and isinstance(task, HumanMessage)
    assert call.tool_calls[0]["args"] == {"sid_list": [str(A)]}
    assert nodes.route(out) == "lookup"
    assert gen.calls == [task.content]


def test_address_can_look_up_every_candidate(bank) -> None:
    cfg = RetrieverConfig(beam=2, lookup="candidates")
    nodes = RetrieverNodes(
        FakeChat(responses=[]), sid_generator=FixedGenerator([FAR, A]), config=cfg
    )
    out = nodes.address_in({"query": Q}, bank, {})
    assert out["sid"] == str(FAR)
    assert out["messages"][-1].tool_calls[0]["args"] == {"sid_list": [str(FAR), str(A)]}


def test_no_candidate_means_no_lookup(bank) -> None:
    nodes = RetrieverNodes(FakeChat(responses=[]), sid_generator=FixedGenerator([]))
    out = nodes.address_in({"query": Q}, bank, {})
    assert out["sid"] is None and len(out["messages"]) == 2
    assert nodes.route(out) == "rewrite"
    with pytest.raises(ValueError, match="non-empty 'query'"):
        nodes.address_in({"query": " "}, bank, {})


def test_rewrite_turns_the_hits_into_support() -> None:
    chat = FakeChat(responses=["<answer>Find the price of one pen, then scale it.</answer>"])
    nodes = RetrieverNodes(chat, sid_generator=FixedGenerator([A]))
    out = nodes.rewrite(_looked_up({"sid": str(A), "payload": ENTRY}))
    assert out["support"] == "Find the price of one pen, then scale it."
    assert out["support_source"] == "rewrite" and out["retrieved"][0]["payload"] == ENTRY
    assert len(chat.prompts) == 1 and isinstance(chat.prompts[0][-1], ToolMessage)


def test_a_refused_rewrite_gives_the_entry() -> None:
    chat = FakeChat(responses=["<answer>1234567890</answer>"])
    nodes = RetrieverNodes(chat, sid_generator=FixedGenerator([A]))
    out = asyncio.run(nodes.arewrite(_looked_up({"sid": str(A), "payload": ENTRY})))
    assert out["support"] == ENTRY
    assert out["support_source"] == "entry" and out["support_refused"] == "empty"


def test_nothing_retrieved_answers_without_the_model() -> None:
    chat = FakeChat(responses=[])  # raises if called
    nodes = RetrieverNodes(chat, sid_generator=FixedGenerator([A]))
    for out in (nodes.rewrite(_looked_up()), asyncio.run(nodes.arewrite({"query": Q}))):
        assert out == {"retrieved": [], "support": NO_MEMORY_ANSWER, "support_source": "none"}
    assert chat.prompts == []
