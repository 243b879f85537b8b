"""Codebooks by content hash, so any process on this machine can quantise for a bank.

A bank records only its codebooks' hash. Every set of codebooks GenMem saves or loads is also
kept (once, a copy of about a hundred kilobytes) under ``$GENMEM_CACHE/codebooks/<hash>``;
:func:`recall` finds them again from a bank's hash. This is what lets the quantizer address a
bank by default (the paper's cold-start path) in a served graph, which has only a bank URL.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from genmem.errors import CodebookError

if TYPE_CHECKING:
    from genmem.memory.rqkmeans import Codebooks

__all__ = ["recall", "registry_root", "remember"]


def registry_root() -> Path:
    """``$GENMEM_CACHE/codebooks`` (``~/.cache/genmem/codebooks`` by default)."""
    cache = os.environ.get("GENMEM_CACHE") or Path.home() / ".cache" / "genmem"
    return Path(cache) / "codebooks"


def remember(codebooks: Codebooks) -> Path | None:
    """Keep a copy of ``codebooks`` by hash (None when the cache cannot be written)."""
    target = registry_root() / codebooks.hash
    if (target / "metadata.json").is_file():
        return target
    try:
        return codebooks.save(target, remember=False)
    except (OSError, CodebookError):  # a read-only cache or a concurrent copy: not an error
        return target if (target / "metadata.json").is_file() else None


def recall(codebook_hash: str) -> Codebooks | None:
    """The codebooks with this content hash, if this machine has seen them."""
    from genmem.memory.rqkmeans import Codebooks

    target = registry_root() / codebook_hash
    if not (target / "metadata.json").is_file():
        return None
    codebooks = Codebooks.load(target, remember=False)
    return codebooks if codebooks.hash == codebook_hash else None
