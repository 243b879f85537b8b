"""The bank explorer: a local web page and JSON API over any bank (``genmem bank serve``)."""

from __future__ import annotations

from genmem.explorer.app import LOOPBACK_HOSTS, ExplorerConfig, create_app
from genmem.explorer.diff import DiffSegment, word_diff
from genmem.explorer.runs import Run, find_runs
from genmem.explorer.view import BankView, EventFilter, EventPage

__all__ = [
    "LOOPBACK_HOSTS",
    "BankView",
    "DiffSegment",
    "EventFilter",
    "EventPage",
    "ExplorerConfig",
    "Run",
    "create_app",
    "find_runs",
    "word_diff",
]
