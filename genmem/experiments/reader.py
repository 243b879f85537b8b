"""Mid-training the interactor to read memory: a trained reader and its control.

The paper mid-trains its interactor on rollouts with and without memory. Here the interactor is
the ranking one (:mod:`genmem.graph.ranked_actor`), which scores each valid command as its whole
reply, so teaching it is plain SFT on the reply it should rank first:

- **Steps.** For every training game that the bank was *not* built from, the game's walkthrough
  is played in the environment (teacher forcing). Before each of its commands, the ranker's
  conversation is built exactly as it is at evaluation (:func:`~genmem.graph.ranked_actor.
  ranking_prompt`: objective, retrieved experience, notes, commands played, observation, valid
  commands) and the walkthrough's command is the reply.
- **Experience.** What the evaluation's MemRetriever gives the planner for that game: its SID,
  its lookup and (unless ``rewrite`` is off) its rewrite, from the same graph and settings
  (:class:`~genmem.experiments.run_config.GraphRunConfig`). A game the bank holds would hand the
  reader its own procedure, never the case at test, so those games are left out
  (:func:`~genmem.experiments.contamination.tasks_in_bank`).
- **Control.** ``memory=False`` trains on the same steps with no experience shown. A gain of the
  reader trained with memory over this control, on test games, is memory use that was learnt
  rather than the games' procedure itself.

The trained reader is a policy directory; ``--reader local:DIR`` makes a ranking interactor score
with it while every other role keeps ``--model``. :func:`ranks_first` measures a scorer on
held-out steps without playing (teacher forcing), the cheap check before episodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from genmem.envs.base import Environment, Task
from genmem.experiments.run_config import GraphRunConfig

if TYPE_CHECKING:
    from genmem.training.policy_io import TrainingRun

__all__ = [
    "ReaderConfig",
    "ReaderReport",
    "ReaderStep",
    "ranked_first",
    "ranks_first",
    "reader_games",
    "reader_prompt",
    "reader_steps",
    "retrieved_support",
    "run_reader",
    "step_scores",
]


class ReaderConfig(GraphRunConfig):
    """What the reader trains on: the bank its experience comes from, and whether it is shown.

    The retrieval fields (``candidates``, ``rerank``, ``allowed``, ``addresser``, ``memory_k``,
    ``rewrite``, ``model``) are the evaluation's, so the reader trains on what it will read.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    bank_url: str = Field(description="The bank MemRetriever reads for each training game.")
    memory: bool = Field(
        default=True,
        description="Show the retrieved experience (the reader); False trains the control on "
        "the same steps without it.",
    )


class ReaderStep(BaseModel):
    """One teacher-forced decision: the ranker's user turn before a walkthrough command."""

    model_config = ConfigDict(frozen=True)

    game: str
    index: int = Field(description="The command's place in the walkthrough (0 first).")
    user: str = Field(description="The ranker's user turn (its system turn is fixed).")
    commands: list[str] = Field(description="The game's valid commands then.")
    command: str = Field(description="The walkthrough's command: the reply to rank first.")
    history: list[str] = Field(description="Commands played before it.")
    notes: list[str] = Field(description="Game text kept in view then (the recipe once read).")
    support: str = Field(description="The experience shown ('' for none).")


class ReaderReport(BaseModel):
    """What a reader run trained on and how long it took."""

    out: str
    memory: bool
    games: int
    left_out: list[str] = Field(description="Training games the bank holds (not used).")
    steps_seen: int = Field(description="Teacher-forced decisions (SFT examples).")
    without_support: int = Field(description="Games whose retrieval gave nothing to show.")
    max_length: int = Field(description="The sequence cap used (raised to the longest example).")
    train_steps: int
    seconds: float
    losses: list[float]
    files: dict[str, str]


def reader_games(env: Environment, bank: Any) -> tuple[list[Task], list[str]]:
    """``env``'s tasks that ``bank`` was not built from, and the ids of those it was."""
    from genmem.experiments.contamination import tasks_in_bank

    tasks = env.tasks()
    held = set(tasks_in_bank(bank, tasks))
    return [t for t in tasks if t.id not in held], sorted(held)


def retrieved_support(
    chat: Any,
    tasks: Sequence[Task],
    config: ReaderConfig,
    *,
    sid_generator: Any = None,
    progress: bool = False,
) -> dict[str, str]:
    """What MemRetriever gives the planner for each task (task id -> support; '' for none),
    from the evaluation's retriever graph and settings."""
    from genmem.graph.retriever import build_retriever_graph
    from genmem.policies.prompts import NO_MEMORY_ANSWER

    retriever = build_retriever_graph(
        chat, sid_generator=sid_generator, config=config.retriever_config()
    ).compile()
    context = {"bank_url": config.bank_url, "memory_k": config.memory_k}
    found: dict[str, str] = {}
    for task in tqdm(tasks, desc="retrieve", unit="game", disable=not progress):
        out = retriever.invoke({"query": task.query}, context=context)
        support = str(out.get("support") or "")
        found[task.id] = "" if support.strip() == NO_MEMORY_ANSWER else support
    return found


