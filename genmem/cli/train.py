"""`genmem train ...`: the training stages; each writes a policy directory into --out."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from genmem.cli.common import (
    CLIError,
    add_concurrency_argument,
    emit,
    fail,
    iter_jsonl,
    nonnegative_int,
    positive_float,
    positive_int,
)
from genmem.cli.fields import add_field_flags, model_from_args
from genmem.cli.tasks import check_task_source
from genmem.policies.backends import DEFAULT_MODEL_SPEC

__all__ = ["register"]

_GAME_BENCHES = ("cooking-train", "textworld-train")
"""The benches with walkthroughs a reader trains on (training splits only)."""

CONFIG_HELP = (
    "cpu (tiny run on the embedded model, default), cpu-lora (the same with LoRA adapters and "
    "trainable SID rows: cheaper per example), cpu-ddp / cpu-zero3 (two CPU processes, DDP or "
    "DeepSpeed ZeRO-3 with DS_ACCELERATOR=cpu; launch with torchrun --nproc_per_node 2), gpu "
    "(one GPU, every weight, bf16), gpu-lora (cpu-lora on one GPU), gpu-zero3 (ZeRO-3 on the "
    "GPUs a launcher starts), a100x8 (the paper's setting: 8 GPUs, ZeRO-3, colocated vLLM), "
    "a100x4-server (4 training GPUs, `trl vllm-serve` apart), or a JSON/YAML file of preset "
    "fields over 'base'"
)


_ALIGN_DATA_FLAGS = ("heldout", "max_context_tokens", "max_target_chars")
"""The fields of :class:`~genmem.training.align_data.AlignDataConfig` that ``train align`` sets."""


def _stdout_to_stderr() -> Any:
    """Keep standard output for the result: the Trainer, TRL and DeepSpeed (whose logger binds
    the stream it finds at import) print progress there, and ``--json`` must stay one object."""
    import contextlib
    import sys

    return contextlib.redirect_stdout(sys.stderr)


def _main_process() -> bool:
    """Whether this process prints the result (the only one, or rank 0 of a launched run)."""
    import os

    return int(os.environ.get("RANK", "0")) == 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bank", required=True, help="bank URL (sqlite:///...?bank=ID, ...)")
    p.add_argument("--config", default="cpu", help=CONFIG_HELP)
    p.add_argument("--train-steps", type=positive_int, help="optimiser steps (default: preset)")
    # --max-steps is the planner's step budget in every command; here it would be ambiguous.
    p.add_argument("--max-steps", dest="old_max_steps", help=argparse.SUPPRESS)
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL_SPEC,
        help="starting policy: local (embedded) or local:DIR / DIR",
    )
    p.add_argument("--out", required=True, help="folder for the policy directory and reports")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem train`` and its stages."""
    from genmem.training.align_data import AlignDataConfig

    p = sub.add_parser(
        "train", help="train the memory policies: align and mid (SFT), grpo (RL); and a reader"
    )
    tsub = p.add_subparsers(dest="train_command", required=True, metavar="STAGE")
    a = tsub.add_parser(
        "align",
        help="stage 1: SFT on query/trajectory/experience -> SID and SID -> experience/description",
        description=(
            "Builds the five alignment mappings from --bank (entries, and the queries and "
            "trajectories their metadata records), adds the SID tokens to the policy, measures "
            "prefix accuracy at top-1/5/50 on held-out and trained queries, trains with TRL's "
            "SFTTrainer (completion-only loss, AdamW, cosine), measures again and writes the "
            "policy to --out, where --model local:OUT loads it. Also writes report.json, "
            "heldout_pairs.jsonl and alignment.png."
        ),
    )
    _common(a)
    a.add_argument(
        "--weights",
        help="lambda per mapping, e.g. query_sid=2,sid_description=0.5 (default: all 1), or "
        "'addressing': the three text -> SID mappings only (query, trajectory, experience)",
    )
    a.add_argument("--eval-size", type=positive_int, default=32, help="queries scored (32)")
    a.add_argument(
        "--queries",
        metavar="FILE",
        help="JSONL of {query, sid} or {query, text}: queries for the entries they name (by SID, "
        "or by a text the bank's codebooks quantise to it), added to those the entries record; "
        "for a bank built from plain texts",
    )
    add_field_flags(
        a,
        AlignDataConfig,
        _ALIGN_DATA_FLAGS,
        overrides={"heldout": {"metavar": "FRACTION"}},
    )
    a.add_argument(
        "--describer",
        metavar="SPEC",
        help="chat model (any backend spec) that writes the SID -> description targets "
        "(default: each record's problem type, else its first sentence)",
    )
    a.add_argument(
        "--curve-every",
        type=nonnegative_int,
        default=0,
        metavar="N",
        help="every N steps, score held-out and trained queries at top-5 and append to "
        "curve.jsonl / curve.png (0: no curve)",
    )
    a.add_argument(
        "--checkpoint-every",
        type=nonnegative_int,
        default=0,
        metavar="N",
        help="save a resumable checkpoint every N steps (0: only when pausing)",
    )
    a.add_argument(
        "--pause-after",
        type=positive_float,
        metavar="SECONDS",
        help="stop after this much training with a checkpoint and a usable policy; run the "
        "same command with --resume to go on",
    )
    a.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its last checkpoint (same schedule and data)",
    )
    a.add_argument(
        "--finish",
        action="store_true",
        help="train no further: merge the last checkpoint in --out as it is (a paused run, or "
        "a checkpoint another machine wrote) into the policy, then score it",
    )
    a.set_defaults(func=_align)
    _register_mid(tsub)
    _register_grpo(tsub)
    _register_reader(tsub)


