"""Reranking protocol shared by every retriever, and the hit rates measured around it.

Whatever proposes addresses (beam search over SIDs, the quantizer baseline, TF-IDF or dense
retrieval over payloads), evaluation treats it the same way, following the paper's matched
budget: at most ``max_candidates`` (50) candidate SIDs, best first; each is read from the bank
with an exact lookup (a candidate whose slot is empty or deleted is dropped, and no SID is ever
added); the payloads left are scored against the query and the ``top_n`` (5) best are kept.

Relevance is the cosine similarity between the query and the payload under a sentence encoder
(the bundled all-MiniLM-L6-v2 by default), or, when a local cross-encoder directory is given,
the cross-encoder's score of the ``(query, payload)`` pair.

Encoding choice: both sides are encoded **without** the experience-addressing prefix by default.
That prefix steers embeddings towards the strategy an experience teaches so that codebook
clusters group alike experiences; relevance of a payload to a task query is a different,
symmetric question, and MiniLM was trained on plain sentence pairs. ``RerankConfig.prefix``
applies one instruction to both sides when a different encoder wants one.

:func:`retrieval_hits` scores one query against its reference SID (candidate hit, hit@1 and
hit@5 after reranking, per-level and cumulative prefix agreement) and :func:`aggregate_hits`
turns many such reports into rates (fractions in [0, 1]; the paper prints them times 100).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from genmem.errors import EncoderUnavailable, InvalidSID
from genmem.memory.encoders import Encoder, import_sentence_transformers, load_encoder
from genmem.memory.sid import SID, SIDSpec
from genmem.policies.types import SIDCandidate

if TYPE_CHECKING:
    from genmem.memory.bank import Bank

__all__ = [
    "HitRates",
    "HitReport",
    "PairScorer",
    "RankedEntry",
    "RerankConfig",
    "Reranker",
    "aggregate_hits",
    "retrieval_hits",
]

_TOKEN = re.compile(r"<SID_L\d+_\d+>")
_WIDE = 2**31  # code bound for SIDs checked without a spec: form and level order only


@runtime_checkable
class PairScorer(Protocol):
    """A cross-encoder: scores ``(query, passage)`` pairs, higher is more relevant."""

    def predict(self, inputs: list[tuple[str, str]], *, batch_size: int = 32) -> Any:
        """One relevance score per pair (array-like of floats)."""
        ...


@dataclass(frozen=True, kw_only=True)
class RerankConfig:
    """Settings of the reranking protocol (defaults: the paper's 50 candidates, top 5)."""

    max_candidates: int = 50
    """Candidates considered per query; later ones in the list are ignored."""

    top_n: int = 5
    """Entries kept after rescoring."""

    encoder: str | None = None
    """Bi-encoder spec for :func:`~genmem.memory.encoders.load_encoder` (None: MiniLM)."""

    prefix: str | None = None
    """Instruction applied to both query and payload before encoding (None: plain text)."""

    cross_encoder: str | None = None
    """Local sentence-transformers CrossEncoder directory; when set it replaces the bi-encoder."""

    device: str = "cpu"
    """Torch device of the encoder or cross-encoder."""

    batch_size: int = 32
    """Texts (or pairs) per forward pass."""

    cache_size: int = 4096
    """Payload embeddings kept, keyed by SID and version, so a payload is encoded once."""

    def __post_init__(self) -> None:
        for name in ("max_candidates", "top_n", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be an integer >= 1")
        if isinstance(self.cache_size, bool) or not isinstance(self.cache_size, int):
            raise ValueError(f"cache_size={self.cache_size!r} must be an integer >= 0")
        if self.cache_size < 0:
            raise ValueError(f"cache_size={self.cache_size} must be >= 0 (0 disables the cache)")
        if self.top_n > self.max_candidates:
            raise ValueError(
                f"top_n={self.top_n} exceeds max_candidates={self.max_candidates}; keep "
                "top_n <= max_candidates (the paper uses 5 of 50)"
            )


class RankedEntry(BaseModel):
    """One entry after reranking: the candidate's SID, its live payload and both scores."""

    model_config = ConfigDict(frozen=True)

    sid: str = Field(description="Canonical SID of the entry.")
    score: float = Field(description="Relevance to the query (cosine or cross-encoder score).")
    payload: str = Field(description="The entry's current payload (retrieved content).")
    version: int = Field(ge=1, description="Version of the payload that was scored.")
    candidate_rank: int = Field(ge=1, description="1-based position in the candidate list.")
    candidate_score: float = Field(description="Score the candidate source gave.")


class Reranker:
    """Look up candidate SIDs in one bank and rescore their payloads against a query.

    Models load on first use: the bi-encoder from ``encoder`` (else ``config.encoder``), or the
    cross-encoder from ``cross_encoder`` (else ``config.cross_encoder``). Nothing is downloaded.
    """

    def __init__(
        self,
        bank: Bank,
        config: RerankConfig | None = None,
        *,
        encoder: Encoder | None = None,
        cross_encoder: PairScorer | None = None,
    ) -> None:
        self.bank = bank
        self.config = config or RerankConfig()
        self._encoder = encoder
        self._cross = cross_encoder
        self._cache: dict[tuple[str, int], np.ndarray] = {}
        self._lock = threading.Lock()
        if cross_encoder is None and self.config.cross_encoder is not None:
            _check_model_dir(self.config.cross_encoder)  # fail now, load later

    def __repr__(self) -> str:
        cfg = self.config
        how = "cross-encoder" if self.uses_cross_encoder else "bi-encoder"
        return f"Reranker({self.bank.bank_id!r}, {how}, {cfg.max_candidates}->{cfg.top_n})"

    @property
    def uses_cross_encoder(self) -> bool:
        """True when pairs are scored by a cross-encoder rather than by cosine similarity."""
        return self._cross is not None or self.config.cross_encoder is not None

    @property
    def encoder(self) -> Encoder:
        """The bi-encoder (loaded on first access)."""
        with self._lock:
            if self._encoder is None:
                cfg = self.config
                self._encoder = load_encoder(cfg.encoder, prefix=cfg.prefix, device=cfg.device)
            return self._encoder

    @property
    def cross_encoder(self) -> PairScorer | None:
        """The cross-encoder (loaded on first access), or None when cosine scoring is used."""
        with self._lock:
            if self._cross is None and self.config.cross_encoder is not None:
                self._cross = _load_cross_encoder(self.config.cross_encoder, self.config.device)
            return self._cross

    def rerank(self, query: str, candidates: Sequence[SIDCandidate]) -> list[RankedEntry]:
        """The ``top_n`` live entries among the candidates, most relevant first."""
        if not isinstance(query, str):
            raise TypeError(f"query must be a string, got {type(query).__name__}")
        found = self.lookup(candidates)
        if not found:
            return []
        scores = self._score(query, found)
        # Stable on candidate order: equal relevance keeps the source's ranking.
        order = sorted(range(len(found)), key=lambda i: (-scores[i], found[i].candidate_rank))
        return [
            found[i].model_copy(update={"score": float(scores[i])})
            for i in order[: self.config.top_n]
        ]

    def lookup(self, candidates: Sequence[SIDCandidate]) -> list[RankedEntry]:
        """The live entries behind the first ``max_candidates`` distinct candidates, in order.

        Each ``score`` is still the candidate's own; :meth:`rerank` replaces it with relevance.

        Every SID is checked against the bank's spec before anything is read, so one malformed
        candidate raises :class:`~genmem.errors.InvalidSID` for the whole list.
        """
        if isinstance(candidates, (str, SIDCandidate)):
            raise TypeError("candidates must be a list of SIDCandidate, not a single one")
        parsed: list[tuple[SID, SIDCandidate]] = []
        for i, cand in enumerate(candidates):
            if not isinstance(cand, SIDCandidate):
                raise TypeError(
                    f"candidate {i} is a {type(cand).__name__}; wrap addresses as "
                    "SIDCandidate(sid=..., score=...)"
                )
            parsed.append((self.bank.sid(cand.sid), cand))
        out: list[RankedEntry] = []
        seen: set[SID] = set()
        for sid, cand in parsed:
            if sid in seen:
                continue
            seen.add(sid)
            if len(seen) > self.config.max_candidates:
                break
            entry = self.bank.get(sid)
            if entry is None:  # empty slot or tombstone: nothing to rank
                continue
            out.append(
                RankedEntry(
                    sid=str(sid),
                    score=cand.score,
                    payload=entry.payload,
                    version=entry.version,
                    candidate_rank=len(seen),
                    candidate_score=cand.score,
                )
            )
        return out

    def _score(self, query: str, found: list[RankedEntry]) -> list[float]:
        """Relevance of each found payload to the query."""
        cross = self.cross_encoder
        if cross is not None:
            pairs = [(query, e.payload) for e in found]
            raw = cross.predict(pairs, batch_size=self.config.batch_size)
            scores = np.asarray(raw, dtype=np.float64).reshape(-1)
            if scores.shape[0] != len(found):
                raise ValueError(
                    f"the cross-encoder returned {scores.shape[0]} scores for {len(found)} "
                    "pairs; it must give one relevance score per pair (num_labels=1)"
                )
            return scores.tolist()
        q = _unit(self.encoder.encode([query], batch_size=1))[0]
        return (self._payload_vectors(found) @ q).tolist()

    def _payload_vectors(self, found: list[RankedEntry]) -> np.ndarray:
        """Unit embeddings of the payloads, from the cache where the version was seen before."""
        keys = [(e.sid, e.version) for e in found]
        missing = [i for i, key in enumerate(keys) if key not in self._cache]
        fresh: dict[tuple[str, int], np.ndarray] = {}
        if missing:
            vecs = _unit(
                self.encoder.encode(
                    [found[i].payload for i in missing], batch_size=self.config.batch_size
                )
            )
            fresh = {keys[i]: v for i, v in zip(missing, vecs, strict=True)}
            if self.config.cache_size:
                if len(self._cache) + len(fresh) > self.config.cache_size:
                    self._cache.clear()  # simple bound; probes mostly revisit the same entries
                self._cache.update(fresh)
        return np.stack([fresh[k] if k in fresh else self._cache[k] for k in keys])


def _unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64 (zero rows stay zero)."""
    arr = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)


def _check_model_dir(path: str) -> Path:
    """The cross-encoder directory, or EncoderUnavailable naming the fix."""
    p = Path(path).expanduser()
    if not p.is_dir():
        raise EncoderUnavailable(
            f"no local cross-encoder directory at {path!r}; models are never downloaded at run "
            "time: pass the path of a sentence-transformers CrossEncoder directory, or leave "
            "cross_encoder unset to rerank by cosine similarity"
        )
    return p.resolve()


def _load_cross_encoder(path: str, device: str) -> PairScorer:
    """A sentence-transformers CrossEncoder from a local directory (offline)."""
    p = _check_model_dir(path)
    st = import_sentence_transformers()
    try:
        return st.CrossEncoder(str(p), device=device, local_files_only=True)
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise EncoderUnavailable(
            f"cannot load a cross-encoder from {p} ({exc}); pass a directory holding a "
            "sentence-transformers CrossEncoder (a sequence-classification model)"
        ) from None


# -- hit rates ------------------------------------------------------------------------------------


class HitReport(BaseModel):
    """How one query's candidates and reranked list relate to its reference SID."""

    model_config = ConfigDict(frozen=True)

    reference: str = Field(description="The SID that should have been found.")
    n_candidates: int = Field(description="Candidates before reranking.")
    n_reranked: int = Field(description="Entries after reranking.")
    candidate_hit: bool = Field(description="Reference among the candidates (Candidate Hit).")
    hit_at_1: bool = Field(description="Reference ranked first after reranking.")
    hit_at_5: bool = Field(description="Reference among the first 5 after reranking.")
    depth_at_1: int = Field(
        description="Leading levels the top reranked SID shares with the reference (0 if none)."
    )
    depth_at_5: int = Field(description="Most leading levels shared by any of the first 5.")
    levels_at_1: list[bool] = Field(
        description="Per level: the top reranked SID has the reference's code there."
    )
    levels_at_5: list[bool] = Field(
        description="Per level: some SID among the first 5 has the reference's code there."
    )


class HitRates(BaseModel):
    """Hit rates over many queries, as fractions in [0, 1]."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(description="Queries aggregated.")
    candidate_hit: float
    hit_at_1: float
    hit_at_5: float
    mean_depth_at_1: float = Field(description="Mean code-level agreement depth of the top SID.")
    prefix_at_1: list[float] = Field(description="Cumulative prefix hit H_{1:l}@1 per level l.")
    prefix_at_5: list[float] = Field(description="Cumulative prefix hit H_{1:l}@5 per level l.")
    level_at_1: list[float] = Field(description="Independent level hit H_l@1 per level l.")
    level_at_5: list[float] = Field(description="Independent level hit H_l@5 per level l.")


def retrieval_hits(
    candidates: Sequence[SIDCandidate],
    reranked: Sequence[RankedEntry | SIDCandidate],
    reference: str | SID,
    *,
    spec: SIDSpec | None = None,
) -> HitReport:
    """Candidate hit, hit@1/5 and prefix agreement of one query against its reference SID.

    With ``spec`` every SID is checked against it; without, SIDs are checked for form (tokens
    with levels in order) and must have as many levels as the reference.
    """
    if spec is None and isinstance(reference, SID):
        spec = reference.spec
    if spec is None:
        text = str(reference)
        levels = len(_TOKEN.findall(text))
        if levels == 0:
            raise InvalidSID(
                f"reference {text!r} is not an SID; write it like <SID_L1_3><SID_L2_0>...",
                text=reference,
            )
        spec = SIDSpec((_WIDE,) * levels)
    ref = _codes(reference, spec)
    cand = [_codes(c.sid, spec) for c in candidates]
    top = [_codes(r.sid, spec) for r in reranked[:5]]
    levels = spec.levels

    def depth(codes: tuple[int, ...]) -> int:
        n = 0
        while n < levels and codes[n] == ref[n]:
            n += 1
        return n

    depths = [depth(c) for c in top]
    return HitReport(
        reference=spec.prefix_string(ref),
        n_candidates=len(cand),
        n_reranked=len(reranked),
        candidate_hit=ref in cand,
        hit_at_1=bool(top) and top[0] == ref,
        hit_at_5=ref in top,
        depth_at_1=depths[0] if depths else 0,
        depth_at_5=max(depths, default=0),
        levels_at_1=[bool(top) and top[0][lv] == ref[lv] for lv in range(levels)],
        levels_at_5=[any(c[lv] == ref[lv] for c in top) for lv in range(levels)],
    )


def _codes(value: str | SID, spec: SIDSpec) -> tuple[int, ...]:
    """Codes of an SID under ``spec`` (InvalidSID when it does not fit)."""
    if isinstance(value, SID):
        if value.spec.levels != spec.levels:
            raise InvalidSID(f"SID {value} has {len(value)} levels, expected {spec.levels}")
        return spec.make(value.codes).codes
    return spec.parse(value).codes


def aggregate_hits(reports: Sequence[HitReport]) -> HitRates:
    """Rates over queries: each boolean averaged, each prefix depth turned into H_{1:l}@k."""
    if not reports:
        raise ValueError("aggregate_hits needs at least one HitReport")
    levels = len(reports[0].levels_at_1)
    if any(len(r.levels_at_1) != levels for r in reports):
        raise ValueError("every report must come from SIDs with the same number of levels")
    n = len(reports)

    def rate(values: Sequence[bool]) -> float:
        return sum(values) / n

    return HitRates(
        n=n,
        candidate_hit=rate([r.candidate_hit for r in reports]),
        hit_at_1=rate([r.hit_at_1 for r in reports]),
        hit_at_5=rate([r.hit_at_5 for r in reports]),
        mean_depth_at_1=sum(r.depth_at_1 for r in reports) / n,
        prefix_at_1=[rate([r.depth_at_1 >= lv for r in reports]) for lv in range(1, levels + 1)],
        prefix_at_5=[rate([r.depth_at_5 >= lv for r in reports]) for lv in range(1, levels + 1)],
        level_at_1=[rate([r.levels_at_1[lv] for r in reports]) for lv in range(levels)],
        level_at_5=[rate([r.levels_at_5[lv] for r in reports]) for lv in range(levels)],
    )
