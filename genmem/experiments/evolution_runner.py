"""One task run of an evolution experiment through the compiled graph of a method.

Probe runs may go on several threads at once (``--concurrency``): the graphs are built under a
lock and each run's task is held per thread, so a scorer never reads another run's task.
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from typing import Any

from genmem.envs.base import Environment, Task
from genmem.experiments.evolution_config import EvolveConfig

__all__ = ["EvolveRunner", "seed_sampling"]

_TASK: ContextVar[Task] = ContextVar("genmem_evolve_task")


class EvolveRunner:
    """Compiled graphs per method, and one task run through one of them."""

    def __init__(
        self, env: Environment, config: EvolveConfig, chat: Any, sid_generator: Any = None
    ) -> None:
        self.env = env
        self.config = config
        self.chat = chat
        self.sid_generator = sid_generator
        self.tools = env.tools()
        self.graphs: dict[str, Any] = {}
        self._building = threading.Lock()

    def graph(self, method: str) -> Any:
        """The compiled ``genmem`` graph of ``method`` (``sid`` drives the stream)."""
        key = "sid" if method == "frozen" else method
        with self._building:
            return self.graphs[key] if key in self.graphs else self._build(key)

    def _build(self, key: str) -> Any:
        from genmem.experiments.methods import method_generator
        from genmem.graph.evolver import EvolverConfig
        from genmem.graph.loop import build_genmem_graph
        from genmem.graph.stack import StackBudgetConfig
        from genmem.graph.stackplanner import StackPlannerConfig

        cfg = self.config
        greedy = key == "greedy"
        beam = 1 if greedy else cfg.candidates
        self.graphs[key] = build_genmem_graph(
            self.chat,
            sid_generator=(
                method_generator(key) if key in ("tfidf", "dense") else self.sid_generator
            ),
            retriever_config=cfg.retriever_config(beam),
            evolver_config=EvolverConfig(
                addresser=cfg.addresser, writer=cfg.experience_writer(self.env)
            ),
            planner_config=StackPlannerConfig(
                budget=StackBudgetConfig(max_steps=cfg.max_steps),
                interactor=cfg.interactor,
                rank_score=cfg.rank_score,
                prior_weight=cfg.prior_weight,
            ),
            solver_tools=self.tools.solver,
            research_tools=self.tools.research,
            interactor_tools=self.tools.interactor,
            interactor_prior=self.env.action_prior(),
            reader_model=cfg.reader_model(),
            scorer=lambda answer, reference: self.env.score(_TASK.get(), answer).score,
            # Only an environment's own verdict may reach MemEvolver, never the score.
            observer=self._observe if self.env.outcome_observable else None,
        ).compile()
        return self.graphs[key]

    def _observe(self, answer: str | None) -> str | None:
        return self.env.signal(self.env.score(_TASK.get(), answer))

    def run(
        self, method: str, task: Task, mode: str, bank_url: str | None, *, phase: str = "stream"
    ) -> dict[str, Any]:
        """One run of ``task``; the final state plus ``outcome`` (or ``error``) and ``seconds``."""
        started = time.perf_counter()
        token = _TASK.set(task)
        # Every method of a phase draws the same random stream on a task (common random
        # numbers): a paired difference then reflects the methods, not their luck.
        seed_sampling(self.config.decode_seed, phase, task.id)
        context: dict[str, Any] = {"max_steps": self.config.max_steps}
        if bank_url is not None:
            context |= {"bank_url": bank_url, "memory_k": self.config.memory_k}
        try:
            self.env.start(task)
            try:
                payload = {"query": task.query, "mode": mode, "reference": task.reference}
                state = dict(self.graph(method).invoke(payload, context=context))
                state["outcome_"] = self.env.score(task, state.get("answer"))
            finally:
                self.env.finish(task)
        except Exception as exc:  # one failing run must not lose the experiment
            state = {"error": repr(exc)}
        finally:
            _TASK.reset(token)
        state["seconds"] = round(time.perf_counter() - started, 2)
        return state


def seed_sampling(seed: int, *parts: str) -> None:
    """Seed torch's sampler for one run from the decoding seed and what the run is.

    Seeding per run, not once per process, makes a run's samples independent of what ran
    before it: a resumed run and a reused control draw what an uninterrupted one would.
    """
    import zlib

    import torch

    torch.manual_seed(zlib.crc32("/".join((str(seed), *parts)).encode("utf-8")))
