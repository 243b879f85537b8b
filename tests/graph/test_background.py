"""Background evolution: the queue's semantics with fakes, and one run on the default model."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from genmem.graph.background import (
    BackgroundConfig,
    BackgroundEvolver,
    background_of,
    evolver_run,
)
from genmem.graph.embed import add_memory
from genmem.graph.evolver import build_evolver_graph
from genmem.graph.loop import build_genmem_graph
from genmem.memory.location import open_bank
from tests.fakes import FakeChat, FixedGenerator
from tests.graph._banks import A, one_entry_bank, revise_reply
from tests.graph.test_embed import RETRIEVE, multiply
from tests.graph.test_loop import EXECUTE, FINISH
from tests.graph.test_loop import RETRIEVE as LOOP_RETRIEVE

Q = "Pens cost $2 each. How much do 3 pens cost?"
PAYLOAD = "Find the price of one item first."
REVISED = "One item's price, times the count of items."
ROOT = Path(__file__).resolve().parents[2]
MAX_NEW_TOKENS = 8
"""Reply cap of the default model (its evolver decision, under a JSON schema, gets room anyway)."""


def _gated(chat: FakeChat, gate: threading.Event, after: int) -> FakeChat:
    """``chat`` with its calls after the first ``after`` waiting for ``gate`` to be set."""

    def wait() -> None:
        if len(chat.prompts) > after:
            assert gate.wait(30), "the test never opened the gate"

    chat.before = wait
    return chat


def _agent():
    return create_agent(FakeChat(responses=[AIMessage("6")] * 4), tools=[multiply], name="solver")


def _wrapped(memory: FakeChat, config: BackgroundConfig):
    graph = add_memory(
        _agent(),
        model=memory,
        sid_generator=FixedGenerator([A]),
        evolve="background",
        background=config,
    )
    return graph.compile(checkpointer=InMemorySaver()), background_of(graph)


def _ask(app, bank_url: str, thread: str = "t1") -> dict[str, Any]:
    return app.invoke(
        {"messages": [HumanMessage(Q)]},
        {"configurable": {"thread_id": thread}},
        context={"bank_url": bank_url},
    )


def _fake_run(calls: list[dict[str, Any]], *, seconds: float = 0.0, fail: bool = False):
    """An EvolveRun stand-in (control flow only) that records its input and overlap."""
    lock = threading.Lock()
    state = {"now": 0, "most": 0}

    def run(inputs, context, store):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(seconds)
        with lock:
            state["now"] -= 1
            calls.append({**inputs, "context": context, "most": state["most"]})
        if fail:
            raise RuntimeError("the bank server is down")
        return {"update": {"sid": inputs["query"]}, "error": None, "events": []}

    return run


@pytest.fixture
def bank_url(tmp_path) -> str:
    return one_entry_bank(tmp_path, PAYLOAD)


def test_the_answer_returns_before_the_write_and_flush_lands_it(bank_url, tmp_path) -> None:
    gate = threading.Event()
    memory = _gated(FakeChat(responses=[RETRIEVE, revise_reply(REVISED)]), gate, after=1)
    app, evolver = _wrapped(memory, BackgroundConfig(journal=tmp_path / "jobs.sqlite"))
    out = _ask(app, bank_url)
    assert out["messages"][-1].content == "6" and out["update"] is None
    assert out["evolve_error"] is None and out["events"][-1]["kind"] == "queued"
    job = evolver.job(out["evolve_job"])
    assert job is not None and job.status in ("pending", "running") and job.thread_id == "t1"
    assert len(open_bank(bank_url).history(A)) == 1  # the worker waits at the gate
    gate.set()
    [done] = evolver.flush(timeout=30)
    assert done.id == out["evolve_job"] and done.status == "applied", done.error
    assert done.update["outcome"] == "revised" and done.events[-1]["kind"] == "applied"
    bank = open_bank(bank_url)
    assert bank.get(A).payload == REVISED and bank.get(A).actor == "mem_evolver"
    evolver.shutdown()


def test_delay_holds_a_job_and_flush_waives_it(bank_url, tmp_path) -> None:
    calls: list[dict[str, Any]] = []
    with BackgroundEvolver(_fake_run(calls), BackgroundConfig(delay_s=0.4, journal=None)) as ev:
        t0 = time.monotonic()
        job = ev.submit({"query": "a"})
        assert job.due_at - job.submitted_at == pytest.approx(0.4)
        time.sleep(0.1)
        assert calls == [] and ev.job(job.id).status == "pending"
        assert ev.wait(job.id, timeout=5).status == "applied"
        assert time.monotonic() - t0 >= 0.4
        later = ev.submit({"query": "b"})
        ev2 = BackgroundEvolver(_fake_run(calls), BackgroundConfig(delay_s=3600, journal=None))
        slow = ev2.submit({"query": "c"})
        t1 = time.monotonic()
        assert [j.status for j in ev2.flush(timeout=5)] == ["applied"]
        assert time.monotonic() - t1 < 5 and ev2.job(slow.id).status == "applied"
        ev2.shutdown()
    assert ev.job(later.id).status == "applied"  # leaving the block flushed it
    assert [c["query"] for c in calls] == ["a", "c", "b"]


def test_a_newer_run_of_a_thread_supersedes_its_pending_update(bank_url, tmp_path) -> None:
    memory = FakeChat(responses=[RETRIEVE, RETRIEVE, RETRIEVE, revise_reply(REVISED)])
    config = BackgroundConfig(delay_s=3600, journal=tmp_path / "jobs.sqlite")
    app, evolver = _wrapped(memory, config)
    first = _ask(app, bank_url, "t1")["evolve_job"]
    other = _ask(app, bank_url, "t2")["evolve_job"]
    newer = _ask(app, bank_url, "t1")["evolve_job"]
    old = evolver.job(first)
    assert old.status == "superseded" and old.superseded_by == newer
    assert [j.status for j in evolver.jobs(open_only=True)] == ["pending", "pending"]
    memory.responses.extend(["not a decision", "not a decision either"])
    finished = {j.id: j for j in evolver.flush(timeout=30)}
    assert set(finished) == {other, newer}  # t2 was another thread: never superseded
    assert evolver.jobs(open_only=True) == []
    # In queue order: t2's job writes; t1's newer job gets two bad decisions and writes nothing.
    assert [finished[other].status, finished[newer].status] == ["applied", "rejected"]
    assert len(open_bank(bank_url).history(A)) == 2
    evolver.shutdown()


def test_supersede_off_runs_every_update(tmp_path) -> None:
    calls: list[dict[str, Any]] = []
    config = BackgroundConfig(delay_s=3600, supersede=False, journal=None)
    with BackgroundEvolver(_fake_run(calls), config) as ev:
        for q in "abc":
            ev.submit({"query": q}, thread_id="t")
    assert [c["query"] for c in calls] == ["a", "b", "c"]


def test_concurrency_is_bounded(tmp_path) -> None:
    calls: list[dict[str, Any]] = []
    config = BackgroundConfig(max_workers=2, journal=None)
    with BackgroundEvolver(_fake_run(calls, seconds=0.15), config) as ev:
        for q in "abcdef":
            ev.submit({"query": q})
        assert len(ev.flush(timeout=10)) == 6
    assert max(c["most"] for c in calls) == 2
    one: list[dict[str, Any]] = []
    with BackgroundEvolver(_fake_run(one, seconds=0.05), BackgroundConfig(journal=None)) as ev:
        for q in "abcd":
            ev.submit({"query": q})
    assert [c["query"] for c in one] == list("abcd") and max(c["most"] for c in one) == 1


def test_shutdown_waits_for_queued_writes_then_refuses_new_ones(tmp_path) -> None:
    calls: list[dict[str, Any]] = []
    ev = BackgroundEvolver(
        _fake_run(calls, seconds=0.05), BackgroundConfig(delay_s=3600, journal=None)
    )
    jobs = [ev.submit({"query": q}) for q in "ab"]
    ev.shutdown(wait=True, timeout=10)
    assert [c["query"] for c in calls] == ["a", "b"]
    with pytest.raises(RuntimeError, match="shut down"):
        ev.submit({"query": "c"})
    assert jobs[0].status == "pending"  # the snapshot returned by submit


def test_shutdown_without_wait_leaves_pending_jobs_for_recovery(bank_url, tmp_path) -> None:
    journal = tmp_path / "jobs.sqlite"
    calls: list[dict[str, Any]] = []
    ev = BackgroundEvolver(_fake_run(calls), BackgroundConfig(delay_s=3600, journal=journal))
    job = ev.submit({"query": "a"}, context={"bank_url": bank_url})
    later = BackgroundEvolver(_fake_run(calls), BackgroundConfig(journal=journal))
    assert later.recover() == []  # its owner is still running: the job is its own
    ev.shutdown(wait=False)
    assert calls == [] and ev.job(job.id).status == "pending"
    [again] = later.recover()
    assert again.id == job.id and again.recoveries == 1
    assert later.wait(job.id, timeout=5).status == "applied"
    assert calls[0]["context"] == {"bank_url": bank_url}
    later.shutdown()


def test_a_job_whose_bank_is_the_graphs_store_recovers_with_that_store(tmp_path, caplog) -> None:
    from langgraph.store.memory import InMemoryStore

    from genmem.memory.langgraph_store import LangGraphBankStore
    from genmem.memory.sid import DEFAULT_SPEC
    from tests.conftest import TEST_HASH

    store = InMemoryStore()
    bank = LangGraphBankStore(store).create_bank(spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(A, PAYLOAD)
    config = BackgroundConfig(delay_s=3600, journal=tmp_path / "jobs.sqlite")
    graph = add_memory(
        _agent(),
        model=FakeChat(responses=[RETRIEVE]),
        sid_generator=FixedGenerator([A]),
        evolve="background",
        background=config,
    )
    out = graph.compile(store=store).invoke({"messages": [HumanMessage(Q)]})  # no context
    first = background_of(graph)
    assert first.job(out["evolve_job"]).uses_store
    first.shutdown(wait=False)  # the process goes away with the job still queued
    memory = FakeChat(responses=[revise_reply(REVISED)])
    later = BackgroundEvolver(
        evolver_run(build_evolver_graph(memory, sid_generator=FixedGenerator([A]))), config
    )
    with caplog.at_level(logging.WARNING, logger="genmem.graph.background"):
        assert later.recover() == []
    assert "without store" in caplog.text and later.jobs(open_only=True)
    assert [j.id for j in later.recover(store=store)] == [out["evolve_job"]]
    [done] = later.flush(timeout=30)
    assert done.status == "applied" and bank.get(A).payload == REVISED
    later.shutdown()


_CRASHING_PROCESS = """
import os, sys, time
from genmem.graph.background import BackgroundConfig, BackgroundEvolver

