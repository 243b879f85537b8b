"""The ``genmem`` command: the demo, closed-loop runs, codebooks, banks, SIDs, evaluation."""

from __future__ import annotations

import argparse
import os
import sys

from genmem import __version__
from genmem._cli_common import CLIError, fail
from genmem.errors import GenMemError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (every sub-command has ``--help``)."""
    from genmem import (
        _cli_bank,
        _cli_codebook,
        _cli_demo,
        _cli_eval,
        _cli_evolve,
        _cli_run,
        _cli_sid,
        _cli_train,
    )

    parser = argparse.ArgumentParser(
        prog="genmem",
        description="Generative symbolic experience memory for LangGraph agents.",
    )
    parser.add_argument("--version", action="version", version=f"genmem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _cli_demo.register(sub)
    _cli_run.register(sub)
    _cli_codebook.register(sub)
    _cli_bank.register(sub)
    _cli_sid.register(sub)
    _cli_eval.register(sub)
    _cli_evolve.register(sub)
    _cli_train.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (2 usage, 1 error, 0 success)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever downloaded at run time
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CLIError as exc:
        return fail(str(exc), 2)
    except GenMemError as exc:
        return fail(str(exc), 1)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        return fail(str(exc), 1)
    except KeyboardInterrupt:
        return fail("interrupted", 130)


if __name__ == "__main__":
    sys.exit(main())
