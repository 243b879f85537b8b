"""The closed loop from a model spec and plain settings: what the CLI and the top-level API share.

:func:`~genmem.graph.loop.build_genmem_graph` takes config objects and chat models; most callers
have a model spec (``"local"``, ``"openai:gpt-4o-mini"``, ``"vllm:<url>#<name>"``) or a LangChain
chat model and a few numbers. :func:`closed_loop` turns those into the compiled graph, with the
addressing that fits the model: SIDs are decoded on the chat model when it is local, else on the
embedded policy (or ``sid_model``), and ``addresser="auto"`` quantises with the bank's codebooks
until a policy is aligned to them.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langgraph.graph.state import CompiledStateGraph

from genmem.graph.addressing import addressing_for
from genmem.graph.background import EvolveMode
from genmem.graph.evolver import EvolverConfig
from genmem.graph.loop import Scorer, build_genmem_graph
from genmem.graph.retriever import RetrieverConfig
from genmem.graph.stack import StackBudgetConfig
from genmem.graph.stackplanner import StackPlannerConfig
from genmem.policies.addressing import Addresser
from genmem.policies.backends import capped_chat_model
from genmem.policies.types import RETRIEVER_ALLOWED, AllowedMode

__all__ = ["closed_loop"]


def closed_loop(
    model: BaseChatModel | str = "local",
    *,
    sid_model: str | None = None,
    max_new_tokens: int | None = None,
    beam: int = 1,
    allowed: AllowedMode = RETRIEVER_ALLOWED,
    addresser: Addresser = "auto",
    max_steps: int | None = None,
    scorer: Scorer | None = None,
    evolve: EvolveMode = "inline",
    name: str = "genmem",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled closed loop (retrieve, execute, assess, evolve) for one chat model.

    Run it with ``.invoke({"query": ...}, context={"bank": bank})`` (or ``bank_url``); the
    input's ``mode`` is ``evolve`` (default), ``read_only`` or ``no_memory``.

    Args:
        model: The chat model of every role: a LangChain chat model, or a spec for
            :func:`~genmem.policies.backends.load_chat_model` (``local`` is the embedded model).
        sid_model: The local policy that decodes SIDs when ``model`` has no local weights
            (``local`` or ``local:DIR``; default the embedded policy). Naming one for a local
            ``model`` decodes SIDs there instead of on the chat model.
        max_new_tokens: Reply cap for a spec ``model`` (None: the backend's default).
        beam: SID candidates per query; above 1 they are reranked.
        allowed: Which SIDs MemRetriever may produce: ``occupied`` (default: only addresses
            holding an entry), ``prefix`` or ``all``.
        addresser: ``auto`` (generate with a policy aligned to the bank, else quantise),
            ``generative`` or ``quantizer``.
        max_steps: StackPlanner's step budget (None: its default).
        scorer: Scores answers against an input ``reference`` (evaluation only; never shown to
            an agent).
        evolve: ``inline`` (the update is written before the run returns) or ``background``.
        name: The compiled graph's name.

    Returns:
        The compiled graph.

    Raises:
        ValueError: a setting out of range (``beam`` below 1, an unknown ``allowed`` or
            ``addresser``).
        InvalidModelSpec: ``sid_model`` is not a local policy, or ``model`` names no backend.
    """
    if beam < 1:
        raise ValueError(f"beam={beam}: at least 1 SID candidate")
    retriever = RetrieverConfig(beam=beam, rerank=beam > 1, allowed=allowed, addresser=addresser)
    evolver = EvolverConfig(addresser=addresser)
    planner = (
        StackPlannerConfig()
        if max_steps is None
        else StackPlannerConfig(budget=StackBudgetConfig(max_steps=max_steps))
    )
    chat = capped_chat_model(model, max_new_tokens) if isinstance(model, str) else model
    graph = build_genmem_graph(
        chat,
        sid_generator=addressing_for(model, sid_model),
        retriever_config=retriever,
        evolver_config=evolver,
        planner_config=planner,
        scorer=scorer,
        evolve=evolve,
    )
    return graph.compile(name=name)
