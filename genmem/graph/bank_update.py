"""A one-node graph that writes one update to a bank: validated memory writes for server clients.

Input ``{"update": {"op", "sid", "payload", "expected_version"?}}``; output ``{"result": ...,
"error": ...}``. The update goes through ``Bank.apply`` and the write gate, as every writer's
does: a payload the gate refuses is a ``rejected`` event (``result.outcome``), a bad update or a
bank that refuses (occupied or empty slot, version conflict, read-only snapshot) comes back as
``error`` with nothing written, as does a bank the store does not hold. The bank comes from the
run context (``bank_url``, ``bank_id``) or, without a URL, from the store the LangGraph server
gives the graph; ``actor`` in the context names the writer in the bank's log. A client of
``langgraph dev`` or the LangGraph server writes memory this way instead of putting raw items
into the store, which would skip every check.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from genmem.errors import GenMemError
from genmem.graph._runtime import abank_from_runtime, bank_from_runtime, sync_and_async
from genmem.memory.gate import WriteGate

__all__ = ["UpdateContext", "UpdateState", "build_update_graph"]

DEFAULT_ACTOR = "bank_update"


class UpdateState(TypedDict, total=False):
    """State of the bank-update graph."""

    update: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None


class UpdateContext(TypedDict, total=False):
    """Run context: where the bank is and whom its log credits with the write."""

    bank_url: str
    bank_id: str
    actor: str


def _actor(runtime: Runtime[UpdateContext]) -> str:
    return str((runtime.context or {}).get("actor") or DEFAULT_ACTOR)


def update_node(state: UpdateState, runtime: Runtime[UpdateContext]) -> UpdateState:
    """Apply the update through the write gate; a refusal comes back as ``error``."""
    try:
        bank = bank_from_runtime(runtime)
        result = bank.apply(state.get("update") or {}, actor=_actor(runtime), gate=WriteGate())
    except GenMemError as exc:
        return {"result": None, "error": str(exc)}
    return {"result": result.model_dump(), "error": None}


async def aupdate_node(state: UpdateState, runtime: Runtime[UpdateContext]) -> UpdateState:
    """:func:`update_node` through the bank's async API."""
    try:
        bank = await abank_from_runtime(runtime)
        result = await bank.aapply(
            state.get("update") or {}, actor=_actor(runtime), gate=WriteGate()
        )
    except GenMemError as exc:
        return {"result": None, "error": str(exc)}
    return {"result": result.model_dump(), "error": None}


def build_update_graph() -> StateGraph:
    """The uncompiled graph (``langgraph dev`` compiles it with its own store)."""
    g = StateGraph(UpdateState, context_schema=UpdateContext)
    g.add_node("update", sync_and_async(update_node, aupdate_node))
    g.add_edge(START, "update")
    g.add_edge("update", END)
    return g
