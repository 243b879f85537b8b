"""Retrieval-only evaluation: does an addressing method find a query's reference SID?

The protocol of the paper's appendix E.2 ("Candidate and final retrieval hit rates" and
"Independent level and cumulative prefix accuracy"). Each evaluation pair holds a query and the
SID of the entry that should serve it. A :data:`Ranker` proposes up to ``k`` distinct SIDs for
the query, best first (SID beam search, or the TF-IDF / dense baselines over payloads, wrapped
by :func:`sid_ranker` and :func:`baseline_ranker`); an optional :data:`RerankFunc` then keeps a
reordered subset (the paper's reranker keeps 5 of 50, see :func:`reranker_fn`). Without one the
candidate list is also the final list. Per query, and then as rates over all queries:

- **Candidate Hit**: the reference is anywhere among the candidates, before reranking.
- **Hit@1, Hit@5** (Eq. 35): the reference is among the first 1 or 5 of the final list.
- **Level hit** ``H_l@k`` (Eq. 36, first line): some SID among the first ``k`` has the
  reference's code at level ``l``, whatever its other levels.
- **Prefix hit** ``H_{1:l}@k`` (Eq. 36, second line): some SID among the first ``k`` agrees
  with the reference on all of levels ``1..l`` at once. At ``l = L`` this is Hit@k.

Both hierarchical metrics are reported for ``k`` = 1 and 5. Rates are fractions in [0, 1]; the
paper prints them times 100. :meth:`RetrievalReport.intervals` puts a seeded percentile bootstrap
interval over queries on each rate. The per-query arithmetic is
:func:`genmem.policies.rerank.retrieval_hits`, so these numbers match the ones the reranking
code reports elsewhere.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field
from tqdm.auto import tqdm

from genmem.envs.stats import (
    DEFAULT_INTERVALS,
    IntervalConfig,
    PairedDiff,
    bootstrap_interval,
    paired_difference,
)
from genmem.errors import InvalidSID
from genmem.memory.sid import DEFAULT_SPEC, SIDSpec
from genmem.policies.baselines import DEFAULT_K
from genmem.policies.rerank import HitReport, retrieval_hits
from genmem.policies.types import SIDCandidate, SIDGenerator

if TYPE_CHECKING:
    from genmem.policies.rerank import Reranker

__all__ = [
    "PAIRED_RATES",
    "PayloadRetriever",
    "Ranker",
    "RerankFunc",
    "RetrievalIntervals",
    "RetrievalPair",
    "RetrievalReport",
    "baseline_ranker",
    "evaluate_retrieval",
    "load_pairs",
    "paired_hits",
    "query_payload_overlap",
    "reranker_fn",
    "sid_ranker",
]

Ranker = Callable[[str, int], list[str]]
"""``(query, k) -> SIDs``: at most ``k`` distinct canonical SIDs, best first."""

RerankFunc = Callable[[str, list[str]], list[str]]
"""``(query, candidates) -> SIDs``: a reordered subset of the candidates, best first."""


class PayloadRetriever(Protocol):
    """What :func:`baseline_ranker` needs: the ``retrieve`` of the TF-IDF and dense baselines."""

    def retrieve(self, query: str, k: int = ...) -> list[SIDCandidate]:
        """Up to ``k`` entries most similar to ``query``, best first."""
        ...


class RetrievalPair(BaseModel):
    """One evaluation example: a query and the SID of the entry that should serve it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    query: str = Field(description="The task query given to the ranker.")
    reference_sid: str = Field(description="Canonical SID of the target entry.")


Interval = tuple[float, float]


class RetrievalIntervals(BaseModel):
    """Bootstrap intervals over queries of every rate of a :class:`RetrievalReport`."""

    candidate_hit: Interval
    hit_at_1: Interval
    hit_at_5: Interval
    level_at_1: list[Interval] = Field(description="Per level l: the interval of H_l@1.")
    prefix_at_1: list[Interval] = Field(description="Per level l: the interval of H_{1:l}@1.")
    level_at_5: list[Interval] = Field(description="Per level l: the interval of H_l@5.")
    prefix_at_5: list[Interval] = Field(description="Per level l: the interval of H_{1:l}@5.")
    settings: IntervalConfig


