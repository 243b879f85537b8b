"""A learning curve written while alignment trains: held-out addressing accuracy against steps.

Every ``every`` optimiser steps (and when a piece of the run ends) the policy beam-decodes the
held-out queries (and as many trained ones) at top-5 and appends one line to ``curve.jsonl``:
the step, the training seconds so far, the last logged loss, and per split the exact-SID rate
at top-1 and top-5 (``hit_at_1``, ``hit_at_5``: the reference SID among the first k beams) and
the cumulative prefix rates at top-5 with their bootstrap intervals. ``curve.png`` is redrawn
each time, so a run in the background shows where it is. A resumed run appends to the same file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from genmem.memory.sid import SIDSpec
from genmem.training.distributed import Ranks
from genmem.training.sid_eval import PrefixAccuracy, prefix_accuracy

__all__ = [
    "CURVE_KS",
    "CurvePoint",
    "append_point",
    "curve_callback",
    "plot_curve",
    "read_curve",
    "split_point",
]

CURVE_KS = (1, 5)


class CurvePoint(BaseModel):
    """One measurement of the curve."""

    step: int
    seconds: float = Field(description="Training seconds of this piece when measured.")
    loss: float | None = Field(description="Last logged training loss.")
    splits: dict[str, dict[str, Any]] = Field(
        description="'heldout' / 'trained' -> n, hit_at_1, hit_at_5, prefix_at_5, prefix_at_5_ci."
    )
    at: float = Field(default_factory=time.time)


def measure(
    policy: Any, spec: SIDSpec, pairs: Mapping[str, Sequence[Mapping[str, str]]]
) -> dict[str, dict[str, Any]]:
    """Exact-SID hits at top-1/5 and cumulative prefix accuracy at top-5, per split."""
    return {
        name: split_point(prefix_accuracy(policy, spec, split, CURVE_KS))
        for name, split in pairs.items()
        if split
    }


def split_point(acc: PrefixAccuracy) -> dict[str, Any]:
    """The curve's figures of one split, from an accuracy measured at k = 1 and 5 (at least)."""
    return {
        "n": acc.n,
        "hit_at_1": acc.exact(1),
        "hit_at_5": acc.exact(5),
        "prefix_at_5": acc.prefix[5],
        "prefix_at_5_ci": acc.prefix_ci[5],
    }


def append_point(path: Path, point: CurvePoint) -> str:
    """Add ``point`` to ``curve.jsonl`` at ``path`` and redraw ``curve.png`` beside it."""
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(point.model_dump(mode="json")) + "\n")
    return plot_curve(read_curve(path), path.with_suffix(".png"))


def read_curve(path: Path) -> list[CurvePoint]:
    """The points of ``curve.jsonl`` (a torn last line, from a killed run, is skipped)."""
    if not path.is_file():
        return []
    points = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            points.append(CurvePoint.model_validate_json(line))
        except ValueError:
            continue
    return points


def plot_curve(points: Sequence[CurvePoint], path: Path) -> str:
    """``curve.png``: held-out and trained Hit@5 and level-1 accuracy (top-5) against steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for split, style in (("heldout", "-"), ("trained", "--")):
        pts = [p for p in points if split in p.splits]
        if not pts:
            continue
        steps = [p.step for p in pts]
        # Hit@5 is the prefix rate at the last level; level 1 is the first.
        for depth, label in ((-1, "Hit@5 (exact SID)"), (0, "level 1 @5")):
            values = [p.splits[split]["prefix_at_5"][depth] for p in pts]
            cis = [p.splits[split]["prefix_at_5_ci"][depth] for p in pts]
            err = [[v - lo for v, (lo, _) in zip(values, cis, strict=True)],
                   [hi - v for v, (_, hi) in zip(values, cis, strict=True)]]  # fmt: skip
            ax.errorbar(steps, values, yerr=err, linestyle=style, marker=".", capsize=2,
                        label=f"{split} {label}")  # fmt: skip
    ax.set(xlabel="optimiser step", ylabel="rate (95% bootstrap)", ylim=(-0.02, 1.02),
           title="SID alignment learning curve")  # fmt: skip
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def curve_callback(
    policy: Any,
    spec: SIDSpec,
    pairs: Mapping[str, Sequence[Mapping[str, str]]],
    out: Path,
    every: int,
    ranks: Ranks | None = None,
) -> Any:
    """A Trainer callback adding a :class:`CurvePoint` every ``every`` steps and at the end.

    In a launched run every process joins each point (ZeRO-3 gathers the weights for it) and
    the main process decodes and writes it.
    """
    from transformers import TrainerCallback

    from genmem.training.policy_io import whole_model

    path = out / "curve.jsonl"
    ranks = ranks or Ranks()

    class Curve(TrainerCallback):
        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.last_step = -1
            self.trainer: Any = None
            """Set by :func:`~genmem.training.sft.sft_train` once the trainer exists."""

        def _point(self, state: Any, model: Any) -> None:
            if state.global_step == self.last_step:
                return
            self.last_step = state.global_step
            losses = [h["loss"] for h in state.log_history if "loss" in h]
            with whole_model(self.trainer, model) as whole:
                if not ranks.is_main:
                    return
                was_training = whole.training
                whole.eval()
                try:
                    splits = measure(replace(policy, model=whole), spec, pairs)
                finally:
                    whole.train(was_training)
            point = CurvePoint(
                step=state.global_step,
                seconds=round(time.perf_counter() - self.started, 2),
                loss=float(losses[-1]) if losses else None,
                splits=splits,
            )
            append_point(path, point)

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            if every and state.global_step % every == 0:
                self._point(state, kw["model"])
            return control

        def on_train_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            self._point(state, kw["model"])
            return control

    return Curve()
