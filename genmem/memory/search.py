"""Codebook configuration search: fit every (sizes, distance) pair on one embedding matrix.

Each row reports the address space (levels, capacity, vocabulary), the fit time, and the
metrics of :mod:`genmem.memory.metrics` evaluated on the embeddings it was fitted on, as in the
paper's configuration comparison. With ``heldout`` > 0 a seeded share of the rows is kept out of
every fit, and each row also reports the reconstruction error of those rows (quantised with the
fitted codebooks): how well the codebooks address text they never saw, which the fitting set's
error overstates. Rows go to a CSV (lists joined with ``/``) and a JSON list.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import Field
from tqdm.auto import tqdm

from genmem.errors import CodebookError
from genmem.memory.metrics import CodebookMetrics, codebook_metrics
from genmem.memory.rqkmeans import (
    DEFAULT_WEIGHT,
    Codebooks,
    RQKMeans,
    RQKMeansConfig,
    as_embeddings,
)
from genmem.memory.sid import SIDSpec

__all__ = [
    "SearchRow",
    "format_search_table",
    "heldout_scores",
    "parse_configs",
    "search_configs",
    "write_search_results",
]


class SearchRow(CodebookMetrics):
    """One fitted configuration: its settings, fit time and every codebook metric."""

    distance: str = Field(description="euclidean, spherical or weighted.")
    weight: float | None = Field(description="w for weighted, else None.")
    fit_seconds: float = Field(description="Wall time of the fit.")
    hash: str = Field(description="Content hash of the fitted codebooks.")
    heldout_n: int = Field(default=0, description="Rows kept out of the fit (0: none).")
    heldout_mse_per_dim: float | None = Field(
        default=None, description="Reconstruction error per dimension of the held-out rows."
    )
    heldout_mse_by_depth: list[float] | None = Field(
        default=None, description="Held-out mean ||e - ê^(l)||^2 for depths 1..L."
    )
    heldout_leaf_utilization: float | None = Field(
        default=None, description="Share of the held-out rows' SIDs that fitted rows also use."
    )

    @property
    def label(self) -> str:
        """Sizes written like ``48x16x8x8``."""
        return "x".join(map(str, self.sizes))


_FIT = RQKMeansConfig()
"""The fit settings a search uses unless told otherwise: RQ-KMeans's own defaults."""


def parse_configs(text: str) -> list[tuple[int, ...]]:
    """Size tuples written as ``48,16,8,8;48,24,24`` (or with ``x``); bad text raises ValueError."""
    parts = [p for p in text.split(";") if p.strip()]
    if not parts:
        raise ValueError(f"no configurations in {text!r}; write them like '48,16,8,8;48,24,24'")
    return [SIDSpec.from_string(p).sizes for p in parts]


def search_configs(
    embeddings: np.ndarray,
    configs: Sequence[Sequence[int]],
    distances: Sequence[str],
    *,
    weight: float = DEFAULT_WEIGHT,
    seed: int = _FIT.seed,
    n_init: int = _FIT.n_init,
    max_iter: int = _FIT.max_iter,
    heldout: float = 0.0,
    progress: bool = True,
) -> list[SearchRow]:
    """Fit and score every configuration under every distance; all are checked before any fit.

    ``heldout``: the share of rows (seeded by ``seed``) kept out of the fits and scored apart.
    """
    if not 0.0 <= heldout < 1.0:
        raise CodebookError(f"heldout={heldout}: use a share in [0, 1)")
    everything = as_embeddings(embeddings)
    order = np.random.default_rng(seed).permutation(everything.shape[0])
    n_held = round(heldout * everything.shape[0])
    x, held = everything[order[n_held:]], everything[order[:n_held]]
    settings = [
        RQKMeansConfig(
            sizes=tuple(sizes),
            distance=dist,  # type: ignore[arg-type]  # validated by the config
            weight=weight if dist == "weighted" else None,
            seed=seed,
            n_init=n_init,
            max_iter=max_iter,
        )
        for sizes in configs
        for dist in distances
    ]
    if not settings:
        raise CodebookError("nothing to search: pass at least one configuration and distance")
    largest = max(max(cfg.sizes) for cfg in settings)
    if x.shape[0] < largest:
        raise CodebookError(
            f"the search needs at least {largest} embeddings to fit on (the largest level "
            f"size), got {x.shape[0]} after holding {n_held} out; pass more embeddings, smaller "
            "configurations or a smaller held-out share"
        )
    rows = []
    for cfg in tqdm(settings, desc="configs", unit="fit", disable=not progress):
        t0 = time.perf_counter()
        model = RQKMeans(cfg).fit(x, progress=False)
        seconds = time.perf_counter() - t0
        cb = model.codebooks_
        m = codebook_metrics(model.codes_, cb.spec, embeddings=x, codebooks=cb)
        rows.append(
            SearchRow(
                distance=cfg.distance,
                weight=cfg.weight,
                fit_seconds=seconds,
                hash=cb.hash,
                **m.model_dump(),
                **heldout_scores(cb, model.codes_, held),
            )
        )
    return rows


