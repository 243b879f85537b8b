"""Background evolution on a LangGraph server: the update runs as a second, background run.

A graph served by ``langgraph dev`` / the LangGraph server and built with
``evolve="background", background=ServerBackground()`` ends its run after the agent's answer;
its ``evolve`` node only asks the server (``langgraph_sdk``) to start a background run of
``mem_evolver_job`` (:func:`build_evolver_job_graph`: MemEvolver, through the same write gate)
with the run's input and context. The server keeps that run durably and executes it with its
own store, so nothing needs flushing; its status, output (``update`` or MemEvolver's ``error``)
and any exception are the server's run record.

- **Delay**: the run is created with ``after_seconds``.
- **Supersede**: a run of a thread gets an evolver thread of its own (a UUID derived from the
  thread id); a newer update cancels that thread's updates still ``pending`` (their records
  stay, ``interrupted``; the running one finishes) and queues behind it
  (``multitask_strategy="enqueue"``). An update of a run without a thread gets a new thread.
- **Bounded concurrency**: the server's job workers (``--n-jobs-per-worker``).
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph_sdk import get_sync_client
from langgraph_sdk.errors import NotFoundError

from genmem.graph.addressing import GeneratorFactory
from genmem.graph.evolver import EvolverConfig, build_evolver_graph
from genmem.graph.retriever import MemoryContext
from genmem.policies.types import SIDGenerator
from genmem.tools.served_banks import on_behalf_headers

__all__ = [
    "EVOLVER_JOB",
    "EvolverJobState",
    "ServerBackground",
    "build_evolver_job_graph",
    "evolver_thread_id",
    "start_server_update",
]

logger = logging.getLogger(__name__)

EVOLVER_JOB = "mem_evolver_job"
"""The served graph (``langgraph.json``) that background updates run as."""

_NAMESPACE = uuid.UUID("6f1b3c1e-5a47-4d3e-9c1a-2b8e0f6d4a10")


@dataclass(frozen=True, kw_only=True)
class ServerBackground:
    """Where and how a served graph starts its background update runs."""

    assistant_id: str = EVOLVER_JOB
    """The served graph (or assistant) that writes the update."""
    url: str | None = None
    """The server's URL; None: ``$LANGGRAPH_API_URL``, which ``langgraph dev`` sets for the
    graphs it serves (set it, or this, on a deployment that does not)."""
    delay_s: float = 0.0
    """Seconds before the update run may start (the server's ``after_seconds``, rounded up)."""
    supersede: bool = True
    """A newer run of the same thread cancels that thread's update runs still pending."""
    timeout_s: float = 30.0
    """How long the node waits for the server to accept the run."""

    def __post_init__(self) -> None:
        if not self.assistant_id.strip():
            raise ValueError("assistant_id='': name the served evolver graph, e.g. mem_evolver_job")
        if not 0 <= self.delay_s <= 86_400:
            raise ValueError(f"delay_s={self.delay_s}: use 0 to 86400 seconds")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s={self.timeout_s}: use a positive number of seconds")


def evolver_thread_id(thread_id: str) -> str:
    """The server thread that holds the background updates of the agent's ``thread_id``."""
    return str(uuid.uuid5(_NAMESPACE, f"genmem-evolve/{thread_id}"))


def _server_url(cfg: ServerBackground) -> str:
    url = cfg.url or os.environ.get("LANGGRAPH_API_URL")
    if not url:
        raise ValueError(
            "no server to start the background update on: ServerBackground(url=...) or "
            "$LANGGRAPH_API_URL (langgraph dev sets it) names it"
        )
    return url


def start_server_update(
    cfg: ServerBackground,
    inputs: dict[str, Any],
    *,
    context: dict[str, Any] | None = None,
    thread_id: str | None = None,
    user: str | None = None,
) -> dict[str, Any]:
    """Start the background update run; returns ``run_id``, ``thread_id``, ``superseded``.

    ``user``: the authenticated user the agent's run belongs to; the update run is started on
    their behalf (the server's service credential), so it reads and writes their banks only.
    """
    # Every update runs on a thread, so its record (status, output, error) outlives the run:
    # the server deletes a thread-less run's temporary thread when it ends.
    target = str(uuid.uuid4()) if thread_id is None else evolver_thread_id(thread_id)
    superseded: list[str] = []
    headers = on_behalf_headers(user)
    with get_sync_client(
        url=_server_url(cfg), timeout=cfg.timeout_s, headers=headers or None
    ) as client:
        if thread_id is not None and cfg.supersede:
            try:
                pending = client.runs.list(target, status="pending", limit=100)
            except NotFoundError:  # the thread's first update: nothing to supersede
                pending = []
            for old in pending:
                client.runs.cancel(target, old["run_id"], action="interrupt")
                superseded.append(old["run_id"])
        run = client.runs.create(
            target,
            cfg.assistant_id,
            input=inputs,
            context=context or None,
            metadata={"genmem": "background_evolve", "agent_thread_id": thread_id},
            multitask_strategy="enqueue",
            if_not_exists="create",
            after_seconds=math.ceil(cfg.delay_s) or None,
        )
    return {"run_id": run["run_id"], "thread_id": run["thread_id"], "superseded": superseded}


class EvolverJobState(TypedDict, total=False):
    """One background update: MemEvolver's input, and its result (replaced on every run)."""

    query: str
    trajectory: dict[str, Any] | str
    outcome: str | None
    sid: str | None
    update: dict[str, Any] | None
    error: dict[str, Any] | None
    events: list[dict[str, Any]]


def build_evolver_job_graph(
    model: BaseChatModel | str = "local",
    *,
    sid_generator: SIDGenerator | GeneratorFactory | None = None,
    config: EvolverConfig | None = None,
) -> StateGraph:
    """MemEvolver as one node whose run starts afresh on a thread that keeps many updates."""
    evolver = build_evolver_graph(model, sid_generator=sid_generator, config=config).compile(
        name="mem_evolver"
    )

    def evolve(state: EvolverJobState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        out = evolver.invoke(
            {
                "query": state.get("query"),
                "trajectory": state.get("trajectory"),
                "outcome": state.get("outcome"),
            },
            context=runtime.context,
        )
        if out.get("error") is not None:
            logger.warning("background update wrote nothing: %s", out["error"].get("message"))
        return {
            "sid": out.get("sid"),
            "update": out.get("update"),
            "error": out.get("error"),
            "events": list(out.get("events", [])),
        }

    g = StateGraph(EvolverJobState, context_schema=MemoryContext)
    g.add_node("evolve", evolve)
    g.add_edge(START, "evolve")
    g.add_edge("evolve", END)
    return g
