"""LangGraph graphs: bank lookup and update, MemRetriever, StackPlanner, MemEvolver, the closed
loop, and the helpers that add the memory to any other agent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from genmem._lazy import lazy_exports

if TYPE_CHECKING:
    from genmem.graph.background import (
        BackgroundConfig,
        BackgroundEvolver,
        EvolveJob,
        ServerBackground,
        background_of,
    )
    from genmem.graph.bank_lookup import LookupContext, LookupState, build_lookup_graph
    from genmem.graph.bank_update import UpdateContext, UpdateState, build_update_graph
    from genmem.graph.embed import (
        MemoryAgentInput,
        MemoryAgentState,
        add_memory,
        memory_tools,
        trajectory_from_messages,
    )
    from genmem.graph.evolver import EvolverConfig, EvolverState, build_evolver_graph
    from genmem.graph.loop import GenMemState, build_genmem_graph
    from genmem.graph.retriever import (
        MemoryContext,
        RetrieverConfig,
        RetrieverState,
        build_retriever_graph,
    )
    from genmem.graph.stack import StackBudgetConfig
    from genmem.graph.stackplanner import StackPlannerConfig, build_stackplanner_graph
    from genmem.graph.subagents import SubAgent, default_subagents
    from genmem.graph.trajectory import StepRecord, Trajectory
    from genmem.graph.wiring import closed_loop

_PUBLIC = {
    "BackgroundConfig": "genmem.graph.background",
    "BackgroundEvolver": "genmem.graph.background",
    "EvolveJob": "genmem.graph.background",
    "EvolverConfig": "genmem.graph.evolver",
    "EvolverState": "genmem.graph.evolver",
    "GenMemState": "genmem.graph.loop",
    "LookupContext": "genmem.graph.bank_lookup",
    "LookupState": "genmem.graph.bank_lookup",
    "MemoryAgentInput": "genmem.graph.embed",
    "MemoryAgentState": "genmem.graph.embed",
    "MemoryContext": "genmem.graph.retriever",
    "RetrieverConfig": "genmem.graph.retriever",
    "RetrieverState": "genmem.graph.retriever",
    "ServerBackground": "genmem.graph.background",
    "StackBudgetConfig": "genmem.graph.stack",
    "StackPlannerConfig": "genmem.graph.stackplanner",
    "StepRecord": "genmem.graph.trajectory",
    "SubAgent": "genmem.graph.subagents",
    "Trajectory": "genmem.graph.trajectory",
    "UpdateContext": "genmem.graph.bank_update",
    "UpdateState": "genmem.graph.bank_update",
    "add_memory": "genmem.graph.embed",
    "background_of": "genmem.graph.background",
    "build_evolver_graph": "genmem.graph.evolver",
    "build_genmem_graph": "genmem.graph.loop",
    "build_lookup_graph": "genmem.graph.bank_lookup",
    "build_retriever_graph": "genmem.graph.retriever",
    "build_stackplanner_graph": "genmem.graph.stackplanner",
    "build_update_graph": "genmem.graph.bank_update",
    "closed_loop": "genmem.graph.wiring",
    "default_subagents": "genmem.graph.subagents",
    "memory_tools": "genmem.graph.embed",
    "trajectory_from_messages": "genmem.graph.embed",
}
"""Public name -> the module that defines it (imported on first use)."""

__all__ = [
    "BackgroundConfig",
    "BackgroundEvolver",
    "EvolveJob",
    "EvolverConfig",
    "EvolverState",
    "GenMemState",
    "LookupContext",
    "LookupState",
    "MemoryAgentInput",
    "MemoryAgentState",
    "MemoryContext",
    "RetrieverConfig",
    "RetrieverState",
    "ServerBackground",
    "StackBudgetConfig",
    "StackPlannerConfig",
    "StepRecord",
    "SubAgent",
    "Trajectory",
    "UpdateContext",
    "UpdateState",
    "add_memory",
    "background_of",
    "build_evolver_graph",
    "build_genmem_graph",
    "build_lookup_graph",
    "build_retriever_graph",
    "build_stackplanner_graph",
    "build_update_graph",
    "closed_loop",
    "default_subagents",
    "memory_tools",
    "trajectory_from_messages",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
