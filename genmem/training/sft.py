"""One SFT run on prompt/completion pairs with TRL, shared by stages 1 and 2.

A run can be cut into pieces: ``checkpoint_every`` saves a Trainer checkpoint (model or
adapters, optimiser, scheduler, data position, RNG) every N steps into ``out/trainer``;
``pause_after`` seconds stops at the next step boundary with a checkpoint; ``resume`` picks the
run up from its last complete checkpoint with the same schedule, as if it had never stopped (a
run killed while saving one leaves it half-written: it is passed over and removed).
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genmem.training.adapters import attach_adapter, optimizer_for
from genmem.training.config import Stage, TrainConfig, sft_args
from genmem.training.distributed import Ranks

__all__ = ["Pieces", "SFTRun", "last_checkpoint", "logged_losses", "sft_arguments", "sft_train"]

_STEP = re.compile(r"checkpoint-[0-9]+")
"""The folder name the Trainer gives a checkpoint."""


@dataclass(frozen=True)
class Pieces:
    """How a run is checkpointed, paused and resumed."""

    checkpoint_every: int = 0
    """Save a checkpoint every N steps (0: only when pausing)."""
    pause_after: float | None = None
    """Stop with a checkpoint once this many seconds of training have passed."""
    resume: bool = False
    """Continue from the last checkpoint in ``out/trainer`` (an error when there is none)."""
    finish: bool = False
    """Train no further: take the weights of the last checkpoint as they are (one written here
    or on another machine, such as a GPU run's adapters brought back without their optimiser)."""


@dataclass(frozen=True)
class SFTRun:
    """What one SFT piece did."""

    trainer: Any
    """The TRL trainer (its ``state`` holds the step and the logged losses)."""
    seconds: float
    paused: bool
    """True when the run stopped before its schedule's last step (``pause_after``, or a
    checkpoint finished part-way)."""
    resumed_from: str | None
    """The checkpoint this piece started from (None: from the start)."""


def last_checkpoint(out: Path) -> str | None:
    """The newest complete Trainer checkpoint of the run in ``out`` (None when there is none).

    The Trainer writes a checkpoint's files into its folder one by one, ``trainer_state.json``
    last; a run killed while saving leaves a folder without it (or with it cut short). Such a
    folder holds nothing to resume from and is passed over.
    """
    folders = _checkpoints(out)
    complete = [f for f in folders if _complete(f)]
    return str(complete[-1]) if complete else None


def _checkpoints(out: Path) -> list[Path]:
    """The ``checkpoint-<step>`` folders of the run in ``out``, oldest step first."""
    folder = out / "trainer"
    if not folder.is_dir():
        return []
    found = [f for f in folder.iterdir() if f.is_dir() and _STEP.fullmatch(f.name)]
    return sorted(found, key=lambda f: int(f.name.rsplit("-", 1)[1]))


def _complete(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` was saved to the end (its trainer state is whole JSON)."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return True


def _drop_torn_checkpoints(out: Path, resume_from: str) -> None:
    """Remove the half-saved checkpoints newer than ``resume_from``.

    Left in place, the Trainer would count one as the newest when it keeps only the last
    ``save_total_limit`` checkpoints, and delete the good one instead.
    """
    step = int(Path(resume_from).name.rsplit("-", 1)[1])
    for folder in _checkpoints(out):
        if int(folder.name.rsplit("-", 1)[1]) > step and not _complete(folder):
            shutil.rmtree(folder)


def _pause_callback(seconds: float, ranks: Ranks) -> Any:
    from transformers import TrainerCallback

    class Pause(TrainerCallback):
        """Stops training (with a checkpoint) once ``seconds`` of training have passed.

        Every process stops at the same step: the first to run late decides for all (one
        stopping alone would leave the others waiting in the next step's collectives).
        """

        def __init__(self) -> None:
            self.started = time.perf_counter()
            self.paused = False

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
            late = any(ranks.gather(time.perf_counter() - self.started >= seconds))
            if late and state.global_step < state.max_steps:
                control.should_training_stop = True
                control.should_save = True
                self.paused = True
            return control

    return Pause()


def sft_arguments(
    preset: TrainConfig,
    out: Path,
    stage: Stage,
    max_steps: int | None,
    progress: bool,
    *,
    pieces: Pieces | None = None,
    started: bool = False,
) -> Any:
    """TRL's ``SFTConfig`` of one piece: made before the model loads (ZeRO-3 partitions it then).

    ``started``: a launched run whose process group :mod:`genmem.training.distributed` began.
    """
    pieces = pieces or Pieces()
    args = sft_args(preset, out / "trainer", stage, max_steps, started=started)
    args.disable_tqdm = not progress
    if pieces.checkpoint_every or pieces.pause_after is not None:
        args.save_strategy = "steps"
        args.save_steps = pieces.checkpoint_every or 10**9
        args.save_total_limit = 1
    return args


def sft_train(
    policy: Any,
    pairs: Iterable[tuple[str, str]],
    preset: TrainConfig,
    out: Path,
    args: Any,
    *,
    spec: Any = None,
    pieces: Pieces | None = None,
    callbacks: Sequence[Any] = (),
    ranks: Ranks | None = None,
) -> SFTRun:
    """Train ``policy`` in place (loss on the completion only) and say what the piece did.

    ``args`` come from :func:`sft_arguments`. With ``preset.adapter == "lora"`` the policy's
    model is wrapped in adapters (``spec`` names the SID rows that train); the caller merges
    them (:func:`merge_adapter`) before saving. A callback with a ``trainer`` attribute is
    handed the trainer (the learning curve gathers ZeRO-3 weights through it).
    """
    from datasets import Dataset
    from trl import SFTTrainer

    pieces = pieces or Pieces()
    resume_from = last_checkpoint(out) if pieces.resume or pieces.finish else None
    if (pieces.resume or pieces.finish) and resume_from is None:
        raise ValueError(f"nothing to resume: {out / 'trainer'} holds no checkpoint")
    if resume_from is not None and args.process_index == 0:
        _drop_torn_checkpoints(out, resume_from)
    if preset.adapter != "full":
        if spec is None:
            raise ValueError("adapter training needs the SID spec of the rows it trains")
        attach_adapter(policy, spec, preset)
    dataset = Dataset.from_list([{"prompt": p, "completion": c} for p, c in pairs])
    ranks = ranks or Ranks()
    pause = _pause_callback(pieces.pause_after, ranks) if pieces.pause_after is not None else None
    trainer = SFTTrainer(
        model=policy.model,
        args=args,
        train_dataset=dataset,
        processing_class=policy.tokenizer,
        optimizers=(optimizer_for(policy.model, preset, args.learning_rate), None),
        callbacks=[*callbacks, *([pause] if pause else [])],
    )
    for callback in callbacks:
        if hasattr(callback, "trainer"):
            callback.trainer = trainer
    started = time.perf_counter()
    if pieces.finish:
        assert resume_from is not None
        _load_checkpoint(trainer, Path(resume_from), preset)
        paused = trainer.state.global_step < trainer.state.max_steps
    else:
        with contextlib.redirect_stdout(sys.stderr):  # the Trainer prints its logs
            trainer.train(resume_from_checkpoint=resume_from)
        paused = bool(pause and pause.paused)
    return SFTRun(trainer, time.perf_counter() - started, paused, resume_from)


def _load_checkpoint(trainer: Any, checkpoint: Path, preset: TrainConfig) -> None:
    """Set ``trainer``'s model weights and state to those of ``checkpoint`` (no training).

    Adapters load with PEFT's state-dict API; a checkpoint may leave out the base embedding's
    copy (unchanged by adapter training), which the model already holds.
    """
    from safetensors.torch import load_file
    from transformers import TrainerState

    model = trainer.model
    if preset.adapter == "full":
        weights = load_file(checkpoint / "model.safetensors", device=str(model.device))
        missing = model.load_state_dict(weights, strict=False).missing_keys
    else:
        from peft import set_peft_model_state_dict

        weights = load_file(checkpoint / "adapter_model.safetensors", device=str(model.device))
        missing = set_peft_model_state_dict(model, weights).missing_keys
    # a trained parameter is lost when none of its names (tied ones share it) was in the file
    params = dict(model.named_parameters(remove_duplicate=False))
    absent = set(missing)
    loaded = {id(p) for name, p in params.items() if name not in absent}
    lost = [
        k
        for k in missing
        if k in params and params[k].requires_grad and id(params[k]) not in loaded
    ]
    if lost:
        raise ValueError(f"{checkpoint} lacks trained weights: {lost[:3]}")
    trainer.state = TrainerState.load_from_json(str(checkpoint / "trainer_state.json"))


def logged_losses(trainer: Any) -> tuple[list[int], list[float]]:
    """The steps at which the trainer logged a training loss, and those losses."""
    logged = [h for h in trainer.state.log_history if "loss" in h]
    return [int(h.get("step", i + 1)) for i, h in enumerate(logged)], [
        float(h["loss"]) for h in logged
    ]
