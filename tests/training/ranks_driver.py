"""One process of a launched training run, for the multi-process tests (not collected).

``torchrun --nproc_per_node 2 tests/training/ranks_driver.py PRESET OUT BANK_URL MODEL_DIR
[STAGES]`` runs, in every process, alignment (with a learning curve), mid-training, GRPO
with whole turns and with constrained SID turns, and a GRPO run whose judge fails on process
1 only. The planner, judge and teacher are the deterministic
:class:`~tests.fakes.RoutingChat`; the policy is a real (tiny) transformers model trained by
the real Trainer, DeepSpeed included. Each process writes
``OUT/rank<R>.json``: what its stages returned, what each saved policy held against the
trained parameters, and the error the failing run ended with. Run without a launcher it is the
one-process reference the launched runs are compared with.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _watch_saves(record: dict[str, Any]) -> None:
    """Wrap each stage's ``write_policy``: note the trained parameters, then check the saved."""
    from genmem.policies.local import outside_zero3
    from genmem.training import align, grpo, mid, policy_io
    from genmem.training.policy_io import whole_model

    original = policy_io.write_policy

    def checked(policy: Any, out: Path, run: Any, notes: Any, **kw: Any) -> Any:
        with whole_model(kw.get("trainer"), policy.model) as whole:
            trained = {
                n: (list(p.shape), float(p.detach().double().sum()))
                for n, p in whole.named_parameters()
            }
        files = original(policy, out, run, notes, **kw)
        if int(os.environ.get("RANK", "0")) == 0:
            from genmem.policies.local import load_policy

            with outside_zero3():
                saved = load_policy(out, fresh=True, dtype="float32").model
            got = {
                n: (list(p.shape), float(p.detach().double().sum()))
                for n, p in saved.named_parameters()
            }
            record.setdefault("saves", {})[Path(out).name] = {
                "names_match": sorted(got) == sorted(trained),
                "smallest": min(p.numel() for p in saved.parameters()),
                "max_difference": max(
                    abs(got[n][1] - trained[n][1]) if got[n][0] == trained[n][0] else float("inf")
                    for n in trained
                    if n in got
                ),
                "parameters": sum(p.numel() for p in saved.parameters()),
                # what TRL's reference and colocated vLLM were started from
                "name_or_path": str(kw["trainer"].model.name_or_path),
                "config_name_or_path": str(kw["trainer"].model.config._name_or_path),
            }
        return files

    for module in (align, mid, grpo):
        module.write_policy = checked


def main() -> None:
    torch.set_num_threads(1)
    preset_name, out_text, bank_url, model = sys.argv[1:5]
    stages = sys.argv[5].split(",") if len(sys.argv) > 5 else ["align", "mid", "grpo", "fail"]
    from genmem.envs.gsm8k import DATA_DIR, GSM8KEnvironment
    from genmem.errors import GenMemError
    from genmem.memory.location import open_bank
    from genmem.training.align import run_align
    from genmem.training.align_data import AlignDataConfig
    from genmem.training.config import RolloutConfig, load_preset
    from genmem.training.distributed import end_processes
    from genmem.training.grpo import run_grpo
    from genmem.training.mid import run_mid
    from tests.fakes import RoutingChat

    out = Path(out_text)
    preset = load_preset(preset_name)
    rank = int(os.environ.get("RANK", "0"))  # one process without a launcher: the reference
    record: dict[str, Any] = {"rank": rank, "world": int(os.environ.get("WORLD_SIZE", "1"))}
    _watch_saves(record)
    env = GSM8KEnvironment(DATA_DIR / "gsm8k" / "train.jsonl")  # the bank's own queries
    if "align" in stages:
        report = run_align(
            open_bank(bank_url),
            out / "align",
            preset=preset,
            model=model,
            max_steps=2,
            data=AlignDataConfig(max_heldout=8, max_context_tokens=96, max_target_chars=200),
            eval_ks=(1, 5),
            max_eval=2,
            curve_every=1,
            progress=False,
        )
        record["align"] = report.model_dump(mode="json")
    if "mid" in stages:
        report = run_mid(
            bank_url,
            env,
            out / "mid",
            preset=preset,
            model=model,
            teacher=RoutingChat(),
            keep="valid",
            limit=3,
            max_new_tokens=16,
            max_steps=2,
            progress=False,
        )
        record["mid"] = report.model_dump(mode="json")
    # every completion mode and the constrained sampler, in two runs (the real-model test in
    # test_grpo_cli.py runs whole turns constrained)
    modes = {"whole": ("whole", False), "sid-constrained": ("sid", True)}
    if "grpo" in stages:
        for name, (completion, constrained) in modes.items():
            report = run_grpo(
                bank_url,
                env,
                out / f"grpo-{name}",
                preset=preset,
                model=model,
                chat_model=RoutingChat(),
                limit=2,
                max_steps=2,
                rollout=RolloutConfig(
                    completion=completion, constrained=constrained, max_new_tokens=8
                ),
                progress=False,
            )
            record[f"grpo-{name}"] = report.model_dump(mode="json")
    if "fail" in stages:
        failing = RoutingChat(judge_error=f"judge down on process {rank}" if rank == 1 else None)
        try:
            run_grpo(
                bank_url,
                env,
                out / "grpo-fail",
                preset=preset,
                model=model,
                chat_model=failing,
                roles=("retriever",),
                limit=2,
                max_steps=2,
                rollout=RolloutConfig(completion="sid", constrained=True, max_failures=0),
                progress=False,
            )
            record["fail"] = None
        except GenMemError as exc:
            record["fail"] = {"type": type(exc).__name__, "message": str(exc)}
    (out / f"rank{rank}.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    end_processes()


if __name__ == "__main__":
    main()