def reader_steps(env: Environment, task: Task, support: str) -> list[ReaderStep]:
    """Teacher forcing on ``task``'s walkthrough: the ranker's turn before each command.

    Raises:
        ValueError: ``env`` has no walkthroughs, or the walkthrough does not win the game.
    """
    from genmem.envs.textworld_env import GameSetEnvironment
    from genmem.policies.prompts import ranking_user_message

    if not isinstance(env, GameSetEnvironment):
        raise ValueError(
            f"a reader trains on game walkthroughs; {type(env).__name__} has none (use a "
            "cooking or textworld bench)"
        )
    steps: list[ReaderStep] = []
    env.start(task)
    try:
        episode = env.episode
        view = episode.view()
        for index, command in enumerate(env.walkthrough(task)):
            history, notes = list(view["history"]), list(view["notes"])
            user = ranking_user_message(
                task.query, view["observation"], view["commands"], history, support, notes
            )
            steps.append(
                ReaderStep(
                    game=task.id,
                    index=index,
                    user=user,
                    commands=list(view["commands"]),
                    command=command,
                    history=history,
                    notes=notes,
                    support=support,
                )
            )
            episode.step(command)
            view = episode.view()
        if not view["won"]:
            raise ValueError(f"the walkthrough of {task.id} does not win it")
    finally:
        env.finish(task)
    return steps


def _conversation(step: ReaderStep) -> list[Any]:
    """The ranker's conversation before ``step``: its fixed system turn and the step's user turn."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from genmem.policies.prompts import RANKING_PROMPT

    return [SystemMessage(RANKING_PROMPT), HumanMessage(step.user)]


def reader_prompt(tokenizer: Any, step: ReaderStep) -> str:
    """The ranker's conversation before ``step``, rendered as the model reads it (ending with
    the assistant's opening): the prompt a command is scored, and trained, after."""
    from genmem.policies.chat_local import to_chat_messages

    messages = to_chat_messages(_conversation(step))
    return str(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False))


def step_scores(
    scorer: Any, steps: Sequence[ReaderStep], *, rule: str = "mean"
) -> list[list[float]]:
    """Each step's valid commands scored by ``scorer`` (a chat model that scores replies) under
    ``rule``, as the ranking interactor scores them."""
    from genmem.policies.choice_scoring import rank_scores

    if rule not in ("mean", "sum"):
        raise ValueError(f"rule {rule!r}: teacher forcing measures 'mean' or 'sum'")
    scores = []
    for step in steps:
        given = scorer.choice_logprobs(_conversation(step), step.commands)
        scores.append(rank_scores(rule, given))  # type: ignore[arg-type]
    return scores


def ranked_first(
    steps: Sequence[ReaderStep],
    scores: Sequence[Sequence[float]],
    *,
    prior: Callable[[str, Sequence[str], Mapping[str, Any]], list[float] | None] | None = None,
    prior_weight: float = 0.0,
) -> list[bool]:
    """Per step, whether the walkthrough's command scores above every other valid command once
    ``prior_weight`` x the action prior over the step's support is added. A tie is not first."""
    first: list[bool] = []
    for step, row in zip(steps, scores, strict=True):
        total = list(row)
        if prior is not None and prior_weight and step.support.strip():
            view = {"history": step.history, "notes": step.notes, "commands": step.commands}
            bonus = prior(step.support, step.commands, view)
            if bonus is not None:
                total = [s + prior_weight * b for s, b in zip(total, bonus, strict=True)]
        mine = total[step.commands.index(step.command)]
        first.append(sum(s >= mine for s in total) == 1)
    return first


def ranks_first(
    scorer: Any,
    steps: Sequence[ReaderStep],
    *,
    rule: str = "mean",
    prior: Callable[[str, Sequence[str], Mapping[str, Any]], list[float] | None] | None = None,
    prior_weight: float = 0.0,
) -> list[bool]:
    """Per step, whether ``scorer`` ranks the walkthrough's command first, as the ranking
    interactor would (:func:`step_scores`, then :func:`ranked_first`)."""
    scores = step_scores(scorer, steps, rule=rule)
    return ranked_first(steps, scores, prior=prior, prior_weight=prior_weight)


