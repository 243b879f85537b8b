"""Stage 1 on a CUDA GPU, end to end (skipped on machines without one, as in CI).

Run on a lent H200 (bench/README.md, "train"): the policy, the SID beams of the accuracy passes
and the curve all on the GPU, bf16 autocast.
"""

from __future__ import annotations

import json

import pytest
import torch

from genmem.cli import main

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_alignment_trains_and_scores_on_the_gpu(seed_bank_url, tmp_path, capsys) -> None:
    preset = tmp_path / "one-gpu.yaml"
    preset.write_text(
        "base: cpu-lora\nuse_cpu: false\nbf16: true\nper_device_train_batch_size: 8\n"
    )
    argv = [
        "train", "align", "--bank", seed_bank_url, "--config", str(preset), "--train-steps", "4",
        "--eval-size", "4", "--weights", "addressing", "--curve-every", "2",
        "--out", str(tmp_path / "out"), "--json",
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["complete"] and report["steps"] == 4 and report["after"]["heldout"]["n"] == 4
    curve = (tmp_path / "out" / "curve.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in curve] == [0, 2, 4]
