"""How the bank explorer serves a bank: its settings, light enough for the CLI's parser to read
their defaults without importing the web stack."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from genmem.memory.gate import DEFAULT_GATE, GateConfig

__all__ = ["LOOPBACK_HOSTS", "MAX_PAGE_SIZE", "ExplorerConfig"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
MAX_PAGE_SIZE = 500
"""The most rows one page (or API answer) holds."""


@dataclass(frozen=True, kw_only=True)
class ExplorerConfig:
    """How the explorer serves a bank."""

    allow_writes: bool = False
    """Offer revise and delete; off by default, so a served bank cannot change."""
    runs: Path | None = None
    """An evolution run folder (or a folder of runs) whose plots and summary to show."""
    gate: GateConfig | None = DEFAULT_GATE
    """Thresholds of the write gate every revision passes (None: no gate, as --no-gate)."""
    host: str = "127.0.0.1"
    """The interface served; on a loopback one, requests for other host names are refused."""
    page_size: int = 50
    """Rows per page when a request names no ``limit``."""
    actor: str = "explorer"
    """Actor recorded in the log for writes made here."""
    index_max_age: float = 60.0
    """Seconds a TF-IDF index that the bank has moved past may still answer text searches."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """Secret that form posts must carry (fresh per process)."""

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise ValueError(f"page_size {self.page_size} must be in 1..{MAX_PAGE_SIZE}")
