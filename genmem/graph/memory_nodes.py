"""The memory nodes that the closed loop and ``add_memory`` share, as classes with testable steps.

Both graphs run MemRetriever before their agent and MemEvolver after it. :class:`MemoryAgents`
compiles the two memory agents for one graph (and its background worker, if updates are queued);
its :class:`RetrieveNode` and :class:`EvolveNode` are the graph nodes, each with a sync and an
async body and its state mapping in plain methods, so they can be tested without a graph.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Literal, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langgraph.runtime import Runtime

from genmem.graph._runtime import sync_and_async
from genmem.graph.addressing import GeneratorFactory
from genmem.graph.background import (
    BackgroundConfig,
    BackgroundEvolver,
    EvolveMode,
    ServerBackground,
    background_evolver,
    queue_update,
)
from genmem.graph.evolver import EvolverConfig, build_evolver_graph
from genmem.graph.retriever import RetrieverConfig, build_retriever_graph
from genmem.policies.types import SIDGenerator

__all__ = [
    "MEMORY_KEYS",
    "MODES",
    "EvolveNode",
    "MemoryAgents",
    "Mode",
    "RetrieveNode",
    "check_mode",
    "fresh_memory_state",
    "retrieval_update",
]

Mode = Literal["evolve", "read_only", "no_memory"]
"""``evolve``: retrieve, act, write; ``read_only``: retrieve and act; ``no_memory``: act only."""
MODES: tuple[str, ...] = get_args(Mode)

MEMORY_KEYS = (
    "sid",
    "addresser",
    "support",
    "support_source",
    "support_refused",
    "update_sid",
    "update_addresser",
    "decision",
    "update",
    "evolve_job",
)
"""The per-run keys the memory nodes write (reset at the start of every run)."""


def check_mode(value: Any) -> Mode:
    """The run's mode (empty means ``evolve``); anything else raises ValueError."""
    mode = value or "evolve"
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {', '.join(MODES)}")
    return mode  # type: ignore[no-any-return]


def fresh_memory_state(*extra: str) -> dict[str, Any]:
    """The memory keys (and ``extra`` ones) of a run that has not started: nothing retrieved,
    nothing written, no events."""
    return {
        **dict.fromkeys((*MEMORY_KEYS, *extra)),
        "retrieved": [],
        "evolve_error": None,
        "events": None,
    }


def retrieval_update(out: dict[str, Any]) -> dict[str, Any]:
    """The state update and event for a finished MemRetriever run."""
    hits = out.get("retrieved", [])
    event = {
        "node": "mem_retriever",
        "kind": "retrieved" if hits else "nothing_retrieved",
        "sid": out.get("sid"),
        "addresser": out.get("addresser"),
        "hits": [h.get("sid") for h in hits],
        "support_source": out.get("support_source"),
        "support_refused": out.get("support_refused"),
    }
    return {
        "sid": out.get("sid"),
        "addresser": out.get("addresser"),
        "candidates": [c.get("sid") for c in out.get("candidates", [])],
        "ranked": list(out.get("ranked", [])),
        "retrieved": hits,
        "support": out.get("support"),
        "support_source": out.get("support_source"),
        "support_refused": out.get("support_refused"),
        "events": [event],
    }


