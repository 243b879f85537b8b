"""Commands killed with SIGKILL mid-run, a torn last write added, then rerun: each resumes and
ends with the same records as a run that was never interrupted (real default model, greedy).

Each test polls the killed run's output files and kills it once it has written something a rerun
must keep; the rerun is the same command (``train`` adds ``--resume``). Only the killed run needs
a process of its own: the uninterrupted run and the rerun are the same command run in this
process (``in_process``), each on the model loaded afresh as a new process would load it (empty
reply memo and prompt caches: a prompt cache left by another run changes how a reply's prefix is
computed, and so, rarely, a greedy token) and with the killed process's thread count."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from genmem.cli import main

_VARIES = {"seconds"}
"""Fields that differ between two runs of the same task: wall time only."""


def _argv(bank: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "genmem.cli", "eval", "--bench", "gsm8k-test", "--limit", "2",
            "--methods", "none", "--bank", bank, "--max-steps", "1", "--max-new-tokens",
            "8", "--out", str(out), "--json"]  # fmt: skip


def _records(out: Path) -> dict[tuple[str, str], dict]:
    path = next(out.rglob("records.jsonl"))
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    keyed = {(r["id"], r["method"]): {k: v for k, v in r.items() if k not in _VARIES} for r in rows}
    assert len(keyed) == len(rows), "a task was recorded twice"
    return keyed


def _env() -> dict[str, str]:
    import torch

    root = str(Path(__file__).resolve().parents[2])
    return {
        **os.environ,
        "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        # this process's thread count: the runs here and the killed one decode alike
        "OMP_NUM_THREADS": str(torch.get_num_threads()),
    }


@pytest.fixture
def in_process(monkeypatch, capsys) -> Callable[..., dict]:
    """Run a command's argv in this process (no interpreter start, no imports), its models
    loaded afresh as a new process would (not a cached load whose greedy replies and prompt
    caches other runs filled), unless ``keep_models``; returns its JSON output."""
    from genmem.policies import local

    monkeypatch.setattr(local, "_CACHE", {})

    def run(argv: list[str], *, keep_models: bool = False) -> dict:
        assert argv[:3] == [sys.executable, "-m", "genmem.cli"]
        if not keep_models:
            monkeypatch.setattr(local, "_CACHE", {})
        capsys.readouterr()
        code = main(argv[3:])
        captured = capsys.readouterr()
        assert code == 0, captured.err[-2000:]
        return json.loads(captured.out) if "--json" in argv else {}

    return run


def _kill_when(argv: list[str], ready: Callable[[], bool]) -> None:
    """Start ``argv`` and SIGKILL it as soon as ``ready()`` (polled); it must not finish first."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env())
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it was killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


def _jsonl(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if k not in _VARIES} for r in rows]


@pytest.mark.slow
def test_eval_killed_mid_run_resumes_to_the_same_records(
    tmp_path: Path, seed_bank_url, in_process
) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    in_process(_argv(seed_bank_url, whole))
    expected = _records(whole)
    assert len(expected) == 2

    proc = subprocess.Popen(_argv(seed_bank_url, killed), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env())  # fmt: skip
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # kill once at least one record is on disk
        found = list(killed.rglob("records.jsonl"))
        if found and found[0].read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    path = next(killed.rglob("records.jsonl"))
    partial = path.read_text().count("\n")
    assert partial == 1, "the kill came after the run had finished"
    with path.open("a") as fh:  # the write a kill cuts in half
        fh.write('{"id": "test-1", "method": "no')

    # The rerun asks the uninterrupted run's very prompts for the task it still has to run, so
    # the model that run loaded answers it from its memo of greedy replies.
    in_process(_argv(seed_bank_url, killed), keep_models=True)
    assert _records(killed) == expected


def _bank_rows(url: str) -> tuple[list[tuple], list[tuple]]:
    """A bank's live entries and its operation log, without times."""
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    entries = [(e.sid, e.payload, e.version) for e in bank.entries()]
    events = [(e.op, e.outcome, e.sid, e.version_before, e.version_after) for e in bank.events()]
    return entries, events


@pytest.fixture(scope="module")
def seed_codebook() -> str:
    """The seed bank's codebooks (cached), so a cold start needs no fit."""
    from genmem.experiments.seed_bank import SeedBankConfig, build_seed_bank

    seed = build_seed_bank(SeedBankConfig(distill="reference", size=300, fit_size=300))
    return str(Path(seed.dir) / "codebook")