def _weights(text: str | None) -> dict[str, float] | None:
    from genmem.training.align_data import ADDRESSING, MAPPINGS

    if not text:
        return None
    if text.strip() == "addressing":
        return dict(ADDRESSING)
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in MAPPINGS:
            raise CLIError(
                f"--weights {text!r}: use NAME=VALUE pairs with NAME one of {', '.join(MAPPINGS)}"
            )
        try:
            out[name] = float(value)
        except ValueError:
            raise CLIError(f"--weights: {value!r} for {name} is not a number") from None
    return out


def _chat_spec(flag: str, spec: str) -> str:
    """A chat-model spec checked before anything runs (exit 2 on a bad one)."""
    from genmem.errors import InvalidModelSpec
    from genmem.policies.backends import capped_chat_model

    try:
        capped_chat_model(spec, 8)  # lazy: builds the client, loads no weights
    except InvalidModelSpec as exc:
        raise CLIError(f"{flag}: {exc}") from None
    local = spec.strip().removeprefix("local:") if spec.strip().startswith("local:") else None
    if local is not None and not (Path(local) / "config.json").is_file():
        raise CLIError(f"{flag} {spec!r}: {local} is not a model directory (no config.json)")
    return spec


def _setup(args: argparse.Namespace):
    """The preset and the bank, checked before any model is loaded."""
    from genmem.memory.location import open_bank
    from genmem.training.config import load_preset
    from genmem.training.policy_io import model_path

    if args.old_max_steps is not None:
        planner = " (the planner's steps are --max-planner-steps)" if args.func is _grpo else ""
        raise CLIError(
            f"--max-steps is the planner's step budget in every command; the optimiser steps of "
            f"`train` are --train-steps{planner}"
        )
    try:
        preset = load_preset(args.config)
        model_path(args.model)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    from genmem.training.distributed import LAUNCH_HINT, launched

    if preset.deepspeed is not None and not launched():
        raise CLIError(
            f"--config {args.config}: DeepSpeed runs one process per device under a launcher: "
            f"{LAUNCH_HINT}"
        )
    if launched() and getattr(args, "finish", False):
        raise CLIError("--finish merges a checkpoint in one process: run it without a launcher")
    bank = open_bank(args.bank)
    if bank.is_empty():
        raise CLIError(f"--bank {args.bank!r} has no entries to train on")
    return preset, bank


def _setup_with_tasks(args: argparse.Namespace, flag: str, chat: str) -> tuple[Any, Any]:
    """The preset and the environment of a stage that runs tasks, every input checked first."""
    from genmem.cli.tasks import environment

    check_task_source(args)  # no tasks: exit 2 before any work
    _chat_spec(flag, chat)
    preset, _ = _setup(args)
    return preset, environment(args)


