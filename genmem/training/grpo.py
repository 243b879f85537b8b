"""Stage 3, joint GRPO of MemRetriever and MemEvolver on rollouts that run through the graphs.

``run_grpo`` trains one policy with TRL's ``GRPOTrainer`` and a ``rollout_func``
(:class:`~genmem.training.rollouts.GraphRollouts`). ``roles=("retriever", "evolver")`` (joint,
the default) mixes both roles' prompts in one dataset, so every step updates the shared policy
on groups of either role; one role trains that role alone (the paper's two separate policies
are two such runs). Rewards: the parts of :mod:`genmem.training.rewards` as separate reward
functions (logged by TRL, weight 0) and the process and outcome channels (weight 1), normalised
per channel as :mod:`genmem.training.advantages` explains. KL to the reference policy (the
starting weights) with ``beta`` from the preset.

The completion trained is the agent's whole turn by default (SID, the lookup result masked out
of the loss, then the policy's own rewrite or decision); ``RolloutConfig(completion="sid")``
trains the SID turn alone (see :mod:`genmem.training.rollouts`).

The bank is copied to ``OUT/bank.db`` first: lookups read the copy, and every MemEvolver
rollout writes to its own scratch copy of it, so the input bank is never written. Each rollout
is appended to ``OUT/rollouts.jsonl`` as it finishes (a launched run: by the main process, for
every process's rollouts, at the end of each batch). A run stopped by too many failures
(:class:`~genmem.errors.TooManyFailures`) keeps that log, writes ``report.json`` with what it
measured so far and marks ``run.json`` failed, then raises.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from pydantic import BaseModel, Field

from genmem.envs.base import Environment
from genmem.errors import TooManyFailures
from genmem.training.config import (
    GRPO_TASKS,
    TrainConfig,
    grpo_args,
    partitions,
    training_device,
)
from genmem.training.dynamics import eligibility_rates, plot_grpo_dynamics
from genmem.training.policy_io import (
    START_DIR,
    TrainingRun,
    join_run,
    load_started,
    save_start,
    write_policy,
)
from genmem.training.rollouts import PARTS, GraphRollouts, Role, RolloutConfig, reward_functions

__all__ = ["GRPOReport", "run_grpo"]


class GRPOReport(BaseModel):
    """What a GRPO run did and measured."""

    out: str
    preset: str
    roles: list[str]
    completion: str = Field(description="What was trained: the whole turn, or the SID turn.")
    tasks: int
    steps: int
    seconds: float
    steps_per_second: float
    rollouts: int
    rewards: dict[str, list[float]] = Field(description="Logged mean per reward, per step.")
    advantages: list[list[float]] = Field(description="TRL's advantages per step.")
    eligibility: dict[str, dict[str, float | None]] = Field(
        default_factory=dict,
        description="Per role, the share of rollouts with each flag of dynamics.RATES.",
    )
    failures: int = Field(default=0, description="Judge calls and rollouts that raised (NaN).")
    files: dict[str, str]


def _logged(history: list[dict[str, Any]], key: str) -> list[float]:
    """One logged value per step (NaN where the step had none, e.g. another role's part)."""
    return [float("nan") if h[key] is None else float(h[key]) for h in history if key in h]


def _reference_sids(bank: Any) -> dict[str, str]:
    """Query text -> SID of the entry it came from (from the entries' provenance)."""
    from genmem.training.align_data import entry_sources

    return {q: s.sid for s in entry_sources(bank) for q in s.queries}


def run_grpo(
    bank_url: str,
    env: Environment,
    out: Path,
    *,
    preset: TrainConfig,
    model: str | None = None,
    chat_model: str | BaseChatModel = "local",
    roles: Sequence[Role] = ("retriever", "evolver"),
    limit: int = GRPO_TASKS,
    max_steps: int | None = None,
    rollout: RolloutConfig | None = None,
    progress: bool = True,
) -> GRPOReport:
    """GRPO on ``env``'s first ``limit`` tasks with ``bank_url``; the policy goes to ``out``.

    ``chat_model`` (a spec or a chat model) plans, judges and, with ``completion="sid"``,
    writes the rewrite and the decision.

    Raises:
        TooManyFailures: more judge calls or rollouts raised than ``rollout.max_failures``.
    """
    from datasets import Dataset
    from trl import GRPOTrainer

    from genmem.memory.bank_copy import working_copy
    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    if preset.adapter != "full":
        raise ValueError(
            f"preset {preset.name!r} trains {preset.adapter} adapters; GRPO trains the full "
            "policy (adapters are for the SFT stages align and mid)"
        )
    ranks, preset = join_run(preset)
    run = TrainingRun.start(out, "grpo", preset, ranks)
    # One process copies the bank and writes the starting weights (with the SID tokens).
    with ranks.main_first() as main:
        work_url = working_copy(bank_url, out) if main else None
        if main:
            save_start(model, open_bank(work_url), out)
    work_url = ranks.broadcast(work_url)
    bank = open_bank(work_url)
    cfg = rollout or RolloutConfig()
    args = grpo_args(preset, out / "trainer", max_steps, started=ranks.launched)
    args.disable_tqdm = not progress or not ranks.is_main
    # Every process loads the folder after the arguments exist (ZeRO-3: its partition only).
    # The folder is also what TRL builds the KL reference from (config._name_or_path) and what
    # colocated vLLM starts from (model.name_or_path): both name out/start, whose vocabulary
    # holds the SID tokens.
    start = out / START_DIR
    policy = load_started(
        out, training_device(preset, ranks.local_rank), partitioned=partitions(preset)
    )

    chat = (
        capped_chat_model(chat_model, cfg.max_new_tokens)
        if isinstance(chat_model, str)
        else chat_model
    )
    log_path = out / "rollouts.jsonl"
    rollouts = GraphRollouts(env, work_url, chat, cfg, log_path=log_path, ranks=ranks)
    by_query = _reference_sids(bank)
    tasks = env.tasks(limit)
    refs = {t.id: by_query[t.query] for t in tasks if t.query in by_query}
    bank.store.close()
    rows = rollouts.add_tasks(tasks, list(roles), refs, policy.tokenizer, progress=progress)
    funcs, weights = reward_functions(roles)
    args.reward_weights = weights
    with contextlib.redirect_stdout(sys.stderr):
        trainer = GRPOTrainer(
            model=policy.model,
            reward_funcs=funcs,
            args=args,
            train_dataset=Dataset.from_list(rows),
            processing_class=policy.tokenizer,
            rollout_func=rollouts,
        )
    advantages: list[list[float]] = []
    score = trainer._generate_and_score_completions

    def recorded(inputs: Any) -> Any:
        batch = score(inputs)
        mine = [float(a) for a in batch["advantages"].reshape(-1).tolist()]
        advantages.append([a for part in ranks.gather(mine) for a in part])  # every process's
        return batch

    trainer._generate_and_score_completions = recorded
    started = time.perf_counter()

    def report(seconds: float, files: dict[str, str], plot: bool = True) -> GRPOReport:
        steps = int(trainer.state.global_step)
        names = [f.__name__ for f in funcs]
        made = GRPOReport(
            out=str(out),
            preset=preset.name,
            roles=list(roles),
            completion=cfg.completion,
            tasks=len(tasks),
            steps=steps,
            seconds=round(seconds, 2),
            steps_per_second=round(steps / seconds, 4) if seconds > 0 else 0.0,
            rollouts=len(rollouts.log),
            rewards={n: _logged(trainer.state.log_history, f"rewards/{n}/mean") for n in names},
            advantages=advantages,
            eligibility={r: eligibility_rates(rollouts.log, r) for r in roles},
            failures=rollouts.failures,
            files={**files, "rollouts": str(log_path)},
        )
        if plot:
            made.files["plot"] = plot_grpo_dynamics(
                rollouts.log, {r: PARTS[r] for r in roles}, out / "grpo.png"
            )
        return made

    try:
        with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints logs; keep --json clean
            trainer.train()
    except TooManyFailures as exc:  # raised on every process at the same batch
        if ranks.is_main:
            run.fail(report(time.perf_counter() - started, {}).model_dump(mode="json"), str(exc))
            shutil.rmtree(start, ignore_errors=True)
        # the others leave only once the report is written (a launcher stops every process
        # as soon as one exits with an error)
        ranks.barrier()
        raise
    finally:
        rollouts.close()
    seconds = time.perf_counter() - started
    notes = {"stage": "grpo", "roles": list(roles), "completion": cfg.completion}
    files = write_policy(policy, out, run, notes=notes, trainer=trainer, ranks=ranks)
    if not ranks.is_main:  # the same figures (its log is every process's), no files written
        return report(seconds, files, plot=False)
    done = report(seconds, files)
    shutil.rmtree(start, ignore_errors=True)  # the reference's weights: only needed to start
    run.finish(done.model_dump(mode="json"))
    return done
