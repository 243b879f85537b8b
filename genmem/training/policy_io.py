"""Starting, recording and writing a training run's policy directory (shared by every stage)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genmem.policies.local import POLICY_FILE, LocalPolicy, load_policy, save_policy
from genmem.training.config import TrainPreset

__all__ = ["TrainingRun", "load_trainable", "model_path", "write_policy"]


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


@dataclass
class TrainingRun:
    """``run.json`` in the output directory: the stage, the preset, and whether it finished."""

    out: Path
    stage: str
    preset: TrainPreset
    started: float = field(default_factory=time.time)

    @classmethod
    def start(cls, out: Path, stage: str, preset: TrainPreset) -> TrainingRun:
        """Create ``out`` and record the run as started."""
        out.mkdir(parents=True, exist_ok=True)
        run = cls(out, stage, preset)
        run._write("running", None)
        return run

    def _write(self, status: str, report: dict[str, Any] | None, error: str | None = None) -> None:
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
    policy: LocalPolicy, out: Path, run: TrainingRun, notes: dict[str, Any]
) -> dict[str, str]:
    """Save the trained policy into ``out`` (a directory ``--model local:out`` loads)."""
    info_notes = {**policy.info.notes, **notes, "preset": run.preset.name}
    policy.info = policy.info.model_copy(update={"notes": info_notes})
    policy.model.eval()
    save_policy(policy, out)
    return {"policy": str(out), "policy_info": str(out / POLICY_FILE)}
