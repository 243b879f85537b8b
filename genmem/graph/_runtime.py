"""Reading a bank from a graph node's runtime (run context, then the graph's store), and nodes
with a sync and an async body."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import Runnable

# LangGraph builds a node from a function as this runnable, which takes a sync and an async body
# (``invoke`` runs one, ``ainvoke``/``astream`` the other) and injects ``runtime`` into both.
from langgraph._internal._runnable import RunnableCallable
from langgraph.config import get_config
from langgraph.runtime import Runtime

from genmem.memory.bank import Bank
from genmem.tools.lookup import aresolve_bank, resolve_bank

__all__ = ["AddressingNodes", "abank_from_runtime", "bank_from_runtime", "sync_and_async"]


class _Access:
    """The bank-resolution view of a node's runtime (context and store, no config)."""

    def __init__(self, runtime: Runtime[Any]) -> None:
        self.context = runtime.context or {}
        self.store = runtime.store
        # The run's config: a LangGraph server's run says so there (graph id, its user), and
        # the bank is then chosen by the server's rules (genmem.tools.served_banks).
        try:
            self.config: dict[str, Any] = dict(get_config())
        except RuntimeError:  # called outside a run (a test on a bare Runtime)
            self.config = {}


def bank_from_runtime(runtime: Runtime[Any]) -> Bank:
    """The bank a run names in its context (``bank_url``, ``bank_id``) or its store holds."""
    return resolve_bank(_Access(runtime))  # type: ignore[arg-type]


async def abank_from_runtime(runtime: Runtime[Any]) -> Bank:
    """:func:`bank_from_runtime` for async nodes (the store is awaited, a URL opens in a thread)."""
    return await aresolve_bank(_Access(runtime))  # type: ignore[arg-type]


def sync_and_async(
    func: Callable[..., Any], afunc: Callable[..., Awaitable[Any]]
) -> Runnable[Any, Any]:
    """A node that runs ``func`` under ``invoke``/``stream`` and ``afunc`` under ``ainvoke``/
    ``astream``; both take the same parameters (``state``, ``runtime``)."""
    return RunnableCallable(func, afunc, name=func.__name__, trace=False)


class AddressingNodes:
    """Node classes whose ``address`` step is :meth:`address_in` on the run's bank.

    ``address`` serves ``invoke``/``stream``; ``aaddress`` serves ``ainvoke``/``astream``: the
    bank opens through its async API, and decoding (a local model, bank reads) runs in a worker
    thread, off the event loop.
    """

    def address_in(self, state: Any, bank: Bank, context: Any) -> Any:
        """The node's work on ``state`` with ``bank`` and the run context."""
        raise NotImplementedError

    def address(self, state: Any, runtime: Runtime[Any]) -> Any:
        """:meth:`address_in` on the run's bank."""
        return self.address_in(state, bank_from_runtime(runtime), runtime.context or {})

    async def aaddress(self, state: Any, runtime: Runtime[Any]) -> Any:
        """:meth:`address` under ``ainvoke``/``astream``."""
        bank = await abank_from_runtime(runtime)
        return await asyncio.to_thread(self.address_in, state, bank, runtime.context or {})
