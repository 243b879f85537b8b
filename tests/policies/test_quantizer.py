"""Quantizer addresser: k=1 is quantize, the beam's top-1 is quantize, scores are summed excess,
bank restrictions hold, bad input is refused; one end-to-end run on the real MiniLM."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from genmem.errors import CodebookError, CodebookMismatch
from genmem.memory.encoders import (
    DEFAULT_ENCODER_ID,
    EXPERIENCE_PREFIX,
    default_encoder,
    encode_for_codebook,
)
from genmem.memory.rqkmeans import Codebooks, RQKMeans, RQKMeansConfig
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.quantizer import QuantizerAddresser
from genmem.policies.types import SIDGenerator
from tests.fakes import HashEncoder, clustered_embeddings, gsm8k_texts

SIZES = (8, 4, 4)
DIM = 16


def _fit(x: np.ndarray, distance: str, **kw) -> Codebooks:
    cfg = RQKMeansConfig(sizes=kw.pop("sizes", SIZES), distance=distance, **kw)
    return RQKMeans(cfg).fit(x, progress=False).codebooks_


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return clustered_embeddings(400, DIM, clusters=10, skew=1.0, seed=1)


@pytest.fixture(scope="module")
def queries() -> np.ndarray:
    return clustered_embeddings(40, DIM, clusters=10, skew=1.0, seed=7)


@pytest.fixture(scope="module", params=["euclidean", "spherical", "weighted"])
def cb(request, data) -> Codebooks:
    return _fit(data, request.param)


def _excess_score(cb: Codebooks, x: np.ndarray, codes: tuple[int, ...]) -> float:
    """The definition: per level, the chosen child's cost minus the best child's cost."""
    r = x.astype(np.float64)
    total = 0.0
    for level, c in enumerate(codes):
        cent = cb.centres[level].astype(np.float64)
        if cb.directions is not None:
            cost = -(cb.directions[level].astype(np.float64) @ r)
        else:
            cost = ((r - cent) ** 2).sum(1) * cb.multipliers[level]
        total += cost[c] - cost.min()
        r = r - cent[c]
    return -total


def _bank(cb: Codebooks, sids=()):
    bank = SQLiteBankStore(":memory:").create_bank("q", spec=cb.spec, codebook_hash=cb.hash)
    for i, sid in enumerate(sids):
        bank.insert(sid, f"entry {i}")
    return bank


# --- assignment and beam --------------------------------------------------------------------------


def test_is_a_sid_generator(cb):
    q = QuantizerAddresser(cb)
    assert isinstance(q, SIDGenerator)
    assert q.spec == cb.spec


def test_k1_is_the_rq_assignment(cb, queries):
    out = QuantizerAddresser(cb).generate_from_embeddings(queries, 1)
    assert [[c.sid for c in row] for row in out] == [[str(s)] for s in cb.sids(queries)]
    assert all(row[0].score == 0.0 for row in out)


def test_beam_top1_is_quantize_and_sids_are_distinct(cb, queries):
    greedy = [str(s) for s in cb.sids(queries)]
    for k in (2, 7, 20):
        out = QuantizerAddresser(cb).generate_from_embeddings(queries, k)
        for row, g in zip(out, greedy, strict=True):
            sids = [c.sid for c in row]
            assert len(sids) == k and len(set(sids)) == k
            assert sids[0] == g and row[0].score == 0.0
            scores = [c.score for c in row]
            assert scores == sorted(scores, reverse=True) and max(scores[1:]) <= 0.0


def test_beam_scores_are_summed_excess(cb, queries):
    out = QuantizerAddresser(cb).generate_from_embeddings(queries[:10], 12)
    for x, row in zip(queries[:10], out, strict=True):
        for cand in row:
            codes = cb.spec.parse(cand.sid).codes
            assert cand.score == pytest.approx(_excess_score(cb, x, codes), abs=1e-9)


def test_full_width_beam_ranks_every_sid_like_exhaustive_search(cb, queries):
    capacity = cb.spec.capacity
    x = queries[3]
    (row,) = QuantizerAddresser(cb).generate_from_embeddings(x[None], capacity)
    assert len(row) == capacity
    leaves = itertools.product(*(range(n) for n in cb.spec.sizes))
    exhaustive = sorted(_excess_score(cb, x, c) for c in leaves)[::-1]
    np.testing.assert_allclose([c.score for c in row], exhaustive, atol=1e-9)
    # asking for more than exists returns every address once
    (more,) = QuantizerAddresser(cb).generate_from_embeddings(x[None], capacity + 5)
    assert len(more) == capacity


def test_top1_follows_quantize_when_excess_ties():
    """Duplicate centres tie exactly: the RQ assignment (lowest code) still comes first."""
    x = clustered_embeddings(64, 4, clusters=4, seed=2)
    base = _fit(x, "euclidean", sizes=(4, 2))
    twin = [np.vstack([base.centres[0][:2], base.centres[0][:2]]), base.centres[1]]
    cb = Codebooks(twin, metadata=base.metadata.model_copy(update={"hash": ""}))
    out = QuantizerAddresser(cb).generate_from_embeddings(x[:10], 4)
    assert [row[0].sid for row in out] == [str(s) for s in cb.sids(x[:10])]
    for row in out:  # the twin of the chosen first-level code has zero excess too
        assert row[1].score == 0.0


# --- encoding -------------------------------------------------------------------------------------


def test_generate_encodes_with_the_given_encoder():
    texts = [f"experience number {i}" for i in range(60)]
    enc = HashEncoder(DIM, prefix="p: ")
    cfg = RQKMeansConfig(sizes=(4, 2), encoder_id="hash-16", encoder_prefix="p: ")
    cb = RQKMeans(cfg).fit(enc.encode(texts), progress=False).codebooks_
    q = QuantizerAddresser(cb, encoder=enc)
    want = [str(s) for s in cb.sids(enc.encode(texts[:5]))]
    assert [c[0].sid for c in q.generate_batch(texts[:5])] == want
    assert q.generate(texts[2], 3)[0].sid == want[2]
    assert q.generate_batch([], 3) == []
    # a plain encoder without the prefix addresses differently for some text
    plain = QuantizerAddresser(cb, encoder=HashEncoder(DIM))
    assert [c[0].sid for c in plain.generate_batch(texts[:20])] != [
        str(s) for s in cb.sids(enc.encode(texts[:20]))
    ]


def test_encoder_problems_are_codebook_errors(cb):
    with pytest.raises(CodebookError, match="record no encoder"):
        QuantizerAddresser(cb).generate("a context")
    with pytest.raises(CodebookError, match="32-dimensional"):
        QuantizerAddresser(cb, encoder=HashEncoder(32)).generate("a context")
    with pytest.raises(CodebookError, match="dimension 3"):
        QuantizerAddresser(cb).generate_from_embeddings(np.zeros((2, 3)), 2)


# --- bank restrictions ----------------------------------------------------------------------------


def test_occupied_restricts_beam_to_entries(cb, data, queries):
    occupied = sorted({str(s) for s in [*cb.sids(data[:12]), *cb.sids(queries[:3])]})
    bank = _bank(cb, occupied)
    q = QuantizerAddresser(cb, bank=bank, allowed="occupied")
    out = q.generate_from_embeddings(queries, 5)
    greedy = [str(s) for s in cb.sids(queries)]
    hits = 0
    for row, g in zip(out, greedy, strict=True):
        sids = [c.sid for c in row]
        assert set(sids) <= set(occupied) and len(sids) == min(5, len(occupied))
        assert len(set(sids)) == len(sids)
        if g in occupied:
            hits += 1
            assert sids[0] == g and row[0].score == 0.0
        else:
            assert row[0].score < 0.0
    assert hits >= 3  # at least the queries whose own SIDs were stored
    # a beam at least as wide as the allowed set is exhaustive over it
    (every,) = q.generate_from_embeddings(queries[:1], 100)
    exhaustive = sorted(
        ((_excess_score(cb, queries[0], cb.spec.parse(s).codes), s) for s in occupied),
        key=lambda t: -t[0],
    )
    assert sorted(c.sid for c in every) == occupied
    np.testing.assert_allclose([c.score for c in every], [t[0] for t in exhaustive], atol=1e-9)
    # k=1 is greedy among allowed children: an entry, scored by the same rule
    for x, row in zip(queries, q.generate_from_embeddings(queries, 1), strict=True):
        assert len(row) == 1 and row[0].sid in occupied
        codes = cb.spec.parse(row[0].sid).codes
        assert row[0].score == pytest.approx(_excess_score(cb, x, codes), abs=1e-9)


def test_occupied_set_follows_the_bank(cb, queries):
    bank = _bank(cb)
    q = QuantizerAddresser(cb, bank=bank, allowed="occupied")
    assert q.generate_from_embeddings(queries[:2], 3) == [[], []]
    target = str(cb.sids(queries[:1])[0])
    bank.insert(target, "now filled")
    assert [c.sid for c in q.generate_from_embeddings(queries[:1], 3)[0]] == [target]
    bank.revise(target, "")  # deletion frees the slot
    assert q.generate_from_embeddings(queries[:1], 3) == [[]]


def test_prefix_mode_allows_any_leaf_under_an_occupied_parent(cb, data, queries):
    occupied = sorted({str(s) for s in cb.sids(data[:6])})
    parents = {cb.spec.parse(s).codes[:-1] for s in occupied}
    q = QuantizerAddresser(cb, bank=_bank(cb, occupied), allowed="prefix")
    for row in q.generate_from_embeddings(queries, 8):
        codes = [cb.spec.parse(c.sid).codes for c in row]
        assert all(c[:-1] in parents for c in codes)
        assert len(codes) == min(8, len(parents) * SIZES[-1])


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_bad_k_is_refused(cb, queries, k):
    q = QuantizerAddresser(cb, encoder=HashEncoder(DIM))
    with pytest.raises(ValueError, match="k="):
        q.generate_from_embeddings(queries[:1], k)
    with pytest.raises(ValueError, match="k="):
        q.generate("text", k)


def test_bad_configuration_is_refused(cb, data):
    with pytest.raises(ValueError, match="pass bank"):
        QuantizerAddresser(cb, allowed="occupied")
    with pytest.raises(ValueError, match="allowed="):
        QuantizerAddresser(cb, allowed="near")  # type: ignore[arg-type]
    other = SQLiteBankStore(":memory:").create_bank("o", spec=cb.spec, codebook_hash="f" * 64)
    with pytest.raises(CodebookMismatch):
        QuantizerAddresser(cb, bank=other)
    q = QuantizerAddresser(cb, encoder=HashEncoder(DIM))
    with pytest.raises(TypeError):
        q.generate_batch("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        q.generate(["one text"])  # type: ignore[arg-type]


# --- real encoder ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_minilm_uses_recorded_encoder_and_prefix():
    texts = gsm8k_texts(8)
    x = default_encoder(prefix=EXPERIENCE_PREFIX).encode(texts)
    cfg = RQKMeansConfig(
        sizes=(4, 2), encoder_id=DEFAULT_ENCODER_ID, encoder_prefix=EXPERIENCE_PREFIX
    )
    cb = RQKMeans(cfg).fit(x, progress=False).codebooks_
    bank = _bank(cb, sorted({str(s) for s in cb.sids(x)}))
    q = QuantizerAddresser(cb, bank=bank, allowed="occupied")  # loads the recorded encoder
    assert q.encoder.prefix == EXPERIENCE_PREFIX
    out = q.generate_batch(texts[:4], 3)
    want = [str(s) for s in cb.sids(encode_for_codebook(cb, texts[:4]))]
    assert [row[0].sid for row in out] == want
    occupied = {str(s) for s in bank.occupied()}
    assert all(c.sid in occupied for row in out for c in row)
    assert all(len(row) == min(3, len(occupied)) for row in out)
