"""Residual K-means (RQ-KMeans) codebooks: fitting, frozen assignment, save and load.

Fitting follows the residual recurrence of the paper. With ``r_i^(1) = e_i``, level ``l`` fits
``N_l`` centres to the residuals ``r^(l)``, assigns each residual a code ``s_i^l`` and passes on
``r_i^(l+1) = r_i^(l) - c^(l)_{s_i^l}``. Whatever the distance setting, the reconstruction after
``l`` levels is the sum of the chosen centres, ``ê_i^(l) = sum_{h<=l} c^(h)_{s_i^h}``, so
``e_i - ê_i^(l)`` is exactly the residual handed to level ``l+1``.

Distance settings (how a code is chosen; all three use the recurrence above):

``euclidean``
    ``s = argmin_j ||r - c_j||^2`` with the K-means centres ``c_j`` (the paper's Eq. 2-3).

``spherical``
    Level ``l`` clusters the unit-normalised residuals ``r / ||r||`` (zero rows stay zero) with
    K-means and keeps the unit directions ``u_j`` of the centres. Assignment is by cosine,
    ``s = argmax_j <r, u_j>``. Each direction then gets a scale, the least-squares fit over the
    residuals it won on the fitting set, ``a_j = mean_{i: s_i=j} <r_i, u_j>`` (``a_j = 0`` when
    none), and the stored centre is ``c_j = a_j u_j``. The residual passed on is ``r - c_s``,
    so reconstruction stays the sum of the chosen (scaled) centres.

``weighted`` (size-balanced, exponent ``w``)
    ``s = argmin_j ||r - c_j||^2 * m_j`` with one multiplier per centre,
    ``m_j = (N_l * p_j) ** w``, where ``p_j = (n_j + 1) / (N + N_l)`` is the Laplace-smoothed
    share of the ``N`` fitting residuals whose weighted cost is lowest at centre ``j``. An
    over-full centre (``N_l p_j > 1``) costs more, an under-used one less. Since ``p`` depends
    on the assignment and the assignment on ``p``, fitting solves for the fixed point by damped
    iteration (``p <- (1 - a) p + a p_new``, ``a`` starting at 1/2 and halving whenever the
    change grows). Starting from the Euclidean K-means centres, each of up to ``balance_iter``
    rounds solves for ``p`` and moves every centre to the mean of its residuals (stopping early
    once fewer than 0.1% of codes change between rounds); a last solve gives the final ``p``.
    The multipliers are then frozen into the codebook and the fitting set is re-assigned with
    them, so quantising any data is one vectorised argmin with fixed multipliers. ``w = 0``
    gives ``m_j = 1`` and skips balancing: exactly the Euclidean setting.

Assignment everywhere uses ``||x||^2 - 2 x.c + ||c||^2`` (or ``x.u`` for cosine) in float64 on
chunks of rows; rows whose best and second-best costs lie within rounding distance are
re-scored with the direct difference, so codes equal a brute-force argmin.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from hashlib import sha256
from pathlib import Path
from typing import Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from sklearn.cluster import KMeans
from tqdm.auto import tqdm

from genmem._version import __version__
from genmem.errors import CodebookError, InvalidSID
from genmem.memory._assign import (
    CHUNK_ROWS,
    SETTLED,
    assign,
    balanced_share,
    group_sums,
    sq_dists,
    unit_rows,
)
from genmem.memory.codebook_registry import registry_path
from genmem.memory.sid import DEFAULT_SIZES, SID, SIDSpec

__all__ = [
    "CENTRES_FILE",
    "DEFAULT_WEIGHT",
    "METADATA_FILE",
    "CodebookMetadata",
    "Codebooks",
    "Distance",
    "RQKMeans",
    "RQKMeansConfig",
    "as_embeddings",
    "check_codes",
]

Distance = Literal["euclidean", "spherical", "weighted"]
DEFAULT_WEIGHT = 0.5
"""The balance exponent ``w`` of ``weighted`` assignment when none is given (the paper's)."""
"""How a level picks its code: see the module docstring for the exact rules."""

DISTANCES: tuple[str, ...] = get_args(Distance)
CENTRES_FILE = "centres.npz"
METADATA_FILE = "metadata.json"
_FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class RQKMeansConfig:
    """Settings of an RQ-KMeans fit (defaults: the paper's 48x16x8x8, weighted, w=0.5)."""

    sizes: tuple[int, ...] = DEFAULT_SIZES
    """Codebook size ``N_l`` per level, level 1 first."""

    distance: Distance = "weighted"
    """Assignment rule per level: ``euclidean``, ``spherical`` or ``weighted``."""

    weight: float | None = None
    """Balance exponent ``w`` for ``weighted`` (default 0.5); must stay unset otherwise."""

    seed: int = 0
    """Seed of every K-means initialisation (one derived seed per level)."""

    n_init: int = 1
    """K-means restarts per level; the run with the lowest inertia is kept."""

    max_iter: int = 100
    """Most Lloyd iterations per K-means run."""

    tol: float = 1e-4
    """K-means convergence tolerance (relative centre shift, as in scikit-learn)."""

    max_points_per_centre: int | None = 256
    """Cap for the K-means start: k-means++ and a first Lloyd run use a seeded sample of at most
    ``N_l`` times this many residuals, then Lloyd continues on all of them from those centres.
    ``None`` runs everything on all residuals."""

    balance_iter: int = 10
    """Most balancing rounds (share fixed point, then centre update) per level for ``weighted``."""

    encoder_id: str | None = None
    """The encoder that produced the embeddings (recorded in the metadata), if any."""

    encoder_prefix: str | None = None
    """The instruction prefix the texts were encoded with (recorded in the metadata), if any."""

    def __post_init__(self) -> None:
        try:
            spec = SIDSpec(tuple(self.sizes))
        except ValueError as exc:
            raise CodebookError(f"{exc}; pass sizes like (48, 16, 8, 8)") from None
        object.__setattr__(self, "sizes", spec.sizes)
        if self.distance not in DISTANCES:
            raise CodebookError(
                f"distance={self.distance!r} is unknown; use one of {', '.join(DISTANCES)}"
            )
        if self.distance == "weighted":
            w = DEFAULT_WEIGHT if self.weight is None else float(self.weight)
            if not math.isfinite(w) or w < 0:
                raise CodebookError(
                    f"weight={self.weight!r} must be a finite number >= 0 (0 means Euclidean); "
                    "the paper's setting is 0.5"
                )
            object.__setattr__(self, "weight", w)
        elif self.weight is not None:
            raise CodebookError(
                f"weight={self.weight!r} only applies to distance='weighted', but "
                f"distance={self.distance!r}; drop the weight or use distance='weighted'"
            )
        checks = [("n_init", 1), ("max_iter", 1), ("balance_iter", 0), ("seed", 0)]
        if self.max_points_per_centre is not None:
            checks.append(("max_points_per_centre", 1))
        for name, low in checks:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise CodebookError(f"{name}={value!r} must be an integer >= {low}")
        if self.seed >= 2**32:
            raise CodebookError(f"seed={self.seed} must be below 2**32 (a numpy seed)")
        if not (math.isfinite(self.tol) and self.tol >= 0):
            raise CodebookError(f"tol={self.tol!r} must be a finite number >= 0, e.g. 1e-4")

    @property
    def spec(self) -> SIDSpec:
        """The address space these sizes define."""
        return SIDSpec(self.sizes)


class CodebookMetadata(BaseModel):
    """What ``metadata.json`` records beside the arrays of a codebook directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = Field(default=_FORMAT_VERSION, description="Layout of the directory.")
    sizes: tuple[int, ...] = Field(description="Codebook size per level.")
    distance: Distance = Field(description="Assignment rule (euclidean, spherical, weighted).")
    weight: float | None = Field(default=None, description="Balance exponent w (weighted only).")
    dim: int = Field(ge=1, description="Embedding dimension d.")
    fitted_on: int = Field(ge=0, description="Number of embeddings the codebooks were fitted on.")
    seed: int = Field(default=0, description="Seed of the fit.")
    n_init: int = Field(default=1, description="K-means restarts per level.")
    max_iter: int = Field(default=100, description="Most K-means iterations per level.")
    tol: float = Field(default=1e-4, description="K-means tolerance.")
    balance_iter: int = Field(default=0, description="Most balancing rounds (weighted).")
    max_points_per_centre: int | None = Field(default=None, description="K-means start sample.")
    encoder_id: str | None = Field(default=None, description="Encoder that made the embeddings.")
    encoder_prefix: str | None = Field(default=None, description="Instruction prefix used.")
    created_at: str = Field(default="", description="UTC time of the fit (ISO 8601).")
    genmem_version: str = Field(default=__version__, description="genmem version that fitted.")
    hash: str = Field(default="", description="Content hash (sha256 hex); see Codebooks.hash.")

    @model_validator(mode="after")
    def _weight_fits_distance(self) -> CodebookMetadata:
        if self.distance != "weighted" and self.weight is not None:
            raise ValueError(f"weight={self.weight} is set but distance={self.distance!r}")
        if self.distance == "weighted" and not (self.weight is not None and self.weight >= 0):
            raise ValueError(f"distance='weighted' needs a weight >= 0, got {self.weight}")
        return self


def check_codes(codes: object, spec: SIDSpec, *, depth: int | None = None) -> np.ndarray:
    """An int64 (N, L) code matrix of ``spec`` (with ``depth``: at least that many columns)."""
    c = np.asarray(codes)
    need = spec.levels if depth is None else depth
    if c.ndim != 2 or not (c.shape[1] >= need if depth is not None else c.shape[1] == need):
        raise CodebookError(
            f"codes must be an (N, {need}) matrix for spec {spec}, not shape {c.shape}"
        )
    if c.size and c.dtype.kind not in "iu":
        raise InvalidSID(f"codes must be integers, got dtype {c.dtype}", text=str(c.dtype))
    for level in range(need if c.shape[0] else 0):
        lo, hi, n = int(c[:, level].min()), int(c[:, level].max()), spec.sizes[level]
        if lo < 0 or hi >= n:
            raise InvalidSID(
                f"codes at level {level + 1} span {lo}..{hi}; allowed 0-{n - 1} (spec {spec})",
                text=(lo, hi),
            )
    return c.astype(np.int64, copy=False)


def as_embeddings(x: object, *, dim: int | None = None, what: str = "embeddings") -> np.ndarray:
    """Check that ``x`` is a finite real (N, d) matrix (of ``dim`` columns when given)."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "fiu" or arr.dtype == np.bool_:
        raise CodebookError(f"{what} must be a real-valued array, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise CodebookError(f"{what} must be a 2-D (N, d) matrix, got shape {arr.shape}")
    if arr.shape[1] < 1:
        raise CodebookError(f"{what} have no columns (shape {arr.shape}); d must be >= 1")
    if dim is not None and arr.shape[1] != dim:
        raise CodebookError(
            f"{what} have dimension {arr.shape[1]} but the codebooks were fitted on "
            f"{dim}-dimensional embeddings; encode with the codebooks' own encoder"
        )
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr).all(axis=1))[0])
        raise CodebookError(f"{what} contain NaN or inf (first at row {bad}); clean them first")
    return arr


