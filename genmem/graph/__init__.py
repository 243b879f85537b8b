"""LangGraph graphs over the memory layer and the policies: lookup, MemRetriever, MemEvolver."""

from genmem.graph.bank_lookup import LookupContext, LookupState, build_lookup_graph
from genmem.graph.evolver import EvolverConfig, EvolverState, build_evolver_graph
from genmem.graph.retriever import (
    MemoryContext,
    RetrieverConfig,
    RetrieverState,
    build_retriever_graph,
)

__all__ = [
    "EvolverConfig",
    "EvolverState",
    "LookupContext",
    "LookupState",
    "MemoryContext",
    "RetrieverConfig",
    "RetrieverState",
    "build_evolver_graph",
    "build_lookup_graph",
    "build_retriever_graph",
]
