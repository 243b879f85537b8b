"""The MemRetriever subgraph: generate an SID, look it up through a real tool call, rewrite.

``address -> lookup -> rewrite``:

- ``address`` asks the addressing policy (a :class:`~genmem.policies.types.SIDGenerator`; by
  default constrained decoding on the retriever's own local model, so the SID is always valid)
  for candidates, optionally reranks them against the bank's payloads, and writes an assistant
  message that calls ``memory_lookup`` with the chosen SID (or, with ``lookup="candidates"``,
  every candidate in ranked order);
- ``lookup`` is LangGraph's ``ToolNode`` running the real tool; the bank comes from the run
  context (``bank_url``, ``bank_id``, ``memory_k``) or the graph's store;
- ``rewrite`` has the retriever's chat model turn what came back into short, task-adaptive
  support (the text between ``<answer>`` tags); with nothing retrieved it answers the fixed
  no-memory sentence without calling the model. The rewrite passes the write gate's checks
  (grounded in the task and the entries read) before the planner sees it; a rewrite the gate
  refuses (an echo of the tool's markup, a number, a loop) is replaced by the entry the lookup
  returned first, and ``support_source`` says which the planner got.

Under ``ainvoke``/``astream`` the nodes take their async path: the bank is read through its async
API (the lookup tool's coroutine), the rewrite is the chat model's ``ainvoke``, and the SID
decoding runs in a worker thread, so an async app's event loop never waits on memory.

The SID decision is not preceded by free-text thinking: the constrained decoder reads the task
directly, which is what makes the address valid by construction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from genmem.graph._runtime import (
    AddressingNodes,
    sync_and_async,
)
from genmem.graph.addressing import BankGenerators, GeneratorFactory
from genmem.memory.bank import Bank
from genmem.memory.gate import check_payload
from genmem.policies.addressing import Addresser, addresser_name, check_addresser
from genmem.policies.backends import load_chat_model
from genmem.policies.prompts import NO_MEMORY_ANSWER, retriever_prompt, retriever_user_message
from genmem.policies.rerank import Reranker
from genmem.policies.types import RETRIEVER_ALLOWED, AllowedMode, SIDGenerator
from genmem.tools.lookup import DEFAULT_MAX_SIDS, create_memory_lookup_tool

__all__ = [
    "MemoryContext",
    "RetrieverConfig",
    "RetrieverNodes",
    "RetrieverState",
    "SupportSource",
    "build_retriever_graph",
    "extract_answer",
]

SupportSource = Literal["rewrite", "entry", "none"]

_ANSWER = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)


class RetrieverState(TypedDict, total=False):
    """State of the MemRetriever subgraph."""

    query: str
    messages: Annotated[list[AnyMessage], add_messages]
    sid: str | None
    candidates: list[dict[str, Any]]
    ranked: list[str]
    """Candidate SIDs in the order the reranker put them (decode order without one)."""
    retrieved: list[dict[str, Any]]
    support: str
    addresser: str
    """What chose the SID: ``generative``, ``quantizer`` (or a caller's generator's name)."""
    support_source: SupportSource
    """Where ``support`` came from: the model's ``rewrite``, the first retrieved ``entry`` (the
    rewrite was refused, see ``support_refused``) or ``none`` (nothing retrieved)."""
    support_refused: str | None
    """The gate's reason for refusing the rewrite (``markup``, ``symbols``, ...), else None."""


class MemoryContext(TypedDict, total=False):
    """Run context: which bank, how many entries a lookup returns, which addresser."""

    bank_url: str
    bank_id: str
    memory_k: int
    addresser: Addresser
    """Overrides the graph's configured addresser for this run (``auto``, ``generative``,
    ``quantizer``)."""


