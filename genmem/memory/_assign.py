"""Vectorised kernels behind RQ-KMeans: exact code assignment and size balancing.

:func:`assign` is the one assignment path (fitting and quantising both use it), so the codes a
fit records are the codes its codebooks give later.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

__all__ = [
    "SETTLED",
    "assign",
    "balanced_share",
    "brute_costs",
    "group_sums",
    "sq_dists",
    "unit_rows",
]

CHUNK_ROWS = 4096  # rows per assignment chunk: bounds the (rows, N_l) cost matrix
_EXACT_BUDGET = 1 << 22  # floats per brute-force sub-chunk (rows * N_l * d)
_TIE_RTOL = 1e-9  # far above float64 rounding of the expanded form (~d * 1e-16)
_SHARE_ROUNDS = 100  # most fixed-point steps per balancing round (each is one argmin pass)
_SHARE_TOL = 1e-3  # L1 change of the shares that counts as settled (0.05% of rows move)
_MIN_STEP = 0.02
SETTLED = 1e-3  # share of rows whose code may still change when balancing counts as done


def brute_costs(r: np.ndarray, vecs: np.ndarray, mult: np.ndarray, cosine: bool) -> np.ndarray:
    """Direct costs for a few rows (the definition the fast path must agree with)."""
    if cosine:
        return -(r[:, None, :] * vecs[None, :, :]).sum(-1)
    return ((r[:, None, :] - vecs[None, :, :]) ** 2).sum(-1) * mult


def assign(r: np.ndarray, vecs: np.ndarray, mult: np.ndarray, cosine: bool) -> np.ndarray:
    """Codes of float64 rows ``r`` against float64 ``vecs``: the argmin of the level cost."""
    k = vecs.shape[0]
    vec_sq = np.einsum("ij,ij->i", vecs, vecs)
    out = np.empty(r.shape[0], dtype=np.int64)
    for start in range(0, r.shape[0], CHUNK_ROWS):
        rc = r[start : start + CHUNK_ROWS]
        cross = rc @ vecs.T
        if cosine:
            cost = -cross
            scale = np.sqrt(np.einsum("ij,ij->i", rc, rc) * vec_sq.max())
        else:
            r_sq = np.einsum("ij,ij->i", rc, rc)
            cost = r_sq[:, None] - 2.0 * cross + vec_sq[None, :]
            np.maximum(cost, 0.0, out=cost)
            cost *= mult[None, :]
            scale = (r_sq + vec_sq.max()) * mult.max()
        best = cost.argmin(axis=1)
        if k > 1:
            two = np.partition(cost, 1, axis=1)
            near = np.flatnonzero(two[:, 1] - two[:, 0] <= _TIE_RTOL * scale)
            step = max(1, _EXACT_BUDGET // (k * vecs.shape[1]))
            for i in range(0, near.size, step):
                rows = near[i : i + step]
                best[rows] = brute_costs(rc[rows], vecs, mult, cosine).argmin(axis=1)
        out[start : start + rc.shape[0]] = best
    return out


def group_sums(r: np.ndarray, codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-code sums of rows and per-code counts (one sparse product, no Python loop)."""
    n = r.shape[0]
    onehot = sparse.csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(k, n))
    return np.asarray(onehot @ r), np.bincount(codes, minlength=k)


def sq_dists(r32: np.ndarray, r_sq: np.ndarray, c: np.ndarray) -> np.ndarray:
    """(N, K) float32 squared distances for balancing (codes themselves come from :func:`assign`).

    ``r32`` are the rows in float32 and ``r_sq`` their squared norms, computed once per level.
    """
    c32 = c.astype(np.float32)
    d2 = r32 @ c32.T
    d2 *= -2.0
    d2 += r_sq[:, None]
    d2 += np.einsum("ij,ij->i", c32, c32)[None, :]
    return np.maximum(d2, 0.0, out=d2)


def balanced_share(d2: np.ndarray, share: np.ndarray, w: float) -> np.ndarray:
    """Damped fixed-point search for shares ``p`` that reproduce themselves under ``m(p)``.

    One step assigns every row to ``argmin_j d2_ij (K p_j)^w`` and moves ``p`` towards the
    smoothed shares that assignment gives. Costs of high-dimensional residuals are nearly equal,
    so full steps overshoot; the step halves whenever the change grows.
    """
    n, k = d2.shape
    step, previous = 0.5, np.inf
    for _ in range(_SHARE_ROUNDS):
        codes = np.argmin(d2 * ((k * share) ** w).astype(np.float32), axis=1)
        target = (np.bincount(codes, minlength=k) + 1.0) / (n + k)
        change = float(np.abs(target - share).sum())
        if change < _SHARE_TOL:
            break
        if change > previous:
            step = max(step / 2, _MIN_STEP)
        previous = change
        share = (1 - step) * share + step * target
    return share


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; zero rows stay zero."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
