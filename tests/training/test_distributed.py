"""Training launched as two processes on this CPU: DDP over gloo and DeepSpeed ZeRO-3.

Each launched run goes through ``tests/training/ranks_driver.py`` under ``torchrun``: alignment
with a learning curve, mid-training, GRPO with whole turns (free SIDs) and with SID turns
sampled under the trie (``--completion sid --constrained``), and a GRPO run whose
judge fails on process 1 only. The policy is a tiny random Llama with the default tokenizer
(the real Trainer, DeepSpeed and graphs train it in seconds); the planner, judge and teacher are
a deterministic fake. A hang fails the test by its timeout. What is checked:

- every stage ends on both processes;
- each shared file has one writer and holds what a one-process run writes (the held-out
  pairs, the untrained accuracy, the traces) or every process's share (the rollout log);
- the saved policy holds full-size tensors equal to the trained parameters (ZeRO-3 used to
  save empty ones);
- a failure on one process stops both with the same typed error, and the report counts both
  processes' rollouts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from genmem.cli import main
from genmem.errors import TooManyFailures
from genmem.training.distributed import Ranks, _portable, shard, unshard
from tests.fakes import tiny_llama

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "tests" / "training" / "ranks_driver.py"
LAUNCH_TIMEOUT = 900
"""Seconds a launched run may take before the test calls it hung (it takes 1-2 minutes)."""


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1.6M-parameter Llama with the default model's tokenizer and generation settings."""
    from transformers import AutoTokenizer, GenerationConfig

    from genmem.policies.embedded import embedded_directory

    source = embedded_directory()
    tok = AutoTokenizer.from_pretrained(source)
    model = tiny_llama(tok, seed=0, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model.generation_config = GenerationConfig.from_pretrained(source)
    target = tmp_path_factory.mktemp("tiny") / "policy"
    model.save_pretrained(target)
    tok.save_pretrained(target)
    return target


def _launch(
    preset: str, out: Path, bank_url: str, model: Path, stages: str, *, processes: int = 2
) -> subprocess.CompletedProcess[str]:
    """The driver under torchrun (``processes`` > 0), or as one plain process (0)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    args = [str(DRIVER), preset, str(out), bank_url, str(model), stages]
    if processes:
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        args = [*launcher, *args]
    done = subprocess.run(
        [sys.executable, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-6000:]
    return done


def _rank_records(out: Path, world: int) -> list[dict[str, Any]]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, seed_bank_url, tiny_model) -> Path:
    """The one-process run the launched ones are compared with (alignment, mid-training)."""
    out = tmp_path_factory.mktemp("one")
    _launch("cpu", out, seed_bank_url, tiny_model, "align,mid", processes=0)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["cpu-ddp", "cpu-zero3"])
def test_two_processes_run_every_stage_with_one_writer_per_file(
    preset, tmp_path, seed_bank_url, tiny_model, one_process
) -> None:
    out = tmp_path / preset
    _launch(preset, out, seed_bank_url, tiny_model, "align,mid,grpo,fail")
    main_rank, other = _rank_records(out, 2)
    assert (main_rank["world"], other["world"]) == (2, 2)

    # Alignment: the main process's files, as one process writes them.
    align = out / "align"
    for name in ("heldout_pairs.jsonl", "before.json"):
        assert (align / name).read_text() == (one_process / "align" / name).read_text(), name
    report = json.loads((align / "report.json").read_text())
    assert report["steps"] == 2 and len(report["losses"]) == 2 and report["after"]
    assert json.loads((align / "run.json").read_text())["status"] == "done"
    # the curve: the untrained point, then steps 1 and 2, each written once
    assert [p["step"] for p in _lines(align / "curve.jsonl")] == [0, 1, 2]
    assert not (align / "start").exists()  # the starting weights are gone once trained
    # Mid-training: every process collected its share; the file holds all, in task order.
    traces = (out / "mid" / "traces.jsonl").read_text()
    assert traces == (one_process / "mid" / "traces.jsonl").read_text()
    kept = sum(json.loads(x)["kept"] for x in traces.splitlines())
    assert main_rank["mid"]["kept"] == other["mid"]["kept"] == kept > 0
    assert main_rank["mid"]["traces"] == len(traces.splitlines()) == 3

    # Every saved policy: full-size tensors equal to the trained parameters.
    saves = main_rank["saves"]
    assert set(saves) == {"align", "mid", "grpo-whole", "grpo-sid-constrained"}
    for name, saved in saves.items():
        assert saved["names_match"] and saved["smallest"] > 0, name
        assert saved["max_difference"] < 1e-4, name
        assert saved["parameters"] == saves["align"]["parameters"], name
        if name.startswith("grpo"):  # the folder whose vocabulary holds the SID tokens
            start = str(out / name / "start")
            assert saved["name_or_path"] == saved["config_name_or_path"] == start

    # GRPO: both processes' rollouts in the log and the report, on every process.
    for mode in ("whole", "sid-constrained"):
        folder = out / f"grpo-{mode}"
        rows = _lines(folder / "rollouts.jsonl")
        report = json.loads((folder / "report.json").read_text())
        assert report["steps"] == 2 and report["rollouts"] == len(rows) == 4, mode
        assert main_rank[f"grpo-{mode}"]["rollouts"] == other[f"grpo-{mode}"]["rollouts"] == 4
        assert [r["step"] for r in rows] == [0, 0, 1, 1]  # a group of G = 2 per step
        if mode == "sid-constrained":
            assert all(r["sid_valid"] for r in rows)
        assert all(len(a) == 2 for a in report["advantages"])  # both processes' completions

    # One process's judge fails: both stop with the same typed error at the same batch.
    assert main_rank["fail"] == other["fail"]
    assert main_rank["fail"]["type"] == "TooManyFailures"
    assert "judge down on process 1" in main_rank["fail"]["message"]
    failed = out / "grpo-fail"
    assert json.loads((failed / "run.json").read_text())["status"] == "failed"
    rows = _lines(failed / "rollouts.jsonl")
    report = json.loads((failed / "report.json").read_text())
    assert report["rollouts"] == len(rows) and report["failures"] >= 1
    assert any(r["errors"] for r in rows) and any(not r["errors"] for r in rows)


@pytest.mark.slow
def test_the_cli_under_torchrun_trains_zero3_and_prints_once(
    tmp_path, seed_bank_url, tiny_model
) -> None:
    """The README's command: DS_ACCELERATOR=cpu torchrun --nproc_per_node 2 -m genmem.cli ..."""
    out = tmp_path / "aligned"
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "genmem.cli", "train", "align", "--config", "cpu-zero3",
            "--bank", seed_bank_url, "--model", f"local:{tiny_model}", "--train-steps", "2",
            "--eval-size", "2", "--max-context-tokens", "96", "--out", str(out), "--json",
        ],
        env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-6000:]
    lines = [x for x in done.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1  # the main process alone prints
    report = json.loads(lines[0])
    assert report["steps"] == 2 and report["preset"] == "cpu-zero3"
    from genmem.policies.local import load_policy

    policy = load_policy(out, fresh=True)
    assert min(p.numel() for p in policy.model.parameters()) > 0
    assert policy.info.alignment is not None and policy.info.notes["stage"] == "align"


def test_a_deepspeed_preset_without_a_launcher_exits_2_naming_it(
    seed_bank_url, tmp_path, capsys
) -> None:
    out = tmp_path / "out"
    code = main(["train", "align", "--config", "cpu-zero3", "--bank", seed_bank_url,
                 "--out", str(out)])  # fmt: skip
    assert code == 2 and "torchrun --nproc_per_node" in capsys.readouterr().err
    assert not out.exists()


def test_one_process_collectives_return_at_once() -> None:
    ranks = Ranks()
    assert ranks.gather(3) == [3] and ranks.broadcast("x") == "x" and ranks.is_main
    with ranks.main_first() as main_process:
        assert main_process
    ranks.agree(None)
    ranks.barrier()


def test_shard_and_unshard_give_back_the_order() -> None:
    items = list(range(7))
    parts = [shard(items, Ranks(rank=r, world=3)) for r in range(3)]
    assert parts == [[0, 3, 6], [1, 4], [2, 5]]
    assert unshard(parts, 7) == items


def test_errors_cross_processes_as_themselves_or_named() -> None:
    import pickle

    from genmem.errors import RankFailed

    exc = TooManyFailures("3 GRPO failures", failures=3, limit=2, last_error="judge down")
    back = pickle.loads(pickle.dumps(_portable(exc)))
    assert isinstance(back, TooManyFailures) and (back.failures, back.limit) == (3, 2)
    assert str(back) == "3 GRPO failures" and back.last_error == "judge down"

    class Local(Exception):  # not importable by the other process: described instead
        pass

    sent = _portable(Local("boom"))
    assert isinstance(sent, RankFailed) and "Local: boom" in str(sent)
