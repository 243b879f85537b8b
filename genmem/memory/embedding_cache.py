"""An encoder wrapper that embeds each distinct text once, in memory and optionally on disk.

Dense baselines re-index a bank's payloads whenever it changes, and every evaluation run
indexes the same bank again; on a CPU a 2,000-entry bank of long payloads takes a minute and a
half to embed. :class:`CachedEncoder` keys each vector by a hash of the encoder id, its prefix
and the text, so only new or changed texts reach the model. With ``path`` the vectors are also
kept in a SQLite file shared between runs (safe for concurrent readers and writers).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from genmem.memory.encoders import Encoder

__all__ = ["CachedEncoder"]


class CachedEncoder:
    """An :class:`~genmem.memory.encoders.Encoder` that reuses vectors it has computed before."""

    def __init__(self, encoder: Encoder, path: str | os.PathLike[str] | None = None) -> None:
        """Wrap ``encoder``; ``path`` is a SQLite file for vectors kept between processes."""
        self.encoder = encoder
        self.path = None if path is None else Path(path)
        self.hits = 0
        self.misses = 0
        self._memory: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._salt = f"{encoder.id}\0{getattr(encoder, 'prefix', None)}\0{encoder.dim}\0"
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, v BLOB)")

    def __repr__(self) -> str:
        return f"CachedEncoder({self.encoder!r}, path={self.path}, cached={len(self._memory)})"

    @property
    def id(self) -> str:
        """The wrapped encoder's id."""
        return self.encoder.id

    @property
    def dim(self) -> int:
        """The wrapped encoder's dimension."""
        return self.encoder.dim

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("PRAGMA journal_mode=WAL")
        return db

    def _key(self, text: str) -> str:
        return hashlib.sha256((self._salt + text).encode()).hexdigest()

    def _load(self, keys: list[str]) -> None:
        """Move vectors of ``keys`` from the file into memory."""
        if self.path is None or not keys:
            return
        with self._connect() as db:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = db.execute(f"SELECT key, v FROM vectors WHERE key IN ({marks})", chunk)
                for key, blob in rows:
                    self._memory[key] = np.frombuffer(blob, dtype=np.float32)

    def _store(self, items: list[tuple[str, np.ndarray]]) -> None:
        if self.path is None or not items:
            return
        with self._connect() as db:
            db.executemany(
                "INSERT OR IGNORE INTO vectors (key, v) VALUES (?, ?)",
                [(k, v.astype(np.float32).tobytes()) for k, v in items],
            )

    def encode(
        self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False
    ) -> np.ndarray:
        """Embed ``texts``; texts seen before (by this process or, with a file, any) are free."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts; wrap a single text in a list")
        keys = [self._key(t) for t in texts]
        with self._lock:
            self._load([k for k in dict.fromkeys(keys) if k not in self._memory])
            todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._memory}
            self.hits += len(keys) - len(todo)
            self.misses += len(todo)
            if todo:
                vecs = self.encoder.encode(
                    list(todo.values()), batch_size=batch_size, progress=progress
                )
                fresh = list(zip(todo, np.asarray(vecs, dtype=np.float32), strict=True))
                self._memory.update(fresh)
                self._store(fresh)
            if not keys:
                return np.zeros((0, self.dim), dtype=np.float32)
            return np.stack([self._memory[k] for k in keys]).astype(np.float32, copy=False)
