"""Where a command's tasks come from: a bench of the registry (``--bench``) or a task file.

The ``--bench`` choices and the flags of the environments' options (``--corpus``, ``--games``,
...) are read off the environment registry (:mod:`genmem.envs.benches`) when the parser is built.
"""

from __future__ import annotations

import argparse
from typing import Any

from genmem.cli.common import CLIError
from genmem.cli.fields import add_field_flag

__all__ = [
    "add_env_options",
    "add_task_arguments",
    "check_task_source",
    "environment",
    "first_error",
]


def add_env_options(p: argparse.ArgumentParser) -> None:
    """``--format`` and one flag per option of the registered environments (``search_k``:
    ``--search-k``), made from the option's field (:mod:`genmem.cli.fields`)."""
    from genmem.envs.benches import FORMATS, option_fields

    p.add_argument("--format", choices=FORMATS, help="format of --data (default: detected)")
    for name, field in option_fields().items():
        add_field_flag(p, name, field)


def add_task_arguments(
    p: argparse.ArgumentParser,
    *,
    default: str | None = None,
    benches: tuple[str, ...] | None = None,
    env_options: bool = True,
    data_help: str = "a task file (JSONL, or CSV for GPQA)",
) -> argparse._MutuallyExclusiveGroup:
    """``--bench NAME | --data FILE`` (one of them required unless ``default`` names a bench).

    ``benches`` narrows the names a command takes (all of ``genmem benches`` otherwise). Returns
    the group, for a command with one more source of its own.
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
    p.set_defaults(bench_required=default is None)
    if env_options:
        add_env_options(p)
    return src


def check_task_source(args: argparse.Namespace) -> None:
    """Refuse a command given no tasks (CLIError)."""
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
    from genmem.envs.benches import BenchOptions, option_fields

    given = {n: getattr(args, n) for n in option_fields() if hasattr(args, n)}
    try:
        return BenchOptions(**{n: v for n, v in given.items() if v != ""})  # "": not given
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
