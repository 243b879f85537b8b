"""Per-level and cumulative prefix accuracy of a policy's SIDs at top-k (beam search).

For a query with reference SID ``z*`` and the policy's beam ``c_1 .. c_K`` (best first):

- level accuracy ``H_l@k``: some ``c_i`` with ``i <= k`` has ``z*``'s code at level ``l``;
- prefix accuracy ``H_{1:l}@k``: some ``c_i`` with ``i <= k`` agrees with ``z*`` on levels
  ``1..l`` at once (at ``l = L``: the exact SID is in the top k).

These are the paper's Eq. 36 metrics at the cut-offs the training stages report (1, 5, 50);
the beam is decoded once at the largest ``k`` and cut. Each query's matched depth is kept, so
every prefix rate carries a seeded 95% percentile bootstrap interval over queries (and two runs
on the same queries can be compared pair by pair).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from genmem.envs.stats import DEFAULT_INTERVALS, IntervalConfig, bootstrap_interval
from genmem.memory.sid import SIDSpec
from genmem.policies.prompts import retriever_user_message

__all__ = ["PrefixAccuracy", "prefix_accuracy", "score_beams"]


class PrefixAccuracy(BaseModel):
    """Accuracy rates (fractions) per cut-off k and per level."""

    n: int = Field(description="Queries scored.")
    ks: list[int]
    level: dict[int, list[float]] = Field(description="k -> H_l@k for l = 1..L.")
    prefix: dict[int, list[float]] = Field(description="k -> H_{1:l}@k for l = 1..L.")
    depth: dict[int, list[int]] = Field(
        default_factory=dict,
        description="k -> per query, how many leading levels the best of its top k matches.",
    )
    prefix_ci: dict[int, list[tuple[float, float]]] = Field(
        default_factory=dict, description="k -> bootstrap interval of H_{1:l}@k for l = 1..L."
    )

    def exact(self, k: int) -> float:
        """Share of queries whose reference SID is in the top k."""
        return self.prefix[k][-1]

    def line(self) -> str:
        """A one-line summary: full-SID accuracy at each k and level-1 accuracy at top-1."""
        parts = [f"exact@{k}={self.exact(k):.1%}" for k in self.ks]
        return f"n={self.n} " + " ".join(parts) + f" L1@1={self.prefix[self.ks[0]][0]:.1%}"


def score_beams(
    beams: Sequence[Sequence[Sequence[int]]],
    references: Sequence[Sequence[int]],
    ks: Sequence[int],
    intervals: IntervalConfig = DEFAULT_INTERVALS,
) -> PrefixAccuracy:
    """Accuracy of ranked code tuples against reference code tuples, with intervals."""
    if len(beams) != len(references) or not references:
        raise ValueError(f"{len(beams)} beams for {len(references)} references; need >= 1 each")
    levels = len(references[0])
    level: dict[int, list[float]] = {}
    prefix: dict[int, list[float]] = {}
    depths: dict[int, list[int]] = {}
    cis: dict[int, list[tuple[float, float]]] = {}
    for k in ks:
        lv = [0] * levels
        depths[k] = []
        for beam, ref in zip(beams, references, strict=True):
            top = beam[:k]
            depth = 0
            for cand in top:
                d = 0
                while d < levels and cand[d] == ref[d]:
                    d += 1
                depth = max(depth, d)
            depths[k].append(depth)
            for i in range(levels):
                lv[i] += any(c[i] == ref[i] for c in top)
        hits = [[float(d > i) for d in depths[k]] for i in range(levels)]
        level[k] = [v / len(references) for v in lv]
        prefix[k] = [sum(h) / len(references) for h in hits]
        cis[k] = [bootstrap_interval(h, intervals) or (0.0, 0.0) for h in hits]
    return PrefixAccuracy(
        n=len(references), ks=list(ks), level=level, prefix=prefix, depth=depths, prefix_ci=cis
    )


def prefix_accuracy(
    policy: Any,
    spec: SIDSpec,
    pairs: Sequence[Mapping[str, str]],
    ks: Sequence[int] = (1, 5, 50),
    *,
    progress: bool = False,
    desc: str = "SID prefix accuracy",
) -> PrefixAccuracy:
    """Beam-decode each pair's query (as MemRetriever phrases it) and score the beams."""
    from tqdm.auto import tqdm

    from genmem.policies.sid_decoding import SIDDecodingConfig, TransformersSIDGenerator

    generator = TransformersSIDGenerator(policy, spec, config=SIDDecodingConfig(allowed="all"))
    contexts = [retriever_user_message(p["query"]) for p in pairs]
    k = min(max(ks), spec.capacity)
    decoded = []
    for i in tqdm(range(0, len(contexts), 8), desc=desc, unit="batch", disable=not progress):
        decoded += generator.generate_batch(contexts[i : i + 8], k=k)
    beams = [[spec.parse(c.sid).codes for c in cands] for cands in decoded]
    references = [spec.parse(p["reference_sid"]).codes for p in pairs]
    return score_beams(beams, references, ks)