def _max_length(tokenizer: Any, pairs: Sequence[tuple[str, str]], cap: int) -> int:
    """The sequence cap that keeps every example whole: ``cap``, or the longest example's
    length when one is longer (a cut example would lose its reply, the only part trained)."""
    end = tokenizer.eos_token or ""
    lengths = (len(tokenizer(p + c + end, add_special_tokens=False)["input_ids"]) for p, c in pairs)
    longest = max(lengths)
    return max(cap, longest)


def run_reader(
    env: Environment,
    config: ReaderConfig,
    out: Path,
    *,
    preset: Any,
    max_steps: int | None = None,
    sid_generator: Any = None,
    progress: bool = True,
) -> ReaderReport:
    """Build the teacher-forced steps of ``env``'s training games and fine-tune ``config.model``
    on them (every weight, one process); write the policy, ``steps.jsonl`` and ``reader.png``.
    ``sid_generator`` overrides MemRetriever's addressing (as :func:`~genmem.experiments.evaluate.
    evaluate`'s does).

    Raises:
        ValueError: an adapter or multi-process preset, no game left outside the bank, or an
            environment without walkthroughs.
    """
    import json

    from genmem.memory.location import open_bank
    from genmem.training.policy_io import TrainingRun

    if preset.adapter != "full" or preset.num_processes != 1:
        raise ValueError(
            f"preset {preset.name!r}: a reader trains every weight in one process; use cpu or gpu"
        )
    tasks, left_out = reader_games(env, open_bank(config.bank_url))
    if not tasks:
        raise ValueError(
            f"all {len(left_out)} games of {env.name} are in the bank; give more games (--games) "
            "than the bank was built from, so some are left to train the reader on"
        )
    run = TrainingRun.start(out, "reader", preset)
    try:
        report = _train_reader(
            env, tasks, left_out, config, out, run, preset, max_steps, sid_generator, progress
        )
    except BaseException as exc:  # Ctrl-C included: run.json must not stay at "running"
        run.fail({"games": len(tasks), "left_out": left_out}, f"{type(exc).__name__}: {exc}")
        raise
    (out / "settings.json").write_text(json.dumps(config.model_dump(), indent=2) + "\n")
    run.finish(report.model_dump(mode="json"))
    return report


def _train_reader(
    env: Environment,
    tasks: list[Task],
    left_out: list[str],
    config: ReaderConfig,
    out: Path,
    run: TrainingRun,
    preset: Any,
    max_steps: int | None,
    sid_generator: Any,
    progress: bool,
) -> ReaderReport:
    """:func:`run_reader` after its checks: the steps, the fine-tuning, the files."""
    from genmem.policies.backends import capped_chat_model
    from genmem.policies.local import load_policy
    from genmem.training.config import training_device
    from genmem.training.dynamics import plot_loss
    from genmem.training.policy_io import model_path, write_policy
    from genmem.training.sft import logged_losses, sft_arguments, sft_train

    supports: dict[str, str] = {t.id: "" for t in tasks}
    if config.memory:
        chat = capped_chat_model(config.model, config.max_new_tokens)
        supports = retrieved_support(
            chat, tasks, config, sid_generator=sid_generator, progress=progress
        )
    steps: list[ReaderStep] = []
    for task in tqdm(tasks, desc="walkthroughs", unit="game", disable=not progress):
        steps += reader_steps(env, task, supports[task.id])
    steps_path = out / "steps.jsonl"
    steps_path.write_text("".join(s.model_dump_json() + "\n" for s in steps), encoding="utf-8")
    device = training_device(preset)
    policy = load_policy(model_path(config.model), fresh=True, dtype="float32")
    if device != "cpu":
        policy.model.to(device)
    pairs = [(reader_prompt(policy.tokenizer, s), s.command) for s in steps]
    cap = _max_length(policy.tokenizer, pairs, preset.max_length)
    preset = preset.model_copy(update={"max_length": cap})
    args = sft_arguments(preset, out, "mid", max_steps, progress)
    piece = sft_train(policy, pairs, preset, out, args)
    trainer = piece.trainer
    notes = {"stage": "reader", "memory": config.memory, "bank": config.bank_url}
    files = write_policy(policy, out, run, notes=notes, trainer=trainer)
    loss_steps, losses = logged_losses(trainer)
    files["steps"] = str(steps_path)
    kind = "with experience" if config.memory else "control, no experience"
    title = f"reader loss ({kind})"
    files["plot"] = plot_loss(losses, out / "reader.png", title=title, steps=loss_steps)
    return ReaderReport(
        out=str(out),
        memory=config.memory,
        games=len(tasks),
        left_out=left_out,
        steps_seen=len(steps),
        without_support=sum(1 for t in tasks if config.memory and not supports[t.id].strip()),
        max_length=cap,
        train_steps=int(trainer.state.global_step),
        seconds=round(piece.seconds, 2),
        losses=losses,
        files=files,
    )
