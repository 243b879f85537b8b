"""LangGraph graphs over the memory layer and the policies: bank lookup, MemRetriever."""

from genmem.graph.bank_lookup import LookupContext, LookupState, build_lookup_graph
from genmem.graph.retriever import (
    MemoryContext,
    RetrieverConfig,
    RetrieverState,
    build_retriever_graph,
)

__all__ = [
    "LookupContext",
    "LookupState",
    "MemoryContext",
    "RetrieverConfig",
    "RetrieverState",
    "build_lookup_graph",
    "build_retriever_graph",
]