class Codebooks:
    """Frozen RQ-KMeans codebooks: per-level centres (plus assignment state) and metadata.

    Every array is read-only. ``centres[l]`` are the vectors summed by reconstruction;
    ``directions[l]`` (spherical only) are the unit vectors codes are chosen by;
    ``multipliers[l]`` (all ones except for weighted) scale each centre's squared distance.
    """

    __slots__ = ("_centres", "_directions", "_frozen", "_metadata", "_multipliers", "_spec")

    def __init__(
        self,
        centres: Sequence[np.ndarray],
        *,
        metadata: CodebookMetadata,
        multipliers: Sequence[np.ndarray] | None = None,
        directions: Sequence[np.ndarray] | None = None,
    ) -> None:
        try:
            spec = SIDSpec(tuple(metadata.sizes))
        except ValueError as exc:
            raise CodebookError(str(exc)) from None
        if len(centres) != spec.levels:
            raise CodebookError(f"{len(centres)} centre arrays for {spec.levels} levels ({spec})")
        if (directions is not None) != (metadata.distance == "spherical"):
            raise CodebookError("directions are required for, and only for, spherical codebooks")
        if multipliers is None:
            multipliers = [np.ones(n, dtype=np.float32) for n in spec.sizes]
        self._spec = spec
        self._centres = self._frozen_arrays("centres", centres, metadata.dim, matrix=True)
        self._multipliers = self._frozen_arrays("multipliers", multipliers, None, matrix=False)
        self._directions = (
            None
            if directions is None
            else self._frozen_arrays("directions", directions, metadata.dim, matrix=True)
        )
        if any((m <= 0).any() for m in self._multipliers):
            raise CodebookError("every multiplier must be > 0")
        digest = self._content_hash(metadata)
        if metadata.hash and metadata.hash != digest:
            raise CodebookError(
                f"codebook content hash mismatch: {METADATA_FILE} records {metadata.hash[:16]}... "
                f"but the arrays and parameters hash to {digest[:16]}...; the codebooks were "
                "edited or corrupted: restore them from a copy or refit with `genmem codebook fit`"
            )
        self._metadata = metadata.model_copy(update={"hash": digest})
        self._frozen = True

    def _frozen_arrays(
        self, name: str, arrays: Sequence[np.ndarray], dim: int | None, *, matrix: bool
    ) -> tuple[np.ndarray, ...]:
        out = []
        for level, (arr, n) in enumerate(zip(arrays, self._spec.sizes, strict=True), 1):
            a = np.array(arr, dtype=np.float32, copy=True)
            want = (n, dim) if matrix else (n,)
            if a.shape != want or not np.isfinite(a).all():
                raise CodebookError(
                    f"{name} of level {level} have shape {a.shape}, expected finite {want}"
                )
            a.flags.writeable = False
            out.append(a)
        return tuple(out)

    def __setattr__(self, name: str, value: object) -> None:
        if getattr(self, "_frozen", False):
            raise AttributeError(f"Codebooks are frozen; cannot set {name!r} (fit new ones)")
        object.__setattr__(self, name, value)

    def _content_hash(self, meta: CodebookMetadata) -> str:
        # What changes the SID a text or vector gets: arrays, rule, and the encoder recipe.
        header = {
            "format_version": _FORMAT_VERSION,
            "sizes": list(self._spec.sizes),
            "dim": meta.dim,
            "distance": meta.distance,
            "weight": meta.weight if meta.distance == "weighted" else None,
            "encoder_id": meta.encoder_id,
            "encoder_prefix": meta.encoder_prefix,
        }
        h = sha256(json.dumps(header, sort_keys=True).encode())
        groups = {"centres": self._centres, "multipliers": self._multipliers}
        if self._directions is not None:
            groups["directions"] = self._directions
        for name, arrays in groups.items():
            for level, arr in enumerate(arrays, 1):
                h.update(f"{name}/{level}/{arr.shape}".encode())
                h.update(np.ascontiguousarray(arr, dtype="<f4").tobytes())
        return h.hexdigest()

    def __repr__(self) -> str:
        m = self._metadata
        w = f", w={m.weight}" if m.distance == "weighted" else ""
        return f"Codebooks({self._spec}, d={m.dim}, {m.distance}{w}, hash={self.hash[:12]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Codebooks) and other.hash == self.hash

    def __hash__(self) -> int:
        return hash(self.hash)

    @property
    def spec(self) -> SIDSpec:
        """The address space (one size per level)."""
        return self._spec

    @property
    def centres(self) -> tuple[np.ndarray, ...]:
        """Per-level (N_l, d) float32 centres; reconstruction sums the chosen ones."""
        return self._centres

    @property
    def directions(self) -> tuple[np.ndarray, ...] | None:
        """Per-level unit directions codes are chosen by (spherical only, else None)."""
        return self._directions

    @property
    def multipliers(self) -> tuple[np.ndarray, ...]:
        """Per-level (N_l,) cost multipliers frozen by the fit (all ones unless weighted)."""
        return self._multipliers

    @property
    def metadata(self) -> CodebookMetadata:
        """The recorded parameters, provenance and content hash."""
        return self._metadata

    @property
    def distance(self) -> Distance:
        """The assignment rule."""
        return self._metadata.distance

    @property
    def weight(self) -> float | None:
        """The balance exponent ``w`` (weighted only)."""
        return self._metadata.weight

    @property
    def dim(self) -> int:
        """Embedding dimension ``d``."""
        return self._metadata.dim

    @property
    def hash(self) -> str:
        """sha256 over arrays, sizes, distance, weight and encoder recipe (not the fit time)."""
        return self._metadata.hash

    def quantize(self, x: np.ndarray) -> np.ndarray:
        """(N, L) int64 codes of (N, d) embeddings, level 1 first."""
        arr = as_embeddings(x, dim=self.dim)
        codes = np.empty((arr.shape[0], self._spec.levels), dtype=np.int64)
        cosine = self._directions is not None
        step = 8 * CHUNK_ROWS  # bounds the float64 copy of the input
        for start in range(0, arr.shape[0], step):
            r = arr[start : start + step].astype(np.float64)
            for level in range(self._spec.levels):
                cent = self._centres[level].astype(np.float64)
                vecs = self._directions[level].astype(np.float64) if cosine else cent
                mult = self._multipliers[level].astype(np.float64)
                s = assign(r, vecs, mult, cosine)
                r -= cent[s]
                codes[start : start + step, level] = s
        return codes

    def sids(self, x: np.ndarray) -> list[SID]:
        """The SID of each embedding."""
        return [SID(tuple(row), self._spec) for row in self.quantize(x).tolist()]

    def reconstruct(self, codes: np.ndarray, depth: int | None = None) -> np.ndarray:
        """(N, d) float64 sum of the chosen centres of the first ``depth`` levels (default L)."""
        depth = self._spec.levels if depth is None else depth
        if not 0 <= depth <= self._spec.levels:
            raise CodebookError(f"depth {depth} outside 0..{self._spec.levels}")
        c = check_codes(codes, self._spec, depth=depth)
        out = np.zeros((c.shape[0], self.dim), dtype=np.float64)
        for level in range(depth):
            out += self._centres[level].astype(np.float64)[c[:, level]]
        return out

    def residuals(self, x: np.ndarray, depth: int | None = None) -> np.ndarray:
        """(N, d) float64 ``e - ê^(depth)``: what the first ``depth`` levels leave unexplained."""
        arr = as_embeddings(x, dim=self.dim)
        return arr.astype(np.float64) - self.reconstruct(self.quantize(arr), depth)

    def reconstruction_error(self, x: np.ndarray, depth: int | None = None) -> np.ndarray:
        """(N,) per-entry Euclidean error ``||e - ê||_2`` (paper Eq. C.2)."""
        return np.linalg.norm(self.residuals(x, depth), axis=1)

    def save(
        self, directory: str | Path, *, overwrite: bool = False, remember: bool = True
    ) -> Path:
        """Write ``centres.npz`` and ``metadata.json`` into ``directory`` (made atomically).

        ``remember`` also keeps a copy by hash (:mod:`genmem.memory.codebook_registry`), so a
        bank built with them can be quantised from its hash alone.
        """
        target = Path(directory)
        if target.exists() and (not target.is_dir() or any(target.iterdir())):
            if not overwrite or not (target / METADATA_FILE).is_file():
                raise CodebookError(
                    f"{target} already exists and is not empty; choose a new directory "
                    "(codebooks are frozen: banks refer to them by hash)"
                )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            arrays = {f"centres_{i}": a for i, a in enumerate(self._centres, 1)}
            arrays |= {f"multipliers_{i}": a for i, a in enumerate(self._multipliers, 1)}
            if self._directions is not None:
                arrays |= {f"directions_{i}": a for i, a in enumerate(self._directions, 1)}
            np.savez(tmp / CENTRES_FILE, **arrays)
            (tmp / METADATA_FILE).write_text(self._metadata.model_dump_json(indent=2) + "\n")
            if target.exists():
                shutil.rmtree(target)
            tmp.rename(target)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
        if remember:
            self.remember()
        return target

    @classmethod
    def load(cls, directory: str | Path, *, remember: bool = True) -> Codebooks:
        """Read a directory written by :meth:`save`, verifying its content hash.

        ``remember`` keeps a copy by hash, as :meth:`save` does.
        """
        src = Path(directory)
        fix = "point at a directory written by `genmem codebook fit --out DIR`"
        if not src.is_dir():
            raise CodebookError(f"codebook directory {str(src)!r} does not exist; {fix}")
        meta_path, arr_path = src / METADATA_FILE, src / CENTRES_FILE
        if not meta_path.is_file() or not arr_path.is_file():
            missing = METADATA_FILE if not meta_path.is_file() else CENTRES_FILE
            raise CodebookError(f"{src} is not a codebook directory: {missing} is missing; {fix}")
        try:
            meta = CodebookMetadata.model_validate_json(meta_path.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError) as exc:
            first = str(exc).splitlines()[0]
            raise CodebookError(
                f"{meta_path} is not valid codebook metadata ({first}); restore it or refit"
            ) from None
        if not meta.hash:
            raise CodebookError(f"{meta_path} records no content hash; restore it or refit")
        levels = range(1, len(meta.sizes) + 1)
        try:
            with np.load(arr_path, allow_pickle=False) as npz:
                centres = [npz[f"centres_{i}"] for i in levels]
                mults = [npz[f"multipliers_{i}"] for i in levels]
                dirs = [npz[f"directions_{i}"] for i in levels] if "directions_1" in npz else None
        except Exception as exc:  # whatever a damaged archive raises: BadZipFile, EOFError,
            # zipfile's NotImplementedError for a flipped compression-method byte, ...
            raise CodebookError(
                f"{arr_path} cannot be read as codebook arrays ({exc}); restore it or refit"
            ) from None
        try:
            codebooks = cls(centres, metadata=meta, multipliers=mults, directions=dirs)
        except CodebookError as exc:
            raise CodebookError(f"{src}: {exc}") from None
        if remember:
            codebooks.remember()
        return codebooks

    def remember(self) -> Path | None:
        """Keep a copy by hash (:mod:`~genmem.memory.codebook_registry`); None if unwritable."""
        target = registry_path(self.hash)
        if (target / METADATA_FILE).is_file():
            return target
        try:
            return self.save(target, remember=False)
        except (OSError, CodebookError):  # a read-only cache or a concurrent copy: not an error
            return target if (target / METADATA_FILE).is_file() else None

    @classmethod
    def recall(cls, codebook_hash: str) -> Codebooks | None:
        """The codebooks with this content hash, if this machine has saved or loaded them."""
        target = registry_path(codebook_hash)
        if not (target / METADATA_FILE).is_file():
            return None
        codebooks = cls.load(target, remember=False)
        return codebooks if codebooks.hash == codebook_hash else None


