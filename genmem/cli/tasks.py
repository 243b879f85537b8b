"""Where a command's tasks come from: a bench of the registry (``--bench``) or a task file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from genmem.cli.common import CLIError, positive_int

__all__ = [
    "add_env_options",
    "add_task_arguments",
    "check_task_source",
    "environment",
    "first_error",
]


def add_env_options(p: argparse.ArgumentParser) -> None:
    """``--format`` and what some environments need: search, WebShop, ALFWorld, TextWorld."""
    from genmem.envs.benches import FORMATS

    p.add_argument("--format", choices=FORMATS, help="format of --data (default: detected)")
    p.add_argument("--corpus", help='QA search: corpus JSONL of {"id", "title", "text"} (BM25)')
    p.add_argument("--search-url", help="QA search: a Search-R1 retrieval server instead")
    p.add_argument("--search-k", type=positive_int, default=3, help="passages per search (3)")
    p.add_argument("--webshop-url", help="WebShop server (default $WEBSHOP_URL)")
    p.add_argument("--alfworld-data", help="ALFWorld data folder (default $ALFWORLD_DATA)")
    p.add_argument("--games", type=positive_int, default=10, help="TextWorld games (10)")
    p.add_argument("--seed", type=int, default=0, help="TextWorld set / option shuffle seed (0)")


def add_task_arguments(
    p: argparse.ArgumentParser,
    *,
    default: str | None = None,
    benches: tuple[str, ...] | None = None,
    env_options: bool = True,
    data_help: str = "a task file (JSONL, or CSV for GPQA)",
    old_split: str = "test",
) -> argparse._MutuallyExclusiveGroup:
    """``--bench NAME | --data FILE`` (one of them required unless ``default`` names a bench).

    ``benches`` narrows the names a command takes (all of ``genmem benches`` otherwise). The old
    ``--dataset NAME [--split S]`` are kept, hidden, to exit 2 naming the bench they meant.
    ``old_split`` is the split the command's old ``--split`` defaulted to. Returns the group,
    for a command with one more source of its own.
    """
    from genmem.envs.benches import BENCHES

    names = benches or tuple(BENCHES)
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--bench",
        choices=names,
        default=default,
        metavar="NAME",
        help="a bundled benchmark (`genmem benches` lists them): "
        + ", ".join(names)
        + (f" (default {default})" if default else ""),
    )
    src.add_argument("--data", help=data_help)
    p.add_argument("--dataset", dest="old_dataset", help=argparse.SUPPRESS)
    p.add_argument("--split", dest="old_split", help=argparse.SUPPRESS)
    p.set_defaults(bench_required=default is None, old_default_split=old_split)
    if env_options:
        add_env_options(p)
    return src


def check_task_source(args: argparse.Namespace) -> None:
    """Refuse the old spellings (naming the new one) and a command given no tasks (CLIError)."""
    from genmem.envs.benches import new_bench_name

    if args.old_dataset or args.old_split:
        bench = new_bench_name(
            args.old_dataset or "gsm8k", args.old_split or args.old_default_split
        )
        old = " ".join(
            f"{flag} {value}"
            for flag, value in (("--dataset", args.old_dataset), ("--split", args.old_split))
            if value
        )
        raise CLIError(f"{old} is now spelled --bench {bench} (`genmem benches` lists them)")
    if args.bench_required and not (args.bench or args.data or getattr(args, "pairs", None)):
        sources = ["--bench NAME (see `genmem benches`)", "--data FILE"]
        sources += ["--pairs FILE"] if hasattr(args, "pairs") else []
        raise CLIError(f"give {', '.join(sources[:-1])} or {sources[-1]}")


def first_error(exc: ValueError) -> str:
    """A pydantic validation error as one line (other errors as they are)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(str(e.get("msg", e)).removeprefix("Value error, ") for e in errors())
    return str(exc)


def _options(args: argparse.Namespace) -> Any:
    from genmem.envs.benches import BenchOptions

    try:
        return BenchOptions(
            corpus=Path(args.corpus) if args.corpus else None,
            search_url=args.search_url,
            search_k=args.search_k,
            webshop_url=args.webshop_url,
            alfworld_data=Path(args.alfworld_data) if args.alfworld_data else None,
            games=args.games,
            seed=args.seed,
        )
    except ValueError as exc:
        raise CLIError(first_error(exc)) from None


def environment(args: argparse.Namespace) -> Any:
    """The environment that ``--bench`` or ``--data`` names."""
    from genmem.envs.benches import open_bench, open_data

    check_task_source(args)
    options = _options(args)
    if args.bench and not args.data:
        if args.format:
            raise CLIError("--format describes --data; a named bench knows its format")
        return open_bench(args.bench, options)  # what a bench needs and lacks: exit 1
    try:
        return open_data(args.data, args.format, options)
    except (FileNotFoundError, ValueError) as exc:  # a wrong file: usage
        raise CLIError(str(exc)) from None
