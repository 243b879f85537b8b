"""Reranking: exact lookups only, empty slots dropped, top-n by relevance, cache by version,
cross-encoder scoring; hit reports and rates; one end-to-end run on the real MiniLM."""

from __future__ import annotations

import numpy as np
import pytest

from genmem.errors import EncoderUnavailable, InvalidSID
from genmem.memory.sid import SID, SIDSpec
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.rerank import (
    HitReport,
    PairScorer,
    RankedEntry,
    RerankConfig,
    Reranker,
    aggregate_hits,
    retrieval_hits,
)
from genmem.policies.types import SIDCandidate
from tests.conftest import TEST_HASH
from tests.fakes import CountingEncoder, HashEncoder, gsm8k_texts

SPEC = SIDSpec((4, 4, 4))


class NoEncoder(HashEncoder):
    """Fails if used: proves the cross-encoder path does not embed."""

    def encode(self, texts, *, batch_size=32, progress=False):
        raise AssertionError("the bi-encoder must not be used")


class OverlapScorer:
    """A fake cross-encoder: shared lowercase words between query and passage."""

    def __init__(self) -> None:
        self.calls = 0

    def predict(self, inputs, *, batch_size=32):
        self.calls += 1
        return np.array([len(set(q.lower().split()) & set(p.lower().split())) for q, p in inputs])


def sid(*codes: int) -> str:
    return str(SPEC.make(codes))


def cand(s: str, score: float = 0.0) -> SIDCandidate:
    return SIDCandidate(sid=s, score=score)


