"""The memory graphs under ``ainvoke``/``astream``: the async node bodies, the tool's coroutine and
the bank's async API, on a store that only answers async calls, with the event loop free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from langgraph.graph import StateGraph
from langgraph.store.memory import InMemoryStore

from genmem.graph.bank_lookup import build_lookup_graph
from genmem.graph.evolver import EvolverConfig, build_evolver_graph
from genmem.graph.loop import build_genmem_graph
from genmem.graph.retriever import build_retriever_graph
from genmem.graph.trajectory import StepRecord, Trajectory
from genmem.memory.bank import Bank
from genmem.memory.langgraph_store import LangGraphBankStore
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from tests.conftest import TEST_HASH
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank, revise_reply
from tests.graph.test_loop import EXECUTE, FINISH, RETRIEVE, Q
from tests.memory.test_bank_async import ServerLikeStore, ticks_during

OLD = "For rate problems, find the amount per unit first, then scale it."
NEW = "Rate problems: compute the unit price, scale it, and check the units of the answer."
QUERY = "Pens cost $3 for 2. How much do 10 cost?"
T = TypeVar("T")
TRAJECTORY = Trajectory(
    query=QUERY,
    steps=[StepRecord(step=0, agent="solver", action="tool", observation="3 / 2 * 10 = 15")],
    answer="15",
    status="finished",
).model_dump()


def _store_bank(payload: str = OLD) -> tuple[InMemoryStore, Bank]:
    inner = InMemoryStore()
    bank = LangGraphBankStore(inner).create_bank("gsm", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(A, payload)
    return inner, bank


def _on_server_store(
    graph: StateGraph, inner: InMemoryStore, run: Callable[[Any], Awaitable[T]], delay_s: float = 0
) -> tuple[T, ServerLikeStore]:
    """Compile ``graph`` with a server-like store over ``inner`` on a fresh loop and ``run`` it."""

    async def main() -> tuple[T, ServerLikeStore]:
        store = ServerLikeStore(inner, delay_s=delay_s)
        return await run(graph.compile(store=store)), store

    return asyncio.run(main())


async def _updates(app: Any, inputs: dict[str, Any]) -> list[dict[str, Any]]:
    stream = app.astream(inputs, context={"bank_id": "gsm"}, stream_mode="updates")
    return [chunk async for chunk in stream]


def test_bank_lookup_graph_awaits_the_store_and_leaves_the_loop_free() -> None:
    inner, _ = _store_bank()
    (out, ticks, seconds), store = _on_server_store(
        build_lookup_graph(),
        inner,
        lambda app: ticks_during(app.ainvoke({"sid_list": [str(A)]}, context={"bank_id": "gsm"})),
        delay_s=0.1,
    )
    (result,) = out["results"]
    assert result["exact"] and result["hits"][0]["payload"] == OLD and out["error"] is None
    assert store.calls >= 2 and seconds >= 0.2
    assert ticks >= seconds / 0.01 * 0.5, f"{ticks} heartbeat ticks in {seconds:.2f} s"


def test_bank_lookup_graph_answers_a_bad_sid_on_the_async_path() -> None:
    inner, _ = _store_bank()
    out, _ = _on_server_store(
        build_lookup_graph(),
        inner,
        lambda app: app.ainvoke({"sid_list": ["<SID_L1_99>"]}, context={"bank_id": "gsm"}),
    )
    assert out["results"] == [] and "SID_L1_99" in out["error"]


def test_retriever_astream_reads_through_the_async_tool() -> None:
    inner, _ = _store_bank()
    chat = FakeChat(responses=[f"<answer>{OLD}</answer>"])
    graph = build_retriever_graph(chat, sid_generator=FixedGenerator([SID((3, 0, 7, 5))]))
    updates, _ = _on_server_store(graph, inner, lambda app: _updates(app, {"query": QUERY}))
    assert [next(iter(u)) for u in updates] == ["address", "lookup", "rewrite"]
    rewrite = updates[-1]["rewrite"]
    assert [h["sid"] for h in rewrite["retrieved"]] == [str(A)]  # the sibling of the SID asked
    assert rewrite["support"] == OLD and rewrite["support_source"] == "rewrite"


def _evolve(reply: str) -> tuple[dict[str, Any], Bank]:
    inner, bank = _store_bank()
    chat = FakeChat(responses=[reply])
    graph = build_evolver_graph(
        chat, sid_generator=FixedGenerator([A]), config=EvolverConfig(max_retries=0)
    )
    inputs = {"query": QUERY, "trajectory": TRAJECTORY, "outcome": "success"}
    out, _ = _on_server_store(
        graph, inner, lambda app: app.ainvoke(inputs, context={"bank_id": "gsm"})
    )
    return out, bank


def test_evolver_ainvoke_writes_through_the_async_api() -> None:
    out, bank = _evolve(revise_reply(NEW))
    assert out["error"] is None and out["update"]["outcome"] == "revised"
    assert bank.get(A).payload == NEW and bank.events()[-1].actor == "mem_evolver"
    assert [e["kind"] for e in out["events"]] == ["applied"]


def test_evolver_ainvoke_records_a_gate_refusal_in_the_bank() -> None:
    out, bank = _evolve(revise_reply("15 15 15 15 15 15 15 15"))
    assert out["update"] is None and out["error"]["kind"] == "gated"
    assert bank.get(A).payload == OLD and bank.events()[-1].outcome == "rejected"


def test_closed_loop_ainvoke_retrieves_executes_and_evolves(tmp_path) -> None:
    url = one_entry_bank(tmp_path, "Find the price of one item first.")
    revised = "One item's price, times count."
    chat = FakeChat(responses=[*RETRIEVE, *EXECUTE, *FINISH, revise_reply(revised)])
    graph = build_genmem_graph(chat, sid_generator=FixedGenerator([A])).compile()
    out = asyncio.run(graph.ainvoke({"query": Q}, context={"bank_url": url}))
    assert out["sid"] == str(A) and out["support"] == "Price of one, times the count."
    assert out["answer"] == "6" and out["update"]["outcome"] == "revised"
    assert [e["node"] for e in out["events"]] == ["mem_retriever", "stackplanner", "mem_evolver"]
    assert open_bank(url).get(A).payload == revised


def test_add_memory_ainvoke_around_a_create_agent_agent_uses_the_servers_store() -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from genmem.graph.embed import add_memory
    from tests.graph import test_embed as embed

    inner, bank = _store_bank(embed.PAYLOAD)
    solver = embed._solver()
    memory = FakeChat(responses=[embed.RETRIEVE, revise_reply(NEW)])
    agent = create_agent(solver, tools=[embed.multiply])
    graph = add_memory(agent, model=memory, sid_generator=FixedGenerator([A]))
    inputs = {"messages": [HumanMessage(embed.Q)]}
    out, _ = _on_server_store(
        graph, inner, lambda app: app.ainvoke(inputs, context={"bank_id": "gsm"})
    )
    assert out["support"] == embed.SUPPORT and out["messages"][-1].content == "6"
    assert [e["node"] for e in out["events"]] == ["mem_retriever", "agent", "mem_evolver"]
    assert out["update"]["outcome"] == "revised" and bank.get(A).payload == NEW


@pytest.mark.slow
def test_real_default_model_astream_through_the_async_paths(tmp_path) -> None:
    """The evolver on the embedded default model, streamed with ``astream``: a bank write (or
    the gate's logged refusal) through the async API, with a tiny token budget."""
    from genmem.policies.backends import load_chat_model

    inner, bank = _store_bank()
    chat = load_chat_model("local", max_new_tokens=48)
    graph = build_evolver_graph(chat, config=EvolverConfig(max_retries=0, allowed="occupied"))
    inputs = {"query": QUERY, "trajectory": TRAJECTORY, "outcome": "success"}
    t0 = time.monotonic()
    updates, _ = _on_server_store(graph, inner, lambda app: _updates(app, inputs))
    print(f"\nevolver astream on the default model: {time.monotonic() - t0:.1f} s")
    assert [next(iter(u)) for u in updates] == ["address", "lookup", "decide", "apply"]
    applied = updates[-1]["apply"]
    last = bank.events()[-1]
    assert last.actor == "mem_evolver" and last.sid == str(A)
    if applied.get("update") is None:
        assert applied["error"]["kind"] == "gated" and last.outcome == "rejected"
    else:
        assert last.outcome in ("revised", "retained")
