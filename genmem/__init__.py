"""GenMem: a generative symbolic experience memory for LangGraph agents.

The public API, importable from here (each name loads its module on first use, so ``import
genmem`` stays light)::

    import genmem

    built = genmem.bank_from_texts(texts, "sqlite:///bank.db?bank=lessons")
    tools = genmem.memory_tools(built.bank)          # memory_lookup for any agent
    wrapped = genmem.add_memory(agent).compile()      # MemRetriever -> agent -> MemEvolver
    loop = genmem.closed_loop("local")                # retrieve, plan, assess, evolve
    loop.invoke({"query": "..."}, context={"bank": built.bank})

Everything else lives in the layers' packages (``genmem.memory``, ``genmem.policies``,
``genmem.graph``, ``genmem.envs``, ``genmem.experiments``, ``genmem.training``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from genmem._lazy import lazy_exports
from genmem._version import __version__
from genmem.errors import GenMemError

if TYPE_CHECKING:
    from genmem.graph.background import background_of
    from genmem.graph.embed import add_memory, memory_tools
    from genmem.graph.evolver import EvolverConfig
    from genmem.graph.loop import build_genmem_graph
    from genmem.graph.retriever import MemoryContext, RetrieverConfig
    from genmem.graph.stack import StackBudgetConfig
    from genmem.graph.stackplanner import StackPlannerConfig
    from genmem.graph.trajectory import Trajectory
    from genmem.graph.wiring import closed_loop
    from genmem.memory.bank import Bank
    from genmem.memory.build import ExperienceRecord
    from genmem.memory.from_texts import BankBuild, bank_from_texts
    from genmem.memory.location import open_bank
    from genmem.memory.rqkmeans import Codebooks
    from genmem.memory.sid import SID
    from genmem.policies.backends import load_chat_model


_PUBLIC = {
    "Bank": "genmem.memory.bank",
    "BankBuild": "genmem.memory.from_texts",
    "Codebooks": "genmem.memory.rqkmeans",
    "EvolverConfig": "genmem.graph.evolver",
    "ExperienceRecord": "genmem.memory.build",
    "MemoryContext": "genmem.graph.retriever",
    "RetrieverConfig": "genmem.graph.retriever",
    "SID": "genmem.memory.sid",
    "StackBudgetConfig": "genmem.graph.stack",
    "StackPlannerConfig": "genmem.graph.stackplanner",
    "Trajectory": "genmem.graph.trajectory",
    "add_memory": "genmem.graph.embed",
    "background_of": "genmem.graph.background",
    "bank_from_texts": "genmem.memory.from_texts",
    "build_genmem_graph": "genmem.graph.loop",
    "closed_loop": "genmem.graph.wiring",
    "load_chat_model": "genmem.policies.backends",
    "memory_tools": "genmem.graph.embed",
    "open_bank": "genmem.memory.location",
}
"""Public name -> the module that defines it."""

__all__ = [
    "SID",
    "Bank",
    "BankBuild",
    "Codebooks",
    "EvolverConfig",
    "ExperienceRecord",
    "GenMemError",
    "MemoryContext",
    "RetrieverConfig",
    "StackBudgetConfig",
    "StackPlannerConfig",
    "Trajectory",
    "__version__",
    "add_memory",
    "background_of",
    "bank_from_texts",
    "build_genmem_graph",
    "closed_loop",
    "load_chat_model",
    "memory_tools",
    "open_bank",
]


__getattr__, __dir__ = lazy_exports(__name__, globals(), _PUBLIC)
