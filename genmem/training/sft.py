"""One SFT run on prompt/completion pairs with TRL, shared by stages 1 and 2."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from genmem.training.config import Stage, TrainPreset, sft_args

__all__ = ["logged_losses", "sft_train"]


def sft_train(
    policy: Any,
    pairs: Iterable[tuple[str, str]],
    preset: TrainPreset,
    out: Path,
    stage: Stage,
    max_steps: int | None,
    progress: bool,
) -> tuple[Any, float]:
    """Train ``policy`` in place (loss on the completion only); the trainer and seconds taken."""
    from datasets import Dataset
    from trl import SFTTrainer

    dataset = Dataset.from_list([{"prompt": p, "completion": c} for p, c in pairs])
    args = sft_args(preset, out / "trainer", stage, max_steps)
    args.disable_tqdm = not progress
    trainer = SFTTrainer(
        model=policy.model, args=args, train_dataset=dataset, processing_class=policy.tokenizer
    )
    started = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints its logs; keep --json clean
        trainer.train()
    return trainer, time.perf_counter() - started


def logged_losses(trainer: Any) -> tuple[list[int], list[float]]:
    """The steps at which the trainer logged a training loss, and those losses."""
    logged = [h for h in trainer.state.log_history if "loss" in h]
    return [int(h.get("step", i + 1)) for i, h in enumerate(logged)], [
        float(h["loss"]) for h in logged
    ]
