"""GRPO rollouts that run through the LangGraph graphs (TRL ``rollout_func``).

Each GRPO prompt is one task in one role. The policy writes the SID turn (sampled by TRL's own
generator, so vLLM is used when the trainer has it); the rest runs through the project's graphs:

- **MemRetriever**: the MemRetriever subgraph looks the SID up with the real ``memory_lookup``
  tool and rewrites what it found; StackPlanner solves the task with that support; the task
  scorer scores the answer.
- **MemEvolver**: the prompt holds the task, the no-memory trajectory and its outcome. The
  MemEvolver subgraph reads the SID, decides ``insert`` / ``revise`` and writes to a *scratch
  copy* of the bank (never the input bank); StackPlanner then solves the task with the evolved
  payload as support.

Before training, every task is run once without memory (StackPlanner alone): that run is the
outcome baseline of Eq. 4 and the trajectory MemEvolver distils. An invalid SID gets format 0
and no memory is supplied, so its outcome is 0.

The strategic-quality judge is the chat model with privileged access to the reference answer,
answering a :class:`~genmem.training.rewards.JudgeVerdict` (0/1/2) under the rubric below
(own wording of the paper's relevance-judge idea). Every part is returned per completion in
``parts``; :func:`reward_functions` exposes them to TRL (see :mod:`genmem.training.advantages`
for how the two channels are weighted and normalised).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from genmem.envs.base import Environment, Task
from genmem.memory.sid import SIDSpec
from genmem.policies.prompts import (
    NO_MEMORY_ANSWER,
    evolver_user_message,
    retriever_user_message,
)
from genmem.policies.sid_decoding import ADDRESS_PROMPT, address_prompt
from genmem.policies.types import SIDCandidate
from genmem.training.advantages import CHANNELS
from genmem.training.graph_runs import planner_graph, scratch_bank, solve
from genmem.training.rewards import (
    ALPHA_PARTIAL,
    JudgeVerdict,
    contrastive_outcome,
    format_reward,
    judge_score,
    operation_reward,
    parse_completion_sid,
    sid_agreement_reward,
)

__all__ = [
    "PARTS",
    "GraphRollouts",
    "Role",
    "RolloutConfig",
    "RolloutTask",
    "neighbourhood_similarity",
    "reward_functions",
]

Role = Literal["retriever", "evolver"]

JUDGE_RUBRIC = (
    "You grade memory support written for an agent. You see the task, its correct answer (the "
    "agent never sees it) and the support text. Score 2 when the support points to the right "
    "method and would lead to the correct answer, 1 when it is related but only partly useful, "
    "0 when it is irrelevant, empty or misleading. Reply as JSON with a short reason and the "
    "score."
)
FAITHFUL_RUBRIC = (
    "You grade an experience distilled from an agent's run. You see the task, its correct "
    "answer and the run. Score 2 when the experience states what the run actually did and what "
    "it teaches, without invented steps or missing the key mistake; 1 when it is partly "
    "faithful; 0 when it is unrelated, empty or contradicts the run. Reply as JSON with a short "
    "reason and the score."
)

PARTS: dict[Role, tuple[str, ...]] = {
    "retriever": ("format", "sid_agreement", "strategy_judge"),
    "evolver": ("format", "sid_agreement", "faithful", "localization", "operation"),
}


class RolloutConfig(BaseModel):
    """How rollouts run the graph and score it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    alpha_partial: float = Field(default=ALPHA_PARTIAL, ge=0)
    memory_k: int = Field(default=3, ge=1, description="Entries a lookup returns.")
    max_steps: int = Field(default=1, ge=1, description="StackPlanner steps per run.")
    max_new_tokens: int = Field(default=128, ge=1, description="Reply cap of the graph's calls.")
    judge: bool = Field(default=True, description="Call the LLM judge (False: judge parts 0).")
    max_context_tokens: int = Field(default=512, ge=16)
    constrained: bool = Field(
        default=False,
        description="Sample the SID turn under the SID trie (always valid, format reward 1); "
        "False samples freely with TRL's generator (vLLM when configured), as the paper does.",
    )


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


@dataclass
class _Chosen:
    """An SID generator that proposes exactly the SID the policy wrote (or nothing)."""

    sid: str | None = None
    spec: SIDSpec | None = None

    def generate(self, context: str, k: int = 1) -> list[SIDCandidate]:
        return [] if self.sid is None else [SIDCandidate(sid=self.sid, score=0.0)]


