"""GenMem around any LangGraph agent: memory nodes before and after it, or memory as a tool.

Two ways to give an existing agent (one from ``langchain.agents.create_agent``, or any compiled
graph whose state has ``messages``) an experience memory:

- :func:`add_memory` wraps the agent in ``start -> retrieve -> agent -> evolve``: MemRetriever
  turns the last human message into support, the agent runs with that support added as one
  clearly delimited message (retrieved data, not instructions), and MemEvolver reads what the
  agent did (its tool calls, their results, its answer) and may write one update;
- :func:`memory_tools` hands the agent the ``memory_lookup`` tool, so the agent itself decides
  when to read memory.

Modes, per run (input ``mode``): ``evolve`` (the default), ``read_only`` (retrieve and run the
agent, never write) and ``no_memory`` (the agent alone). The bank is named per run in the
context (``bank_url``, ``bank_id``, ``memory_k``) or comes from the store the graph is compiled
with. The context also reaches the agent, so its own tools can read it.

With ``evolve="background"`` a run returns as soon as the agent has answered and MemEvolver's
update is queued on a worker (:mod:`genmem.graph.background`).

Example::

    from langchain.agents import create_agent
    from genmem.graph.embed import add_memory, memory_tools
    from genmem.graph.retriever import MemoryContext

    agent = create_agent(model, tools=[*my_tools, *memory_tools()], context_schema=MemoryContext)
    app = add_memory(agent).compile()
    out = app.invoke(
        {"messages": [{"role": "user", "content": "How much do 3 pens at $2 cost?"}]},
        context={"bank_url": "sqlite:////abs/bank.db?bank=gsm"},
    )
    out["messages"][-1].content, out["support"], out["update"]
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict, get_type_hints

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime

from genmem.graph._runtime import sync_and_async
from genmem.graph.addressing import GeneratorFactory
from genmem.graph.background import (
    BackgroundConfig,
    EvolveMode,
    ServerBackground,
    attach_background,
)
from genmem.graph.evolver import EvolverConfig
from genmem.graph.memory_nodes import MemoryAgents, Mode, check_mode, fresh_memory_state
from genmem.graph.retriever import MemoryContext, RetrieverConfig
from genmem.graph.trajectory import StepRecord, Trajectory, extend_or_reset
from genmem.memory.bank import Bank
from genmem.policies.chat_local import content_text
from genmem.policies.prompts import NO_MEMORY_ANSWER, support_user_message
from genmem.policies.types import SIDGenerator
from genmem.tools.lookup import DEFAULT_LOOKUP_K, create_memory_lookup_tool

__all__ = [
    "AGENT_NODE",
    "SUPPORT_ID_PREFIX",
    "MemoryAgentInput",
    "MemoryAgentState",
    "add_memory",
    "memory_tools",
    "support_message",
    "trajectory_from_messages",
]

AGENT_NODE = "agent"
"""The wrapped agent's node name, its steps' ``agent`` and its event's ``node``."""

SUPPORT_ID_PREFIX = "genmem-support-"
"""Id prefix of the message that carries the support (kept out of the conversation)."""


class MemoryAgentInput(TypedDict, total=False):
    """What one run of a memory-wrapped agent takes."""

    messages: Annotated[list[AnyMessage], add_messages]
    mode: Mode


class MemoryAgentState(MemoryAgentInput, total=False):
    """State of a memory-wrapped agent (per-run keys reset at the start of every run)."""

    query: str | None
    """The text memory was addressed with: the last human message, or the ``query_key``."""
    sid: str | None
    addresser: str | None
    """What chose ``sid``: ``generative`` (a policy) or ``quantizer`` (the frozen codebooks)."""
    candidates: list[str]
    """SIDs the addressing policy proposed; ``ranked``: after reranking."""
    ranked: list[str]
    retrieved: list[dict[str, Any]]
    support: str | None
    support_source: str | None
    """``rewrite`` (the retriever's text), ``entry`` (its rewrite was refused) or ``none``."""
    support_refused: str | None
    """Why the write gate's checks refused the retriever's rewrite, when they did."""
    trajectory: dict[str, Any] | None
    """What the agent did this run, as a ``Trajectory.model_dump()`` (MemEvolver's input)."""
    update_sid: str | None
    """Where MemEvolver wrote (or would have written) this run's update."""
    update_addresser: str | None
    decision: dict[str, Any] | None
    """MemEvolver's decision as it made it (operation, SID, payload), before the write gate."""
    update: dict[str, Any] | None
    evolve_error: dict[str, Any] | None
    evolve_job: str | None
    """The queued update's job id (``evolve="background"``); see ``background_of(app)``."""
    events: Annotated[list[dict[str, Any]], extend_or_reset]


