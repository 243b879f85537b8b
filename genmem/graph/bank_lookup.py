"""A one-node graph that reads a bank: the memory layer served by ``langgraph dev``.

Input ``{"sid_list": [...]}``; output ``{"results": [...], "error": ...}``. The bank comes from
the run context (``bank_url``, ``bank_id``, ``memory_k``) or, without a URL, from the store the
LangGraph server gives the graph, so a bank can live in the platform's own store. Under
``ainvoke``/``astream`` (and on the server) the node reads through the bank's async API. The memory
agents' graphs (MemRetriever, MemEvolver, StackPlanner, the closed loop) build on this layer.
"""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from genmem.errors import InvalidSID
from genmem.graph._runtime import abank_from_runtime, bank_from_runtime, sync_and_async
from genmem.tools.lookup import DEFAULT_LOOKUP_K

__all__ = ["LookupContext", "LookupState", "alookup_node", "build_lookup_graph"]


class LookupState(TypedDict, total=False):
    """State of the bank-lookup graph."""

    sid_list: list[str]
    results: list[dict[str, Any]]
    error: str | None


class LookupContext(TypedDict, total=False):
    """Run context: where the bank is and how many neighbours to return."""

    bank_url: str
    bank_id: str
    memory_k: int


def lookup_node(state: LookupState, runtime: Runtime[LookupContext]) -> LookupState:
    """Look the requested SIDs up; a malformed SID comes back as ``error``, nothing is read."""
    bank = bank_from_runtime(runtime)
    k = int((runtime.context or {}).get("memory_k") or DEFAULT_LOOKUP_K)
    try:
        results = bank.lookup(state.get("sid_list") or [], k=k)
    except InvalidSID as exc:
        return {"results": [], "error": str(exc)}
    return {"results": [r.model_dump() for r in results], "error": None}


async def alookup_node(state: LookupState, runtime: Runtime[LookupContext]) -> LookupState:
    """:func:`lookup_node` through the bank's async API."""
    bank = await abank_from_runtime(runtime)
    k = int((runtime.context or {}).get("memory_k") or DEFAULT_LOOKUP_K)
    try:
        results = await bank.alookup(state.get("sid_list") or [], k=k)
    except InvalidSID as exc:
        return {"results": [], "error": str(exc)}
    return {"results": [r.model_dump() for r in results], "error": None}


def build_lookup_graph() -> StateGraph:
    """The uncompiled graph (``langgraph dev`` compiles it with its own store)."""
    g = StateGraph(LookupState, context_schema=LookupContext)
    g.add_node("lookup", sync_and_async(lookup_node, alookup_node))
    g.add_edge(START, "lookup")
    g.add_edge("lookup", END)
    return g
