"""The closed loop: retrieve -> execute -> assess -> evolve, as one LangGraph graph.

- ``retrieve`` runs MemRetriever (generate an SID, ``memory_lookup``, rewrite into support);
- ``execute`` runs StackPlanner on the query with that support;
- ``assess`` scores the answer against a ``reference`` when the graph has a scorer (``score``,
  for evaluation only), and settles ``outcome``: what the agents may be told about the run. That
  is an outcome given with the input, or the environment's own verdict from ``observer`` (a
  game's won flag, a shop's reward), and nothing else. A score against a reference is never
  turned into an outcome: the online protocol gives no agent access to held-out answers, so
  neither the reference nor a verdict derived from it ever reaches a prompt;
- ``evolve`` runs MemEvolver on the trajectory and that outcome (None: MemEvolver is told
  nothing about success), which may write one update.

Modes, per run (input ``mode``): ``evolve`` (everything, the default), ``read_only`` (retrieve
and execute, never write: for probes), ``no_memory`` (execute only: the baseline). The bank is
named per run in the context (``bank_url``, ``bank_id``) or comes from the graph's store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from genmem.graph._runtime import sync_and_async
from genmem.graph.background import (
    BackgroundConfig,
    EvolveMode,
    ServerBackground,
    attach_background,
)
from genmem.graph.evolver import EvolverConfig
from genmem.graph.memory_nodes import MODES, MemoryAgents, Mode, check_mode, fresh_memory_state
from genmem.graph.retriever import MemoryContext, RetrieverConfig
from genmem.graph.stackplanner import (
    PlannerContext,
    StackPlannerConfig,
    build_stackplanner_graph,
)
from genmem.graph.subagents import ActionPrior, SubAgent
from genmem.graph.trajectory import extend_or_reset
from genmem.policies.backends import RoleModels
from genmem.policies.types import SIDGenerator

__all__ = [
    "MODES",
    "GenMemInput",
    "GenMemOutput",
    "GenMemState",
    "LoopContext",
    "Mode",
    "Observer",
    "Scorer",
    "build_genmem_graph",
]


Scorer = Callable[[str | None, Any], float]
"""Scores an answer against a reference, in [0, 1] (for evaluation; never shown to an agent)."""

Observer = Callable[[str | None], str | None]
"""The environment's own verdict on a finished run's answer (``"success"`` / ``"failure"``, e.g.
from a game's won flag), or None when the environment has none. Never a reference comparison."""


class GenMemInput(TypedDict, total=False):
    """What one closed-loop run takes."""

    query: str
    mode: Mode
    reference: Any
    """The gold answer, for scoring only (never shown to an agent, nor any verdict from it)."""
    outcome: str | None
    """The environment's own verdict, when the caller has one (passed to MemEvolver)."""


class GenMemOutput(TypedDict, total=False):
    """What one closed-loop run returns."""

    query: str
    mode: Mode
    sid: str | None
    addresser: str | None
    """What chose ``sid``: ``generative`` (a policy), ``quantizer`` (the frozen codebooks)."""
    candidates: list[str]
    """SIDs the addressing policy proposed, in its order."""
    ranked: list[str]
    """The same SIDs after reranking (the proposal order without a reranker)."""
    retrieved: list[dict[str, Any]]
    support: str | None
    support_source: str | None
    """``rewrite`` (MemRetriever's text), ``entry`` (its rewrite was refused, the first entry
    read instead) or ``none`` (nothing retrieved)."""
    support_refused: str | None
    """Why the write gate's checks refused MemRetriever's rewrite, when they did."""
    answer: str | None
    status: str
    trajectory: dict[str, Any]
    score: float | None
    """The answer's score against the reference (evaluation only)."""
    outcome: str | None
    """What MemEvolver was told about the run: a given or observed outcome, never the score."""
    update_sid: str | None
    update_addresser: str | None
    """What chose ``update_sid``."""
    decision: dict[str, Any] | None
    update: dict[str, Any] | None
    evolve_error: dict[str, Any] | None
    evolve_job: str | None
    """The queued update's job id (``evolve="background"``); see ``background_of(app)``."""
    events: list[dict[str, Any]]


class GenMemState(GenMemInput, GenMemOutput, total=False):
    """The closed loop's state (the run-level event log resets with each new run)."""

    events: Annotated[list[dict[str, Any]], extend_or_reset]  # type: ignore[misc]


class LoopContext(MemoryContext, PlannerContext, total=False):
    """Run context: the bank (``bank_url``, ``bank_id``, ``memory_k``) and budget overrides."""


def build_genmem_graph(
    model: BaseChatModel | str = "local",
    *,
    models: RoleModels | None = None,
    sid_generator: SIDGenerator | Callable[..., SIDGenerator] | None = None,
    retriever_config: RetrieverConfig | None = None,
    planner_config: StackPlannerConfig | None = None,
    evolver_config: EvolverConfig | None = None,
    agents: Sequence[SubAgent] | None = None,
    solver_tools: Sequence[BaseTool] = (),
    research_tools: Sequence[BaseTool] = (),
    interactor_tools: Sequence[BaseTool] = (),
    interactor_prior: ActionPrior | None = None,
    reader_model: BaseChatModel | str | None = None,
    scorer: Scorer | None = None,
    observer: Observer | None = None,
    evolve: EvolveMode = "inline",
    background: BackgroundConfig | ServerBackground | None = None,
) -> StateGraph:
    """The uncompiled closed-loop graph (:func:`genmem.graph.wiring.closed_loop` compiles it
    from a model spec and plain settings).

    Args:
        model: The chat model of every role (a chat model or a spec).
        models: A model per role (``retriever``, ``lead``, ``subagent``, ``evolver``); overrides
            ``model``.
        sid_generator: The addressing policy of MemRetriever and MemEvolver: a generator, a
            factory ``(bank, config) -> generator``, or None (decode on a local ``model``; the
            configs' ``addresser`` decides per bank).
        retriever_config: How MemRetriever addresses and rewrites.
        planner_config: StackPlanner's budget and behaviour.
        evolver_config: How MemEvolver addresses and retries.
        agents: StackPlanner's sub-agents (default: the solver, plus the research and
            interactor agents when their tools are given).
        solver_tools: Tools of the solver sub-agent.
        research_tools: Tools of the researcher sub-agent.
        interactor_tools: Tools of the interactor sub-agent (an environment's actions).
        interactor_prior: What a retrieved experience adds to a ranking interactor's scores
            (an environment's :meth:`~genmem.envs.base.Environment.action_prior`; used when
            ``planner_config.prior_weight`` is above 0).
        reader_model: The model a ranking interactor scores commands with (a reader trained by
            ``genmem train reader``); None: the sub-agents' model.
        scorer: Scores answers against the input's ``reference`` (the ``score`` output, for
            evaluation only; never shown to an agent).
        observer: The environment's own verdict on an answer, the only outcome MemEvolver may
            see besides one passed in with the input.
        evolve: ``inline``, or ``background``: the run returns after ``assess`` and
            MemEvolver's update is queued on a worker configured by ``background``
            (:mod:`genmem.graph.background`; the worker is ``background_of(graph)``), or with
            ``ServerBackground`` started as a background run on the LangGraph server.
        background: The background worker's settings, or :class:`ServerBackground`.

    Returns:
        The graph, to compile (``.compile()``) with or without a checkpointer and store.
    """

    def role(name: str) -> BaseChatModel | str:
        return models.model(name) if models is not None else model  # type: ignore[arg-type]

    memory = MemoryAgents.build(
        role("retriever"),
        role("evolver"),
        sid_generator=sid_generator,
        retriever_config=retriever_config,
        evolver_config=evolver_config,
        evolve=evolve,
        background=background,
    )
    planner = build_stackplanner_graph(
        role("lead"),
        subagent_model=role("subagent"),
        agents=agents,
        solver_tools=solver_tools,
        research_tools=research_tools,
        interactor_tools=interactor_tools,
        interactor_prior=interactor_prior,
        config=planner_config,
        reader_model=reader_model,
    ).compile(name="stackplanner")

    def start(state: GenMemState) -> dict[str, Any]:
        query = state.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("the GenMem graph needs a non-empty 'query' in its input")
        return {**fresh_memory_state("answer", "score"), "mode": check_mode(state.get("mode"))}

    def planner_input(state: GenMemState) -> dict[str, Any]:
        if state.get("mode") == "no_memory":
            return {"query": state["query"], "support": None, "experience": None}
        payloads = [str(h.get("payload") or "") for h in state.get("retrieved") or []]
        stored = "\n\n".join(p for p in payloads if p.strip()) or None
        return {"query": state["query"], "support": state.get("support"), "experience": stored}

    def execute(state: GenMemState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        return executed(planner.invoke(planner_input(state), context=runtime.context))

    async def aexecute(state: GenMemState, runtime: Runtime[LoopContext]) -> dict[str, Any]:
        return executed(await planner.ainvoke(planner_input(state), context=runtime.context))

    def executed(out: dict[str, Any]) -> dict[str, Any]:
        event = {
            "node": "stackplanner",
            "kind": out.get("status"),
            "answer": out.get("answer"),
            "steps": len(out.get("trajectory", {}).get("steps", [])),
        }
        return {
            "answer": out.get("answer"),
            "status": out.get("status"),
            "trajectory": out.get("trajectory"),
            "events": [event],
        }

    def assess(state: GenMemState) -> dict[str, Any]:
        score: float | None = None
        if scorer is not None and state.get("reference") is not None:
            score = float(scorer(state.get("answer"), state["reference"]))
        outcome = state.get("outcome") or None
        if outcome is None and observer is not None:
            outcome = observer(state.get("answer"))
        return {"score": score, "outcome": outcome}

    def after_start(state: GenMemState) -> str:
        return "execute" if state["mode"] == "no_memory" else "retrieve"

    def after_assess(state: GenMemState) -> str:
        return "evolve" if state["mode"] == "evolve" else END

    g = StateGraph(
        GenMemState,
        context_schema=LoopContext,
        input_schema=GenMemInput,
        output_schema=GenMemOutput,
    )
    g.add_node("start", start)
    # Under ainvoke/astream the memory nodes await the subgraphs' async paths.
    g.add_node("retrieve", memory.retrieve.node())
    g.add_node("execute", sync_and_async(execute, aexecute))
    g.add_node("assess", assess)
    g.add_node("evolve", memory.evolve.node())
    g.add_edge(START, "start")
    g.add_conditional_edges("start", after_start, ["retrieve", "execute"])
    g.add_edge("retrieve", "execute")
    g.add_edge("execute", "assess")
    g.add_conditional_edges("assess", after_assess, ["evolve", END])
    g.add_edge("evolve", END)
    if memory.queue is not None:
        attach_background(g, memory.queue)
    return g
