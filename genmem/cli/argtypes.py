"""What argparse reads (integers and numbers with a lower bound) and the usage error of a
command: the pieces every ``genmem`` command module and the field flags share."""

from __future__ import annotations

import argparse

__all__ = ["CLIError", "nonnegative_int", "positive_float", "positive_int"]


class CLIError(Exception):
    """A bad command-line input found after parsing; printed as one line, exit code 2."""


def _int_at_least(value: str, low: int) -> int:
    """``value`` as an integer >= ``low``, or argparse's error naming both."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if n < low:
        raise argparse.ArgumentTypeError(f"{value!r} must be >= {low}")
    return n


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(value, 1)


def nonnegative_int(value: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(value, 0)


def positive_float(value: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        x = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not (x > 0 and x != float("inf")):
        raise argparse.ArgumentTypeError(f"{value!r} must be a finite number > 0")
    return x
