"""`genmem train align` end to end on the embedded model and a GSM8K seed bank; bad input."""

from __future__ import annotations

import json
import math

import pytest

from genmem.cli import main
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC
from tests.training._weights import assert_trained


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "h100x64"], "use cpu, a100x8"),
        (["--model", "/no/such/policy"], "policy directory"),
        (["--weights", "query_sid=two"], "not a number"),
        (["--weights", "querysid=1"], "NAME=VALUE"),
        (["--describer", "local:/no/such/model"], "not a model directory"),
        (["--describer", "vllm:http://x"], "has no '#'"),
        (["--weights", "query_sid=0,trajectory_sid=0,experience_sid=0,sid_experience=0,"
          "sid_description=0"], "at least one"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_and_writes_nothing(
    seed_bank_url, tmp_path, capsys, extra, message
) -> None:
    out = tmp_path / "out"
    code = main(["train", "align", "--bank", seed_bank_url, "--out", str(out), *extra])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_align_two_steps_then_the_policy_loads_and_generates_sids(
    seed_bank_url, tmp_path, capsys
) -> None:
    out = tmp_path / "aligned"
    preset = tmp_path / "tiny.yaml"  # a preset file over the cpu preset: small, short batches
    preset.write_text("base: cpu\nper_device_train_batch_size: 2\nmax_length: 256\n")
    code = main([
        "train", "align", "--bank", seed_bank_url, "--config", str(preset), "--train-steps", "2",
        "--eval-size", "2", "--max-context-tokens", "128", "--max-target-chars", "300",
        "--out", str(out), "--json",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 2 and len(report["losses"]) == 2 and report["preset"] == "tiny"
    assert all(math.isfinite(x) and x > 0 for x in report["losses"])
    assert set(report["counts"]) == {
        "query_sid", "trajectory_sid", "experience_sid", "sid_experience", "sid_description"
    }  # fmt: skip
    assert all(n > 0 for n in report["counts"].values())
    for split in ("heldout", "trained"):
        for when in ("before", "after"):
            acc = report[when][split]
            assert acc["n"] == 2 and acc["ks"] == [1, 5, 50]
            assert all(0 <= v <= 1 for v in acc["prefix"]["50"])
            # A longer beam never finds less.
            assert acc["prefix"]["50"][0] >= acc["prefix"]["1"][0]
    assert open(report["files"]["plot"], "rb").read(4) == b"\x89PNG"
    info = json.loads((out / "genmem_policy.json").read_text())
    assert info["sid_sizes"] == list(DEFAULT_SPEC.sizes) and info["notes"]["stage"] == "align"
    # The directory records what it was aligned to: --addresser auto generates with it there.
    bank = open_bank(seed_bank_url)
    alignment = info["alignment"]
    assert alignment["codebook_hash"] == bank.codebook_hash and alignment["steps"] == 2
    assert alignment["bank_id"] == bank.bank_id and alignment["heldout"]["n"] == 2
    assert json.loads((out / "run.json").read_text())["status"] == "done"
    assert set(report["withheld"]) == set(report["counts"])
    held = (out / "heldout_pairs.jsonl").read_text().splitlines()
    assert report["withheld"]["query_sid"] == len(held) == 30  # 10% of the 300 queries
    assert_trained(out, open_bank(seed_bank_url))

    # The policy directory is a --model for every other command.
    code = main([
        "sid", "generate", "--bank", seed_bank_url, "--model", f"local:{out}", "--beam", "3",
        "--query", "A baker sells 12 muffins a day. How many in a week?", "--json",
    ])  # fmt: skip
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    sids = [c["sid"] for c in rows]
    assert len(sids) == 3 and all(DEFAULT_SPEC.is_valid(s) for s in sids)
    assert {c["addresser"] for c in rows} == {"generative"}  # aligned to this bank: auto generates
    code = main([
        "sid", "generate", "--bank", seed_bank_url, "--beam", "3", "--json",
        "--query", "A baker sells 12 muffins a day. How many in a week?",
    ])  # fmt: skip
    assert code == 0  # the embedded policy was never aligned: auto quantises
    assert {c["addresser"] for c in json.loads(capsys.readouterr().out)} == {"quantizer"}