class RetrievalReport(BaseModel):
    """Hit counts over an evaluation set; the matching rates are derived from them."""

    model_config = ConfigDict(frozen=True)

    n: int = Field(ge=1, description="Queries evaluated.")
    k: int = Field(ge=1, description="Candidates asked of the ranker per query.")
    levels: int = Field(ge=1, description="SID levels L.")
    reranked: bool = Field(description="Whether a rerank step produced the final lists.")
    mean_candidates: float = Field(description="Candidates returned per query, on average.")
    candidate_hits: int = Field(description="Queries whose reference is among the candidates.")
    hits_at_1: int = Field(description="Queries whose reference is first in the final list.")
    hits_at_5: int = Field(description="Queries whose reference is in the final top 5.")
    level_hits_at_1: list[int] = Field(description="Per level l: queries counted by H_l@1.")
    prefix_hits_at_1: list[int] = Field(description="Per level l: queries counted by H_{1:l}@1.")
    level_hits_at_5: list[int] = Field(description="Per level l: queries counted by H_l@5.")
    prefix_hits_at_5: list[int] = Field(description="Per level l: queries counted by H_{1:l}@5.")
    per_query: list[HitReport] = Field(description="Each query's report, in input order.")

    @classmethod
    def from_hits(cls, reports: Sequence[HitReport], *, k: int, reranked: bool) -> RetrievalReport:
        """Count hits over per-query reports (all from SIDs with the same number of levels)."""
        if not reports:
            raise ValueError("no queries to report on; pass at least one HitReport")
        levels = len(reports[0].levels_at_1)
        if any(len(r.levels_at_1) != levels for r in reports):
            raise ValueError("every report must come from SIDs with the same number of levels")

        def count(flags: Any) -> int:
            return sum(1 for f in flags if f)

        depths = range(1, levels + 1)
        return cls(
            n=len(reports),
            k=k,
            levels=levels,
            reranked=reranked,
            mean_candidates=sum(r.n_candidates for r in reports) / len(reports),
            candidate_hits=count(r.candidate_hit for r in reports),
            hits_at_1=count(r.hit_at_1 for r in reports),
            hits_at_5=count(r.hit_at_5 for r in reports),
            level_hits_at_1=[count(r.levels_at_1[lv] for r in reports) for lv in range(levels)],
            prefix_hits_at_1=[count(r.depth_at_1 >= d for r in reports) for d in depths],
            level_hits_at_5=[count(r.levels_at_5[lv] for r in reports) for lv in range(levels)],
            prefix_hits_at_5=[count(r.depth_at_5 >= d for r in reports) for d in depths],
            per_query=list(reports),
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def candidate_hit(self) -> float:
        """Candidate Hit rate."""
        return self.candidate_hits / self.n

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hit_at_1(self) -> float:
        """Hit@1 rate (Eq. 35, k = 1)."""
        return self.hits_at_1 / self.n

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hit_at_5(self) -> float:
        """Hit@5 rate (Eq. 35, k = 5)."""
        return self.hits_at_5 / self.n

    @computed_field  # type: ignore[prop-decorator]
    @property
    def level_at_1(self) -> list[float]:
        """Independent level hit rate H_l@1 per level (Eq. 36)."""
        return [c / self.n for c in self.level_hits_at_1]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prefix_at_1(self) -> list[float]:
        """Cumulative prefix hit rate H_{1:l}@1 per level (Eq. 36)."""
        return [c / self.n for c in self.prefix_hits_at_1]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def level_at_5(self) -> list[float]:
        """Independent level hit rate H_l@5 per level (Eq. 36)."""
        return [c / self.n for c in self.level_hits_at_5]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prefix_at_5(self) -> list[float]:
        """Cumulative prefix hit rate H_{1:l}@5 per level (Eq. 36)."""
        return [c / self.n for c in self.prefix_hits_at_5]

    def intervals(self, settings: IntervalConfig = DEFAULT_INTERVALS) -> RetrievalIntervals:
        """A bootstrap interval over queries for each rate (each query a 0/1 hit)."""

        def ci(flags: Any) -> Interval:
            interval = bootstrap_interval([float(f) for f in flags], settings)
            assert interval is not None  # a report holds at least one query
            return interval

        q = self.per_query
        depths = range(1, self.levels + 1)
        return RetrievalIntervals(
            candidate_hit=ci(r.candidate_hit for r in q),
            hit_at_1=ci(r.hit_at_1 for r in q),
            hit_at_5=ci(r.hit_at_5 for r in q),
            level_at_1=[ci(r.levels_at_1[lv] for r in q) for lv in range(self.levels)],
            prefix_at_1=[ci(r.depth_at_1 >= d for r in q) for d in depths],
            level_at_5=[ci(r.levels_at_5[lv] for r in q) for lv in range(self.levels)],
            prefix_at_5=[ci(r.depth_at_5 >= d for r in q) for d in depths],
            settings=settings,
        )

    def summary(self) -> str:
        """The headline rates as percentages on one line."""
        levels = " ".join(f"L{i + 1}={v:.1%}" for i, v in enumerate(self.prefix_at_1))
        return (
            f"n={self.n} k={self.k} candidate_hit={self.candidate_hit:.1%} "
            f"hit@1={self.hit_at_1:.1%} hit@5={self.hit_at_5:.1%} prefix@1: {levels}"
        )


PAIRED_RATES = ("candidate_hit", "hit_at_1", "hit_at_5")
"""The rates :func:`paired_hits` compares query by query."""


def paired_hits(
    method: RetrievalReport,
    baseline: RetrievalReport,
    settings: IntervalConfig = DEFAULT_INTERVALS,
) -> dict[str, PairedDiff]:
    """``method - baseline`` per rate, paired by query (both scored on the same pairs, in order)."""
    if method.n != baseline.n:
        raise ValueError(f"cannot pair reports over {method.n} and {baseline.n} queries")
    out = {}
    for rate in PAIRED_RATES:
        a = {i: float(getattr(r, rate)) for i, r in enumerate(method.per_query)}
        b = {i: float(getattr(r, rate)) for i, r in enumerate(baseline.per_query)}
        diff = paired_difference(a, b, settings)
        assert diff is not None  # a report holds at least one query
        out[rate] = diff
    return out


# -- input ---------------------------------------------------------------------------------------


def _reference(pair: RetrievalPair, spec: SIDSpec, where: str) -> RetrievalPair:
    """``pair`` with its reference checked against ``spec`` and written canonically."""
    if not pair.query.strip():
        raise ValueError(f"{where}: query is empty; every pair needs the text to retrieve for")
    try:
        sid = spec.parse(pair.reference_sid)
    except InvalidSID as exc:
        raise InvalidSID(f"{where}: reference_sid: {exc}", text=pair.reference_sid) from None
    return pair.model_copy(update={"reference_sid": str(sid)})


def load_pairs(
    path: str | os.PathLike[str], *, spec: SIDSpec = DEFAULT_SPEC
) -> list[RetrievalPair]:
    """Read a JSONL file of ``{"query": ..., "reference_sid": ...}`` objects (blank lines skipped).

    Other keys on a line are ignored. Every reference must be a canonical SID of ``spec``.

    Raises:
        ValueError: A line that is not a JSON object with a non-empty string ``query`` and an
            SID ``reference_sid`` (:class:`~genmem.errors.InvalidSID` for the latter), or a file
            with no pairs; the message starts with ``path:line``.
    """
    p = Path(path)
    pairs: list[RetrievalPair] = []
    with p.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{p}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{where}: not valid JSON ({exc.msg}); write one object per line like "
                    '{"query": "...", "reference_sid": "<SID_L1_0>..."}'
                ) from None
            if not isinstance(obj, dict):
                raise ValueError(
                    f"{where}: expected a JSON object with query and reference_sid, "
                    f"got {type(obj).__name__}"
                )
            for key in ("query", "reference_sid"):
                if not isinstance(obj.get(key), str):
                    got = "missing" if key not in obj else type(obj[key]).__name__
                    raise ValueError(f"{where}: {key!r} must be a string ({got})")
            pairs.append(_reference(RetrievalPair.model_validate(obj), spec, where))
    if not pairs:
        raise ValueError(f"{p}: no pairs; the file has no non-blank lines")
    return pairs


