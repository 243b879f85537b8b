"""Deterministic fakes shared by the test suite (one module, grouped by what they stand in for)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from genmem.memory.encoders import format_for_encoding

__all__ = ["HashEncoder", "clustered_embeddings", "gsm8k_texts"]

_GSM8K = Path(__file__).resolve().parents[1] / "genmem" / "envs" / "data" / "gsm8k" / "train.jsonl"


# --- encoders -----------------------------------------------------------------------------------


class HashEncoder:
    """An :class:`~genmem.memory.encoders.Encoder` whose vector is a pure function of the text.

    Each (prefixed) text seeds a generator with its sha256, so equal texts give equal unit
    vectors and different texts give unrelated ones; nothing is loaded.
    """

    def __init__(self, dim: int = 32, *, prefix: str | None = None) -> None:
        self._dim = dim
        self.prefix = prefix

    @property
    def id(self) -> str:
        """Spec-like name of the fake."""
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return self._dim

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False
    ) -> np.ndarray:
        """Unit float32 rows, one per text."""
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            full = format_for_encoding(text, self.prefix).encode()
            seed = int.from_bytes(hashlib.sha256(full).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=self._dim)
            out[i] = v / np.linalg.norm(v)
        return out


# --- embedding data -----------------------------------------------------------------------------


def clustered_embeddings(
    n: int = 600, d: int = 16, *, clusters: int = 12, skew: float = 0.0, seed: int = 0
) -> np.ndarray:
    """Unit float32 rows around ``clusters`` centres; ``skew > 0`` makes cluster sizes Zipf-like.

    Cluster ``k`` gets weight ``(k + 1) ** -skew``, so ``skew=2`` puts most rows in a few
    clusters (the data a size-balanced assignment should spread out).
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d))
    weights = (np.arange(clusters) + 1.0) ** -skew
    labels = rng.choice(clusters, size=n, p=weights / weights.sum())
    x = centres[labels] + 0.3 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def gsm8k_texts(n: int) -> list[str]:
    """The first ``n`` shipped GSM8K problems as ``question + answer`` texts (real text data)."""
    out = []
    with _GSM8K.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out.append(f"{row['question']}\n{row['answer']}")
            if len(out) == n:
                break
    return out
