"""Where a command's tasks come from: a bench, a bundled dataset split, or a task file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from genmem.cli.common import CLIError, positive_int

__all__ = ["add_dataset_arguments", "add_env_options", "environment", "first_error"]


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


def add_dataset_arguments(
    p: argparse.ArgumentParser, *, default_split: str, default_dataset: str | None = None
) -> None:
    """``--dataset NAME [--split S] | --data FILE`` (one required unless a default dataset)."""
    from genmem.envs.benches import DATASETS

    names = ", ".join(f"{k} ({'/'.join(v)})" for k, v in DATASETS.items())
    src = p.add_mutually_exclusive_group(required=default_dataset is None)
    src.add_argument(
        "--dataset",
        choices=tuple(DATASETS),
        default=default_dataset,
        help=f"a bundled dataset: {names}"
        + (f" (default {default_dataset})" if default_dataset else ""),
    )
    src.add_argument("--data", help="a task file (JSONL, or CSV for GPQA)")
    p.add_argument("--split", default=default_split, help=f"split of --dataset ({default_split})")
    add_env_options(p)


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
    """The environment that ``--bench``, ``--dataset``/``--split`` or ``--data`` names."""
    from genmem.envs.benches import open_bench, open_data, open_dataset

    options = _options(args)
    dataset = None if getattr(args, "data", None) else getattr(args, "dataset", None)
    named = getattr(args, "bench", None) or dataset
    if named and args.format:
        raise CLIError("--format describes --data; a named bench or dataset knows its format")
    if getattr(args, "bench", None):  # what a bench needs and lacks is an error (exit 1)
        return open_bench(args.bench, options)
    try:
        if dataset:
            return open_dataset(args.dataset, args.split, options)
        return open_data(args.data, args.format, options)
    except (FileNotFoundError, ValueError) as exc:  # a wrong name, split or file: usage
        raise CLIError(str(exc)) from None