def _queries(path: str) -> list[Any]:
    """``--queries``: each line a {query, sid} or {query, text} object."""
    from pydantic import ValidationError

    from genmem.training.align_data import QueryPair

    rows = []
    for lineno, obj in iter_jsonl(path):
        try:
            rows.append(QueryPair.model_validate(obj))
        except ValidationError as exc:
            error = exc.errors()[0]
            field = ".".join(str(x) for x in error["loc"])
            where = f"{field}: " if field else ""
            raise CLIError(
                f"{path}:{lineno}: {where}{error['msg']} (a line is {{query, sid}} or "
                "{query, text})"
            ) from None
    if not rows:
        raise CLIError(f"{path} holds no queries")
    return rows


def _align(args: argparse.Namespace) -> int:

    from genmem.training.align import run_align
    from genmem.training.align_data import AlignDataConfig
    from genmem.training.sft import Pieces

    weights = _weights(args.weights)
    if args.describer is not None:
        _chat_spec("--describer", args.describer)
    preset, bank = _setup(args)
    extra = {"weights": weights} if weights else {}
    data = model_from_args(
        AlignDataConfig, args, names=_ALIGN_DATA_FLAGS, seed=preset.seed, **extra
    )
    queries = _queries(args.queries) if args.queries else []
    out = Path(args.out)
    if args.resume and args.finish:
        raise CLIError("--resume trains on, --finish trains no further: give one of them")
    if args.resume or args.finish:
        from genmem.training.sft import last_checkpoint

        flag = "--resume" if args.resume else "--finish"
        if last_checkpoint(out) is None:
            raise CLIError(f"{flag}: {out / 'trainer'} holds no checkpoint to start from")
    try:
        with _stdout_to_stderr():
            report = run_align(
                bank,
                out,
                preset=preset,
                model=args.model,
                max_steps=args.train_steps,
                data=data,
                max_eval=args.eval_size,
                describer=args.describer,
                queries=queries,
                pieces=Pieces(args.checkpoint_every, args.pause_after, args.resume, args.finish),
                curve_every=args.curve_every,
                progress=not args.json,
            )
    except ValueError as exc:  # no data to align with (the bank, the queries): exit 1
        return fail(str(exc), 1) if _main_process() else 1
    if not _main_process():
        return 0
    state = "" if report.complete else " (paused: --resume continues)"
    if args.finish:
        part = "" if report.complete else ", part-way through its schedule"
        state = f" (its last checkpoint, merged without training{part})"
    lines = [
        f"aligned {report.entries} entries ({report.examples} examples {report.counts}) for "
        f"{report.piece_steps} steps in {report.seconds:.0f} s ({report.steps_per_second:.3f} "
        f"steps/s, {report.examples_per_second:.2f} examples/s, {report.adapter}); step "
        f"{report.steps}{state}",
    ]
    if "curve" in report.files:
        lines.append(f"  learning curve: {report.files['curve_plot']}")
    for split, acc in report.after.items():
        lines.append(f"  {split}: before {report.before[split].line()}")
        lines.append(f"  {split}: after  {acc.line()}")
    plot = f"; plot: {report.files['plot']}" if "plot" in report.files else ""
    lines.append(f"policy: {report.out} (use --model local:{report.out}){plot}")
    emit(report.model_dump(mode="json"), as_json=args.json, text="\n".join(lines))
    return 0


