"""LangGraph graphs over the memory layer (the memory agents' graphs build on these)."""

from genmem.graph.bank_lookup import LookupContext, LookupState, build_lookup_graph

__all__ = ["LookupContext", "LookupState", "build_lookup_graph"]
