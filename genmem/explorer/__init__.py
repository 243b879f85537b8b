"""The bank explorer: a local web page and JSON API over any bank (``genmem bank serve``).

Names are imported on first use, so the CLI's parser can read :class:`ExplorerConfig`'s defaults
without loading the web stack."""

from __future__ import annotations

from typing import TYPE_CHECKING

from genmem._lazy import lazy_exports

if TYPE_CHECKING:
    from genmem.explorer.app import create_app
    from genmem.explorer.config import LOOPBACK_HOSTS, ExplorerConfig
    from genmem.explorer.diff import DiffSegment, word_diff
    from genmem.explorer.runs import Run, find_runs
    from genmem.explorer.view import BankView, EventFilter, EventPage

_EXPORTS = {
    "LOOPBACK_HOSTS": "genmem.explorer.config",
    "ExplorerConfig": "genmem.explorer.config",
    "create_app": "genmem.explorer.app",
    "DiffSegment": "genmem.explorer.diff",
    "word_diff": "genmem.explorer.diff",
    "Run": "genmem.explorer.runs",
    "find_runs": "genmem.explorer.runs",
    "BankView": "genmem.explorer.view",
    "EventFilter": "genmem.explorer.view",
    "EventPage": "genmem.explorer.view",
}
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
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
