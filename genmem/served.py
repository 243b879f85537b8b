"""The graphs ``langgraph.json`` serves, each built and compiled the first time it is asked for.

Every public name here is a graph factory: a function of no arguments that the LangGraph server
(``langgraph dev`` locally) calls when it needs the graph. The first call builds and compiles it,
later calls return that same compiled graph, so importing this module (or :mod:`genmem.graph`)
builds nothing, and the embedded default model loads on a graph's first run, not when the graph
is built. Each is compiled without a store or checkpointer: the server adds its own to every run.

Factories rather than a module ``__getattr__``: the server looks the name in ``langgraph.json``
up in the module's ``__dict__``, so an attribute computed on access would not be found.

This module sits on :mod:`genmem.graph` and :mod:`genmem.envs`: ``genmem_gsm8k`` attaches
GSM8K's scorer, and the graph layer never imports an environment. Send that graph
``{"query": ..., "reference": <gold answer>}`` and the loop scores the answer (``score`` in the
output, for evaluation). The reference and the score never reach an agent: MemEvolver evolves
memory from the trajectory alone, or from an ``outcome`` the caller passes in (an environment's
own signal).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from genmem.envs.gsm8k import score_gsm8k
from genmem.graph.background_server import ServerBackground, build_evolver_job_graph
from genmem.graph.bank_lookup import build_lookup_graph
from genmem.graph.bank_update import build_update_graph
from genmem.graph.compose import build_decompose_graph, build_fuse_graph
from genmem.graph.evolver import build_evolver_graph
from genmem.graph.loop import build_genmem_graph
from genmem.graph.retriever import build_retriever_graph
from genmem.graph.stackplanner import build_stackplanner_graph

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

__all__ = [
    "bank_lookup",
    "bank_update",
    "genmem",
    "genmem_background",
    "genmem_gsm8k",
    "mem_evolver",
    "mem_evolver_job",
    "mem_retriever",
    "sid_decompose",
    "sid_fuse",
    "stackplanner",
]


@cache
def genmem() -> CompiledStateGraph:
    """The closed loop (retrieve -> StackPlanner -> assess -> evolve) on the default model."""
    return build_genmem_graph().compile()


@cache
def genmem_background() -> CompiledStateGraph:
    """The same loop answering without waiting for MemEvolver: it starts each update as a
    background run of ``mem_evolver_job`` on the server."""
    return build_genmem_graph(evolve="background", background=ServerBackground()).compile()


@cache
def genmem_gsm8k() -> CompiledStateGraph:
    """The ``genmem`` loop scored by GSM8K's numeric match (``reference`` = the gold answer)."""
    return build_genmem_graph(scorer=score_gsm8k).compile()


@cache
def stackplanner() -> CompiledStateGraph:
    """StackPlanner alone on the default model."""
    return build_stackplanner_graph().compile()


@cache
def mem_retriever() -> CompiledStateGraph:
    """MemRetriever alone on the default model."""
    return build_retriever_graph().compile()


@cache
def mem_evolver() -> CompiledStateGraph:
    """MemEvolver alone on the default model."""
    return build_evolver_graph().compile()


@cache
def mem_evolver_job() -> CompiledStateGraph:
    """MemEvolver afresh on every run of a thread: the graph background updates run as."""
    return build_evolver_job_graph().compile()


@cache
def bank_lookup() -> CompiledStateGraph:
    """One node that reads a bank."""
    return build_lookup_graph().compile()


@cache
def bank_update() -> CompiledStateGraph:
    """One node that writes one validated update to a bank."""
    return build_update_graph().compile()


@cache
def sid_fuse() -> CompiledStateGraph:
    """Fusion of two entries into one, on the default model."""
    return build_fuse_graph().compile()


@cache
def sid_decompose() -> CompiledStateGraph:
    """An entry rebuilt from the best pair of its neighbours, on the default model."""
    return build_decompose_graph().compile()
