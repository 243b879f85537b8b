"""`genmem train grpo`: bad input, then 2 joint steps on the embedded model through the graphs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from genmem.cli import main
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC
from genmem.training.advantages import channel_advantages


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "nope"], "use cpu, a100x8"),
        (["--dataset", "gsm8k", "--split", "dev"], "split"),
        (["--data", "/no/tasks.jsonl"], "does not exist"),
        (["--format", "qa"], "--format describes --data"),
        (["--planner-model", "vllm:nohash"], "has no '#'"),
    ],
)
def test_bad_input_exits_2(seed_bank_url, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    assert main(["train", "grpo", "--bank", seed_bank_url, "--out", str(out), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_joint_grpo_two_steps_through_the_graph(seed_bank_url, tmp_path, capsys) -> None:
    events_before = [e.model_dump() for e in open_bank(seed_bank_url).events()]
    out = tmp_path / "grpo"
    code = main([
        "train", "grpo", "--bank", seed_bank_url, "--limit", "1", "--max-steps", "2",
        "--constrained", "--max-new-tokens", "16", "--out", str(out), "--json",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert (
        report["steps"] == 2
        and report["rollouts"] == 4
        and report["roles"]
        == [
            "retriever",
            "evolver",
        ]
    )
    for name in ("format", "sid_agreement", "process_channel", "outcome_channel"):
        assert len(report["rewards"][name]) == 2
    rollouts = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 4 and {r["role"] for r in rollouts} == {"retriever", "evolver"}
    assert [r["step"] for r in rollouts] == [0, 0, 1, 1]  # one group of G = 2 per step
    for role in ("retriever", "evolver"):
        mine = [r for r in rollouts if r["role"] == role]
        rates = report["eligibility"][role]
        assert rates["sid_valid"] == 1.0  # --constrained
        assert rates["answered"] == sum(r["answered"] for r in mine) / len(mine)
    for r in rollouts:
        assert DEFAULT_SPEC.is_valid(r["completion"].strip())  # --constrained
        valid_op = r["role"] == "retriever" or r["op"] in ("insert", "revise")
        assert r["format"] == (1.0 if valid_op else 0.0)
        assert 0.0 <= r["sid_agreement"] <= 1.0  # the task's source entry is the reference
        assert -1.0 <= r["outcome_channel"] <= 1.2 and "error" not in r
        assert r["sid_valid"] and isinstance(r["retrieved"], bool)  # dynamics flags
        assert r["sid_match"] == (r["sid_agreement"] == 1.0)
        assert r["answered"] == (r["outcome_channel"] > 0)  # GSM8K scores 0/1, Eq. 4
        if r["role"] == "evolver":
            assert r["operation"] in (0.0, 1.0) and 0.0 <= r["localization"] <= 1.0
    # TRL's advantages are the per-channel normalised ones (groups of G = 2, one per step).
    for step, adv in enumerate(report["advantages"]):
        group = rollouts[2 * step : 2 * step + 2]
        expected = channel_advantages(
            [r["process_channel"] for r in group], [r["outcome_channel"] for r in group], 2
        )
        assert np.allclose(adv, expected, atol=1e-3)
    # The input bank was never written; the policy loads back and still writes valid SIDs.
    assert [e.model_dump() for e in open_bank(seed_bank_url).events()] == events_before
    assert not (out / "start").exists()
    assert open(report["files"]["plot"], "rb").read(4) == b"\x89PNG"
    code = main([
        "sid", "generate", "--bank", seed_bank_url, "--model", f"local:{out}", "--beam", "2",
        "--query", "Tom has 3 apples and buys 4 more. How many now?", "--json",
    ])  # fmt: skip
    assert code == 0
    sids = [c["sid"] for c in json.loads(capsys.readouterr().out)]
    assert len(sids) == 2 and all(DEFAULT_SPEC.is_valid(s) for s in sids)
