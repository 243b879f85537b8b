"""The memory nodes on their own: what they send to the memory agents and what they write back."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from genmem.graph.memory_nodes import (
    MEMORY_KEYS,
    EvolveNode,
    RetrieveNode,
    check_mode,
    fresh_memory_state,
)

RUNTIME = SimpleNamespace(context={"bank_url": "sqlite:///b.db"}, store=None)


class Recording:
    """A stand-in for a compiled graph: records each input with its context, returns ``reply``."""

    def __init__(self, reply: dict) -> None:
        self.reply = reply
        self.seen: list[tuple[dict, object]] = []

    def invoke(self, inputs: dict, *, context: object = None) -> dict:
        self.seen.append((inputs, context))
        return self.reply

    async def ainvoke(self, inputs: dict, *, context: object = None) -> dict:
        return self.invoke(inputs, context=context)


def test_fresh_state_resets_every_memory_key() -> None:
    fresh = fresh_memory_state("answer")
    assert all(fresh[k] is None for k in (*MEMORY_KEYS, "answer"))
    assert fresh["retrieved"] == [] and fresh["events"] is None and fresh["evolve_error"] is None
    assert check_mode(None) == "evolve"
    with pytest.raises(ValueError, match="mode='write'"):
        check_mode("write")


def test_the_retrieve_node_sends_the_query_and_reads_the_run() -> None:
    hit = {"sid": "<SID_L1_1>", "payload": "p"}
    retriever = Recording(
        {
            "sid": "<SID_L1_1>",
            "addresser": "quantizer",
            "candidates": [{"sid": "<SID_L1_1>", "score": 0.0}],
            "retrieved": [hit],
            "support": "use p",
            "support_source": "rewrite",
        }
    )
    node = RetrieveNode(retriever)
    state = {"query": "how?", "messages": ["not for the retriever"]}
    update = node.retrieve(state, RUNTIME)
    assert retriever.seen == [({"query": "how?"}, RUNTIME.context)]
    assert update["sid"] == "<SID_L1_1>" and update["support"] == "use p"
    assert update["candidates"] == ["<SID_L1_1>"] and update["retrieved"] == [hit]
    assert update["events"][0]["kind"] == "retrieved"
    assert asyncio.run(node.aretrieve(state, RUNTIME)) == update


@pytest.mark.parametrize("pass_outcome", [True, False])
def test_the_evolve_node_passes_the_outcome_only_when_told(pass_outcome) -> None:
    out = {
        "sid": "<SID_L1_0>",
        "addresser": "quantizer",
        "decision": {"op": "insert"},
        "update": {"op": "insert", "sid": "<SID_L1_0>"},
        "error": None,
        "events": [{"node": "mem_evolver"}],
    }
    evolver = Recording(out)
    node = EvolveNode(evolver, pass_outcome=pass_outcome)
    state = {"query": "q", "trajectory": {"steps": []}, "outcome": "success", "answer": "7"}
    update = node.evolve(state, RUNTIME)
    assert evolver.seen[0][1] == RUNTIME.context
    assert evolver.seen[0][0] == {
        "query": "q",
        "trajectory": {"steps": []},
        "outcome": "success" if pass_outcome else None,
    }
    assert update == {
        "update_sid": "<SID_L1_0>",
        "update_addresser": "quantizer",
        "decision": {"op": "insert"},
        "update": {"op": "insert", "sid": "<SID_L1_0>"},
        "evolve_error": None,
        "events": [{"node": "mem_evolver"}],
    }
    assert asyncio.run(node.aevolve(state, RUNTIME)) == update


def test_a_queued_update_is_not_written_inline(monkeypatch) -> None:
    evolver = Recording({})
    queued: list = []
    monkeypatch.setattr(
        "genmem.graph.memory_nodes.queue_update",
        lambda queue, inputs, runtime: queued.append(inputs) or {"evolve_job": "j1"},
    )
    node = EvolveNode(evolver, queue=object(), pass_outcome=False)  # type: ignore[arg-type]
    update = node.evolve({"query": "q", "trajectory": {}}, RUNTIME)
    assert update == {"evolve_job": "j1"} and evolver.seen == [] and queued[0]["query"] == "q"
