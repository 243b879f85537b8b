"""Content-coupled baseline retrievers over a bank's current payloads: TF-IDF and dense (Chroma).

These are the comparison the paper runs against generative addressing. Each indexes the live
payloads of one bank, keyed by SID, and answers a query with the ``k`` (50) most similar entries
as :class:`~genmem.policies.types.SIDCandidate` lists, so their output goes through the same
:class:`~genmem.policies.rerank.Reranker` as generated SIDs. Unlike an SID, their addressing
depends on payload text: the index is a snapshot, and :meth:`rebuild` must be called whenever
the bank changes (the paper rebuilds at every evolution checkpoint).

- :class:`TfidfRetriever`: scikit-learn ``TfidfVectorizer`` (rows L2-normalised), cosine via
  ``linear_kernel``. Entries sharing no term with the query score 0 and are not returned.
- :class:`DenseRetriever`: a Chroma collection in cosine space holding embeddings from our
  encoder (Chroma's own embedding function is never used: it would download a model). Scores
  are cosine similarities, ``1 - distance``. The default encoder is MiniLM without the
  experience-addressing prefix, the same text on both sides as the reranker sees it.
"""

from __future__ import annotations

import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import numpy as np
from tqdm.auto import tqdm

from genmem.memory.encoders import Encoder, default_encoder
from genmem.policies.types import SIDCandidate

if TYPE_CHECKING:
    from genmem.memory.bank import Bank

__all__ = ["DEFAULT_K", "DenseRetriever", "TfidfRetriever"]

DEFAULT_K = 50
"""Candidate budget shared with generative retrieval (the paper's 50 before reranking)."""


def _check_k(k: object) -> int:
    """``k`` as an int >= 1, else ValueError."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r}: ask for an integer number of candidates >= 1, e.g. 50")
    return k


def _check_queries(queries: Sequence[str]) -> list[str]:
    """Queries as a list of strings (a lone string is refused, not split into characters)."""
    if isinstance(queries, str):
        raise TypeError("retrieve_batch takes a list of queries; use retrieve() for one")
    out = list(queries)
    for i, q in enumerate(out):
        if not isinstance(q, str):
            raise TypeError(f"query {i} must be a string, got {type(q).__name__}")
    return out


class _PayloadIndex(ABC):
    """What both baselines share: the bank, the indexed SIDs, build state and the public API."""

    def __init__(self, bank: Bank) -> None:
        self.bank = bank
        self._sids: list[str] = []
        self._built = False

    @classmethod
    def from_bank(cls, bank: Bank, **kwargs: Any) -> Self:
        """A retriever over ``bank``'s current payloads, built now."""
        return cls(bank, **kwargs).rebuild()

    @property
    def size(self) -> int:
        """Entries in the index (as of the last rebuild)."""
        return len(self._sids)

    @property
    def sids(self) -> list[str]:
        """Indexed SIDs in code order (as of the last rebuild)."""
        return list(self._sids)

    def rebuild(self, *, progress: bool = False) -> Self:
        """Re-read the bank's live entries and index their payloads from scratch."""
        entries = self.bank.entries()
        sids = [e.sid for e in entries]
        self._sids, self._built = [], False  # a failed rebuild leaves no stale index behind
        self._index(sids, [e.payload for e in entries], progress=progress)
        self._sids, self._built = sids, True
        return self

    def retrieve(self, query: str, k: int = DEFAULT_K) -> list[SIDCandidate]:
        """Up to ``k`` entries most similar to ``query``, best first."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        return self.retrieve_batch([query], k)[0]

    def retrieve_batch(
        self, queries: Sequence[str], k: int = DEFAULT_K
    ) -> list[list[SIDCandidate]]:
        """:meth:`retrieve` for several queries (queries encoded together), in order."""
        k = _check_k(k)
        qs = _check_queries(queries)
        if not self._built:
            raise RuntimeError(
                f"{type(self).__name__} has no index yet; call rebuild() or use from_bank()"
            )
        if not qs:
            return []
        if not self._sids:
            return [[] for _ in qs]
        return self._search(qs, min(k, len(self._sids)))

    def close(self) -> None:  # noqa: B027 - only the dense index holds a resource
        """Release what the index holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def _index(self, sids: list[str], payloads: list[str], *, progress: bool) -> None:
        """Replace the index with these entries."""

    @abstractmethod
    def _search(self, queries: list[str], k: int) -> list[list[SIDCandidate]]:
        """The top ``k`` (at most the index size) per query, on a non-empty index."""