class RetrieveNode:
    """MemRetriever as a node: addresses memory with the state's ``query``."""

    def __init__(self, retriever: Runnable[Any, Any]) -> None:
        """``retriever``: a compiled MemRetriever graph."""
        self.retriever = retriever

    @staticmethod
    def inputs(state: dict[str, Any]) -> dict[str, Any]:
        """MemRetriever's input for this state."""
        return {"query": state["query"]}

    def retrieve(self, state: dict[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
        """Run MemRetriever with the run's context; the state update."""
        return retrieval_update(self.retriever.invoke(self.inputs(state), context=runtime.context))

    async def aretrieve(self, state: dict[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
        """:meth:`retrieve` under ``ainvoke``/``astream``."""
        out = await self.retriever.ainvoke(self.inputs(state), context=runtime.context)
        return retrieval_update(out)

    def node(self) -> Runnable[Any, Any]:
        """The graph node (sync and async bodies)."""
        return sync_and_async(self.retrieve, self.aretrieve)


class EvolveNode:
    """MemEvolver as a node: turns the run's trajectory into at most one update, inline or queued
    on a background worker."""

    def __init__(
        self,
        evolver: Runnable[Any, Any],
        queue: BackgroundEvolver | ServerBackground | None = None,
        *,
        pass_outcome: bool = True,
    ) -> None:
        """``evolver``: a compiled MemEvolver graph; ``queue``: where a background update goes
        (None: inline); ``pass_outcome``: give MemEvolver the state's ``outcome`` (the
        environment's verdict), else tell it nothing about success."""
        self.evolver = evolver
        self.queue = queue
        self.pass_outcome = pass_outcome

    def inputs(self, state: dict[str, Any]) -> dict[str, Any]:
        """MemEvolver's input: the query, the trajectory and (if passed) the outcome."""
        return {
            "query": state["query"],
            "trajectory": state["trajectory"],
            "outcome": state.get("outcome") if self.pass_outcome else None,
        }

    @staticmethod
    def update(out: dict[str, Any]) -> dict[str, Any]:
        """The state update from a finished MemEvolver run."""
        return {
            "update_sid": out.get("sid"),
            "update_addresser": out.get("addresser"),
            "decision": out.get("decision"),
            "update": out.get("update"),
            "evolve_error": out.get("error"),
            "events": list(out.get("events", [])),
        }

    def evolve(self, state: dict[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
        """Write (or queue) the run's update; the state update."""
        if self.queue is not None:
            return queue_update(self.queue, self.inputs(state), runtime)
        return self.update(self.evolver.invoke(self.inputs(state), context=runtime.context))

    async def aevolve(self, state: dict[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
        """:meth:`evolve` under ``ainvoke``/``astream``."""
        if self.queue is not None:
            return await asyncio.to_thread(queue_update, self.queue, self.inputs(state), runtime)
        out = await self.evolver.ainvoke(self.inputs(state), context=runtime.context)
        return self.update(out)

    def node(self) -> Runnable[Any, Any]:
        """The graph node (sync and async bodies)."""
        return sync_and_async(self.evolve, self.aevolve)


@dataclass(frozen=True)
class MemoryAgents:
    """MemRetriever and MemEvolver compiled for one graph, as its two memory nodes."""

    retrieve: RetrieveNode
    evolve: EvolveNode

    @property
    def queue(self) -> BackgroundEvolver | ServerBackground | None:
        """Where updates are queued (None: written inline)."""
        return self.evolve.queue

    @classmethod
    def build(
        cls,
        retriever_model: BaseChatModel | str,
        evolver_model: BaseChatModel | str,
        *,
        sid_generator: SIDGenerator | GeneratorFactory | None = None,
        retriever_config: RetrieverConfig | None = None,
        evolver_config: EvolverConfig | None = None,
        evolve: EvolveMode = "inline",
        background: BackgroundConfig | ServerBackground | None = None,
        pass_outcome: bool = True,
    ) -> MemoryAgents:
        """Compile both memory agents (and the background worker of ``evolve="background"``).

        Args:
            retriever_model: MemRetriever's chat model (or spec).
            evolver_model: MemEvolver's chat model (or spec).
            sid_generator: The addressing policy of both (see ``build_retriever_graph``).
            retriever_config: How MemRetriever addresses and rewrites.
            evolver_config: How MemEvolver addresses and retries.
            evolve: ``inline`` or ``background``.
            background: The background worker's settings, or :class:`ServerBackground`.
            pass_outcome: Whether MemEvolver is told the state's ``outcome``.

        Returns:
            The two nodes; ``queue`` is the background worker, if any.

        Raises:
            ValueError: ``evolve`` and ``background`` disagree.
        """
        retriever = build_retriever_graph(
            retriever_model, sid_generator=sid_generator, config=retriever_config
        ).compile(name="mem_retriever")
        evolver_graph = build_evolver_graph(
            evolver_model, sid_generator=sid_generator, config=evolver_config
        )
        evolver = evolver_graph.compile(name="mem_evolver")
        queue = background_evolver(evolve, background, evolver_graph)
        return cls(RetrieveNode(retriever), EvolveNode(evolver, queue, pass_outcome=pass_outcome))