def neighbourhood_similarity(
    sid: Sequence[int], payload_vec: Any, bank: Any, encode: Callable[[list[str]], Any]
) -> float:
    """r_loc: how well ``sid``'s neighbourhood matches the payload, in [0, 1].

    The neighbourhood is the live entries sharing the longest prefix with ``sid`` (at least one
    level; the entry at ``sid`` itself excluded). The reward is the best cosine similarity
    between the payload and those entries (clipped at 0), scaled by how deep the shared prefix
    is (``depth / (L - 1)``): a payload next to close siblings scores high, one dropped into an
    unrelated region scores low.
    """
    import numpy as np

    levels = len(sid)
    own = tuple(sid)
    for depth in range(levels - 1, 0, -1):
        near = [e for e in bank.entries(own[:depth]) if bank.sid(e.sid).codes != own]
        texts = [e.payload for e in near if e.payload.strip()]
        if texts:
            vecs = np.asarray(encode(texts), dtype=np.float64)
            p = np.asarray(payload_vec, dtype=np.float64)
            sims = vecs @ p / (np.linalg.norm(vecs, axis=1) * np.linalg.norm(p) + 1e-12)
            return float(max(0.0, sims.max()) * depth / (levels - 1))
    return 0.0


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

    def __post_init__(self) -> None:
        from genmem.memory.location import open_bank

        self.bank = open_bank(self.bank_url)
        self.spec = self.bank.spec
        self._chosen = _Chosen(spec=self.spec)
        self._graphs: dict[str, Any] = {}
        self._scratch = Path(tempfile.mkdtemp(prefix="genmem-grpo-"))
        self._encoder: Any = None

    def close(self) -> None:
        """Remove the folder of per-rollout scratch banks."""
        import shutil

        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- setup --------------------------------------------------------------------------------

    def _graph(self, name: str) -> Any:
        if name not in self._graphs:
            from genmem.graph.evolver import build_evolver_graph
            from genmem.graph.retriever import build_retriever_graph

            if name == "planner":
                graph = planner_graph(self.chat, self.env, self.config.max_steps)
            else:
                build = build_retriever_graph if name == "retriever" else build_evolver_graph
                graph = build(self.chat, sid_generator=self._chosen).compile()
            self._graphs[name] = graph
        return self._graphs[name]

    def _solve(self, task: Task, support: str | None) -> tuple[str | None, float, str]:
        """StackPlanner on ``task`` (with ``support``): answer, task score, rendered trajectory."""
        from genmem.graph.trajectory import render_trajectory

        answer, outcome, trajectory = solve(self._graph("planner"), self.env, task, support)
        return answer, float(outcome.score), render_trajectory(trajectory, clip=600)

    def add_tasks(
        self,
        tasks: Sequence[Task],
        roles: Sequence[Role],
        reference_sids: dict[str, str],
        tokenizer: Any,
        progress: bool = True,
    ) -> list[dict[str, Any]]:
        """Run each task once without memory; return the GRPO dataset rows (prompt, role, id)."""
        from tqdm.auto import tqdm

        rows = []
        for task in tqdm(tasks, desc="no-memory baselines", disable=not progress):
            answer, score, trajectory = self._solve(task, None)
            for role in roles:
                item = RolloutTask(
                    task=task,
                    role=role,
                    reference_sid=reference_sids.get(task.id),
                    base_answer=answer,
                    base_score=score,
                    base_trajectory=trajectory,
                )
                outcome = "success" if score >= 1.0 else "failure"
                context = (
                    retriever_user_message(task.query)
                    if role == "retriever"
                    else evolver_user_message(task.query, trajectory, outcome)
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
        """Sample the SID turns with the trainer's generator, run the graph, score each."""
        tok = trainer.processing_class
        self.step = int(trainer.state.global_step)
        prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        if self.config.constrained:
            completion_ids, logprobs = self._sample_constrained(trainer, prompt_ids), None
        else:
            # TRL's own sampler (transformers or vLLM, ZeRO-3 aware); private, pinned TRL 1.16.
            completion_ids, logprobs = trainer._generate_single_turn(
                prompt_ids, None, {}, trainer.num_generations
            )
        texts = tok.batch_decode(completion_ids, skip_special_tokens=True)
        parts = [self.score(p, t) for p, t in zip(prompts, texts, strict=True)]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            "parts": parts,
        }

    def _sample_constrained(self, trainer: Any, prompt_ids: list[list[int]]) -> list[list[int]]:
        """Sample one SID per prompt under the trie of all SIDs, then the end token."""
        import torch

        from genmem.policies.sid_decoding import SIDTrie
        from genmem.policies.sid_tokens import sid_token_ids

        tok = trainer.processing_class
        trie = SIDTrie(self.spec, sid_token_ids(tok, self.spec), None)
        model = trainer.accelerator.unwrap_model(trainer.model)
        out: list[list[int]] = []
        for ids in prompt_ids:
            n = len(ids)

            def allowed(_: int, seq: Any, n: int = n) -> list[int]:
                done = seq[n:].tolist()
                if len(done) >= self.spec.levels:
                    return [tok.eos_token_id]
                return trie.allowed(done)

            with torch.no_grad():
                gen = model.generate(
                    torch.tensor([ids], device=model.device),
                    do_sample=True,
                    temperature=trainer.temperature,
                    max_new_tokens=self.spec.levels + 1,
                    prefix_allowed_tokens_fn=allowed,
                    pad_token_id=tok.pad_token_id,
                )
            out.append(gen[0, n:].tolist())
        return out

    def score(self, prompt: str, completion: str) -> dict[str, float | None]:
        """Run the graph for one completion and return every reward part and both channels."""
        item = self.tasks.get(prompt)
        if item is None:
            raise KeyError("a GRPO prompt that add_tasks did not make; rebuild the dataset")
        run = self._evolve if item.role == "evolver" else self._retrieve
        try:
            parts = run(item, completion)
        except Exception as exc:  # a crashing rollout scores 0; training goes on
            parts = dict.fromkeys(PARTS[item.role], 0.0) | {"outcome": 0.0, "error": repr(exc)}
        # Eligibility flags for the training-dynamics curves: logged, not rewards.
        agreement = parts.get("sid_agreement")
        flags = {
            "step": self.step,
            "sid_valid": parse_completion_sid(completion, self.spec) is not None,
            "retrieved": bool(parts.pop("retrieved", False)),
            "sid_match": None if agreement is None else agreement >= 1.0,
            "answered": bool(parts.pop("answered", False)),
        }
        process = sum(v for k, v in parts.items() if k in PARTS[item.role] and v is not None)
        parts["process_channel"] = process
        parts["outcome_channel"] = parts["outcome"]
        self.log.append(
            {"task": item.task.id, "role": item.role, "completion": completion, **flags, **parts}
        )
        return parts

    def _judge(self, rubric: str, task: Task, text: str, label: str) -> float:
        if not self.config.judge or not text.strip() or text == NO_MEMORY_ANSWER:
            return 0.0
        from langchain_core.messages import HumanMessage, SystemMessage

        user = f"Task:\n{task.query}\n\nCorrect answer: {task.reference}\n\n{label}:\n{text[:1500]}"
        try:
            verdict = self.chat.with_structured_output(JudgeVerdict).invoke(
                [SystemMessage(rubric), HumanMessage(user)]
            )
        except Exception:  # an unreadable verdict scores 0
            verdict = None
        return judge_score(verdict if isinstance(verdict, JudgeVerdict) else None)

    def _common(self, item: RolloutTask, completion: str, **fmt: Any) -> dict[str, Any]:
        return {
            "format": format_reward(completion, self.spec, **fmt),
            "sid_agreement": sid_agreement_reward(completion, item.reference_sid, self.spec),
        }

    def _retrieve(self, item: RolloutTask, completion: str) -> dict[str, Any]:
        codes = parse_completion_sid(completion, self.spec)
        parts = self._common(item, completion)
        if codes is None:
            return parts | {"strategy_judge": 0.0, "outcome": 0.0}
        self._chosen.sid = str(self.spec.make(codes))
        out = self._graph("retriever").invoke(
            {"query": item.task.query},
            context={"bank_url": self.bank_url, "memory_k": self.config.memory_k},
        )
        support = out.get("support") or NO_MEMORY_ANSWER
        _, score, _ = self._solve(item.task, support)
        judged = self._judge(JUDGE_RUBRIC, item.task, support, "Support")
        outcome = contrastive_outcome(
            score, item.base_score, alpha_partial=self.config.alpha_partial
        )
        return parts | {
            "strategy_judge": judged,
            "outcome": outcome,
            "retrieved": bool(out.get("retrieved")),
            "answered": score >= 1.0,
        }

    def _evolve(self, item: RolloutTask, completion: str) -> dict[str, Any]:
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
        self._chosen.sid = str(sid)
        scratch = self._scratch / f"rollout-{len(self.log)}.db"
        with scratch_bank(self.bank_url, scratch) as url:
            out = self._graph("evolver").invoke(
                {
                    "query": item.task.query,
                    "trajectory": item.base_trajectory,
                    "outcome": "success" if item.base_score >= 1.0 else "failure",
                },
                context={"bank_url": url, "memory_k": self.config.memory_k},
            )
            decision = out.get("decision") or {}
            op = decision.get("op")
            written = open_bank(url).get(sid)
            payload = written.payload if written is not None and out.get("update") else ""
        parts = self._common(item, completion, op=op, needs_op=True) | {
            "op": op,
            "retrieved": occupied,
        }
        if not payload.strip():
            return parts | {
                "faithful": 0.0,
                "localization": 0.0,
                "operation": operation_reward(op, occupied),
                "outcome": 0.0,
            }
        encode = self._encode
        loc_reward = neighbourhood_similarity(codes, encode([payload])[0], self.bank, encode)
        _, score, _ = self._solve(item.task, payload)
        return parts | {
            "faithful": self._judge(
                FAITHFUL_RUBRIC,
                item.task,
                f"Run:\n{item.base_trajectory}\n\nExperience:\n{payload}",
                "Run and experience",
            ),
            "localization": loc_reward,
            "operation": operation_reward(op, occupied),
            "outcome": contrastive_outcome(
                score, item.base_score, alpha_partial=self.config.alpha_partial
            ),
            "answered": score >= 1.0,
        }

    def _encode(self, texts: list[str]) -> Any:
        if self._encoder is None:
            from genmem.memory.encoders import default_encoder

            self._encoder = default_encoder()
        return self._encoder.encode(texts, progress=False)


def reward_functions(roles: Sequence[Role]) -> tuple[list[Callable[..., list]], list[float]]:
    """TRL reward functions reading the rollout's ``parts``: each part (weight 0), two channels.

    A part that does not apply to a completion's role, or has no value (SID agreement without a
    reference), is None, which TRL logs as missing rather than as 0.
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