@dataclass(frozen=True, kw_only=True)
class RetrieverConfig:
    """How MemRetriever addresses and rewrites."""

    beam: int = 1
    """SID candidates to decode (1 = greedy)."""
    rerank: bool = False
    """Look the candidates up and take the SID whose payload best matches the task."""
    allowed: AllowedMode = RETRIEVER_ALLOWED
    """Which SIDs the decoder may produce (default ``occupied``: only addresses holding an
    entry)."""
    addresser: Addresser = "auto"
    """``auto`` (an aligned policy generates, else the quantizer), ``generative``, ``quantizer``;
    ignored when the graph is given its own ``sid_generator``."""
    lookup: Literal["chosen", "candidates"] = "chosen"
    """Look up the chosen SID only (the default), or every candidate, in ranked order (what
    the SID-symbol experiment's text conditions read with ``beam`` = k)."""
    rewrite: bool = True
    """Have the model rewrite what the lookup returned for the task (the paper). False: the
    planner gets the entry read, as stored, as it does when the gate refuses a rewrite; no model
    call (support_source ``entry``, support_refused ``skipped``)."""

    def __post_init__(self) -> None:
        check_addresser(self.addresser)
        if not 1 <= self.beam <= 50:
            raise ValueError(f"beam={self.beam}: use 1 (greedy) to 50")
        if self.rerank and self.beam < 2:
            raise ValueError("rerank=True needs beam >= 2 candidates to choose from")
        if self.lookup not in ("chosen", "candidates"):
            raise ValueError(f"lookup={self.lookup!r}: use 'chosen' or 'candidates'")


def extract_answer(text: str) -> str:
    """The text inside ``<answer>`` tags (thinking removed), else the reply stripped."""
    match = _ANSWER.search(text)
    if match:
        return match.group(1).strip()
    return _THINK.sub("", text).strip()


def checked_support(rewrite: str, query: str, retrieved: list[dict[str, Any]]) -> dict[str, Any]:
    """The support the planner gets: the rewrite if the gate passes it, else the first entry."""
    payloads = [str(h.get("payload") or "") for h in retrieved]
    verdict = check_payload(rewrite, sources=[query, *payloads])
    if verdict.passed:
        return {"support": rewrite, "support_source": "rewrite", "support_refused": None}
    entry = payloads[0].strip() if payloads else ""
    return {
        "support": entry or NO_MEMORY_ANSWER,
        "support_source": "entry" if entry else "none",
        "support_refused": verdict.reason,
    }


def _retrieved(state: RetrieverState) -> list[dict[str, Any]]:
    """The hits every ``memory_lookup`` answer in the conversation returned."""
    retrieved: list[dict[str, Any]] = []
    for msg in state.get("messages", []):
        if isinstance(msg, ToolMessage):
            for result in msg.artifact or []:
                data = result.model_dump() if hasattr(result, "model_dump") else result
                retrieved += list(data.get("hits", []))
    return retrieved


def _support(
    state: RetrieverState, reply: BaseMessage, retrieved: list[dict[str, Any]]
) -> RetrieverState:
    """The state update from the model's rewrite of what was retrieved."""
    query = state.get("query") or ""
    checked = checked_support(extract_answer(str(reply.content)), query, retrieved)
    return {"messages": [reply], "retrieved": retrieved, **checked}  # type: ignore[typeddict-item]


def _as_stored(retrieved: list[dict[str, Any]]) -> RetrieverState:
    """The support without a rewrite: the first entry read, as stored."""
    entry = str(retrieved[0].get("payload") or "").strip()
    return {
        "retrieved": retrieved,
        "support": entry or NO_MEMORY_ANSWER,
        "support_source": "entry" if entry else "none",
        "support_refused": "skipped",
    }  # type: ignore[typeddict-item]


