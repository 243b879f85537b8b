"""The ``genmem`` parser and entry point: one sub-command group per module of this package."""

from __future__ import annotations

import argparse
import os

from genmem._version import __version__
from genmem.cli.common import CLIError, fail
from genmem.errors import GenMemError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (every sub-command has ``--help``)."""
    from genmem.cli.bank import register as register_bank
    from genmem.cli.benches import register as register_benches
    from genmem.cli.codebook import register as register_codebook
    from genmem.cli.demo import register as register_demo
    from genmem.cli.eval import register as register_eval
    from genmem.cli.evolve import register as register_evolve
    from genmem.cli.experiment import register as register_experiment
    from genmem.cli.run import register as register_run
    from genmem.cli.serve import register as register_serve
    from genmem.cli.sid import register as register_sid
    from genmem.cli.train import register as register_train

    parser = argparse.ArgumentParser(
        prog="genmem",
        description="Generative symbolic experience memory for LangGraph agents.",
    )
    parser.add_argument("--version", action="version", version=f"genmem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register_demo(sub)
    register_run(sub)
    register_codebook(sub)
    register_bank(sub)
    register_benches(sub)
    register_sid(sub)
    register_eval(sub)
    register_evolve(sub)
    register_experiment(sub)
    register_train(sub)
    register_serve(sub)
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
    finally:
        from genmem.training.distributed import end_processes

        end_processes()  # a launched training run leaves its process group before exiting
