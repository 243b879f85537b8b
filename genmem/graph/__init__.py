"""LangGraph graphs: bank lookup and update, MemRetriever, StackPlanner, MemEvolver, the closed
loop, and the helpers that add the memory to any other agent."""

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
from genmem.graph.stack import StackBudget
from genmem.graph.stackplanner import StackPlannerConfig, SubAgent, build_stackplanner_graph
from genmem.graph.trajectory import StepRecord, Trajectory
from genmem.graph.wiring import closed_loop

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
    "StackBudget",
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
    "memory_tools",
    "trajectory_from_messages",
]