class RetrieverNodes(AddressingNodes):
    """MemRetriever's nodes, as methods that can be called on a state (and a bank) directly.

    :func:`build_retriever_graph` wires them: ``address``, then (:meth:`route`) ``lookup``
    when an SID was chosen, then ``rewrite``.
    """

    def __init__(
        self,
        chat: BaseChatModel,
        *,
        sid_generator: SIDGenerator | GeneratorFactory | None = None,
        config: RetrieverConfig | None = None,
    ) -> None:
        """``chat``: the rewriting model (and, by default, the addressing policy's);
        ``sid_generator``: the addressing policy (see :func:`build_retriever_graph`)."""
        self.chat = chat
        self.config = config or RetrieverConfig()
        self.generator_for = BankGenerators(chat, sid_generator, self.config, role="MemRetriever")

    def address_in(
        self, state: RetrieverState, bank: Bank, context: MemoryContext
    ) -> RetrieverState:
        """The candidates for the query, the chosen SID and the ``memory_lookup`` call to make
        (none when no SID was proposed)."""
        cfg = self.config
        query = state.get("query") or ""
        if not query.strip():
            raise ValueError("MemRetriever needs a non-empty 'query' in its input")
        task = retriever_user_message(query)
        generator = self.generator_for(bank, context.get("addresser"))
        candidates = generator.generate(task, k=cfg.beam)
        chosen = candidates[0].sid if candidates else None
        order = [c.sid for c in candidates]
        if cfg.rerank and candidates:
            ranked = Reranker(bank).rerank(query, candidates)
            chosen = ranked[0].sid if ranked else chosen
            order = [r.sid for r in ranked]
        messages: list[AnyMessage] = [
            SystemMessage(retriever_prompt(bank.spec)),
            HumanMessage(task),
        ]
        if chosen is not None:
            sids = order if cfg.lookup == "candidates" else [chosen]
            call = {"name": "memory_lookup", "args": {"sid_list": sids}, "id": "lookup-1"}
            messages.append(AIMessage("", tool_calls=[call]))
        return {
            "messages": messages,
            "sid": chosen,
            "candidates": [c.model_dump() for c in candidates],
            "ranked": order,
            "addresser": addresser_name(generator),
        }

    def rewrite(self, state: RetrieverState) -> RetrieverState:
        """The support the planner gets: the model's rewrite of what the lookup returned (if
        the gate passes it), or the no-memory sentence without asking the model."""
        retrieved = _retrieved(state)
        if not retrieved:
            return {"retrieved": [], "support": NO_MEMORY_ANSWER, "support_source": "none"}
        if not self.config.rewrite:
            return _as_stored(retrieved)
        return _support(state, self.chat.invoke(state["messages"]), retrieved)

    async def arewrite(self, state: RetrieverState) -> RetrieverState:
        """:meth:`rewrite` through the model's ``ainvoke``."""
        retrieved = _retrieved(state)
        if not retrieved:
            return {"retrieved": [], "support": NO_MEMORY_ANSWER, "support_source": "none"}
        if not self.config.rewrite:
            return _as_stored(retrieved)
        return _support(state, await self.chat.ainvoke(state["messages"]), retrieved)

    @staticmethod
    def route(state: RetrieverState) -> str:
        """``lookup`` when an SID was chosen, else straight to ``rewrite``."""
        return "lookup" if state.get("sid") else "rewrite"


def build_retriever_graph(
    model: BaseChatModel | str = "local",
    *,
    sid_generator: SIDGenerator | GeneratorFactory | None = None,
    config: RetrieverConfig | None = None,
) -> StateGraph:
    """The uncompiled MemRetriever graph (``langgraph dev`` compiles it with its own store)."""
    nodes = RetrieverNodes(load_chat_model(model), sid_generator=sid_generator, config=config)
    g = StateGraph(RetrieverState, context_schema=MemoryContext)
    g.add_node("address", sync_and_async(nodes.address, nodes.aaddress))
    # a lookup of every candidate takes the beam
    max_sids = max(DEFAULT_MAX_SIDS, nodes.config.beam)
    g.add_node("lookup", ToolNode([create_memory_lookup_tool(max_sids=max_sids)]))
    g.add_node("rewrite", sync_and_async(nodes.rewrite, nodes.arewrite))
    g.add_edge(START, "address")
    g.add_conditional_edges("address", nodes.route, ["lookup", "rewrite"])
    g.add_edge("lookup", "rewrite")
    g.add_edge("rewrite", END)
    return g