def _last_human(messages: Sequence[AnyMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage) and not _is_support(messages[i]):
            return i
    return None


def _is_support(message: AnyMessage) -> bool:
    return str(message.id or "").startswith(SUPPORT_ID_PREFIX)


def support_message(support: str, sid: str | None = None) -> HumanMessage:
    """The message that hands ``support`` to an agent, delimited as retrieved data."""
    return HumanMessage(
        support_user_message(support, sid), id=f"{SUPPORT_ID_PREFIX}{uuid.uuid4().hex}"
    )


def trajectory_from_messages(
    query: str, messages: Sequence[AnyMessage], *, support: str | None = None
) -> Trajectory:
    """The trajectory of one agent turn: each tool call with its result, then the answer.

    ``messages`` are the turn's new messages (what the agent added after the question). The
    last AI message without tool calls is the answer; without one the status is ``failed``.
    """
    results = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    steps: list[StepRecord] = []
    answer: str | None = None
    for msg in messages:
        if not isinstance(msg, AIMessage):
            continue
        thought = content_text(msg.content).strip()
        for call in msg.tool_calls:
            result = results.get(call.get("id") or "")
            steps.append(
                StepRecord(
                    step=len(steps),
                    agent=AGENT_NODE,
                    action="tool",
                    arguments={"tool": call["name"], "args": call["args"]},
                    observation=content_text(result.content)
                    if result is not None
                    else "(no result)",
                    thought=thought,
                )
            )
        for bad in msg.invalid_tool_calls:
            steps.append(
                StepRecord(
                    step=len(steps),
                    agent=AGENT_NODE,
                    action="invalid",
                    arguments={"tool": bad.get("name"), "args": bad.get("args")},
                    observation=str(bad.get("error") or "the call did not parse"),
                    thought=thought,
                )
            )
    # Only a closing reply counts: an agent that stopped while still calling tools has none.
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last is not None and not last.tool_calls and not last.invalid_tool_calls:
        answer = content_text(last.content).strip() or None
    return Trajectory(
        query=query,
        support=support,
        steps=steps,
        answer=answer,
        status="finished" if answer is not None else "failed",
        stop_reason="" if answer is not None else "the agent ended without a final answer",
    )


def _with_key(schema: type, key: str, name: str) -> type:
    """``schema`` plus one optional text key (for ``query_key``)."""
    hints = get_type_hints(schema, include_extras=True)
    return TypedDict(name, {**hints, key: str}, total=False)  # type: ignore[operator]


def add_memory(
    agent: Runnable[Any, Any],
    *,
    model: BaseChatModel | str = "local",
    sid_generator: SIDGenerator | GeneratorFactory | None = None,
    retriever_config: RetrieverConfig | None = None,
    evolver_config: EvolverConfig | None = None,
    mode_default: Mode = "evolve",
    query_key: str | None = None,
    evolve: EvolveMode = "inline",
    background: BackgroundConfig | ServerBackground | None = None,
) -> StateGraph:
    """``agent`` between MemRetriever and MemEvolver, as an uncompiled graph.

    Args:
        agent: A compiled LangGraph agent (e.g. from ``create_agent``) whose state has
            ``messages``; it is invoked with the conversation (plus the support message) and
            the run's context.
        model: The chat model of MemRetriever and MemEvolver (not of the agent).
        sid_generator: The addressing policy of both memory agents (default: constrained
            decoding on ``model``, which must then be a local model).
        retriever_config: How MemRetriever addresses and rewrites.
        evolver_config: How MemEvolver addresses and retries.
        mode_default: The mode of a run whose input names none.
        query_key: An input key whose text addresses memory instead of the last human
            message (it is added to the graph's input).
        evolve: ``inline`` (the run writes its update before it returns) or ``background``
            (the run returns after the agent; the update is queued on a worker:
            :mod:`genmem.graph.background`, reached with ``background_of(graph)``).
        background: Delay, concurrency, supersede and journal of the background mode
            (:class:`BackgroundConfig`), or :class:`ServerBackground` for a served graph
            whose updates run as background runs on the LangGraph server.

    Returns:
        The graph; compile it (``langgraph dev`` compiles it with its own store and
        checkpointer).
    """
    if isinstance(agent, StateGraph):
        raise TypeError("add_memory takes a compiled agent: pass agent.compile()")
    if not callable(getattr(agent, "invoke", None)):
        raise TypeError(f"add_memory needs a runnable agent, got {type(agent).__name__}")
    default = check_mode(mode_default)
    state_schema: type = MemoryAgentState
    input_schema: type = MemoryAgentInput
    if query_key is not None:
        if not query_key.isidentifier() or query_key in get_type_hints(MemoryAgentState):
            raise ValueError(
                f"query_key={query_key!r}: use an identifier that is not one of the state's "
                f"keys ({', '.join(get_type_hints(MemoryAgentState))})"
            )
        state_schema = _with_key(MemoryAgentState, query_key, "MemoryAgentQueryState")
        input_schema = _with_key(MemoryAgentInput, query_key, "MemoryAgentQueryInput")

    memory = MemoryAgents.build(
        model,
        model,
        sid_generator=sid_generator,
        retriever_config=retriever_config,
        evolver_config=evolver_config,
        evolve=evolve,
        background=background,
        pass_outcome=False,  # a wrapped agent's run has no environment verdict
    )

    def start(state: dict[str, Any]) -> dict[str, Any]:
        messages = list(state.get("messages") or [])
        if query_key is not None:
            query = state.get(query_key)
            if not isinstance(query, str) or not query.strip():
                raise ValueError(f"add_memory(query_key={query_key!r}) needs that key's text")
        else:
            last = _last_human(messages)
            if last is None:
                raise ValueError(
                    "the memory-wrapped agent needs a human message in 'messages' to address "
                    'memory with, e.g. {"messages": [{"role": "user", "content": "..."}]}'
                )
            query = content_text(messages[last].content)
            if not query.strip():
                raise ValueError("the last human message has no text to address memory with")
        return {
            **fresh_memory_state("trajectory"),
            "query": query.strip(),
            "mode": check_mode(state.get("mode") or default),
        }

    def call_agent(state: dict[str, Any], runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        messages, given = agent_messages(state)
        out = agent.invoke({"messages": messages}, context=runtime.context)
        return agent_update(state, messages, given, out)

    async def acall_agent(state: dict[str, Any], runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        messages, given = agent_messages(state)
        given_input, ctx = {"messages": messages}, runtime.context
        if callable(getattr(agent, "ainvoke", None)):
            out = await agent.ainvoke(given_input, context=ctx)
        else:  # an agent with only invoke: off the event loop
            out = await asyncio.to_thread(agent.invoke, given_input, context=ctx)
        return agent_update(state, messages, given, out)

    def agent_messages(state: dict[str, Any]) -> tuple[list[AnyMessage], str | None]:
        """The conversation the agent gets (with the support message) and the support given."""
        messages = list(state.get("messages") or [])
        support = (state.get("support") or "").strip() if state["mode"] != "no_memory" else ""
        given: str | None = None
        if support and support != NO_MEMORY_ANSWER:
            given = support
            at = _last_human(messages)
            at = len(messages) if at is None else at
            messages.insert(at, support_message(support, state.get("sid")))
        return messages, given

    def agent_update(
        state: dict[str, Any], messages: list[AnyMessage], given: str | None, out: Any
    ) -> dict[str, Any]:
        """The state update from the agent's output: its new messages and their trajectory."""
        seen = {m.id for m in messages}
        produced = out.get("messages") if isinstance(out, dict) else None
        if not isinstance(produced, list):
            raise TypeError(
                f"the wrapped agent returned {type(out).__name__} without a 'messages' list; "
                "wrap an agent whose state has messages (e.g. one from create_agent)"
            )
        new = [m for m in produced if m.id not in seen and not _is_support(m)]
        trajectory = trajectory_from_messages(state["query"], new, support=given)
        event = {
            "node": AGENT_NODE,
            "kind": trajectory.status,
            "answer": trajectory.answer,
            "steps": len(trajectory.steps),
        }
        return {"messages": new, "trajectory": trajectory.model_dump(), "events": [event]}

    def after_start(state: dict[str, Any]) -> str:
        return AGENT_NODE if state["mode"] == "no_memory" else "retrieve"

    def after_agent(state: dict[str, Any]) -> str:
        return "evolve" if state["mode"] == "evolve" else END

    g = StateGraph(state_schema, context_schema=MemoryContext, input_schema=input_schema)
    g.add_node("start", start)
    # Under ainvoke/astream the memory nodes and the agent run their async bodies.
    g.add_node("retrieve", memory.retrieve.node())
    g.add_node(AGENT_NODE, sync_and_async(call_agent, acall_agent))
    g.add_node("evolve", memory.evolve.node())
    g.add_edge(START, "start")
    g.add_conditional_edges("start", after_start, ["retrieve", AGENT_NODE])
    g.add_edge("retrieve", AGENT_NODE)
    g.add_conditional_edges(AGENT_NODE, after_agent, ["evolve", END])
    g.add_edge("evolve", END)
    if memory.queue is not None:
        attach_background(g, memory.queue)
    return g


def memory_tools(bank: Bank | None = None, k: int = DEFAULT_LOOKUP_K) -> list[BaseTool]:
    """The ``memory_lookup`` tool for any agent: ``create_agent(m, tools=[*t, *memory_tools()])``.

    Args:
        bank: The bank the tool always reads. Without it each call reads the bank the run
            names in its context (``bank`` or ``bank_url``, ``bank_id``; give ``create_agent``
            the ``context_schema=MemoryContext``), its config, or the agent's store.
        k: How many neighbouring entries come back when the exact slot is empty.

    Returns:
        A one-tool list; a bad SID or a missing bank comes back to the agent as the tool's
        result, never as an exception.
    """
    return [create_memory_lookup_tool(bank, k=k)]
