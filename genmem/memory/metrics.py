"""Codebook metrics: capacity, utilisation, balance, inter-level dependence, reconstruction.

Definitions (paper appendix on RQ-KMeans), for ``n`` evaluated codes ``z_i = (s_i^1..s_i^L)``
under sizes ``N_1..N_L``; every log is natural:

- ``capacity = prod N_l``; ``vocab_size = sum N_l``.
- ``utilization[l] = |{s_i^l}| / N_l`` and ``prefix_utilization[l] = |P_l| / prod_{h<=l} N_h``,
  with ``P_l`` the set of observed depth-``l`` prefixes; fractions in 0..1 (the paper prints
  percentages). ``used_leaves = |P_L|``; ``leaf_utilization = prefix_utilization[L-1]``.
- ``ucr = |P_L| / n`` (distinct complete SIDs per entry); ``singleton_fraction`` = share of
  entries alone on their SID, ``#{z : n_z = 1} / n``.
- ``entropy[l] = H_l = -sum_j p_lj log p_lj`` over the code shares ``p_lj`` (0 log 0 = 0);
  ``entropy_norm[l] = H_l / log N_l``; ``effective_codes[l] = exp(H_l)``.
  A level with a single code (``N_l = 1``) cannot be unbalanced, so its ``entropy_norm`` is
  defined as 1.0 (the formula would divide 0 by 0).
- ``dui = mean_l entropy_norm[l]``.
- ``joint_entropy = H_joint`` over complete SIDs; ``total_correlation = sum_l H_l - H_joint``;
  ``icr = H_joint / sum_l H_l``, or None when every marginal entropy is 0 (collapsed codes).
- With embeddings ``e_i`` and the codebooks: ``recon_euclidean = mean_i ||e_i - ê_i||``,
  ``recon_mse = mean_i ||e_i - ê_i||^2`` (squared error per entry, summed over dimensions),
  ``recon_mse_per_dim = recon_mse / d`` (per coordinate: the scale of the paper's
  reconstruction-loss tables), and ``recon_mse_by_depth[l]`` the per-entry squared error of the
  partial reconstruction from the first ``l + 1`` levels.
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from genmem.errors import CodebookError
from genmem.memory.rqkmeans import Codebooks, as_embeddings, check_codes
from genmem.memory.sid import SIDSpec

__all__ = ["CodebookMetrics", "code_shares", "codebook_metrics", "entropy"]


class CodebookMetrics(BaseModel):
    """Quality of one set of SID assignments (see the module docstring for each formula)."""

    model_config = ConfigDict(frozen=True)

    sizes: list[int] = Field(description="Codebook size per level.")
    levels: int = Field(description="Number of levels L.")
    capacity: int = Field(description="Number of possible addresses, prod N_l.")
    vocab_size: int = Field(description="Number of level symbols, sum N_l.")
    n: int = Field(description="Number of evaluated entries.")
    utilization: list[float] = Field(description="U_l: share of level-l codes used (0-1).")
    prefix_utilization: list[float] = Field(description="U_1:l: share of prefixes used (0-1).")
    used_leaves: int = Field(description="|P_L|: distinct complete SIDs.")
    leaf_utilization: float = Field(description="U_1:L = used_leaves / capacity.")
    ucr: float = Field(description="Unique-code ratio |P_L| / n.")
    singleton_fraction: float = Field(description="Share of entries alone on their SID.")
    entropy: list[float] = Field(description="H_l in nats.")
    entropy_norm: list[float] = Field(description="H_l / log N_l (1.0 when N_l = 1).")
    effective_codes: list[float] = Field(description="exp(H_l).")
    dui: float = Field(description="Mean normalised entropy over levels.")
    joint_entropy: float = Field(description="Entropy of complete SIDs, nats.")
    total_correlation: float = Field(description="sum_l H_l - H_joint, nats.")
    icr: float | None = Field(description="H_joint / sum_l H_l; None when all H_l are 0.")
    recon_mse: float | None = Field(default=None, description="mean ||e - ê||^2 per entry.")
    recon_mse_per_dim: float | None = Field(default=None, description="recon_mse / d.")
    recon_euclidean: float | None = Field(default=None, description="mean ||e - ê||.")
    recon_mse_by_depth: list[float] | None = Field(
        default=None, description="mean ||e - ê^(l)||^2 for depths 1..L."
    )


def _check_codes(codes: np.ndarray, spec: SIDSpec) -> np.ndarray:
    c = check_codes(codes, spec)
    if c.shape[0] == 0:
        raise CodebookError("metrics need a non-empty set of codes")
    return c


def code_shares(codes: np.ndarray, spec: SIDSpec) -> list[np.ndarray]:
    """Per-level code shares ``p_lj`` (level l: an (N_l,) array summing to 1), for plots."""
    c = _check_codes(codes, spec)
    return [np.bincount(c[:, lv], minlength=n) / c.shape[0] for lv, n in enumerate(spec.sizes)]


def entropy(shares: np.ndarray) -> float:
    """Shannon entropy in nats of a probability vector, with 0 log 0 = 0."""
    p = np.asarray(shares, dtype=np.float64)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum()) if p.size else 0.0


def _prefix_counts(c: np.ndarray, spec: SIDSpec) -> list[np.ndarray]:
    """Occupancy counts of the observed prefixes of every depth 1..L."""
    out = []
    if spec.capacity < 2**62:  # one integer key per prefix: fast unique counts
        key = np.zeros(c.shape[0], dtype=np.int64)
        for level, n in enumerate(spec.sizes):
            key = key * n + c[:, level]
            out.append(np.unique(key, return_counts=True)[1])
    else:
        for depth in range(1, spec.levels + 1):
            out.append(np.unique(c[:, :depth], axis=0, return_counts=True)[1])
    return out


def codebook_metrics(
    codes: np.ndarray,
    spec: SIDSpec,
    embeddings: np.ndarray | None = None,
    codebooks: Codebooks | None = None,
) -> CodebookMetrics:
    """All codebook metrics of (n, L) ``codes``; reconstruction needs embeddings and codebooks."""
    c = _check_codes(codes, spec)
    n = c.shape[0]
    shares = code_shares(c, spec)
    prefixes = _prefix_counts(c, spec)
    h = [entropy(p) for p in shares]
    h_norm = [hl / math.log(nl) if nl > 1 else 1.0 for hl, nl in zip(h, spec.sizes, strict=True)]
    leaf_counts = prefixes[-1]
    h_joint = entropy(leaf_counts / n)
    h_sum = float(sum(h))
    prefix_capacity = np.cumprod(np.asarray(spec.sizes, dtype=np.float64))
    recon: dict[str, object] = {}
    if embeddings is not None or codebooks is not None:
        recon = _reconstruction(c, spec, embeddings, codebooks)
    return CodebookMetrics(
        sizes=list(spec.sizes),
        levels=spec.levels,
        capacity=spec.capacity,
        vocab_size=spec.vocab_size,
        n=n,
        utilization=[float(np.count_nonzero(p)) / len(p) for p in shares],
        prefix_utilization=[
            len(pc) / cap for pc, cap in zip(prefixes, prefix_capacity, strict=True)
        ],
        used_leaves=len(leaf_counts),
        leaf_utilization=len(leaf_counts) / spec.capacity,
        ucr=len(leaf_counts) / n,
        singleton_fraction=float(np.count_nonzero(leaf_counts == 1)) / n,
        entropy=h,
        entropy_norm=h_norm,
        effective_codes=[math.exp(x) for x in h],
        dui=float(np.mean(h_norm)),
        joint_entropy=h_joint,
        total_correlation=h_sum - h_joint,
        icr=h_joint / h_sum if h_sum > 0 else None,
        **recon,
    )


def _reconstruction(
    c: np.ndarray, spec: SIDSpec, embeddings: np.ndarray | None, codebooks: Codebooks | None
) -> dict[str, object]:
    if embeddings is None or codebooks is None:
        raise CodebookError("reconstruction metrics need both embeddings and codebooks")
    if codebooks.spec != spec:
        raise CodebookError(f"codebooks have spec {codebooks.spec} but codes use spec {spec}")
    e = as_embeddings(embeddings, dim=codebooks.dim).astype(np.float64)
    if e.shape[0] != c.shape[0]:
        raise CodebookError(f"{e.shape[0]} embeddings for {c.shape[0]} codes; they must pair up")
    by_depth = []
    for depth in range(1, spec.levels + 1):
        err = e - codebooks.reconstruct(c, depth)
        by_depth.append(np.einsum("ij,ij->i", err, err))
    sq = by_depth[-1]
    return {
        "recon_mse": float(sq.mean()),
        "recon_mse_per_dim": float(sq.mean()) / codebooks.dim,
        "recon_euclidean": float(np.sqrt(sq).mean()),
        "recon_mse_by_depth": [float(d.mean()) for d in by_depth],
    }
