"""Helpers shared by the `genmem` sub-commands: JSON output, readable input files, errors."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from genmem.cli.argtypes import CLIError, nonnegative_int, positive_float, positive_int
from genmem.cli.fields import add_field_flags, field_help
from genmem.experiments.run_config import GraphRunConfig
from genmem.graph.stack import DEFAULT_MAX_STEPS

__all__ = [
    "CLIError",
    "add_addresser_argument",
    "add_budget_arguments",
    "add_concurrency_argument",
    "add_gate_argument",
    "add_sid_model_argument",
    "check_concurrency",
    "emit",
    "fail",
    "gate_config",
    "gate_summary",
    "iter_jsonl",
    "nonnegative_int",
    "positive_float",
    "positive_int",
    "read_text_jsonl",
]


def emit(obj: Any, *, as_json: bool, text: str | None = None) -> None:
    """Print ``obj`` as JSON (for scripts) or ``text`` (for people)."""
    if as_json:
        print(json.dumps(obj, ensure_ascii=False, default=str))
    else:
        print(text if text is not None else json.dumps(obj, indent=2, ensure_ascii=False))


def addressing(model: str, sid_model: str | None) -> Any:
    """:func:`genmem.graph.addressing.addressing_for` for ``--model`` and ``--sid-model``; a
    spec that cannot address is a usage error (exit 2)."""
    from genmem.errors import InvalidModelSpec
    from genmem.graph.addressing import addressing_for

    try:
        return addressing_for(model, sid_model)
    except InvalidModelSpec as exc:
        raise CLIError(str(exc)) from None


def sid_generator(spec: str, bank: Any, **kwargs: Any) -> Any:
    """:func:`genmem.policies.addressing.sid_generator_for`; a spec that cannot address this way
    is a usage error (exit 2)."""
    from genmem.errors import InvalidModelSpec
    from genmem.policies.addressing import sid_generator_for

    try:
        return sid_generator_for(spec, bank, **kwargs)
    except InvalidModelSpec as exc:
        raise CLIError(str(exc)) from None


def add_budget_arguments(p: argparse.ArgumentParser, *, max_steps: int = DEFAULT_MAX_STEPS) -> None:
    """``--max-steps``, ``--max-new-tokens`` and ``--allowed``: the budgets of a graph run
    (fields of :class:`~genmem.experiments.run_config.GraphRunConfig`); ``max_steps``: a
    command's own default step budget."""
    steps = GraphRunConfig.model_fields["max_steps"]
    own_help = f"{field_help(steps, default=False)} (default {max_steps})"
    own = {"default": max_steps, "help": own_help}
    add_field_flags(
        p,
        GraphRunConfig,
        ["max_steps", "max_new_tokens", "allowed"],
        overrides={"max_steps": own} if max_steps != steps.default else None,
    )


def add_interactor_argument(p: argparse.ArgumentParser) -> None:
    """``--interactor``, ``--reader``, ``--rank-score``, ``--prior-weight`` and ``--writer``: how
    the game-playing sub-agent acts and who writes what it learnt (the same in every command)."""
    add_field_flags(
        p,
        GraphRunConfig,
        ["interactor", "reader", "rank_score", "prior_weight", "writer", "rewrite"],
    )


def check_interactor(args: argparse.Namespace) -> None:
    """``--interactor rank`` scores replies with a local model's weights: refuse a served one,
    and a ``--reader`` without the ranking interactor that would use it."""
    from genmem.policies.addressing import is_local_spec

    reader = getattr(args, "reader", None)
    ranks = getattr(args, "interactor", "tools") == "rank"
    if reader and not ranks:
        raise CLIError(
            f"--reader {reader!r} scores the commands of --interactor rank; add --interactor rank "
            "(the tool-calling interactor writes its commands with --model)"
        )
    flag, spec = ("--reader", reader) if reader else ("--model", args.model)
    if ranks and not is_local_spec(spec):
        raise CLIError(
            f"--interactor rank scores commands with a local model's likelihood; {flag} "
            f"{spec!r} is served. Use {flag} local (or local:DIR), or --interactor tools"
        )


def add_concurrency_argument(p: argparse.ArgumentParser) -> None:
    """``--concurrency N``: how many tasks run at once (one flag, one help, every command)."""
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=1,
        metavar="N",
        help="tasks run at once (default 1: one after another, in order); records are the same "
        "either way. It pays with a served model (genmem serve, vllm:URL#MODEL, an API): the "
        "local model answers one call at a time. Games and WebShop (one episode at a time) and "
        "a sampling local model still run one task at a time, with a warning",
    )