def _register_grpo(tsub: argparse._SubParsersAction) -> None:
    from genmem.cli.tasks import add_task_arguments
    from genmem.training.config import GRPO_TASKS, RolloutConfig

    g = tsub.add_parser(
        "grpo",
        help="stage 3: joint GRPO of MemRetriever and MemEvolver on rollouts through the graphs",
        description=(
            "TRL GRPOTrainer with a rollout function that runs the graphs. The policy writes "
            "the SID; the real memory_lookup reads it; with --completion whole (default) the "
            "policy then writes the rewrite (MemRetriever) or the update decision (MemEvolver) "
            "itself, the lookup result being masked out of the loss; --completion sid trains "
            "the SID alone and lets --planner-model write them. StackPlanner solves the task "
            "with and without the support; MemEvolver writes to a scratch copy of the bank and "
            "is told only what the environment itself observes (nothing on GSM8K or QA). "
            "Rewards (logged separately): format, SID agreement, the LLM judge with the "
            "reference (retriever), r_faithful (the judge) + r_loc (best cosine similarity of "
            "the new payload to the live entries sharing the update SID's longest prefix, times "
            "that prefix's depth over L-1) + r_op (revise on an occupied SID, insert on an empty "
            "one) for the evolver, and the contrastive outcome (with memory minus without, "
            "+0.2 when both succeed); process and outcome channels are normalised separately. "
            "A judge call or rollout that raises is logged and left out (NaN), never scored 0; "
            "more than --max-failures stop the run (exit 1). Tasks come from --bench "
            "(default gsm8k-train) or --data. Writes the policy, rollouts.jsonl (every "
            "rollout's parts, flags and the text of each completion part) and grpo.png "
            "(training dynamics per role) into --out."
        ),
    )
    _common(g)
    add_task_arguments(g, default="gsm8k-train")
    g.add_argument(
        "--limit", type=positive_int, default=GRPO_TASKS, help=f"training tasks ({GRPO_TASKS})"
    )
    g.add_argument(
        "--role",
        choices=("joint", "retriever", "evolver"),
        default="joint",
        help="joint (both roles' prompts in one run, one policy; default) or one role",
    )
    add_field_flags(g, RolloutConfig, ["completion"])
    g.add_argument(
        "--planner-model",
        default=DEFAULT_MODEL_SPEC,
        help="model spec of the rest of the graph: StackPlanner, the judge, and with "
        f"--completion sid the rewrite and decision ({DEFAULT_MODEL_SPEC})",
    )
    add_field_flags(
        g,
        RolloutConfig,
        ["constrained", "judge", "memory_k", "max_steps", "max_new_tokens", "max_failures"],
        overrides={"max_steps": {"flag": "--max-planner-steps"}},
    )
    add_concurrency_argument(g)
    g.set_defaults(func=_grpo)


def _grpo(args: argparse.Namespace) -> int:
    from genmem.training.config import RolloutConfig
    from genmem.training.grpo import run_grpo

    preset, env = _setup_with_tasks(args, "--planner-model", args.planner_model)
    if preset.adapter != "full":
        raise CLIError(
            f"--config {args.config}: adapter {preset.adapter!r} is for the SFT stages (align, "
            "mid); GRPO trains the full policy"
        )
    roles = ("retriever", "evolver") if args.role == "joint" else (args.role,)
    with _stdout_to_stderr():
        report = run_grpo(
            args.bank,
            env,
            Path(args.out),
            preset=preset,
            model=args.model,
            chat_model=args.planner_model,
            roles=roles,
            limit=args.limit,
            max_steps=args.train_steps,
            rollout=model_from_args(RolloutConfig, args),
            progress=not args.json,
        )
    if not _main_process():
        return 0
    means = {k: [round(v, 3) for v in vals] for k, vals in report.rewards.items()}
    text = (
        f"GRPO ({', '.join(report.roles)}; {report.completion} completions) on {report.tasks} "
        f"tasks: {report.steps} steps, {report.rollouts} rollouts ({report.failures} failed) "
        f"in {report.seconds:.0f} s ({report.steps_per_second:.3f} steps/s)\n"
        f"rewards per step: {means}\n"
        f"eligibility per role: {report.eligibility}\n"
        f"policy: {report.out} (use --model local:{report.out})"
    )
    emit(report.model_dump(mode="json"), as_json=args.json, text=text)
    return 0


def _register_mid(tsub: argparse._SubParsersAction) -> None:
    from genmem.cli.tasks import add_task_arguments
    from genmem.training.config import MID_TASKS, TRAINING_MAX_NEW_TOKENS

    m = tsub.add_parser(
        "mid",
        help="stage 2: SFT on graph traces (teacher text turns, policy SIDs) kept by rejection",
        description=(
            "Runs the MemRetriever (lookup, rewrite, StackPlanner) or MemEvolver (lookup, "
            "decision on a scratch bank copy) graph on training tasks with --teacher for the "
            "text turns and the --model policy for the SID turns; keeps traces that are well "
            "formed and, with --keep correct (default), task-correct; fine-tunes the policy on "
            "their SID and text turns. Writes traces.jsonl, mid.png (the loss) and the policy "
            "into --out."
        ),
    )
    _common(m)
    add_task_arguments(m, default="gsm8k-train")
    m.add_argument("--role", choices=("retriever", "evolver"), default="retriever")
    m.add_argument(
        "--teacher",
        default=DEFAULT_MODEL_SPEC,
        help=f"model spec of the text turns ({DEFAULT_MODEL_SPEC})",
    )
    m.add_argument(
        "--keep",
        choices=("correct", "valid"),
        default="correct",
        help="rejection rule: well formed and task-correct (default), or well formed only",
    )
    m.add_argument(
        "--limit", type=positive_int, default=MID_TASKS, help=f"training tasks ({MID_TASKS})"
    )
    m.add_argument(
        "--max-new-tokens",
        type=positive_int,
        default=TRAINING_MAX_NEW_TOKENS,
        help=f"teacher reply cap ({TRAINING_MAX_NEW_TOKENS})",
    )
    m.set_defaults(func=_mid)


