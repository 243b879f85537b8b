"""LangChain tools over a bank: `memory_lookup`."""

from genmem.tools.lookup import (
    DEFAULT_LOOKUP_K,
    DEFAULT_MAX_SIDS,
    MAX_RESOLVED_BANKS,
    MemoryLookupInput,
    aresolve_bank,
    close_resolved_banks,
    create_memory_lookup_tool,
    format_lookup_results,
    resolve_bank,
)

__all__ = [
    "DEFAULT_LOOKUP_K",
    "DEFAULT_MAX_SIDS",
    "MAX_RESOLVED_BANKS",
    "MemoryLookupInput",
    "aresolve_bank",
    "close_resolved_banks",
    "create_memory_lookup_tool",
    "format_lookup_results",
    "resolve_bank",
]
