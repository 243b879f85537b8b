"""MemEvolver after the answer: a queue of updates that worker threads write in the background.

With ``evolve="background"`` (:func:`~genmem.graph.embed.add_memory`,
:func:`~genmem.graph.loop.build_genmem_graph`) a run ends as soon as the agent has answered: its
``evolve`` node only queues the update on a :class:`BackgroundEvolver` and returns the job id.
The worker then runs the same MemEvolver graph, through the same write gate, as the inline mode.

- **Delay**: a job waits ``delay_s`` before it may start (a conversation that is still going on
  settles first).
- **Supersede**: a newer run of the same thread (``configurable.thread_id``) replaces a job of
  that thread that has not started yet; a job that is running is never interrupted.
- **Bounded concurrency**: at most ``max_workers`` updates run at once.
- **flush / shutdown**: :meth:`BackgroundEvolver.flush` runs every queued job now (delays are
  waived) and waits for all of them; :meth:`BackgroundEvolver.shutdown` does the same and stops
  the workers. A clean interpreter exit shuts down the same way, so nothing queued is lost.
- **Crash recovery**: each job is written to a SQLite journal before it can run, marked
  ``running`` when it starts and given its final status when it ends. After a crash,
  :meth:`BackgroundEvolver.recover` re-queues the jobs a previous process left open. A job that
  was running when the process died runs again from the start (at least once: its update may
  have reached the bank already, in which case MemEvolver reads and revises its own entry).
- **Errors** never reach the answer: a job that raises is ``failed`` with the exception in its
  ``error`` and logged; a job MemEvolver refuses (the gate, a bad decision) is ``rejected`` with
  MemEvolver's reason, as the inline mode reports it.
"""

from __future__ import annotations

import atexit
import functools
import heapq
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langgraph.config import get_config
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from genmem.graph._journal import EvolveJob, JobStatus, Journal
from genmem.graph.background_server import ServerBackground, start_server_update
from genmem.tools.served_banks import served_user

__all__ = [
    "DEFAULT_JOURNAL",
    "BackgroundConfig",
    "BackgroundEvolver",
    "EvolveJob",
    "EvolveMode",
    "EvolveRun",
    "JobStatus",
    "ServerBackground",
    "attach_background",
    "background_evolver",
    "background_of",
    "evolver_run",
    "queue_update",
]

logger = logging.getLogger(__name__)

EvolveMode = Literal["inline", "background"]
"""``inline``: the run writes its update before it returns; ``background``: it queues it."""

EvolveRun = Callable[[dict[str, Any], dict[str, Any], BaseStore | None], dict[str, Any]]
"""Runs MemEvolver once: ``(input, context, store) -> `` its output state (``update``,
``error``, ``events``)."""

DEFAULT_JOURNAL = Path(".genmem") / "evolve-jobs.sqlite"
"""Where the journal lives unless configured: under the working directory, as ``langgraph dev``
keeps its runs in ``.langgraph_api/``."""


@dataclass(frozen=True, kw_only=True)
class BackgroundConfig:
    """How background updates are queued, delayed, superseded and journalled."""

    delay_s: float = 0.0
    """Seconds a job waits before it may start (``flush`` waives the wait)."""
    max_workers: int = 1
    """Updates that may run at the same time."""
    supersede: bool = True
    """A newer run of the same thread replaces that thread's job that has not started (its
    trajectory is then never written); False runs every job."""
    journal: str | Path | None = DEFAULT_JOURNAL
    """SQLite file that keeps every job (the crash-recovery list); None keeps jobs in memory
    only, so a crash loses the jobs still open."""

    def __post_init__(self) -> None:
        if isinstance(self.delay_s, bool) or not isinstance(self.delay_s, (int, float)):
            raise TypeError(f"delay_s={self.delay_s!r}: use a number of seconds")
        if not 0 <= self.delay_s <= 86_400:
            raise ValueError(f"delay_s={self.delay_s}: use 0 to 86400 seconds")
        if (
            isinstance(self.max_workers, bool)
            or not isinstance(self.max_workers, int)
            or not 1 <= self.max_workers <= 64
        ):
            raise ValueError(f"max_workers={self.max_workers!r}: use an int from 1 to 64")