class TfidfRetriever(_PayloadIndex):
    """TF-IDF cosine retrieval over a bank's payloads (scikit-learn, exact, in memory)."""

    def __init__(self, bank: Bank, **vectorizer_kwargs: Any) -> None:
        """Keyword arguments go to ``TfidfVectorizer`` (its defaults otherwise; norm stays l2)."""
        super().__init__(bank)
        if vectorizer_kwargs.get("norm", "l2") != "l2":
            raise ValueError(
                f"norm={vectorizer_kwargs['norm']!r}: cosine via linear_kernel needs "
                "L2-normalised rows; leave norm unset"
            )
        self._kwargs = vectorizer_kwargs
        self._vectorizer: Any = None
        self._matrix: Any = None

    def __repr__(self) -> str:
        return f"TfidfRetriever({self.bank.bank_id!r}, size={self.size})"

    def _index(self, sids: list[str], payloads: list[str], *, progress: bool) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._vectorizer, self._matrix = None, None
        if not payloads:
            return
        vectorizer = TfidfVectorizer(**self._kwargs)
        docs = tqdm(payloads, desc="tf-idf index", unit="entry", disable=not progress)
        try:
            self._matrix = vectorizer.fit_transform(docs)
        except ValueError:
            # No indexable term in any payload (e.g. only punctuation): nothing can match.
            return
        self._vectorizer = vectorizer

    def _search(self, queries: list[str], k: int) -> list[list[SIDCandidate]]:
        from sklearn.metrics.pairwise import linear_kernel

        if self._vectorizer is None:
            return [[] for _ in queries]
        # Sparse x sparse: only the entries sharing a term with a query are ever touched.
        sims = linear_kernel(self._vectorizer.transform(queries), self._matrix, dense_output=False)
        sims = sims.tocsr()
        out = []
        for r in range(sims.shape[0]):
            row = sims.getrow(r)
            keep = row.data > 0
            cols, scores = row.indices[keep], row.data[keep]
            # Highest score first; equal scores keep code order, so results are deterministic.
            top = np.lexsort((cols, -scores))[:k]
            out.append([SIDCandidate(sid=self._sids[cols[i]], score=float(scores[i])) for i in top])
        return out


class DenseRetriever(_PayloadIndex):
    """Dense retrieval over a bank's payloads in a Chroma collection (cosine space).

    ``path`` None keeps the collection in memory (``EphemeralClient``); a directory uses a
    ``PersistentClient`` there. Each instance owns one uniquely named collection, deleted by
    :meth:`close` (also on leaving a ``with`` block).
    """

    def __init__(
        self,
        bank: Bank,
        *,
        encoder: Encoder | None = None,
        path: str | os.PathLike[str] | None = None,
        batch_size: int = 64,
    ) -> None:
        """``encoder`` embeds payloads and queries alike (None: MiniLM, loaded on first use)."""
        super().__init__(bank)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be an integer >= 1")
        self._encoder = encoder
        self.batch_size = batch_size
        self.path = None if path is None else Path(path)
        self.collection_name = f"genmem-dense-{uuid.uuid4().hex}"
        self._client: Any = None
        self._collection: Any = None

    def __repr__(self) -> str:
        where = "memory" if self.path is None else str(self.path)
        return f"DenseRetriever({self.bank.bank_id!r}, size={self.size}, chroma={where})"

    @property
    def encoder(self) -> Encoder:
        """The encoder (MiniLM without prefix unless one was passed; loaded on first access)."""
        if self._encoder is None:
            self._encoder = default_encoder(prefix=None)
        return self._encoder

    def _chroma(self) -> Any:
        """The Chroma client (made on first use, telemetry off)."""
        if self._client is None:
            os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
            import chromadb
            from chromadb.config import Settings

            settings = Settings(anonymized_telemetry=False)
            if self.path is None:
                self._client = chromadb.EphemeralClient(settings=settings)
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                self._client = chromadb.PersistentClient(path=str(self.path), settings=settings)
        return self._client

    def _drop_collection(self) -> None:
        if self._collection is not None:
            self._client.delete_collection(self.collection_name)
            self._collection = None

    def _index(self, sids: list[str], payloads: list[str], *, progress: bool) -> None:
        client = self._chroma()
        self._drop_collection()
        # ef_search above the candidate budget keeps HNSW's top 50 close to exact.
        self._collection = client.create_collection(
            self.collection_name,
            configuration={"hnsw": {"space": "cosine", "ef_search": 200}},
            embedding_function=None,
        )
        if not payloads:
            return
        step = min(client.get_max_batch_size(), self.batch_size * 16)
        bar = tqdm(total=len(payloads), desc="dense index", unit="entry", disable=not progress)
        with bar:
            for start in range(0, len(payloads), step):
                chunk = payloads[start : start + step]
                vecs = self.encoder.encode(chunk, batch_size=self.batch_size)
                self._collection.add(ids=sids[start : start + step], embeddings=vecs)
                bar.update(len(chunk))

    def _search(self, queries: list[str], k: int) -> list[list[SIDCandidate]]:
        vecs = self.encoder.encode(queries, batch_size=self.batch_size)
        res = self._collection.query(query_embeddings=vecs, n_results=k, include=["distances"])
        return [
            [
                SIDCandidate(sid=sid, score=1.0 - float(dist))
                for sid, dist in zip(ids, dists, strict=True)
            ]
            for ids, dists in zip(res["ids"], res["distances"], strict=True)
        ]

    def close(self) -> None:
        """Delete this instance's collection (the client and other collections stay)."""
        if self._client is not None:
            self._drop_collection()
        self._sids, self._built = [], False
