"""Starting, recording and writing a training run's policy directory (shared by every stage).

One process (no launcher) trains a private float32 copy loaded in memory
(:func:`load_trainable`). A launched run starts from a folder instead: the main process loads
the starting policy, adds the bank's SID tokens and saves it to ``OUT/start`` (:func:`save_start`)
while the others wait; then every process loads that folder after the Trainer's arguments exist
(:func:`load_started`), so under DeepSpeed ZeRO-3 each loads only its partition, and the folder
is also what TRL builds the KL reference from and what vLLM serves.

:func:`write_policy` saves through the Trainer under ZeRO-3 (the weights gathered from every
process, written by the main one; ``save_pretrained`` on a partitioned module writes empty
tensors), and with ``save_pretrained`` on the main process otherwise.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genmem.policies.local import (
    POLICY_FILE,
    LocalPolicy,
    load_policy,
    outside_zero3,
    save_policy,
)
from genmem.policies.policy_dir import write_info
from genmem.training.config import TrainConfig, for_processes
from genmem.training.distributed import Ranks, start_processes

__all__ = [
    "START_DIR",
    "TrainingRun",
    "join_run",
    "load_started",
    "load_trainable",
    "model_path",
    "save_start",
    "whole_model",
    "write_policy",
    "zero3",
]

START_DIR = "start"
"""The folder in ``--out`` that holds a launched run's starting weights."""


def model_path(spec: str | None) -> str | None:
    """The policy a ``--model`` spec names: None (the default), an embedded name, or a folder."""
    from genmem.policies.embedded import DEFAULT_MODEL, embedded_model

    if spec in (None, ""):
        return None
    text = str(spec).removeprefix("local:")
    named = embedded_model(spec)
    if named is not None and not (Path(text) / "config.json").is_file():
        return None if named is DEFAULT_MODEL else named.name
    if not (Path(text) / "config.json").is_file():
        raise ValueError(
            f"--model {spec!r}: training starts from 'local' (the embedded model), an embedded "
            "model by name ('local:gemma3-270m') or a policy directory ('local:DIR' or DIR, "
            "with a config.json)"
        )
    return text


def load_trainable(spec: str | None, bank: Any, device: str = "cpu") -> LocalPolicy:
    """A private float32 copy of the policy on ``device``, with the SID tokens of ``bank``."""
    from genmem.policies.sid_tokens import add_sid_tokens

    policy = load_policy(model_path(spec), fresh=True, dtype="float32")
    trained_for = policy.info.codebook_hash
    if trained_for and trained_for != bank.codebook_hash:
        raise ValueError(
            f"the policy was trained on codebooks {trained_for[:12]}, the bank {bank.bank_id!r} "
            f"uses {bank.codebook_hash[:12]}: its SID tokens mean other addresses"
        )
    add_sid_tokens(policy.model, policy.tokenizer, bank.spec)
    if device != "cpu":  # after the new rows are set, so they start the same on any device
        policy.model.to(device)
    policy.info = policy.info.model_copy(
        update={"sid_sizes": list(bank.spec.sizes), "codebook_hash": bank.codebook_hash}
    )
    return policy


def join_run(preset: TrainConfig) -> tuple[Ranks, TrainConfig]:
    """This process's place in the run, and ``preset`` re-checked for the launcher's count."""
    ranks = start_processes(deepspeed=preset.deepspeed is not None, use_cpu=preset.use_cpu)
    return ranks, (for_processes(preset, ranks.world) if ranks.launched else preset)


def save_start(spec: str | None, bank: Any, out: Path) -> Path:
    """Write the starting policy, with ``bank``'s SID tokens, to ``out/start`` (main process)."""
    with outside_zero3():
        policy = load_trainable(spec, bank)
        return save_policy(policy, out / START_DIR)


def load_started(out: Path, device: str, *, partitioned: bool) -> LocalPolicy:
    """Every process's copy of ``out/start``, loaded after the Trainer's arguments exist.

    ``partitioned`` (ZeRO-3): transformers loads straight into this process's partition and
    DeepSpeed places it; otherwise the copy goes to ``device``.
    """
    with contextlib.nullcontext() if partitioned else outside_zero3():
        policy = load_policy(out / START_DIR, fresh=True, dtype="float32")
    if not partitioned and device != "cpu":
        policy.model.to(device)
    return policy