_ACTIVE: set[str] = set()
"""Owners (journal names) of this process's evolvers that are not shut down."""


def _owner_active(owner: str) -> bool:
    """Whether the evolver named ``owner`` may still run its jobs: one of this process's that
    is not shut down, or any in another live process on this host (other hosts: unknown, no)."""
    host, _, rest = owner.partition(":")
    pid, _, _ = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    if int(pid) == os.getpid():
        return owner in _ACTIVE
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


@dataclass
class _Live:
    """An open job and what the journal cannot hold: the live context and the store."""

    job: EvolveJob
    context: dict[str, Any]
    store: BaseStore | None


def evolver_run(graph: StateGraph, *, name: str = "mem_evolver") -> EvolveRun:
    """An uncompiled MemEvolver graph as an :data:`EvolveRun` (compiled once per store)."""
    compiled: dict[int, tuple[BaseStore | None, Any]] = {}
    lock = threading.Lock()

    def run(
        inputs: dict[str, Any], context: dict[str, Any], store: BaseStore | None
    ) -> dict[str, Any]:
        with lock:
            hit = compiled.get(id(store))
            if hit is None:  # the store is kept with it, so its id is not reused
                hit = compiled[id(store)] = (store, graph.compile(store=store, name=name))
        return dict(hit[1].invoke(inputs, context=context))

    return run


