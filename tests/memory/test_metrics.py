"""Codebook metrics against small hand-computed examples, plus invariants on random codes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genmem.errors import CodebookError, InvalidSID
from genmem.memory.metrics import code_shares, codebook_metrics, entropy
from genmem.memory.rqkmeans import CodebookMetadata, Codebooks
from genmem.memory.sid import SIDSpec

approx = lambda v: pytest.approx(v, abs=1e-6)  # noqa: E731


def test_two_by_two_example():
    """codes (0,0) (0,1) (1,0) (1,0) under sizes 2x2, every number worked out by hand.

    Level 1 shares (1/2, 1/2): H1 = ln 2 = 0.693147. Level 2 shares (3/4, 1/4):
    H2 = 0.75 ln(4/3) + 0.25 ln 4 = 0.562335. Leaves (1/4, 1/4, 1/2):
    H_joint = 0.5 ln 4 + 0.5 ln 2 = 1.039721. T = 0.693147 + 0.562335 - 1.039721 = 0.215762;
    ICR = 1.039721 / 1.255482 = 0.828144; DUI = (1 + 0.811278) / 2 = 0.905639.
    """
    m = codebook_metrics(np.array([[0, 0], [0, 1], [1, 0], [1, 0]]), SIDSpec((2, 2)))
    assert (m.capacity, m.vocab_size, m.n, m.levels) == (4, 4, 4, 2)
    assert m.utilization == [1.0, 1.0]
    assert m.prefix_utilization == [1.0, 0.75]
    assert (m.used_leaves, m.leaf_utilization, m.ucr) == (3, 0.75, 0.75)
    assert m.singleton_fraction == 0.5
    assert m.entropy == [approx(0.693147), approx(0.562335)]
    assert m.entropy_norm == [approx(1.0), approx(0.811278)]
    assert m.effective_codes == [approx(2.0), approx(1.754765)]
    assert m.dui == approx(0.905639)
    assert m.joint_entropy == approx(1.039721)
    assert m.total_correlation == approx(0.215762)
    assert m.icr == approx(0.828144)
    assert m.recon_mse is None and m.recon_mse_by_depth is None


def test_three_level_prefixes_and_ucr():
    """Sizes 4x2x2, five entries; two share the leaf (1,0,1).

    U_1 = |{0,1,3}|/4 = 0.75, U_2 = 1, U_3 = 1; prefixes: depth 1 {0,1,3} -> 3/4,
    depth 2 {(0,1),(1,0),(3,1)} -> 3/8, depth 3 {(0,1,0),(1,0,1),(3,1,1),(0,1,1)} -> 4/16.
    UCR = 4/5, singletons 3/5.
    """
    codes = np.array([[0, 1, 0], [1, 0, 1], [1, 0, 1], [3, 1, 1], [0, 1, 1]])
    m = codebook_metrics(codes, SIDSpec((4, 2, 2)))
    assert m.utilization == [0.75, 1.0, 1.0]
    assert m.prefix_utilization == [0.75, 0.375, 0.25]
    assert (m.used_leaves, m.ucr, m.singleton_fraction) == (4, 0.8, 0.6)
    assert m.ucr == approx(m.capacity / m.n * m.leaf_utilization)


def test_collapsed_assignment_has_no_icr():
    m = codebook_metrics(np.array([[1, 0]] * 3), SIDSpec((3, 2)))
    assert m.utilization == [approx(1 / 3), 0.5]
    assert m.prefix_utilization == [approx(1 / 3), approx(1 / 6)]
    assert (m.used_leaves, m.singleton_fraction) == (1, 0.0)
    assert m.entropy == [0.0, 0.0] and m.entropy_norm == [0.0, 0.0]
    assert m.effective_codes == [1.0, 1.0]
    assert (m.dui, m.joint_entropy, m.total_correlation) == (0.0, 0.0, 0.0)
    assert m.icr is None


def test_single_code_level_counts_as_balanced():
    """N_l = 1 makes H_l / log N_l 0/0; it is defined as 1.0 (a one-code level is uniform)."""
    m = codebook_metrics(np.array([[0, 0], [0, 1]]), SIDSpec((1, 2)))
    assert m.entropy == [0.0, approx(math.log(2))]
    assert m.entropy_norm == [1.0, approx(1.0)]
    assert m.dui == approx(1.0)
    assert m.icr == approx(1.0) and m.total_correlation == approx(0.0)


def test_reconstruction_metrics_by_hand():
    """Centres L1 {(0,0), (10,0)}, L2 {(1,0), (0,1)}; e = (1,0) -> (0,0); e = (10,2) -> (1,1).

    ê = (1,0) and (10,1): squared errors 0 and 1, so MSE 0.5, per dimension 0.25, mean
    Euclidean error 0.5. After level 1 only: ê = (0,0), (10,0), squared errors 1 and 4 -> 2.5.
    """
    meta = CodebookMetadata(sizes=(2, 2), distance="euclidean", dim=2, fitted_on=0)
    cb = Codebooks([np.array([[0, 0], [10, 0]]), np.array([[1, 0], [0, 1]])], metadata=meta)
    e = np.array([[1.0, 0.0], [10.0, 2.0]])
    codes = np.array([[0, 0], [1, 1]])
    m = codebook_metrics(codes, cb.spec, embeddings=e, codebooks=cb)
    assert (m.recon_mse, m.recon_mse_per_dim, m.recon_euclidean) == (0.5, 0.25, 0.5)
    assert m.recon_mse_by_depth == [2.5, 0.5]
    np.testing.assert_array_equal(cb.quantize(e), codes)


def test_code_shares_and_entropy():
    shares = code_shares(np.array([[0, 1], [2, 1], [2, 0], [2, 1]]), SIDSpec((3, 2)))
    np.testing.assert_allclose(shares[0], [0.25, 0.0, 0.75])
    np.testing.assert_allclose(shares[1], [0.25, 0.75])
    assert entropy(shares[0]) == approx(0.562335)
    assert entropy([0.0, 1.0]) == 0.0


@pytest.mark.parametrize(
    ("codes", "error", "match"),
    [
        (np.array([[0, 2]]), InvalidSID, "level 2"),
        (np.array([[-1, 0]]), InvalidSID, "level 1"),
        (np.array([[0.0, 1.0]]), InvalidSID, "integers"),
        (np.array([0, 1]), CodebookError, "shape"),
        (np.zeros((0, 2), dtype=int), CodebookError, "non-empty"),
        (np.zeros((3, 3), dtype=int), CodebookError, "shape"),
    ],
)
def test_bad_codes_are_rejected(codes, error, match):
    with pytest.raises(error, match=match):
        codebook_metrics(codes, SIDSpec((2, 2)))


def test_reconstruction_needs_matching_inputs():
    meta = CodebookMetadata(sizes=(2, 2), distance="euclidean", dim=2, fitted_on=0)
    cb = Codebooks([np.eye(2), np.eye(2)], metadata=meta)
    codes = np.zeros((2, 2), dtype=int)
    with pytest.raises(CodebookError, match="both"):
        codebook_metrics(codes, cb.spec, embeddings=np.zeros((2, 2)))
    with pytest.raises(CodebookError, match="pair up"):
        codebook_metrics(codes, cb.spec, embeddings=np.zeros((3, 2)), codebooks=cb)
    with pytest.raises(CodebookError, match="dimension 3"):
        codebook_metrics(codes, cb.spec, embeddings=np.zeros((2, 3)), codebooks=cb)


@settings(max_examples=50, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    n=st.integers(1, 80),
    seed=st.integers(0, 2**16),
)
def test_invariants_on_random_codes(sizes, n, seed):
    spec = SIDSpec(tuple(sizes))
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, k, size=n) for k in sizes], axis=1)
    m = codebook_metrics(codes, spec)
    assert m.ucr == approx(m.capacity / n * m.leaf_utilization)
    assert m.used_leaves == len({tuple(r) for r in codes.tolist()})
    assert all(0 < u <= 1 for u in m.utilization + m.prefix_utilization)
    assert m.prefix_utilization[-1] == approx(m.leaf_utilization)
    assert 0 <= m.dui <= 1 + 1e-12
    assert all(1 - 1e-9 <= e <= k + 1e-9 for e, k in zip(m.effective_codes, sizes, strict=True))
    assert m.total_correlation >= -1e-9
    assert m.icr is None or 0 < m.icr <= 1 + 1e-9
