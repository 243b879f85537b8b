"""Where codebooks are kept by content hash, so any process on this machine can quantise for a bank.

A bank records only its codebooks' hash. Every set of codebooks GenMem saves or loads is also
kept (once, a copy of about a hundred kilobytes) under ``$GENMEM_CACHE/codebooks/<hash>``:
:meth:`Codebooks.recall <genmem.memory.rqkmeans.Codebooks.recall>` finds them again from a
bank's hash. This is what lets the quantizer address a bank by default (the paper's cold-start
path) in a served graph, which has only a bank URL.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["registry_path", "registry_root"]


def registry_root() -> Path:
    """``$GENMEM_CACHE/codebooks`` (``~/.cache/genmem/codebooks`` by default)."""
    cache = os.environ.get("GENMEM_CACHE") or Path.home() / ".cache" / "genmem"
    return Path(cache) / "codebooks"


def registry_path(codebook_hash: str) -> Path:
    """The folder that holds (or would hold) the codebooks with this content hash."""
    return registry_root() / codebook_hash