journal, bank_url, trajectory = sys.argv[1], sys.argv[2], sys.argv[3]

def run(inputs, context, store):
    os._exit(3)  # the process dies in the middle of a write

ev = BackgroundEvolver(run, BackgroundConfig(delay_s=3600, journal=journal))
inputs = {"query": "Pens cost $2 each. How much do 3 pens cost?", "outcome": None,
          "trajectory": trajectory}
ev.submit(inputs, context={"bank_url": bank_url}, thread_id="t1")
ev.submit(inputs, context={"bank_url": bank_url}, thread_id="t2")
ev.flush()  # t1's job starts, and the process dies
"""


def test_a_crashed_process_leaves_its_jobs_in_the_journal_and_recover_writes_them(
    bank_url, tmp_path
) -> None:
    journal = tmp_path / "jobs.sqlite"
    trajectory = "Question: 3 pens at $2.\n[0] agent tool multiply(3, 2) -> 6\nFinal answer: 6"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(_CRASHING_PROCESS),
            str(journal),
            bank_url,
            trajectory,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stderr
    memory = FakeChat(responses=[revise_reply(REVISED), revise_reply("Multiply price by count.")])
    evolver = BackgroundEvolver(
        evolver_run(build_evolver_graph(memory, sid_generator=FixedGenerator([A]))),
        BackgroundConfig(journal=journal),
    )
    left = evolver.jobs(open_only=True)
    assert [(j.thread_id, j.status) for j in left] == [("t1", "running"), ("t2", "pending")]
    recovered = evolver.recover()
    assert [j.id for j in recovered] == [j.id for j in left]
    finished = evolver.flush(timeout=30)
    assert [j.status for j in finished] == ["applied", "applied"], [j.error for j in finished]
    history = open_bank(bank_url).history(A)  # one worker: t1's job, then t2's
    assert [e.payload for e in history] == [PAYLOAD, REVISED, "Multiply price by count."]
    assert evolver.jobs(open_only=True) == [] and evolver.recover() == []
    evolver.shutdown()


def test_errors_are_recorded_and_logged_never_raised(bank_url, tmp_path, caplog) -> None:
    calls: list[dict[str, Any]] = []
    with BackgroundEvolver(_fake_run(calls, fail=True), BackgroundConfig(journal=None)) as ev:
        with caplog.at_level(logging.ERROR, logger="genmem.graph.background"):
            job = ev.wait(ev.submit({"query": "a"}).id, timeout=5)
    assert job.status == "failed" and job.error["kind"] == "exception"
    assert job.error["type"] == "RuntimeError" and "bank server is down" in job.error["message"]
    assert any(job.id in r.getMessage() for r in caplog.records)
    # MemEvolver's own refusal (an insert of nothing) is the job's recorded rejection.
    memory = FakeChat(responses=[RETRIEVE, '{"op": "revise", "sid": "", "payload": 7}'])
    app, evolver = _wrapped(memory, BackgroundConfig(journal=None))
    out = _ask(app, bank_url)
    assert out["messages"][-1].content == "6" and out["evolve_error"] is None
    [done] = evolver.flush(timeout=30)
    assert done.status == "rejected" and done.error["kind"] == "invalid_output"
    assert done.events[-1]["kind"] == "rejected" and len(open_bank(bank_url).history(A)) == 1
    # A run that cannot queue (the worker was shut down) still answers, and says why.
    evolver.shutdown()
    out = _ask(app, bank_url, "t2")
    assert out["messages"][-1].content == "6" and out["evolve_job"] is None
    assert (
        out["evolve_error"]["kind"] == "not_queued"
        and "shut down" in out["evolve_error"]["message"]
    )


def test_the_closed_loop_queues_its_update(bank_url, tmp_path) -> None:
    chat = FakeChat(responses=[*LOOP_RETRIEVE, *EXECUTE, *FINISH, revise_reply(REVISED)])
    graph = build_genmem_graph(
        chat,
        sid_generator=FixedGenerator([A]),
        evolve="background",
        background=BackgroundConfig(delay_s=3600, journal=tmp_path / "jobs.sqlite"),
    )
    app = graph.compile()
    out = app.invoke({"query": Q}, context={"bank_url": bank_url})
    assert out["answer"] == "6" and out["update"] is None and out["evolve_job"]
    assert [e["kind"] for e in out["events"]][-1] == "queued"
    evolver = background_of(app)
    assert evolver is background_of(graph) and len(open_bank(bank_url).history(A)) == 1
    [done] = evolver.flush(timeout=30)
    assert done.status == "applied" and open_bank(bank_url).get(A).payload == REVISED
    # ainvoke (how a served graph runs) queues the same way, from the async node body.
    # (the fake model replays its replies from the first)
    out = asyncio.run(app.ainvoke({"query": Q}, context={"bank_url": bank_url}))
    assert out["answer"] == "6" and out["update"] is None and out["evolve_job"]
    [done] = evolver.flush(timeout=30)
    assert done.id == out["evolve_job"] and done.status == "applied", done.error
    evolver.shutdown()


def test_bad_settings() -> None:
    agent = _agent()
    memory = FakeChat(responses=[])
    with pytest.raises(ValueError, match="evolve='soon'"):
        add_memory(agent, model=memory, evolve="soon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass both or neither"):
        add_memory(agent, model=memory, background=BackgroundConfig(journal=None))
    with pytest.raises(ValueError, match="no local background evolver"):
        background_of(add_memory(agent, model=memory).compile())
    with pytest.raises(ValueError, match="max_workers=0"):
        BackgroundConfig(max_workers=0)
    with pytest.raises(ValueError, match="delay_s=-1"):
        BackgroundConfig(delay_s=-1)


@pytest.mark.slow
def test_background_evolution_on_the_default_model(bank_url, tmp_path) -> None:
    from langchain.agents.middleware import ModelCallLimitMiddleware

    from genmem.graph.evolver import EvolverConfig
    from genmem.graph.retriever import RetrieverConfig
    from genmem.policies.backends import load_chat_model

    chat = load_chat_model("local", max_new_tokens=MAX_NEW_TOKENS)
    agent = create_agent(chat, middleware=[ModelCallLimitMiddleware(run_limit=1)])
    graph = add_memory(
        agent,
        model=chat,
        retriever_config=RetrieverConfig(allowed="occupied"),
        evolver_config=EvolverConfig(allowed="occupied", max_retries=0),
        evolve="background",
        background=BackgroundConfig(delay_s=3600, journal=tmp_path / "jobs.sqlite"),
    )
    app, evolver = graph.compile(), background_of(graph)
    before = open_bank(bank_url).stats().events
    t0 = time.monotonic()
    out = app.invoke({"messages": [HumanMessage(Q)]}, context={"bank_url": bank_url})
    answered = time.monotonic() - t0
    # The run answered without MemEvolver: its update waits in the queue, the bank is as it was.
    assert out["trajectory"] is not None and out["update"] is None and out["evolve_error"] is None
    assert evolver.job(out["evolve_job"]).status == "pending"
    assert open_bank(bank_url).stats().events == before
    t1 = time.monotonic()
    [job] = evolver.flush(timeout=300)
    wrote = time.monotonic() - t1
    print(f"\nanswered in {answered:.1f} s; the background update took {wrote:.1f} s")
    evolver.shutdown()
    # The write went through the gate: stored (applied), or refused with the refusal logged.
    bank = open_bank(bank_url)
    assert bank.stats().events == before + 1
    last = bank.events()[-1]
    assert last.actor == "mem_evolver" and last.sid == str(A)
    if job.status == "applied":
        assert job.update["seq"] == last.seq and last.outcome != "rejected"
    else:
        assert job.status == "rejected" and job.error["kind"] == "gated", job.error
        assert (last.outcome, last.reason) == ("rejected", job.error["gate_reason"])


def test_the_served_update_graph_starts_afresh_on_a_thread_of_many_updates(bank_url) -> None:
    from genmem.graph.background_server import build_evolver_job_graph

    memory = FakeChat(responses=[revise_reply(REVISED), revise_reply("Multiply price by count.")])
    app = build_evolver_job_graph(memory, sid_generator=FixedGenerator([A])).compile(
        checkpointer=InMemorySaver()
    )
    run = {"configurable": {"thread_id": "updates-of-t1"}}
    ctx = {"bank_url": bank_url}
    inputs = {"query": Q, "trajectory": "Question: 3 pens at $2.\nFinal answer: 6", "outcome": None}
    one = app.invoke(inputs, run, context=ctx)
    two = app.invoke(inputs, run, context=ctx)
    assert one["update"]["version_after"] == 2 and two["update"]["version_after"] == 3
    assert [e["kind"] for e in two["events"]] == ["applied"]  # this run's events only
    # The second decision read the entry the first one wrote, and none of its messages.
    assert REVISED in memory.texts()[1] and revise_reply(REVISED) not in memory.texts()[1]
    assert open_bank(bank_url).get(A).payload == "Multiply price by count."