def add_addresser_argument(p: argparse.ArgumentParser) -> None:
    """``--addresser``: what chooses SIDs (the same meaning in every command)."""
    add_field_flags(p, GraphRunConfig, ["addresser"])


def add_distill_argument(p: argparse.ArgumentParser) -> None:
    """``--distill``: who writes a GSM8K seed bank's experiences (the same in every command)."""
    from genmem.experiments.seed_bank import DEFAULT_DISTILL

    p.add_argument(
        "--distill",
        choices=("procedure", "reference", "abstract", "model"),
        default=DEFAULT_DISTILL,
        help="who writes the seed experiences: the procedure of each reference solution without "
        "its problem text (procedure, default), the same with the problem (reference), the "
        "procedure with names and numbers as placeholders A, n1 (abstract), or the default "
        "model, one lesson per problem (model: slower, and the write gate refuses most of what "
        "a 135M model writes)",
    )


def add_source_argument(p: argparse.ArgumentParser) -> None:
    """``--source``: what a seed bank is built from (the same in every command): an environment
    that can seed one (``genmem.envs.benches.seed_sources``)."""
    from genmem.envs.benches import seed_sources
    from genmem.experiments.seed_bank import DEFAULT_SOURCE

    sources = seed_sources()
    about = "; ".join(
        f"{name}: {s.about}" + (" (--distill abstract only)" if s.write is not None else "")
        for name, s in sources.items()
    )
    p.add_argument(
        "--source",
        choices=list(sources),
        default=DEFAULT_SOURCE,
        help=f"where the seed experiences come from (default {DEFAULT_SOURCE}). {about}",
    )


def add_gate_argument(p: argparse.ArgumentParser) -> None:
    """``--no-gate``: write without the write gate (the same meaning in every command)."""
    p.add_argument(
        "--no-gate",
        action="store_true",
        help="write every payload, junk included: skip the write gate that refuses empty, "
        "symbol-only, repetitive, field-name, markup and ungrounded payloads (on by default)",
    )


def gate_config(args: argparse.Namespace) -> Any:
    """The gate thresholds ``--no-gate`` leaves in force (None: no gate)."""
    from genmem.memory.gate import DEFAULT_GATE

    return None if getattr(args, "no_gate", False) else DEFAULT_GATE


def gate_summary(rejected: dict[str, int]) -> str:
    """``write gate refused 3 (symbols 2, empty 1)`` for people."""
    total = sum(rejected.values())
    if not total:
        return "write gate refused none"
    parts = ", ".join(f"{k} {n}" for k, n in sorted(rejected.items(), key=lambda kv: -kv[1]))
    return f"write gate refused {total} ({parts})"


def check_concurrency(args: argparse.Namespace) -> None:
    """Refuse ``--concurrency`` > 1 with ``--mode evolve`` (CLIError): updates land in order."""
    if args.concurrency > 1 and args.mode == "evolve":
        raise CLIError(
            f"--concurrency {args.concurrency} with --mode evolve: each update must land before "
            "the next task reads the bank; use --mode read_only, or --concurrency 1"
        )


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line; bad lines raise CLIError."""
    from genmem.envs.bundled import read_jsonl

    p = Path(path)
    if not p.is_file():
        raise CLIError(f"input file {str(p)!r} does not exist")
    try:
        yield from read_jsonl(p)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def read_text_jsonl(path: str | Path, field: str = "text") -> list[dict[str, Any]]:
    """Read a JSONL whose every object has a non-empty string ``field``."""
    rows = []
    for lineno, obj in iter_jsonl(path):
        value = obj.get(field)
        if not isinstance(value, str) or not value.strip():
            raise CLIError(f"{path}:{lineno}: needs a non-empty string field {field!r}")
        rows.append(obj)
    if not rows:
        raise CLIError(f"input file {str(path)!r} holds no records")
    return rows


def fail(message: str, code: int = 1) -> int:
    """Print one error line to stderr and return the exit code."""
    print(f"genmem: error: {message}", file=sys.stderr)
    return code


def add_sid_model_argument(p: argparse.ArgumentParser) -> None:
    """``--sid-model``: the policy that decodes SIDs when it is not the chat model."""
    p.add_argument(
        "--sid-model",
        help="the addressing policy that decodes SIDs: local or local:DIR (default: the --model "
        "policy when it is local, else local)",
    )