@pytest.fixture
def bank():
    b = SQLiteBankStore(":memory:").create_bank("r", spec=SPEC, codebook_hash=TEST_HASH)
    for i in range(10):
        b.insert(sid(i % 4, i // 4, 1), f"experience {i}")
    return b


def test_rerank_keeps_top_n_live_candidates_most_relevant_first(bank):
    empty = sid(3, 3, 3)
    deleted = sid(1, 0, 1)  # entry 1
    bank.revise(deleted, "")
    cands = [cand(sid(i % 4, i // 4, 1), -i) for i in range(10)] + [cand(empty, -99)]
    cands.insert(0, cands.pop(1))  # the deleted entry first in the candidate list
    r = Reranker(bank, encoder=HashEncoder(16))
    out = r.rerank("experience 6", cands)
    assert len(out) == 5
    assert out[0].sid == sid(2, 1, 1) and out[0].payload == "experience 6"
    assert out[0].score == pytest.approx(1.0, abs=1e-6)
    assert out[0].candidate_rank == 7 and out[0].candidate_score == -6
    assert out[0].version == 1
    scores = [e.score for e in out]
    assert scores == sorted(scores, reverse=True)
    live = {c.sid for c in cands} - {empty, deleted}
    assert {e.sid for e in out} <= live
    assert all(bank.get(e.sid).payload == e.payload for e in out)


def test_empty_and_deleted_slots_are_dropped_never_replaced(bank):
    bank.revise(sid(0, 0, 1), "")
    r = Reranker(bank, encoder=HashEncoder(16))
    assert r.rerank("experience 0", [cand(sid(0, 0, 1)), cand(sid(3, 3, 3))]) == []
    assert r.rerank("anything", []) == []
    # a relative of an empty slot is never substituted (unlike bank.lookup)
    out = r.rerank("experience 4", [cand(sid(0, 1, 0))])
    assert out == []


def test_candidate_budget_and_duplicates():
    b = SQLiteBankStore(":memory:").create_bank("b", spec=SPEC, codebook_hash=TEST_HASH)
    all_sids = [str(s) for s in SPEC.all_sids()]
    for i, s in enumerate(all_sids[:60]):
        b.insert(s, f"experience {i}")
    cands = [cand(s) for s in all_sids[:60]]
    target = "experience 55"
    r = Reranker(b, encoder=HashEncoder(16))
    assert target not in [e.payload for e in r.rerank(target, cands)]
    wide = Reranker(b, RerankConfig(max_candidates=60), encoder=HashEncoder(16))
    assert wide.rerank(target, cands)[0].payload == target
    # repeats count once against the budget and keep their first rank
    dup = [cand(all_sids[0])] * 70 + [cand(all_sids[55])]
    out = r.rerank(target, dup)
    assert [e.sid for e in out] == [all_sids[55], all_sids[0]]
    assert [e.candidate_rank for e in out] == [2, 1]
    assert len(r.lookup(cands)) == 50


def test_top_n_setting(bank):
    cands = [cand(sid(i % 4, i // 4, 1)) for i in range(10)]
    out = Reranker(bank, RerankConfig(top_n=2), encoder=HashEncoder(16)).rerank("x", cands)
    assert len(out) == 2


def test_payload_embeddings_are_cached_by_version(bank):
    enc = CountingEncoder()
    r = Reranker(bank, encoder=enc)
    cands = [cand(sid(i % 4, i // 4, 1)) for i in range(4)]
    r.rerank("q1", cands)
    assert len(enc.seen) == 5
    r.rerank("q2", cands)
    assert enc.seen[5:] == ["q2"]
    bank.revise(sid(2, 0, 1), "a revised strategy")
    out = r.rerank("a revised strategy", cands)
    assert enc.seen[6:] == ["a revised strategy", "a revised strategy"]
    assert out[0].sid == sid(2, 0, 1) and out[0].version == 2
    assert out[0].payload == "a revised strategy"


def test_cross_encoder_scores_pairs(bank):
    bank.revise(sid(3, 0, 1), "add the apples then subtract the pears")
    scorer = OverlapScorer()
    assert isinstance(scorer, PairScorer)
    r = Reranker(bank, encoder=NoEncoder(16), cross_encoder=scorer)
    assert r.uses_cross_encoder
    cands = [cand(sid(i % 4, i // 4, 1)) for i in range(10)]
    out = r.rerank("subtract the pears from the apples", cands)
    assert out[0].sid == sid(3, 0, 1) and out[0].score == 4.0
    assert scorer.calls == 1


def test_missing_cross_encoder_directory_fails_before_loading(bank, tmp_path):
    with pytest.raises(EncoderUnavailable, match="never downloaded"):
        Reranker(bank, RerankConfig(cross_encoder=str(tmp_path / "nope")))


def test_bad_input(bank):
    r = Reranker(bank, encoder=HashEncoder(16))
    with pytest.raises(InvalidSID):
        r.rerank("q", [cand(sid(0, 0, 1)), cand("<SID_L1_0><SID_L2_9><SID_L3_0>")])
    with pytest.raises(InvalidSID):
        r.rerank("q", [cand("<SID_L1_0><SID_L2_0>")])
    with pytest.raises(TypeError, match="SIDCandidate"):
        r.rerank("q", [sid(0, 0, 1)])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        r.rerank(None, [])  # type: ignore[arg-type]
    for bad in ({"top_n": 0}, {"max_candidates": 0}, {"top_n": 6, "max_candidates": 5}):
        with pytest.raises(ValueError):
            RerankConfig(**bad)
    with pytest.raises(ValueError):
        RerankConfig(cache_size=-1)


# --- hit reports --------------------------------------------------------------------------------


def _ranked(s: str) -> RankedEntry:
    return RankedEntry(
        sid=s, score=0.0, payload="p", version=1, candidate_rank=1, candidate_score=0
    )


def test_retrieval_hits_on_one_query():
    ref = sid(1, 2, 3)
    cands = [cand(sid(1, 2, 0)), cand(ref), cand(sid(0, 2, 3))]
    rep = retrieval_hits(cands, [_ranked(sid(1, 2, 0)), _ranked(sid(0, 2, 3))], ref)
    assert rep.candidate_hit and not rep.hit_at_1 and not rep.hit_at_5
    assert (rep.depth_at_1, rep.depth_at_5) == (2, 2)
    assert rep.levels_at_1 == [True, True, False]
    assert rep.levels_at_5 == [True, True, True]
    assert (rep.n_candidates, rep.n_reranked) == (3, 2)
    six = [sid(0, 0, 0)] * 5 + [ref]
    late = retrieval_hits(cands, [cand(s) for s in six], ref, spec=SPEC)
    assert not late.hit_at_5 and late.depth_at_5 == 0  # only the first 5 count
    top = retrieval_hits([], [cand(ref)], SPEC.parse(ref))
    assert top.hit_at_1 and top.hit_at_5 and not top.candidate_hit and top.depth_at_1 == 3
    none = retrieval_hits([], [], ref)
    assert (none.depth_at_1, none.levels_at_1, none.hit_at_5) == (0, [False] * 3, False)


def test_retrieval_hits_checks_sids():
    with pytest.raises(InvalidSID):
        retrieval_hits([], [], "not an sid")
    with pytest.raises(InvalidSID):
        retrieval_hits([cand("<SID_L1_1><SID_L2_2>")], [], sid(1, 2, 3))
    with pytest.raises(InvalidSID):
        retrieval_hits([cand(sid(1, 2, 3))], [], "<SID_L1_1><SID_L2_9><SID_L3_0>", spec=SPEC)
    with pytest.raises(InvalidSID):
        retrieval_hits([], [], SID((1, 2), SIDSpec((4, 4))), spec=SPEC)


def test_aggregate_hits():
    ref = sid(1, 2, 3)
    reports = [
        retrieval_hits([cand(ref)], [cand(ref)], ref),
        retrieval_hits([cand(ref)], [cand(sid(1, 0, 0)), cand(ref)], ref),
        retrieval_hits([cand(sid(1, 2, 0))], [cand(sid(1, 2, 0))], ref),
        retrieval_hits([], [], ref),
    ]
    rates = aggregate_hits(reports)
    assert rates.n == 4
    assert (rates.candidate_hit, rates.hit_at_1, rates.hit_at_5) == (0.5, 0.25, 0.5)
    assert rates.mean_depth_at_1 == (3 + 1 + 2 + 0) / 4
    assert rates.prefix_at_1 == [0.75, 0.5, 0.25]
    assert rates.prefix_at_5 == [0.75, 0.75, 0.5]
    assert rates.level_at_1 == [0.75, 0.5, 0.25]
    assert rates.level_at_5 == [0.75, 0.75, 0.5]
    with pytest.raises(ValueError):
        aggregate_hits([])
    two = retrieval_hits([], [], "<SID_L1_0><SID_L2_0>")
    with pytest.raises(ValueError, match="levels"):
        aggregate_hits([*reports, two])
    assert isinstance(reports[0], HitReport)


# --- real encoder -------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_minilm_reranks_gsm8k_payloads():
    texts = gsm8k_texts(8)
    b = SQLiteBankStore(":memory:").create_bank("g", spec=SPEC, codebook_hash=TEST_HASH)
    sids = [sid(i % 4, i // 4, 0) for i in range(8)]
    for s, t in zip(sids, texts, strict=True):
        b.insert(s, t)
    cands = [cand(s, -i) for i, s in enumerate(sids)] + [cand(sid(3, 3, 3), -9)]
    r = Reranker(b)
    question = texts[5].split("\n")[0]
    out = r.rerank(question, cands)
    assert r.encoder.prefix is None and r.encoder.dim == 384
    assert len(out) == 5 and {e.sid for e in out} <= set(sids)
    assert out[0].sid == sids[5] and out[0].payload == texts[5]
    scores = [e.score for e in out]
    assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0
    rep = retrieval_hits(cands, out, sids[5], spec=SPEC)
    assert rep.candidate_hit and rep.hit_at_1 and rep.depth_at_1 == 3