def heldout_scores(cb: Codebooks, fitted: np.ndarray, held: np.ndarray) -> dict[str, object]:
    """``held`` rows quantised by ``cb``: their reconstruction error (``heldout_*`` fields of
    :class:`SearchRow`), and the share of their SIDs among the ``fitted`` rows' codes."""
    if held.shape[0] == 0:
        return {}
    codes = cb.quantize(held)
    e = held.astype(np.float64)
    by_depth = []
    for depth in range(1, cb.spec.levels + 1):
        err = e - cb.reconstruct(codes, depth)
        by_depth.append(float(np.einsum("ij,ij->i", err, err).mean()))
    used = {tuple(row) for row in fitted.tolist()}
    return {
        "heldout_n": int(held.shape[0]),
        "heldout_mse_per_dim": by_depth[-1] / cb.dim,
        "heldout_mse_by_depth": by_depth,
        "heldout_leaf_utilization": sum(tuple(r) in used for r in codes.tolist()) / len(codes),
    }


_FIRST_COLUMNS = ["sizes", "distance", "weight", "fit_seconds"]


def _cell(key: str, value: object) -> object:
    if key == "sizes" and isinstance(value, list):
        return "x".join(map(str, value))
    if isinstance(value, list):
        return "/".join(f"{v:.6g}" for v in value)
    return "" if value is None else value


def write_search_results(rows: Sequence[SearchRow], csv_path: str | Path) -> tuple[Path, Path]:
    """Write rows to ``csv_path`` and the same rows as a JSON list beside it (``.json``)."""
    out = Path(csv_path)
    json_path = out.with_suffix(".json")
    out.parent.mkdir(parents=True, exist_ok=True)
    fields = _FIRST_COLUMNS + [f for f in SearchRow.model_fields if f not in _FIRST_COLUMNS]
    with out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(k, v) for k, v in row.model_dump().items()})
    json_path.write_text(json.dumps([r.model_dump() for r in rows], indent=2) + "\n")
    return out, json_path


def format_search_table(rows: Sequence[SearchRow]) -> str:
    """A fixed-width table of the headline columns, one line per configuration."""
    head = (
        f"{'sizes':<14}{'L':>2} {'capacity':>9} {'vocab':>5} {'distance':<15}"
        f"{'fit s':>7} {'leaf%':>7} {'UCR':>7} {'DUI':>6} {'ICR':>6} {'MSE/dim':>10}"
        f" {'held MSE/dim':>12}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        icr = f"{r.icr:.3f}" if r.icr is not None else "-"
        dist = r.distance + (f"({r.weight:g})" if r.weight is not None else "")
        lines.append(
            f"{r.label:<14}{r.levels:>2} {r.capacity:>9} {r.vocab_size:>5} {dist:<15}"
            f"{r.fit_seconds:>7.2f} {100 * r.leaf_utilization:>7.2f} {r.ucr:>7.4f} "
            f"{r.dui:>6.3f} {icr:>6} {r.recon_mse_per_dim:>10.3e} "
            + (
                f"{r.heldout_mse_per_dim:>12.3e}"
                if r.heldout_mse_per_dim is not None
                else f"{'-':>12}"
            )
        )
    return "\n".join(lines)