_TASKS = 300
"""Cold-start tasks whose records the killed run writes into its bank, one slot at a time
(short ones: encoding them is most of the run, writing them the window for the kill)."""


def _extracted(out: Path) -> None:
    """The files a cold start leaves once every task is tried, assessed and extracted: a
    worked solution per GSM8K training task stands in for what the model extracts."""
    from genmem.envs.benches import open_bench
    from genmem.envs.bundled import gsm8k_seed_experiences
    from genmem.experiments.coldstart import AttemptRecord, ExperienceLine
    from genmem.experiments.experience_schemas import EXPERIENCE_FIELDS, ExperienceFields

    out.mkdir(parents=True)
    tasks = open_bench("gsm8k-train").tasks(_TASKS)
    solved = gsm8k_seed_experiences(limit=_TASKS)
    empty = dict.fromkeys(EXPERIENCE_FIELDS, "")
    with (
        (out / "attempts.jsonl").open("w") as a,
        (out / "failures.jsonl").open("w") as f,
        (out / "experiences.jsonl").open("w") as x,
    ):
        for task, seed in zip(tasks, solved, strict=True):
            a.write(AttemptRecord(query_id=task.id, k=0, verdict="success").model_dump_json())
            f.write(json.dumps({"stage": "assess", "query_id": task.id, "k": 0, "errors": ["-"]}))
            text = seed["text"][:60]
            fields = ExperienceFields(**empty | {"procedure": text})
            line = ExperienceLine(
                query_id=task.id, index=0, source="gsm8k", type="math", evidence="success",
                fields=fields, text=text, query=task.query,
            )  # fmt: skip
            x.write(line.model_dump_json())
            for fh in (a, f, x):
                fh.write("\n")


def _entries_in(db: Path) -> int:
    """Entries written so far to the SQLite bank file ``db`` (0 before it exists)."""
    import sqlite3

    if not db.is_file():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.01) as conn:
            return int(conn.execute("SELECT count(*) FROM genmem_slots").fetchone()[0])
    except sqlite3.Error:  # not created yet, or locked for a moment
        return 0


@pytest.mark.slow
def test_coldstart_killed_while_writing_its_bank_resumes_to_the_same_bank(
    tmp_path: Path, seed_codebook, in_process
) -> None:
    """Killed after it had written part of its bank, a cold start rerun writes the rest and
    ends with the bank, report and statistics of a run that was never stopped.

    Its model stages are done already (their files are given: a real extraction takes minutes
    on CI's CPUs); that they resume record by record is the eval test's and the end-to-end
    cold-start test's, on the same JSONL files."""

    def argv(name: str) -> list[str]:
        return [sys.executable, "-m", "genmem.cli", "bank", "coldstart", "--bench", "gsm8k-train",
                "--limit", str(_TASKS), "--attempts", "1", "--codebook", seed_codebook,
                "--merge", "concat", "--no-gate", "--bank", f"sqlite:///{tmp_path}/{name}.db",
                "--out", str(tmp_path / name), "--json"]  # fmt: skip

    # --no-gate: the stand-in records have no trajectory to ground them.

    for name in ("whole", "killed"):
        _extracted(tmp_path / name)
    whole = in_process(argv("whole"))
    assert whole["records"] == _TASKS and whole["entries"] > 50

    _kill_when(argv("killed"), lambda: _entries_in(tmp_path / "killed.db") >= 1)
    written = _entries_in(tmp_path / "killed.db")
    assert 1 <= written < whole["entries"], "the kill came after the bank was written"

    resumed = in_process(argv("killed"))
    varies = {"seconds", "out", "bank", "files"}
    assert {k: v for k, v in resumed.items() if k not in varies} == {
        k: v for k, v in whole.items() if k not in varies
    }
    killed_bank = _bank_rows(f"sqlite:///{tmp_path}/killed.db")
    assert killed_bank == _bank_rows(f"sqlite:///{tmp_path}/whole.db")
    for name in ("stats.json", "experiences.jsonl", "attempts.jsonl"):
        assert (tmp_path / "killed" / name).read_text() == (tmp_path / "whole" / name).read_text()