def _register_reader(tsub: argparse._SubParsersAction) -> None:
    from genmem.cli.tasks import add_task_arguments
    from genmem.experiments.run_config import GraphRunConfig

    r = tsub.add_parser(
        "reader",
        help="mid-train the ranking interactor to read retrieved experience (or its control)",
        description=(
            "Plays the walkthrough of every training game the bank was not built from and, "
            "before each command, builds the ranking interactor's prompt as evaluation does, "
            "with the experience MemRetriever reads from --bank for that game (--no-memory: "
            "none, the control); fine-tunes --model to rank the walkthrough's command first. "
            "Writes steps.jsonl, reader.png (the loss) and the policy into --out; evaluate it "
            "with `genmem eval --interactor rank --reader local:OUT`. One process, every weight."
        ),
    )
    _common(r)
    add_task_arguments(r, default="cooking-train", benches=_GAME_BENCHES)
    r.add_argument(
        "--no-memory",
        dest="memory",
        action="store_false",
        help="train the control: the same steps with no experience shown",
    )
    add_field_flags(
        r,
        GraphRunConfig,
        ["candidates", "rerank", "allowed", "addresser", "memory_k", "rewrite", "max_new_tokens"],
    )
    r.set_defaults(func=_reader)


def _reader(args: argparse.Namespace) -> int:
    from genmem.experiments.reader import ReaderConfig, run_reader
    from genmem.training.distributed import launched

    if launched():
        raise CLIError("train reader runs in one process: start it without a launcher")
    preset, env = _setup_with_tasks(args, "--model", args.model)
    config = model_from_args(ReaderConfig, args, bank_url=args.bank)
    try:
        with _stdout_to_stderr():
            report = run_reader(
                env,
                config,
                Path(args.out),
                preset=preset,
                max_steps=args.train_steps,
                progress=not args.json,
            )
    except ValueError as exc:  # no game outside the bank, a preset it cannot use
        return fail(str(exc), 1)
    kind = "reader" if report.memory else "control (no experience shown)"
    text = (
        f"{kind}: {report.steps_seen} steps of {report.games} games ({len(report.left_out)} "
        f"left out: in the bank), {report.train_steps} optimiser steps in "
        f"{report.seconds:.0f} s\npolicy: {report.out} (use --interactor rank --reader "
        f"local:{report.out})"
    )
    emit(report.model_dump(mode="json"), as_json=args.json, text=text)
    return 0


def _mid(args: argparse.Namespace) -> int:
    from genmem.training.mid import run_mid

    preset, env = _setup_with_tasks(args, "--teacher", args.teacher)
    try:
        with _stdout_to_stderr():
            report = run_mid(
                args.bank,
                env,
                Path(args.out),
                preset=preset,
                role=args.role,
                model=args.model,
                teacher=args.teacher,
                keep=args.keep,
                limit=args.limit,
                max_new_tokens=args.max_new_tokens,
                max_steps=args.train_steps,
                progress=not args.json,
            )
    except ValueError as exc:  # nothing survived rejection sampling: say so, exit 1
        return fail(str(exc), 1) if _main_process() else 1
    if not _main_process():
        return 0
    text = (
        f"{report.role} traces: {report.kept} of {report.traces} kept ({report.keep}), "
        f"{report.examples} examples, {report.steps} steps in {report.seconds:.0f} s\n"
        f"policy: {report.out} (use --model local:{report.out})"
    )
    emit(report.model_dump(mode="json"), as_json=args.json, text=text)
    return 0
