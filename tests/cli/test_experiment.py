"""`genmem experiment symbols|fusion|codebooks`: bad input, and runs on the real default model."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from genmem.cli import main
from genmem.experiments.symbols import CONDITIONS, SYMBOLIC_HEADER


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--beams", "0"], "1 to 50"),
        (["--beams", "1,x"], "comma-separated whole numbers"),
        (["--conditions", "raw,l9"], "unknown conditions"),
        (["--sid-model", "vllm:http://x#m"], "--sid-model"),
        (["--bench", "gsm8k-test", "--format", "qa"], "--format describes --data"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(
    tmp_path: Path, capsys, extra: list[str], message: str
) -> None:
    out = tmp_path / "out"
    assert main(["experiment", "symbols", *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_symbols_on_the_real_model_and_seed_bank(tmp_path: Path, seed_bank_url: str, capsys):
    out = tmp_path / "sym"
    args = ["experiment", "symbols", "--bench", "gsm8k-test", "--limit", "2", "--beams", "2"]
    args += ["--bank", seed_bank_url, "--max-steps", "1", "--max-new-tokens", "8"]
    # l1_l2 and l1_l3 cut the same SIDs as l1 and full, and shuffled and random show other SIDs
    # the way full shows its own (tests/experiments/test_symbols.py runs every condition)
    run = ("raw", "l1", "full", "rewrite", "retrieved")
    args += ["--conditions", ",".join(run)]
    assert main([*args, "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # the default policy was never aligned: auto quantises, and it reads SID tokens as text
    assert result["addresser"] == "quantizer" and result["sid_tokens"] == "text"
    assert list(result["conditions"]) == [c for c in CONDITIONS if c in run]
    assert set(result["conditions"]["full"]) == {"2"}
    assert result["conditions"]["full"]["2"]["n"] == 2
    assert result["conditions"]["full"]["2"]["vs_raw"]["n"] == 2
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 2 * len(run)
    assert not [r for r in records if r["error"]]
    by = {(r["id"], r["condition"], r["k"]): r for r in records}
    task = records[0]["id"]
    full = by[(task, "full", 2)]
    assert len(full["sids"]) == 2 and full["support"].startswith(SYMBOLIC_HEADER)
    # level-first: the two level-1 tokens, then the two level-2 tokens, ...
    shown = re.findall(r"<SID_L(\d+)_\d+>", full["support"])
    assert shown == ["1", "1", "2", "2", "3", "3", "4", "4"]
    tokens = re.findall(r"<SID_L\d+_\d+>", full["support"])
    assert tokens[:2] == [re.findall(r"<SID_L1_\d+>", s)[0] for s in full["sids"]]
    assert by[(task, "l1", 2)]["support"].count("<SID_L1_") == 2
    assert "<SID_L2_" not in by[(task, "l1", 2)]["support"]
    # the text conditions read the bank: the seed entry of the task's first SID
    assert by[(task, "retrieved", 2)]["support"].startswith("Entry 1:\n")
    assert by[(task, "rewrite", 2)]["support_source"] in ("rewrite", "entry")
    assert Counter(r["condition"] for r in records)["raw"] == 2
    assert (out / "symbols.png").stat().st_size > 0
    prepared = (out / "addresses.jsonl").read_text().splitlines()
    assert len(prepared) == 2


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--conditions", "fused,c"], 2, "unknown conditions"),
        (["--sid-model", "vllm:http://x#m"], 2, "--sid-model"),
        (["--bank", "sqlite:///nowhere/x.db?bank=missing"], 1, "no bank 'missing'"),
    ],
)
@pytest.mark.parametrize("experiment", ["fusion", "symbols"])
def test_bad_input_is_refused_before_an_output_folder_is_made(
    tmp_path: Path, capsys, experiment: str, extra: list[str], code: int, message: str
) -> None:
    if experiment == "symbols" and extra[0] == "--conditions":
        extra = ["--conditions", "raw,c"]
    out = tmp_path / "out"
    assert main(["experiment", experiment, *extra, "--out", str(out)]) == code
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_fusion_on_the_real_model_and_seed_bank(tmp_path: Path, seed_bank_url: str, capsys):
    from genmem.memory.location import open_bank

    before = open_bank(seed_bank_url).stats()
    out = tmp_path / "fusion"
    args = ["experiment", "fusion", "--bench", "gsm8k-test", "--limit", "1"]
    args += ["--bank", seed_bank_url, "--max-steps", "1", "--max-new-tokens", "8"]
    assert main([*args, "--conditions", "none,a,unchecked", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["conditions"]) == ["none", "a", "fused", "unchecked"]
    assert set(result["fused_vs"]) == {"a", "none"}
    assert sum(result["fusions"].values()) == 1 and "error" not in result["fusions"]
    pair = json.loads((out / "pairs.jsonl").read_text())
    bank = open_bank(seed_bank_url)
    assert len(pair["sources"]) == 2 and all(bank.get(s) is not None for s in pair["sources"])
    assert pair["fused"] and pair["addresser"] == "quantizer"  # the policy is not aligned
    # the write went through the gate into the scratch copy; --bank is as it was
    assert bank.stats() == before
    scratch = open_bank(pair["scratch"])
    logged = scratch.events()
    assert len(logged) == before.events + 1 and logged[-1].outcome == pair["outcome"]
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 4 and not [r for r in records if r["error"]]
    fused = next(r for r in records if r["condition"] == "fused")
    assert (fused["support"] is None) == (pair["outcome"] == "rejected")
    assert (out / "fusion.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--heldout", "1.5"], "heldout"),
        (["--configs", "8;x"], "--configs"),
        (["--source", "qa", "--distill", "procedure"], "abstract"),
        (["--size", "50"], "greater than or equal to 48"),  # 40 rows left to fit on
        (["--align-steps", "-1"], "0 or more"),
        (["--eval-size", "-1"], "0 or more"),
        (["--align-steps", "1", "--config", "h100x64"], "use cpu, cpu-lora"),
        (["--bench", "gsm8k-test"], "give --limit too"),
    ],
)
def test_codebook_ablation_refuses_bad_settings(tmp_path: Path, capsys, extra, message) -> None:
    out = tmp_path / "abl"
    assert main(["experiment", "codebooks", *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_codebook_ablation_with_and_without_the_prefix(tmp_path: Path, capsys) -> None:
    from genmem.memory.encoders import EXPERIENCE_PREFIX
    from genmem.memory.location import open_bank
    from genmem.memory.rqkmeans import Codebooks

    out = tmp_path / "abl"
    args = ["experiment", "codebooks", "--distill", "reference", "--size", "80"]
    args += ["--configs", "8,4,2", "--heldout", "0.25", "--candidates", "5"]
    assert main([*args, "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    with_prefix, plain = result["rows"]
    assert (with_prefix["prefix"], plain["prefix"]) == (True, False)
    for row in result["rows"]:
        assert (row["fit_n"], row["heldout_n"], row["levels"]) == (60, 20, 3)
        assert row["questions"] == 80 and row["heldout_questions"] == 20
        assert 0 < row["fit_mse_per_dim"] and 0 < row["heldout_mse_per_dim"]
        assert 0.0 <= row["heldout_hit_at_5"]["rate"] <= 1.0
        assert row["hit_at_1"]["rate"] <= row["hit_at_5"]["rate"]
    # the two banks differ in their codebooks' encoding only
    recorded = [open_bank(r["bank"]).codebook_hash for r in result["rows"]]
    prefixes = [Codebooks.recall(h).metadata.encoder_prefix for h in recorded]
    assert prefixes == [EXPERIENCE_PREFIX, ""]
    assert "| 8x4x2 | no |" in (out / "codebooks.md").read_text()


@pytest.mark.slow
def test_codebook_ablation_aligns_a_policy_per_bank_and_scores_tasks(
    tmp_path: Path, capsys
) -> None:
    """One command, one table: an aligned policy per shape, its held-out hits and task scores.
    (One bank, to keep it small; tests/experiments/test_codebook_policy.py pairs rows.)"""
    out = tmp_path / "abl"
    preset = tmp_path / "tiny.yaml"
    preset.write_text("base: cpu-lora\nper_device_train_batch_size: 2\nmax_length: 128\n")
    args = ["experiment", "codebooks", "--distill", "reference", "--size", "80", "--prefix", "with"]
    args += ["--configs", "8,4,2", "--heldout", "0.25", "--candidates", "5"]
    args += ["--align-steps", "1", "--config", str(preset), "--eval-size", "0"]
    args += ["--limit", "1", "--max-steps", "1", "--max-new-tokens", "8", "--out", str(out)]
    assert main([*args, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (row,) = result["rows"]
    aligned, tasks = row["aligned"], row["tasks"]
    policy = Path(aligned["policy"])
    assert policy == out / "align" / "8x4x2-prefix" and aligned["steps"] == 1
    pairs = [json.loads(x) for x in (policy / "heldout_pairs.jsonl").read_text().splitlines()]
    assert aligned["heldout"] == len(pairs) > 0
    assert set(aligned["per_query"]) == {p["query"] for p in pairs}
    assert set(aligned["hit_at_5"]) == set(aligned["hit_at_1"]) == {
        "sid", "sid_reranked", "tfidf", "tfidf_reranked", "quantizer_reranked"
    }  # fmt: skip
    for method, at5 in aligned["hit_at_5"].items():
        assert aligned["hit_at_1"][method]["rate"] <= at5["rate"] <= 1
    for name in ("sid - tfidf", "sid_reranked - tfidf_reranked"):
        assert aligned["vs_tfidf"][name]["n"] == len(pairs)
    # the policy records its alignment to this bank, so the task run addresses with it
    assert tasks["n"] == 1 and tasks["addresser"] == "generative" and tasks["errors"] == 0
    assert tasks["vs_none"]["n"] == 1 and result["none_score"] is not None
    table = (out / "codebooks.md").read_text()
    assert "aligned - TF-IDF" in table and "task score (sid)" in table and "(generative)" in table
    # a rerun reuses the finished alignment, its scores and the task records
    kept = [(policy / name).stat().st_mtime for name in ("report.json", "hits.json")]
    assert main([*args, "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["rows"][0]
    assert (again["aligned"], again["tasks"]) == (aligned, tasks)
    assert kept == [(policy / name).stat().st_mtime for name in ("report.json", "hits.json")]
