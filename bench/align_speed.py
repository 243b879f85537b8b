"""Benchmark: what a stage-1 alignment step costs, and how much addressing it teaches per second.

Runs a few optimiser steps of ``genmem train align``'s SFT on the same bank under several
settings, one after another in this process, and prints seconds per step, examples per second
and *addressing* examples per second (query/trajectory/experience -> SID, the mappings that
teach the model to address), each as a ratio against the first setting (today's ``cpu`` preset:
full fine-tuning, 512-token contexts, all five mappings). The first step of each setting is
warm-up and not timed. No loss is printed: a few steps on different batches of different
mappings say nothing about learning (``genmem train align --curve-every`` measures that)::

    python bench/align_speed.py --bank "sqlite:///seed.db?bank=ID"            # 8 steps each
    python bench/align_speed.py --bank URL --steps 12 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genmem.memory.location import open_bank
from genmem.training.align_data import AlignDataConfig, alignment_data, entry_sources
from genmem.training.config import load_preset
from genmem.training.policy_io import load_trainable
from genmem.training.sft import sft_train

FORWARD = ("query_sid", "trajectory_sid", "experience_sid")


@dataclass(frozen=True)
class Setting:
    name: str
    preset: str
    context_tokens: int
    target_chars: int
    addressing_only: bool
    overrides: tuple[tuple[str, Any], ...] = ()


SETTINGS = (
    Setting("cpu (full, 512-token contexts, 5 mappings)", "cpu", 512, 1200, False),
    Setting("full, 128-token contexts", "cpu", 128, 400, False, (("max_length", 256),)),
    Setting("cpu-lora (LoRA + SID rows, 128-token contexts)", "cpu-lora", 128, 400, False),
    Setting("cpu-lora, addressing mappings only", "cpu-lora", 128, 400, True),
)


def _timer() -> Any:
    from transformers import TrainerCallback

    class Timer(TrainerCallback):
        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            self.ends.append(time.perf_counter())
            return control

    return Timer()


def run(bank_url: str, steps: int) -> list[dict[str, Any]]:
    """Time ``steps`` steps of every setting; one row each."""
    bank = open_bank(bank_url)
    sources = entry_sources(bank)
    rows = []
    for s in SETTINGS:
        preset = load_preset(s.preset, **dict(s.overrides))
        weights = dict.fromkeys(FORWARD, 1.0) if s.addressing_only else None
        policy = load_trainable(None, bank)
        cfg = AlignDataConfig(
            max_context_tokens=s.context_tokens,
            max_target_chars=s.target_chars,
            **({"weights": weights} if weights else {}),
        )
        mix = alignment_data(sources, policy.tokenizer, cfg)
        pairs = [(x.prompt, x.completion) for x in mix.train]
        share = sum(mix.counts[m] for m in FORWARD) / len(mix.train)
        timer = _timer()
        with tempfile.TemporaryDirectory() as tmp:
            sft_train(
                policy, pairs, preset, Path(tmp), "align", steps, False,
                spec=bank.spec, callbacks=[timer],
            )  # fmt: skip
        per_step = (timer.ends[-1] - timer.ends[0]) / (len(timer.ends) - 1)
        examples = preset.global_batch / per_step
        rows.append({
            "setting": s.name,
            "seconds_per_step": round(per_step, 2),
            "steps_per_second": round(1 / per_step, 4),
            "examples_per_second": round(examples, 3),
            "addressing_share": round(share, 3),
            "addressing_examples_per_second": round(examples * share, 3),
            "trainable_parameters": sum(
                p.numel() for p in policy.model.parameters() if p.requires_grad
            ),
        })  # fmt: skip
        print(f"{s.name}: {per_step:.2f} s/step", file=sys.stderr)
    base = rows[0]
    for row in rows:
        row["speedup_steps"] = round(base["seconds_per_step"] / row["seconds_per_step"], 2)
        row["speedup_addressing"] = round(
            row["addressing_examples_per_second"] / base["addressing_examples_per_second"], 2
        )
    return rows


def main() -> int:
    """Parse flags, run, print a table or JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bank", required=True, help="bank URL (a GSM8K seed bank)")
    p.add_argument("--steps", type=int, default=8, help="steps per setting, the first untimed")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = run(args.bank, max(args.steps, 3))
    if args.json:
        print(json.dumps({"steps": args.steps, "rows": rows}, indent=2))
        return 0
    print("| setting | s/step | examples/s | addressing examples/s | x steps | x addressing |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['setting']} | {r['seconds_per_step']} | {r['examples_per_second']} | "
            f"{r['addressing_examples_per_second']} | {r['speedup_steps']} | "
            f"{r['speedup_addressing']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
