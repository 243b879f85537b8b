"""GRPO rollouts that run through the LangGraph graphs (TRL ``rollout_func``).

Each GRPO prompt is one task in one role, rendered as the SID turn's prompt at inference (the
addressing prompt over the role's user turn). The policy samples the SID turn (TRL's own
generator, so vLLM when the trainer has it; ``constrained`` samples under the SID trie); the
rest runs through the project's graphs:

- **MemRetriever**: the MemRetriever subgraph looks the SID up with the real ``memory_lookup``
  tool and rewrites what it found; StackPlanner solves the task with that support; the task
  scorer scores the answer.
- **MemEvolver**: the prompt holds the task, the no-memory run and what the environment itself
  says about that run (:meth:`~genmem.envs.base.Environment.signal`: a game's won flag; nothing
  for GSM8K or QA, where only the reference could tell), exactly what MemEvolver is given at
  inference and never a verdict against the reference. The MemEvolver subgraph reads the SID,
  decides ``insert`` / ``revise`` and writes to a *scratch copy* of the bank (never the input
  bank; each copy is closed and removed after its rollout); StackPlanner then solves the task
  with the evolved payload as support.

What GRPO trains (``completion``):

- ``whole`` (default): the agent's whole turn, as the paper optimises it: the SID, then the
  ``memory_lookup`` result (as the text turn's prompt, masked out of the loss by ``env_mask``),
  then the rewrite (MemRetriever) or decision (MemEvolver) the policy itself samples
  (:mod:`genmem.training.turns`). The chat model only plans (StackPlanner) and judges.
- ``sid``: the SID turn alone; the rewrite and the decision come from the chat model, untrained.

Before training, every task is run once without memory (StackPlanner alone): that run is the
outcome baseline of Eq. 4 and the trajectory MemEvolver distils. An invalid SID gets format 0
and no memory is supplied, so its outcome is 0.

The strategic-quality judge is the chat model with privileged access to the reference answer
(it is not trained), answering a :class:`~genmem.training.rewards.JudgeVerdict` (0/1/2); the
graded texts reach it as data blocks (:func:`~genmem.training.rewards.judge_messages`). Every
part is returned per completion in ``parts``; :func:`reward_functions` exposes them to TRL (see
:mod:`genmem.training.advantages` for how the two channels are weighted and normalised).

Rollouts of a batch run ``concurrency`` at a time (:func:`~genmem.envs.pool.run_tasks`)
when the rest of the graph is a served model: each rollout holds its own SID (a context
variable, never a shared attribute), writes its own scratch bank, and the log, its file and the
failure count are guarded by one lock. Whole-turn rollouts run one at a time (the policy samples
its own turns through the trainer's model), as do environments that hold one episode.

Failures are never scored as 0: a judge call that raises leaves its part NaN (and the process
channel NaN), a rollout that raises leaves every part and both channels NaN. TRL leaves NaN out
of its group statistics, and a completion with no value at all gets advantage 0. Each failure is
logged with its task and exception and counted; one more than ``max_failures`` stops the run
with :class:`~genmem.errors.TooManyFailures`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import tempfile
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from genmem.envs.base import Environment, Task
from genmem.envs.pool import run_tasks, task_workers
from genmem.envs.scoring import contrastive_outcome
from genmem.errors import TooManyFailures
from genmem.memory.sid import SIDSpec
from genmem.policies.prompts import (
    ADDRESS_PROMPT,
    NO_MEMORY_ANSWER,
    evolver_user_message,
    retriever_user_message,
)
from genmem.policies.sid_decoding import address_prompt
from genmem.policies.types import SIDCandidate
from genmem.training.advantages import CHANNELS
from genmem.training.config import Completion, RolloutConfig
from genmem.training.distributed import Ranks, shard, unshard
from genmem.training.graph_runs import planner_graph, scratch_bank, solve
from genmem.training.rewards import (
    FAITHFUL_RUBRIC,
    JUDGE_RUBRIC,
    JudgeVerdict,
    format_reward,
    judge_messages,
    judge_score,
    neighbourhood_similarity,
    operation_reward,
    parse_completion_sid,
    sid_agreement_reward,
)
from genmem.training.turns import (
    PolicyTurnChat,
    TurnRecord,
    generation_model,
    sampled_logprobs,
    trainer_sampler,
)

__all__ = [
    "PARTS",
    "Completion",
    "GraphRollouts",
    "Role",
    "RolloutConfig",
    "RolloutTask",
    "reward_functions",
]

logger = logging.getLogger(__name__)

Role = Literal["retriever", "evolver"]

PARTS: dict[Role, tuple[str, ...]] = {
    "retriever": ("format", "sid_agreement", "strategy_judge"),
    "evolver": ("format", "sid_agreement", "faithful", "localization", "operation"),
}
_REPLY: dict[Role, str] = {"retriever": "rewrite", "evolver": "decision"}
"""What the policy's text turn is called in the rollout log, per role."""