class RQKMeans:
    """Fit RQ-KMeans codebooks level by level on residuals (scikit-learn style).

    After :meth:`fit`: ``codebooks_`` (frozen :class:`Codebooks`), ``codes_`` (the fitting
    set's (N, L) codes, equal to ``codebooks_.quantize(X)``), ``level_seconds_`` and
    ``level_mse_`` (mean squared residual norm after each level).
    """

    def __init__(self, config: RQKMeansConfig | None = None) -> None:
        self.config = config or RQKMeansConfig()

    def fit(self, x: np.ndarray, *, progress: bool = True) -> RQKMeans:
        """Fit every level on the residuals of the previous ones; returns ``self``."""
        cfg = self.config
        arr = as_embeddings(x)
        n, dim = arr.shape
        if n < max(cfg.sizes):
            raise CodebookError(
                f"fitting {cfg.spec} needs at least {max(cfg.sizes)} embeddings (one per centre "
                f"of the largest level), got {n}; pass more embeddings or smaller sizes"
            )
        seeds = np.random.SeedSequence(cfg.seed).generate_state(cfg.spec.levels)
        r = arr.astype(np.float64)
        centres, mults, dirs, codes = [], [], [], np.empty((n, cfg.spec.levels), np.int64)
        self.level_seconds_: list[float] = []
        self.level_mse_: list[float] = []
        bar = tqdm(total=cfg.spec.levels, desc="RQ-KMeans", unit="level", disable=not progress)
        with bar:
            for level, k in enumerate(cfg.sizes):
                t0 = time.perf_counter()
                c, m, u, s = self._fit_level(r, k, int(seeds[level]))
                r -= c.astype(np.float64)[s]
                centres.append(c)
                mults.append(m)
                dirs.append(u)
                codes[:, level] = s
                self.level_seconds_.append(time.perf_counter() - t0)
                self.level_mse_.append(float(np.einsum("ij,ij->", r, r) / n))
                bar.set_postfix(level=level + 1, k=k, mse=f"{self.level_mse_[-1]:.4g}")
                bar.update(1)
        meta = CodebookMetadata(
            sizes=cfg.sizes,
            distance=cfg.distance,
            weight=cfg.weight,
            dim=dim,
            fitted_on=n,
            seed=cfg.seed,
            n_init=cfg.n_init,
            max_iter=cfg.max_iter,
            tol=cfg.tol,
            balance_iter=cfg.balance_iter if cfg.distance == "weighted" else 0,
            max_points_per_centre=cfg.max_points_per_centre,
            encoder_id=cfg.encoder_id,
            encoder_prefix=cfg.encoder_prefix,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        spherical = cfg.distance == "spherical"
        self.codebooks_ = Codebooks(
            centres, metadata=meta, multipliers=mults, directions=dirs if spherical else None
        )
        self.codes_ = codes
        self.fit_seconds_ = float(sum(self.level_seconds_))
        return self

    def _kmeans(self, data: np.ndarray, k: int, seed: int) -> np.ndarray:
        """K-means centres of ``data``; started on a sample when the data is large."""
        cfg = self.config
        x = data.astype(np.float32)
        init: str | np.ndarray = "k-means++"
        n_init = cfg.n_init
        cap = cfg.max_points_per_centre
        if cap is not None and x.shape[0] > k * cap:
            # k-means++ over every row dominates the cost at this size; a sample of a few
            # hundred rows per centre places the centres as well (the start faiss uses too).
            rows = np.sort(np.random.default_rng(seed).choice(x.shape[0], k * cap, replace=False))
            # float64: scikit-learn's k-means++ upcasts float32 distances chunk by chunk (slow)
            start = KMeans(
                k, n_init=n_init, max_iter=cfg.max_iter, tol=cfg.tol, random_state=seed
            ).fit(data[rows].astype(np.float64))
            init, n_init = start.cluster_centers_.astype(np.float32), 1
        km = KMeans(
            k, init=init, n_init=n_init, max_iter=cfg.max_iter, tol=cfg.tol, random_state=seed
        )
        return km.fit(x).cluster_centers_.astype(np.float64)

    def _fit_level(
        self, r: np.ndarray, k: int, seed: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """One level: (centres, multipliers, directions or None, codes) as stored/assigned."""
        cfg = self.config
        ones = np.ones(k, dtype=np.float32)
        if cfg.distance == "spherical":
            u = unit_rows(self._kmeans(unit_rows(r), k, seed))
            u[np.linalg.norm(u, axis=1) == 0, 0] = 1.0  # a degenerate centre still needs a way
            u32 = u.astype(np.float32)
            s = assign(r, u32.astype(np.float64), np.ones(k), cosine=True)
            sums, counts = group_sums(r, s, k)
            scale = np.einsum("ij,ij->i", sums, u32) / np.maximum(counts, 1)
            return (scale[:, None] * u32).astype(np.float32), ones, u32, s
        c = self._kmeans(r, k, seed)
        if cfg.distance == "euclidean" or cfg.weight == 0:
            c32 = c.astype(np.float32)
            return c32, ones, None, assign(r, c32.astype(np.float64), np.ones(k), cosine=False)
        return self._balance(r, c, k)

    def _balance(
        self, r: np.ndarray, c: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray, None, np.ndarray]:
        """Size-balancing rounds for ``weighted``, then assignment with frozen multipliers."""
        n, w = r.shape[0], float(self.config.weight or 0.0)
        r32 = r.astype(np.float32)
        r_sq = np.einsum("ij,ij->i", r32, r32)
        d2 = sq_dists(r32, r_sq, c)
        share = (np.bincount(d2.argmin(axis=1), minlength=k) + 1.0) / (n + k)
        previous = None
        for _ in range(self.config.balance_iter):
            share = balanced_share(d2, share, w)
            s = np.argmin(d2 * ((k * share) ** w).astype(np.float32), axis=1)
            if previous is not None and np.count_nonzero(s != previous) < SETTLED * n:
                break  # centres and shares no longer move each other
            previous = s
            sums, counts = group_sums(r, s, k)
            filled = counts > 0  # an empty centre keeps its place and its (falling) cost
            c[filled] = sums[filled] / counts[filled, None]
            d2 = sq_dists(r32, r_sq, c)
        mult = ((k * balanced_share(d2, share, w)) ** w).astype(np.float32)
        c32 = c.astype(np.float32)
        return c32, mult, None, assign(r, c32.astype(np.float64), mult.astype(np.float64), False)