def _split_context(context: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The JSON-safe part of a run context, and the keys of the live objects left out."""
    kept, detached = {}, []
    for key, value in context.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            detached.append(key)
        else:
            kept[key] = value
    return kept, sorted(detached)


def _final(job: EvolveJob, out: dict[str, Any]) -> EvolveJob:
    """``job`` finished with MemEvolver's output: applied, or rejected with its reason."""
    update, error = out.get("update"), out.get("error")
    status: JobStatus = "applied" if update is not None else "rejected"
    if update is None and error is None:
        error = {"kind": "no_update", "message": "MemEvolver ended without an update or a reason"}
    return job.model_copy(
        update={
            "status": status,
            "update": update,
            "error": None if update is not None else error,
            "events": list(out.get("events") or []),
            "finished_at": time.time(),
        }
    )


class BackgroundEvolver:
    """A journalled queue of MemEvolver updates and the worker threads that write them.

    Args:
        run: Runs MemEvolver once (:func:`evolver_run` over the graph's MemEvolver).
        config: Delay, concurrency, supersede and journal settings.
        store: The graph store recovered jobs run with when the job's own is gone.
    """

    def __init__(
        self,
        run: EvolveRun,
        config: BackgroundConfig | None = None,
        *,
        store: BaseStore | None = None,
    ) -> None:
        self.config = config or BackgroundConfig()
        self._run = run
        self._store = store
        self._journal = Journal(self.config.journal)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        """This instance's name in the journal (recovery takes over other owners' jobs)."""
        self._cond = threading.Condition()
        self._live: dict[str, _Live] = {}
        self._queued: set[str] = set()
        self._heap: list[tuple[float, int, str]] = []
        self._seq = 0
        self._urgent = 0
        self._draining = False
        self._stopped = False
        self._workers: list[threading.Thread] = []
        self._exit_hook = functools.partial(_shutdown_at_exit, weakref.ref(self))
        atexit.register(self._exit_hook)
        _ACTIVE.add(self.owner)

    # --- queueing ------------------------------------------------------------------------------

    def submit(
        self,
        inputs: dict[str, Any],
        *,
        context: dict[str, Any] | None = None,
        store: BaseStore | None = None,
        thread_id: str | None = None,
    ) -> EvolveJob:
        """Journal one update and queue it; returns the pending job.

        Args:
            inputs: MemEvolver's input (``query``, ``trajectory``, ``outcome``).
            context: The run context (``bank_url``, ``bank_id``, ...) MemEvolver runs with.
            store: The graph store, when the bank lives there.
            thread_id: The run's thread; with ``supersede`` this job replaces the thread's job
                that has not started yet.

        Raises:
            RuntimeError: the evolver was shut down.
        """
        live = dict(context or {})
        kept, detached = _split_context(live)
        now = time.time()
        job = EvolveJob(
            id=uuid.uuid4().hex,
            thread_id=thread_id,
            submitted_at=now,
            due_at=now + self.config.delay_s,
            input=dict(inputs),
            context=kept,
            detached=detached,
            # A bank named in the context is opened by name; only an unnamed one is the store's.
            uses_store=store is not None and not (live.get("bank") or live.get("bank_url")),
        )
        with self._cond:
            if self._stopped or self._draining:
                raise RuntimeError(
                    "this BackgroundEvolver is shut down; build the graph again for new runs"
                )
            if self.config.supersede and thread_id is not None:
                self._supersede(thread_id, job.id)
            self._enqueue(_Live(job, live, store))
        return job

    def _supersede(self, thread_id: str, newer: str) -> None:
        """Mark the thread's jobs that have not started as superseded by ``newer``."""
        for job_id in [j for j in self._queued if self._live[j].job.thread_id == thread_id]:
            old = self._live.pop(job_id).job
            self._queued.discard(job_id)
            done = old.model_copy(
                update={"status": "superseded", "superseded_by": newer, "finished_at": time.time()}
            )
            self._journal.put(done, self.owner)
            logger.info("background evolve job %s superseded by %s", job_id, newer)

    def _enqueue(self, live: _Live) -> None:
        """Journal ``live.job`` as pending and hand it to the workers (``_cond`` held)."""
        self._journal.put(live.job, self.owner)
        self._live[live.job.id] = live
        self._queued.add(live.job.id)
        self._seq += 1
        heapq.heappush(self._heap, (live.job.due_at, self._seq, live.job.id))
        self._start_workers()
        self._cond.notify_all()

    def _start_workers(self) -> None:
        while len(self._workers) < self.config.max_workers:
            worker = threading.Thread(
                target=self._work, name=f"genmem-evolve-{len(self._workers)}", daemon=True
            )
            self._workers.append(worker)
            worker.start()

    # --- workers -------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._cond:
                job_id = self._next_due()
                if job_id is None:
                    return
                live = self._live[job_id]
            self._execute(live)

    def _next_due(self) -> str | None:
        """The next job to run, waiting for its time (``_cond`` held); None: stop working."""
        while True:
            while self._heap and self._heap[0][2] not in self._queued:
                heapq.heappop(self._heap)  # superseded while it waited
            if self._stopped:
                return None
            if not self._heap:
                if self._draining:
                    return None
                self._cond.wait()
                continue
            due, _, job_id = self._heap[0]
            wait = due - time.time()
            if wait > 0 and not self._urgent and not self._draining:
                self._cond.wait(wait)
                continue
            heapq.heappop(self._heap)
            self._queued.discard(job_id)
            return job_id

    def _execute(self, live: _Live) -> None:
        job = live.job.model_copy(update={"status": "running", "started_at": time.time()})
        final = job
        try:
            self._journal.put(job, self.owner)
            final = _final(job, self._run(dict(job.input), live.context, live.store))
        except Exception as exc:  # a background update never raises into anyone's answer
            logger.exception("background evolve job %s failed", job.id)
            final = job.model_copy(
                update={
                    "status": "failed",
                    "error": {"kind": "exception", "type": type(exc).__name__, "message": str(exc)},
                    "finished_at": time.time(),
                }
            )
        else:
            if final.status == "rejected":
                logger.warning(
                    "background evolve job %s wrote nothing: %s",
                    job.id,
                    (final.error or {}).get("message"),
                )
        try:
            self._journal.put(final, self.owner)
        except Exception:
            logger.exception("background evolve job %s: its status was not journalled", job.id)
        with self._cond:
            self._live.pop(job.id, None)
            self._cond.notify_all()

    # --- reading, waiting, stopping ------------------------------------------------------------

    def job(self, job_id: str) -> EvolveJob | None:
        """The job as journalled now (None for an unknown id)."""
        return self._journal.get(job_id)

    def jobs(self, *, open_only: bool = False) -> list[EvolveJob]:
        """Every journalled job (of any process) in the order queued; ``open_only``: unfinished."""
        return self._journal.jobs(open_only=open_only)

    def wait(self, job_id: str, timeout: float | None = None) -> EvolveJob:
        """Wait until ``job_id`` has finished (its delay is kept) and return it.

        Raises:
            TimeoutError: it is still open after ``timeout`` seconds.
            KeyError: no such job.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: job_id not in self._live, timeout):
                raise TimeoutError(f"background evolve job {job_id} still open after {timeout} s")
        job = self._journal.get(job_id)
        if job is None:
            raise KeyError(f"no background evolve job {job_id!r} in {self._journal_name()}")
        return job

    def flush(self, timeout: float | None = None) -> list[EvolveJob]:
        """Run every queued job now (delays waived), wait for all, and return them as finished.

        Raises:
            TimeoutError: jobs are still open after ``timeout`` seconds (they keep running).
        """
        with self._cond:
            ids = list(self._live)
            self._urgent += 1
            self._cond.notify_all()
            try:
                if not self._cond.wait_for(lambda: not self._live or self._stopped, timeout):
                    raise TimeoutError(
                        f"{len(self._live)} background evolve jobs still open after {timeout} s"
                    )
            finally:
                self._urgent -= 1
        return [j for j in (self._journal.get(i) for i in ids) if j is not None]

    def shutdown(self, *, wait: bool = True, timeout: float | None = None) -> None:
        """Stop taking jobs. ``wait``: run every queued job first (delays waived) and wait.

        Without ``wait`` the queued jobs stay ``pending`` in the journal for :meth:`recover`;
        a job already running still finishes. The journal stays readable (:meth:`job`).
        """
        with self._cond:
            if wait:
                self._draining = True
            else:
                self._stopped = True
                _ACTIVE.discard(self.owner)  # its queued jobs are free to recover now
            self._cond.notify_all()
            workers = list(self._workers)
        deadline = None if timeout is None else time.monotonic() + timeout
        for worker in workers:
            if worker is not threading.current_thread():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                worker.join(left)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        _ACTIVE.discard(self.owner)
        atexit.unregister(self._exit_hook)

    def recover(
        self, *, store: BaseStore | None = None, context: dict[str, Any] | None = None
    ) -> list[EvolveJob]:
        """Re-queue the open jobs that evolvers no longer running left in the journal (a crashed
        or stopped process, one shut down without ``wait``): call it on start-up.

        They run at once (their delays are over), in the order they were first queued. Jobs of
        an evolver still running (in this process, or in a live process on this host) are left
        to it; on a journal shared between hosts, only one host should recover.
        A job whose run context held live objects (``detached``) needs them in ``context``; a
        job that read its bank from a graph store needs ``store`` (or the constructor's). Jobs
        that cannot run yet stay open, and a warning names what they need.
        """
        store = store if store is not None else self._store
        context = context or {}
        requeued = []
        for job, owner in self._journal.open_jobs():
            if owner == self.owner or _owner_active(owner):
                continue
            missing = [k for k in job.detached if k not in context]
            if job.uses_store and store is None:
                missing.append("store")
            if missing:
                logger.warning(
                    "background evolve job %s cannot be recovered without %s; it stays open",
                    job.id,
                    ", ".join(missing),
                )
                continue
            again = job.model_copy(
                update={
                    "status": "pending",
                    "started_at": None,
                    "due_at": time.time(),  # its delay was for a conversation long over
                    "recoveries": job.recoveries + 1,
                }
            )
            live = {**job.context, **{k: context[k] for k in job.detached}}
            with self._cond:
                if self._stopped or self._draining:
                    raise RuntimeError("this BackgroundEvolver is shut down; recover before that")
                self._enqueue(_Live(again, live, store if job.uses_store else None))
            requeued.append(again)
        return requeued

    def _journal_name(self) -> str:
        return str(self._journal.path or "the in-memory journal")

    def __enter__(self) -> BackgroundEvolver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown(wait=True)


def _shutdown_at_exit(ref: weakref.ref[BackgroundEvolver]) -> None:
    """A clean interpreter exit writes what is queued first."""
    evolver = ref()
    if evolver is not None:
        evolver.shutdown(wait=True)


_BY_GRAPH: weakref.WeakKeyDictionary[StateGraph, BackgroundEvolver] = weakref.WeakKeyDictionary()


def attach_background(graph: StateGraph, queue: BackgroundEvolver | ServerBackground) -> None:
    """Record a local ``queue`` as the one ``graph``'s runs use (see :func:`background_of`)."""
    if isinstance(queue, BackgroundEvolver):
        _BY_GRAPH[graph] = queue


def background_of(graph: StateGraph | CompiledStateGraph) -> BackgroundEvolver:
    """The :class:`BackgroundEvolver` of a graph built with ``evolve="background"``.

    Args:
        graph: The graph, compiled or not, from ``add_memory`` or ``build_genmem_graph``.

    Returns:
        Its worker: ``drain()`` waits for queued updates, ``close()`` stops it.

    Raises:
        ValueError: the graph writes inline, runs its updates on a server
            (:class:`ServerBackground`: they are the server's runs), or was not built by GenMem.
    """
    builder = graph.builder if isinstance(graph, CompiledStateGraph) else graph
    found = _BY_GRAPH.get(builder)
    if found is None:
        raise ValueError(
            "this graph has no local background evolver: build it with evolve='background' "
            "(add_memory or build_genmem_graph) and a BackgroundConfig"
        )
    return found


def background_evolver(
    mode: EvolveMode,
    config: BackgroundConfig | ServerBackground | None,
    evolver_graph: StateGraph,
) -> BackgroundEvolver | ServerBackground | None:
    """Where a graph's ``evolve`` node sends its update: a local worker, the server, or
    nowhere (``inline``, None); checks that ``mode`` and ``config`` agree."""
    if mode not in ("inline", "background"):
        raise ValueError(f"evolve={mode!r}: use 'inline' or 'background'")
    if mode == "inline":
        if config is not None:
            raise ValueError("background=... configures evolve='background'; pass both or neither")
        return None
    if isinstance(config, ServerBackground):
        return config
    return BackgroundEvolver(evolver_run(evolver_graph), config)


def queue_update(
    queue: BackgroundEvolver | ServerBackground, inputs: dict[str, Any], runtime: Runtime[Any]
) -> dict[str, Any]:
    """The ``evolve`` node's work in background mode: queue the update, return at once.

    The job runs with the run's context and store (on the server: as a background run there);
    the run's ``thread_id`` (from its config) lets a newer run of the thread supersede it. A job
    that cannot be queued is reported in ``evolve_error`` (kind ``not_queued``) and logged; the
    answer is unaffected.
    """
    configurable = (get_config() or {}).get("configurable") or {}
    thread_id = None if configurable.get("thread_id") is None else str(configurable["thread_id"])
    context = dict(runtime.context or {})
    try:
        if isinstance(queue, ServerBackground):
            run = start_server_update(
                queue, inputs, context=context, thread_id=thread_id, user=served_user(configurable)
            )
            job_id = run["run_id"]
            where = {"thread_id": run["thread_id"], "superseded": run["superseded"]}
        else:
            job = queue.submit(inputs, context=context, store=runtime.store, thread_id=thread_id)
            job_id, where = job.id, {"thread_id": job.thread_id, "due_at": job.due_at}
    except Exception as exc:
        logger.exception("the background update was not queued")
        error = {"kind": "not_queued", "message": f"{type(exc).__name__}: {exc}"}
        event = {"node": "mem_evolver", "kind": "not_queued", "message": error["message"]}
        return {"update": None, "evolve_error": error, "evolve_job": None, "events": [event]}
    event = {"node": "mem_evolver", "kind": "queued", "job": job_id, **where}
    return {"update": None, "evolve_error": None, "evolve_job": job_id, "events": [event]}