@dataclass
class RolloutTask:
    """One task with its baseline run and, when known, the SID of the entry it came from."""

    task: Task
    role: Role
    reference_sid: str | None
    prompt: str = ""
    base_answer: str | None = None
    base_score: float = 0.0
    base_trajectory: str = ""
    base_signal: str | None = None
    """What the environment itself said about the baseline run (None: nothing observable)."""


_SID: ContextVar[str | None] = ContextVar("genmem_rollout_sid", default=None)
"""The SID the policy wrote in the rollout that runs in this thread."""


@dataclass
class _Chosen:
    """An SID generator that proposes exactly the SID this rollout's policy wrote (or nothing)."""

    spec: SIDSpec | None = None

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        sid = _SID.get()
        return [] if sid is None else [SIDCandidate(sid=sid, score=0.0)]


def _nan_to_none(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def _log_line(row: dict[str, Any]) -> str:
    """One ``rollouts.jsonl`` line (NaN written null)."""
    return json.dumps({k: _nan_to_none(v) for k, v in row.items()}) + "\n"


@dataclass
class GraphRollouts:
    """TRL ``rollout_func`` over the graphs; keeps per-completion reward parts for the rewards."""

    env: Environment
    bank_url: str
    chat: Any
    config: RolloutConfig = field(default_factory=RolloutConfig)
    tasks: dict[str, RolloutTask] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    """The trainer's global step when the current batch was sampled (logged with each rollout)."""
    log_path: Path | None = None
    """Where each rollout's log row is appended as it finishes (JSON lines; NaN written null)."""
    encoder: Any = None
    """Text encoder of r_loc (None: the embedded default, loaded on first use)."""
    failures: int = 0
    """Failures of every process of the run so far (counted once per batch when launched)."""
    last_failure: str | None = None
    ranks: Ranks = field(default_factory=Ranks)
    """The run's processes: the main one writes the log; baselines and failures are shared."""

    def __post_init__(self) -> None:
        from genmem.memory.location import open_bank

        self.bank = open_bank(self.bank_url)
        self.spec = self.bank.spec
        self._chosen = _Chosen(spec=self.spec)
        self._graphs: dict[str, Any] = {}
        self._scratch = Path(tempfile.mkdtemp(prefix="genmem-grpo-"))
        self._policy_chat = PolicyTurnChat(max_new_tokens=self.config.max_new_tokens)
        self._lock = threading.RLock()
        self._scratch_ids = itertools.count()
        if self.log_path is not None and self.ranks.is_main:
            self.log_path.write_text("", encoding="utf-8")

    def close(self) -> None:
        """Close the bank and remove the folder of per-rollout scratch banks."""
        import shutil

        self.bank.store.close()
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- setup --------------------------------------------------------------------------------

    def _graph(self, name: str) -> Any:
        if name not in self._graphs:
            from genmem.graph.evolver import EvolverConfig, build_evolver_graph
            from genmem.graph.retriever import build_retriever_graph

            whole = self.config.completion == "whole"
            writer = self._policy_chat if whole else self.chat
            if name == "planner":
                graph = planner_graph(self.chat, self.env, self.config.max_steps)
            elif name == "retriever":
                graph = build_retriever_graph(writer, sid_generator=self._chosen).compile()
            else:
                # Whole turns: one decision per rollout, so the completion holds one and the
                # format reward grades the policy's first answer, not a retry after feedback.
                cfg = EvolverConfig(max_retries=0) if whole else None
                graph = build_evolver_graph(writer, sid_generator=self._chosen, config=cfg)
                graph = graph.compile()
            self._graphs[name] = graph
        return self._graphs[name]

    def _solve(self, task: Task, support: str | None) -> tuple[str | None, Any, str]:
        """StackPlanner on ``task`` (with ``support``): answer, outcome, rendered trajectory."""
        from genmem.graph.trajectory import render_trajectory

        answer, outcome, trajectory = solve(self._graph("planner"), self.env, task, support)
        return answer, outcome, render_trajectory(trajectory, clip=600)

    def add_tasks(
        self,
        tasks: Sequence[Task],
        roles: Sequence[Role],
        reference_sids: dict[str, str],
        tokenizer: Any,
        progress: bool = True,
    ) -> list[dict[str, Any]]:
        """Run each task once without memory; return the GRPO dataset rows (prompt, role, id).

        A launched run splits the baselines over its processes and gathers them, so each runs
        once and every process builds the same rows.
        """
        from tqdm.auto import tqdm

        def baseline(task: Task) -> tuple[str | None, float, str, str | None]:
            answer, outcome, trajectory = self._solve(task, None)
            return answer, float(outcome.score), trajectory, self.env.signal(outcome)

        mine = shard(tasks, self.ranks)
        bar = tqdm(mine, desc="no-memory baselines", disable=not progress or not self.ranks.is_main)
        runs = unshard(self.ranks.gather([baseline(t) for t in bar]), len(tasks))
        rows = []
        for task, (answer, score, trajectory, signal) in zip(tasks, runs, strict=True):
            for role in roles:
                item = RolloutTask(
                    task=task,
                    role=role,
                    reference_sid=reference_sids.get(task.id),
                    base_answer=answer,
                    base_score=score,
                    base_trajectory=trajectory,
                    base_signal=signal,
                )
                context = (
                    retriever_user_message(task.query)
                    if role == "retriever"
                    else evolver_user_message(task.query, trajectory, item.base_signal)
                )
                item.prompt = address_prompt(
                    tokenizer,
                    context,
                    system_prompt=ADDRESS_PROMPT,
                    max_context_tokens=self.config.max_context_tokens,
                )
                self.tasks[item.prompt] = item
                rows.append({"prompt": item.prompt, "role": role, "task_id": task.id})
        return rows

    # -- TRL hook -----------------------------------------------------------------------------

    def __call__(self, prompts: list[str], trainer: Any) -> dict[str, Any]:
        """Sample the SID turns, run the graph (and, whole, the policy's text turns), score.

        Every process of a launched run calls it once per generation batch with its own
        prompts; it issues the same collectives on each (one weight gather for the SID turns,
        one for all the text turns, one gather of the log rows and failure counts), however
        many of its SIDs were valid.

        Raises:
            TooManyFailures: the run's failures (all processes) went past ``max_failures``;
                every process raises it.
        """
        tok = trainer.processing_class
        self.step = int(trainer.state.global_step)
        prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if self.config.constrained:
            with generation_model(trainer) as model:
                sid_ids, sid_logprobs = self._sample_constrained(trainer, model, prompt_ids)
        else:
            # TRL's own sampler (transformers or vLLM, ZeRO-3 aware); private, pinned TRL 1.16.
            sid_ids, sid_logprobs = trainer._generate_single_turn(
                prompt_ids, None, {}, trainer.num_generations
            )
        sid_texts = tok.batch_decode(sid_ids, skip_special_tokens=True)
        whole = self.config.completion == "whole"
        records = [TurnRecord(context=[*prompt_ids[i], *sid_ids[i]]) for i in range(len(prompts))]
        logged, failed = len(self.log), self.failures
        with generation_model(trainer) if whole else contextlib.nullcontext() as model:
            sampler = trainer_sampler(trainer, model) if whole else None

            def rollout(i: int) -> dict[str, Any]:
                prompt, turns = prompts[i], records[i]
                role = self.tasks[prompt].role if prompt in self.tasks else "retriever"
                if sampler is not None:
                    self._policy_chat.begin(turns, sampler, tok, part=_REPLY[role])
                try:
                    return self.score(prompt, sid_texts[i], turns=turns)
                finally:
                    self._policy_chat.end()

            scored = dict(run_tasks(rollout, range(len(prompts)), concurrency=self.workers()))
        self._share_batch(logged, failed)
        completion_ids, env_mask, logprobs = [], [], []
        parts = [scored[i] for i in range(len(prompts))]
        for i, turns in enumerate(records):
            completion_ids.append([*sid_ids[i], *turns.ids])
            env_mask.append([1] * len(sid_ids[i]) + turns.mask)
            if sid_logprobs is not None:
                logprobs.append([*sid_logprobs[i], *turns.logprobs])
        out = {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs if sid_logprobs is not None else None,
            "parts": parts,
        }
        if whole:
            out["env_mask"] = env_mask
        return out

    def _share_batch(self, logged: int, failed: int) -> None:
        """Pool this batch's log rows and failures over the processes; stop on too many.

        One process alone writes each row as its rollout ends; a launched run gathers every
        process's rows here and the main process writes them, so ``rollouts.jsonl``,
        :attr:`log` and :attr:`failures` cover the whole run on every process.
        """
        with self._lock:
            rows, new = self.log[logged:], self.failures - failed
            last = self.last_failure if new else None
        if self.ranks.distributed:
            shared = self.ranks.gather((rows, new, last))
            rows = [row for part, _, _ in shared for row in part]
            new = sum(n for _, n, _ in shared)
            last = next((x for _, _, x in shared if x is not None), last)
            with self._lock:
                self.log[logged:] = rows
                self.failures = failed + new
                self.last_failure = last or self.last_failure
            if self.log_path is not None and self.ranks.is_main:
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.writelines(_log_line(row) for row in rows)
        self._stop_if_too_many()

    def _stop_if_too_many(self) -> None:
        """Raise :class:`TooManyFailures` once the run's failures pass ``max_failures``."""
        if self.failures > self.config.max_failures:
            raise TooManyFailures(
                f"{self.failures} GRPO failures (max_failures={self.config.max_failures}); "
                f"the last: {self.last_failure}. Fix the cause, or raise --max-failures",
                failures=self.failures,
                limit=self.config.max_failures,
                last_error=self.last_failure or "",
            )

    def workers(self) -> int:
        """How many rollouts run at once: ``concurrency``, or 1 (with a warning) when unsafe."""
        whole = self.config.completion == "whole"
        return task_workers(
            self.config.concurrency,
            self.env,
            chat=self.chat,
            what="GRPO rollouts",
            blocked="whole-turn rollouts sample through the trainer's one model" if whole else None,
        )

    def _sample_constrained(
        self, trainer: Any, model: Any, prompt_ids: list[list[int]]
    ) -> tuple[list[list[int]], list[list[float]]]:
        """Sample one SID per prompt under the trie of all SIDs, then the end token.

        Returns the tokens and their log-probabilities under the unconstrained model (what
        TRL compares its own with, e.g. vLLM's importance-sampling correction).
        """
        import torch

        from genmem.policies.sid_decoding import SIDTrie
        from genmem.policies.sid_tokens import sid_token_ids

        tok = trainer.processing_class
        trie = SIDTrie(self.spec, sid_token_ids(tok, self.spec), None)
        out: list[list[int]] = []
        logprobs: list[list[float]] = []
        for ids in prompt_ids:
            n = len(ids)

            def allowed(_: int, seq: Any, n: int = n) -> list[int]:
                done = seq[n:].tolist()
                if len(done) >= self.spec.levels:
                    return [tok.eos_token_id]
                return trie.allowed(done)

            gen = model.generate(
                torch.tensor([ids], device=model.device),
                do_sample=True,
                temperature=trainer.temperature,
                max_new_tokens=self.spec.levels + 1,
                prefix_allowed_tokens_fn=allowed,
                pad_token_id=tok.pad_token_id,
                output_logits=True,
                return_dict_in_generate=True,
            )
            new = gen.sequences[0, n:].tolist()
            out.append(new)
            logprobs.append(sampled_logprobs(gen.logits, new, trainer.temperature))
        return out, logprobs

    # -- one rollout --------------------------------------------------------------------------

    def score(
        self, prompt: str, completion: str, turns: TurnRecord | None = None
    ) -> dict[str, Any]:
        """Run the graph for one SID turn and return every reward part and both channels.

        ``turns`` collects the policy's text turns in whole-turn mode (for the log).

        Raises:
            TooManyFailures: one process only: this rollout's failure was one more than
                ``max_failures`` (a launched run decides at the end of the batch, on every
                process at once).
        """
        item = self.tasks.get(prompt)
        if item is None:
            raise KeyError("a GRPO prompt that add_tasks did not make; rebuild the dataset")
        run = self._evolve if item.role == "evolver" else self._retrieve
        errors: list[str] = []
        try:
            parts = run(item, completion, errors)
        except Exception as exc:  # scored NaN (left out of the group), counted, logged
            errors.append(self._failed("rollout", item.task, exc))
            parts = dict.fromkeys(PARTS[item.role], math.nan) | {"outcome": math.nan}
        # Eligibility flags for the training-dynamics curves: logged, not rewards.
        agreement = parts.get("sid_agreement")
        flags = {
            "step": self.step,
            "sid_valid": parse_completion_sid(completion, self.spec) is not None,
            "retrieved": bool(parts.pop("retrieved", False)),
            "sid_match": None if agreement is None or math.isnan(agreement) else agreement >= 1.0,
            "answered": bool(parts.pop("answered", False)),
        }
        texts = {
            k: parts.pop(k)
            for k in ("support", "support_source", "payload", "gate_reason")
            if k in parts
        }
        values = [parts.get(k) for k in PARTS[item.role]]
        failed = any(v is not None and math.isnan(v) for v in values)
        parts["process_channel"] = math.nan if failed else sum(v for v in values if v is not None)
        parts["outcome_channel"] = parts["outcome"]
        sid_part = {"part": "sid", "trained": True, "text": completion}
        row = {
            "task": item.task.id,
            "role": item.role,
            "completion": completion,
            "turns": [sid_part, *(turns.parts if turns is not None else [])],
            **texts,
            **flags,
            **parts,
            "errors": errors,
        }
        with self._lock:
            self.log.append(row)
            if not self.ranks.distributed:  # one process: the row is written, the run may stop
                if self.log_path is not None:
                    with self.log_path.open("a", encoding="utf-8") as fh:
                        fh.write(_log_line(row))
                self._stop_if_too_many()
        return parts

    def _failed(self, what: str, task: Task, exc: BaseException) -> str:
        """Count and log a failure; the line the rollout log keeps."""
        line = f"{what} on task {task.id!r}: {exc!r}"
        with self._lock:
            self.failures += 1
            self.last_failure, count = line, self.failures
        logger.warning(
            "GRPO %s failed on task %r (failure %d of at most %d): %r",
            what,
            task.id,
            count,
            self.config.max_failures,
            exc,
            exc_info=exc,
        )
        return line

    def _judge(self, rubric: str, task: Task, errors: list[str], **texts: str) -> float:
        """The judge's score for ``texts`` (data blocks by tag); NaN if the call raised."""
        if not self.config.judge:
            return 0.0
        try:
            verdict = self.chat.with_structured_output(JudgeVerdict).invoke(
                judge_messages(rubric, task, **texts)
            )
        except Exception as exc:  # no verdict is not a 0 verdict: left out, counted, logged
            errors.append(self._failed("judge", task, exc))
            return math.nan
        return judge_score(verdict if isinstance(verdict, JudgeVerdict) else None)

    def _common(self, item: RolloutTask, completion: str, **fmt: Any) -> dict[str, Any]:
        return {
            "format": format_reward(completion, self.spec, **fmt),
            "sid_agreement": sid_agreement_reward(completion, item.reference_sid, self.spec),
        }

    def _outcome(self, item: RolloutTask, score: float) -> float:
        return contrastive_outcome(score, item.base_score, self.config.alpha_partial)

    def _retrieve(self, item: RolloutTask, completion: str, errors: list[str]) -> dict[str, Any]:
        codes = parse_completion_sid(completion, self.spec)
        parts = self._common(item, completion)
        if codes is None:
            return parts | {"strategy_judge": 0.0, "outcome": 0.0}
        _SID.set(str(self.spec.make(codes)))
        out = self._graph("retriever").invoke(
            {"query": item.task.query},
            context={"bank": self.bank, "memory_k": self.config.memory_k},
        )
        support = out.get("support") or NO_MEMORY_ANSWER
        _, outcome, _ = self._solve(item.task, support)
        score = float(outcome.score)
        # A rewrite the gate refused never reached the planner (it got the entry read instead):
        # the trained turn is junk, and its strategy scores 0, as a refused evolver payload does.
        refused = out.get("support_refused")
        useless = refused or not support.strip() or support == NO_MEMORY_ANSWER
        judged = 0.0 if useless else self._judge(JUDGE_RUBRIC, item.task, errors, support=support)
        return parts | {
            "strategy_judge": judged,
            "outcome": self._outcome(item, score),
            "retrieved": bool(out.get("retrieved")),
            "answered": score >= 1.0,
            "support": support,
            "support_source": out.get("support_source", "none"),
            "gate_reason": refused,
        }

    def _evolve(self, item: RolloutTask, completion: str, errors: list[str]) -> dict[str, Any]:
        from genmem.memory.location import open_bank

        codes = parse_completion_sid(completion, self.spec)
        if codes is None:
            return self._common(item, completion, needs_op=True) | {
                "faithful": 0.0,
                "localization": 0.0,
                "operation": 0.0,
                "outcome": 0.0,
            }
        sid = self.spec.make(codes)
        occupied = self.bank.get(sid) is not None
        _SID.set(str(sid))
        path = self._scratch / f"rollout-{next(self._scratch_ids)}.db"
        with scratch_bank(self.bank_url, path) as url:
            # The rollout owns this bank: passed as an object (never cached by URL), closed
            # before its files go.
            scratch = open_bank(url)
            try:
                out = self._graph("evolver").invoke(
                    {
                        "query": item.task.query,
                        "trajectory": item.base_trajectory,
                        "outcome": item.base_signal,
                    },
                    context={"bank": scratch, "memory_k": self.config.memory_k},
                )
                written = scratch.get(sid) if out.get("update") else None
            finally:
                scratch.store.close()
        op = (out.get("decision") or {}).get("op")
        payload = written.payload if written is not None else ""
        parts = self._common(item, completion, op=op, needs_op=True) | {
            "op": op,
            "retrieved": occupied,
            "payload": payload,
            "gate_reason": (out.get("error") or {}).get("gate_reason"),
            "operation": operation_reward(op, occupied),
        }
        if not payload.strip():
            return parts | {"faithful": 0.0, "localization": 0.0, "outcome": 0.0}
        encode = self._encode
        loc_reward = neighbourhood_similarity(codes, encode([payload])[0], self.bank, encode)
        _, outcome, _ = self._solve(item.task, payload)
        score = float(outcome.score)
        faithful = self._judge(
            FAITHFUL_RUBRIC, item.task, errors, run=item.base_trajectory, experience=payload
        )
        return parts | {
            "faithful": faithful,
            "localization": loc_reward,
            "outcome": self._outcome(item, score),
            "answered": score >= 1.0,
        }

    def _encode(self, texts: list[str]) -> Any:
        if self.encoder is None:
            from genmem.memory.encoders import default_encoder

            self.encoder = default_encoder()
        return self.encoder.encode(texts, progress=False)


def reward_functions(roles: Sequence[Role]) -> tuple[list[Callable[..., list]], list[float]]:
    """TRL reward functions reading the rollout's ``parts``: each part (weight 0), two channels.

    A part that does not apply to a completion's role, has no value (SID agreement without a
    reference) or failed (NaN) is None, which TRL turns into NaN and leaves out of the group's
    mean and spread rather than scoring it 0.
    """
    names = list(dict.fromkeys(n for r in roles for n in PARTS[r]))

    def reader(name: str) -> Callable[..., list]:
        def reward(prompts: list, completions: list, parts: list[dict], **_: Any) -> list:
            values = [p.get(name) for p in parts]
            return [None if v is None or math.isnan(float(v)) else float(v) for v in values]

        reward.__name__ = name
        return reward

    funcs = [reader(n) for n in names] + [reader(c) for c in CHANNELS]
    return funcs, [0.0] * len(names) + [1.0] * len(CHANNELS)
