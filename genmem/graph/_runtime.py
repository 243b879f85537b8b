"""Reading a bank from a graph node's runtime (run context, then the graph's store)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from genmem.memory.bank import Bank
from genmem.tools.lookup import resolve_bank

__all__ = ["bank_from_runtime"]


class _Access:
    """The bank-resolution view of a node's runtime (context and store, no config)."""

    def __init__(self, runtime: Runtime[Any]) -> None:
        self.context = runtime.context or {}
        self.store = runtime.store
        self.config: dict[str, Any] = {}


def bank_from_runtime(runtime: Runtime[Any]) -> Bank:
    """The bank a run names in its context (``bank_url``, ``bank_id``) or its store holds."""
    return resolve_bank(_Access(runtime))  # type: ignore[arg-type]