@contextlib.contextmanager
def whole_model(trainer: Any, model: Any = None) -> Iterator[Any]:
    """``trainer``'s model unwrapped, with all its weights (enter it on every process at once).

    Under ZeRO-3 the weights are gathered once and DeepSpeed's hooks are off inside, its
    step hook included (TRL's unwrap leaves that one, and until DeepSpeed has traced a step it
    is a collective on every forward pass). So what runs inside issues no collective: SID
    decoding on the main process alone, text turns of different counts on each. Without a
    trainer, ``model`` as it is.
    """
    if trainer is None:
        yield model
        return
    from trl.models.utils import unwrap_model_for_generation

    with (
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=True,
            gradient_checkpointing_kwargs=getattr(
                trainer.args, "gradient_checkpointing_kwargs", None
            ),
        ) as unwrapped,
        _without_step_hook(trainer.model_wrapped if zero3(trainer) else None),
    ):
        yield unwrapped


@contextlib.contextmanager
def _without_step_hook(engine: Any) -> Iterator[None]:
    """DeepSpeed ZeRO-3's start-of-forward hook on ``engine``'s module, off inside the block."""
    optimizer = getattr(engine, "optimizer", None)
    offload = getattr(optimizer, "parameter_offload", optimizer)
    handle = getattr(offload, "fwd_pre_hook", None)
    if handle is None:
        yield
        return
    hooks = offload.module._forward_pre_hooks
    hook = hooks.pop(handle.id, None)
    try:
        yield
    finally:
        if hook is not None:
            hooks[handle.id] = hook
            hooks.move_to_end(handle.id, last=False)  # first again, where DeepSpeed put it


def zero3(trainer: Any) -> bool:
    """Whether ``trainer`` partitions its parameters (DeepSpeed ZeRO-3)."""
    if not getattr(trainer, "is_deepspeed_enabled", False):
        return False
    plugin = trainer.accelerator.state.deepspeed_plugin
    return plugin is not None and plugin.zero_stage == 3


@dataclass
class TrainingRun:
    """``run.json`` in the output directory: the stage, the preset, and whether it finished.

    Only the main process of a launched run writes it (``main=False`` records nothing).
    """

    out: Path
    stage: str
    preset: TrainConfig
    started: float = field(default_factory=time.time)
    main: bool = True

    @classmethod
    def start(
        cls, out: Path, stage: str, preset: TrainConfig, ranks: Ranks | None = None
    ) -> TrainingRun:
        """Create ``out`` and record the run as started."""
        main = ranks is None or ranks.is_main
        if main:
            out.mkdir(parents=True, exist_ok=True)
        run = cls(out, stage, preset, main=main)
        run._write("running", None)
        if ranks is not None:
            ranks.barrier()  # the folder exists for every process from here on
        return run

    def _write(self, status: str, report: dict[str, Any] | None, error: str | None = None) -> None:
        if not self.main:
            return
        body = {
            "stage": self.stage,
            "status": status,
            "started": self.started,
            "preset": self.preset.model_dump(),
        }
        if error is not None:
            body["error"] = error
        (self.out / "run.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        if report is not None:
            text = json.dumps(report, indent=2) + "\n"
            (self.out / "report.json").write_text(text, encoding="utf-8")

    def finish(self, report: dict[str, Any]) -> None:
        """Record the run as done and write ``report.json``."""
        self._write("done", report)

    def pause(self, report: dict[str, Any]) -> None:
        """Record the run as paused with a checkpoint (``--resume`` continues it)."""
        self._write("paused", report)

    def fail(self, report: dict[str, Any], error: str) -> None:
        """Record the run as stopped by ``error`` and write what it measured to ``report.json``."""
        self._write("failed", report, error)


def write_policy(
    policy: LocalPolicy,
    out: Path,
    run: TrainingRun,
    notes: dict[str, Any],
    *,
    trainer: Any = None,
    ranks: Ranks | None = None,
) -> dict[str, str]:
    """Save the trained policy into ``out`` (a directory ``--model local:out`` loads).

    Every process of a launched run calls it (a ZeRO-3 save gathers from all of them); the
    files are written once, by the main process, and all processes return after they exist.
    """
    info_notes = {**policy.info.notes, **notes, "preset": run.preset.name}
    policy.info = policy.info.model_copy(update={"notes": info_notes})
    policy.model.eval()
    main = ranks is None or ranks.is_main
    if trainer is not None and zero3(trainer):
        trainer.save_model(str(out))  # gathered 16-bit weights, written by the main process
        if main:
            policy.tokenizer.save_pretrained(out)
            write_info(out, policy.info)
            (out / "training_args.bin").unlink(missing_ok=True)
    elif main:
        save_policy(policy, out)
    if ranks is not None:
        ranks.barrier()
    return {"policy": str(out), "policy_info": str(out / POLICY_FILE)}