@pytest.mark.slow
def test_evolve_killed_mid_run_resumes_to_the_same_records(
    tmp_path: Path, seed_bank_url, in_process
) -> None:
    def argv(out: Path) -> list[str]:
        return [sys.executable, "-m", "genmem.cli", "evolve", "--bank", seed_bank_url,
                "--bench", "gsm8k-test", "--blocks", "1", "--block-size", "1", "--probe-size",
                "1", "--methods", "none", "--candidates", "1", "--no-rerank", "--max-steps", "1",
                "--max-new-tokens", "8", "--memory-k", "1", "--out", str(out),
                "--json"]  # fmt: skip

    # The stream runs the full loop (retrieve, execute, evolve) on the working bank; the probes
    # run without memory ("none"), whose t1 run repeats its t0 run with a greedy model.

    whole = tmp_path / "whole"
    in_process(argv(whole))
    out = tmp_path / "killed"
    _kill_when(argv(out), lambda: _lines(out / "probes.jsonl") >= 1)  # t0 probed, streaming
    assert _lines(out / "stream.jsonl") == 0, "the kill came after the stream query"
    with (out / "stream.jsonl").open("a") as fh:  # the write a kill cuts in half
        fh.write('{"index": 0, "block": 1, "id": "te')

    in_process(argv(out))
    for name in ("stream.jsonl", "probes.jsonl"):
        assert _jsonl(out / name) == _jsonl(whole / name), name
    assert _lines(out / "stream.jsonl") == 1 and _lines(out / "probes.jsonl") == 2

    def work(folder: Path) -> str:
        return json.loads((folder / "summary.json").read_text())["work_bank"]

    assert _bank_rows(work(out)) == _bank_rows(work(whole))
    assert not list(out.glob("bank.before-*"))


@pytest.mark.slow
def test_align_killed_mid_run_resumes_from_its_last_whole_checkpoint(
    tmp_path: Path, seed_bank_url, in_process
) -> None:
    """No uninterrupted run to compare with here: that a resumed run trains on the same batches
    with the same losses is tests/training/test_train_cli.py's pause test; this one adds the kill
    and a checkpoint it cut short."""
    from genmem.policies.local import load_policy

    preset = tmp_path / "tiny-lora.yaml"
    preset.write_text("base: cpu-lora\nper_device_train_batch_size: 2\nmax_length: 160\n")
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "genmem.cli", "train", "align", "--bank", seed_bank_url,
            "--config", str(preset), "--train-steps", "3", "--checkpoint-every", "1",
            "--eval-size", "1", "--max-context-tokens", "64", "--max-target-chars", "120",
            "--weights", "addressing", "--out", str(out), "--json"]  # fmt: skip

    _kill_when(argv, (out / "trainer" / "checkpoint-1" / "trainer_state.json").is_file)
    done = sorted(
        int(p.parent.name.split("-")[1]) for p in out.glob("trainer/*/trainer_state.json")
    )
    assert done and done[-1] < 3, "the kill came after the last checkpoint"
    last = out / "trainer" / f"checkpoint-{done[-1]}"
    logged = json.loads((last / "trainer_state.json").read_text())
    # The kill cut the next checkpoint's save short: its weights half-written, no state.
    torn = out / "trainer" / f"checkpoint-{done[-1] + 1}"
    shutil.rmtree(torn, ignore_errors=True)
    torn.mkdir()
    for f in last.glob("*.safetensors"):
        (torn / f.name).write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    before = json.loads((out / "before.json").read_text())

    resumed = in_process([*argv, "--resume"])
    assert resumed["resumed_from"].endswith(f"checkpoint-{done[-1]}")
    assert resumed["complete"] and resumed["steps"] == 3
    assert resumed["piece_steps"] == 3 - done[-1]
    assert resumed["loss_steps"] == [1, 2, 3]  # the killed run's losses kept, the rest added
    killed_losses = [h["loss"] for h in logged["log_history"] if "loss" in h]
    assert resumed["losses"][: done[-1]] == pytest.approx(killed_losses)
    assert resumed["before"] == before  # measured once, before the kill
    assert json.loads((out / "run.json").read_text())["status"] == "done"
    assert [p.name for p in (out / "trainer").glob("checkpoint-*")] == ["checkpoint-3"]
    policy = load_policy(out, fresh=True)
    assert policy.info.alignment is not None and policy.info.alignment.steps == 3