def _coerce_pairs(
    pairs: Sequence[RetrievalPair | Mapping[str, Any]], spec: SIDSpec
) -> list[RetrievalPair]:
    """Pairs as checked models (mappings are validated like lines of a pairs file)."""
    if isinstance(pairs, (str, Mapping)) or not isinstance(pairs, Sequence):
        raise ValueError(
            f"pairs must be a list of RetrievalPair or dicts, got {type(pairs).__name__}"
        )
    if not pairs:
        raise ValueError("pairs is empty; evaluate at least one query")
    out = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, Mapping):
            try:
                pair = RetrievalPair.model_validate(dict(pair))
            except ValidationError as exc:
                raise ValueError(
                    f"pair {i}: needs string fields query and reference_sid ({exc.errors()})"
                ) from None
        elif not isinstance(pair, RetrievalPair):
            raise ValueError(f"pair {i} is a {type(pair).__name__}; pass RetrievalPair or dict")
        out.append(_reference(pair, spec, f"pair {i}"))
    return out


def _check_sids(value: Any, *, limit: int, spec: SIDSpec, where: str) -> list[str]:
    """A ranker's or reranker's answer as canonical SIDs: a list, distinct, at most ``limit``."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ValueError(f"{where} must be a list of SID strings, got {type(value).__name__}")
    if len(value) > limit:
        raise ValueError(f"{where} has {len(value)} SIDs; at most {limit} were asked for")
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{where}[{i}] is a {type(item).__name__}, not an SID string")
        try:
            out.append(str(spec.parse(item)))
        except InvalidSID as exc:
            raise InvalidSID(f"{where}[{i}]: {exc}", text=item) from None
    if len(set(out)) != len(out):
        dup = next(s for s in out if out.count(s) > 1)
        raise ValueError(f"{where} lists {dup} more than once; SIDs must be distinct")
    return out


# -- evaluation ----------------------------------------------------------------------------------


def _as_candidates(sids: Sequence[str]) -> list[SIDCandidate]:
    """Ranked SIDs as candidates whose score falls with rank."""
    return [SIDCandidate(sid=s, score=-float(i)) for i, s in enumerate(sids)]


def evaluate_retrieval(
    pairs: Sequence[RetrievalPair | Mapping[str, Any]],
    rank: Ranker,
    k: int = DEFAULT_K,
    *,
    rerank: RerankFunc | None = None,
    spec: SIDSpec = DEFAULT_SPEC,
    progress: bool = False,
) -> RetrievalReport:
    """Ask ``rank`` for ``k`` candidates per query and score them against the references.

    Args:
        pairs: Queries with their reference SIDs (from :func:`load_pairs`, or dicts).
        rank: Called once per query as ``rank(query, k)``.
        k: Candidate budget per query (the paper's 50).
        rerank: Called as ``rerank(query, candidates)``; Hit@k is then taken on its output,
            which must be a subset of the candidates. None: the candidates are the final list.
        spec: Address space of the references and of every returned SID.
        progress: Show a progress bar.

    Raises:
        ValueError: Bad pairs or ``k``, or a ranker / reranker answer that is not a list of
            at most ``k`` distinct SIDs of ``spec`` (the message names the query).
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k={k!r}: ask for an integer number of candidates >= 1, e.g. 50")
    checked = _coerce_pairs(pairs, spec)
    reports: list[HitReport] = []
    for i, pair in enumerate(tqdm(checked, desc="retrieval eval", disable=not progress)):
        where = f"ranker answer for pair {i} ({pair.query[:40]!r})"
        candidates = _check_sids(rank(pair.query, k), limit=k, spec=spec, where=where)
        final = candidates
        if rerank is not None:
            where = f"rerank answer for pair {i} ({pair.query[:40]!r})"
            final = _check_sids(
                rerank(pair.query, list(candidates)), limit=len(candidates), spec=spec, where=where
            )
            stray = set(final) - set(candidates)
            if stray:
                raise ValueError(
                    f"{where} has {sorted(stray)[0]}, which is not among the candidates; a "
                    "reranker may only reorder and drop candidates"
                )
        reports.append(
            retrieval_hits(
                _as_candidates(candidates),
                _as_candidates(final),
                pair.reference_sid,
                spec=spec,
            )
        )
    return RetrievalReport.from_hits(reports, k=k, reranked=rerank is not None)


def _candidate_sids(candidates: Any, source: str) -> list[str]:
    """The SID strings of a list of :class:`SIDCandidate`, checked."""
    if isinstance(candidates, (str, SIDCandidate)) or not isinstance(candidates, Sequence):
        raise ValueError(f"{source} must return a list of SIDCandidate")
    out = []
    for i, cand in enumerate(candidates):
        if not isinstance(cand, SIDCandidate):
            raise ValueError(f"{source} returned a {type(cand).__name__} at {i}, not SIDCandidate")
        out.append(cand.sid)
    return out


def sid_ranker(generator: SIDGenerator) -> Ranker:
    """A :data:`Ranker` that decodes ``k`` SIDs per query with an SID generator (beam search).

    The generator reads the query as MemRetriever's user turn, exactly as the retriever graph
    and training hand it over, so the addresses scored here are the ones inference would make.
    """
    from genmem.policies.prompts import retriever_user_message

    def rank(query: str, k: int) -> list[str]:
        context = retriever_user_message(query)
        return _candidate_sids(generator.generate(context, k), type(generator).__name__)

    return rank


def baseline_ranker(baseline: PayloadRetriever) -> Ranker:
    """A :data:`Ranker` over a content retriever (``TfidfRetriever``, ``DenseRetriever``)."""

    def rank(query: str, k: int) -> list[str]:
        return _candidate_sids(baseline.retrieve(query, k), type(baseline).__name__)

    return rank


def reranker_fn(reranker: Reranker) -> RerankFunc:
    """A :data:`RerankFunc` that runs the paper's reranking protocol with ``reranker``.

    Candidates with an empty slot in the reranker's bank are dropped, and the ``top_n`` (5)
    most relevant payloads are kept.
    """

    def rerank(query: str, candidates: list[str]) -> list[str]:
        return [entry.sid for entry in reranker.rerank(query, _as_candidates(candidates))]

    return rerank


_WORD = re.compile(r"[a-z0-9]{3,}")


def query_payload_overlap(
    pairs: Sequence[RetrievalPair], bank: Any, settings: IntervalConfig = DEFAULT_INTERVALS
) -> dict[str, Any]:
    """How much of each query its reference payload repeats (a lexical ranker's head start).

    ``mean``: the share of a query's distinct words (3+ letters or digits) that occur in its
    reference entry's payload, averaged over pairs, with a bootstrap interval (``mean_ci``);
    ``verbatim``: payloads that contain their whole query (spacing and case aside).
    """
    shares, verbatim = [], 0
    for pair in pairs:
        entry = bank.get(pair.reference_sid)
        if entry is None:
            continue
        query, payload = pair.query.lower(), entry.payload.lower()
        words = set(_WORD.findall(query))
        if words:
            shares.append(len(words & set(_WORD.findall(payload))) / len(words))
        verbatim += " ".join(query.split()) in " ".join(payload.split())
    mean = sum(shares) / len(shares) if shares else None
    interval = bootstrap_interval(shares, settings) if shares else None
    return {"mean": mean, "mean_ci": interval, "verbatim": verbatim, "n": len(shares)}
