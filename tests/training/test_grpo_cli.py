"""`genmem train grpo`: bad input, then real GRPO steps on the embedded model through the graphs.

The joint run trains whole turns (the default): its env_mask is checked span by span against
the text each part logged, and its weights must have moved. A SID-only run and a run stopped by
failures follow.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from genmem.cli import main
from genmem.envs.gsm8k import GSM8KEnvironment
from genmem.errors import TooManyFailures
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC
from genmem.policies.prompts import NO_MEMORY_ANSWER
from genmem.training.advantages import channel_advantages
from genmem.training.config import RolloutConfig, load_preset
from genmem.training.rollouts import GraphRollouts

PROBE = "model.layers.0.self_attn.q_proj.weight"
"""A trainable weight every step's gradient reaches."""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "nope"], "use cpu, cpu-lora, cpu-ddp, cpu-zero3, gpu, gpu-lora"),
        (["--dataset", "gsm8k", "--split", "train"], "unrecognized arguments: --dataset gsm8k"),
        (["--bench", "gsm8k-dev"], "invalid choice"),
        (["--data", "/no/tasks.jsonl"], "does not exist"),
        (["--format", "qa"], "--format describes --data"),
        (["--planner-model", "vllm:nohash"], "has no '#'"),
        (["--completion", "all"], "invalid choice"),
        (["--max-failures", "-1"], "must be >= 0"),
        (["--max-steps", "2"], "are --train-steps (the planner's steps are --max-planner-steps)"),
        (["--config", "cpu-lora", "--bench", "gsm8k-train"], "GRPO trains the full policy"),
    ],
)
def test_bad_input_exits_2(seed_bank_url, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    try:
        code = main(["train", "grpo", "--bank", seed_bank_url, "--out", str(out), *extra])
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def _weights(directory: Any) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    return load_file(str(directory / "model.safetensors"))


@pytest.fixture(scope="module")
def start_probe() -> np.ndarray:
    from genmem.policies.local import load_policy

    return load_policy(None, fresh=True, dtype="float32").model.state_dict()[PROBE].numpy()


@pytest.fixture
def rollout_outputs(monkeypatch) -> list[dict[str, Any]]:
    """What every rollout_func call returned to TRL, with the tokenizer it used."""
    seen: list[dict[str, Any]] = []
    call = GraphRollouts.__call__

    def recording(self: GraphRollouts, prompts: list[str], trainer: Any) -> dict[str, Any]:
        out = call(self, prompts, trainer)
        seen.append({**out, "tokenizer": trainer.processing_class})
        return out

    monkeypatch.setattr(GraphRollouts, "__call__", recording)
    return seen


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """Consecutive runs of equal mask values: (value, start, end)."""
    runs: list[tuple[int, int, int]] = []
    for i, m in enumerate(mask):
        if runs and runs[-1][0] == m:
            runs[-1] = (m, runs[-1][1], i + 1)
        else:
            runs.append((m, i, i + 1))
    return runs


@pytest.mark.slow
def test_joint_grpo_trains_whole_turns_through_the_graph(
    seed_bank_url, tmp_path, capsys, rollout_outputs, start_probe
) -> None:
    events_before = [e.model_dump() for e in open_bank(seed_bank_url).events()]
    out = tmp_path / "grpo"
    code = main([
        "train", "grpo", "--bank", seed_bank_url, "--limit", "1", "--train-steps", "2",
        "--constrained", "--max-new-tokens", "16", "--memory-k", "1", "--out", str(out), "--json",
    ])  # fmt: skip
    # --memory-k 1: one entry per lookup (3 by default) keeps the masked lookup turns, which
    # the policy and its reference read on every step, at 700-1,240 tokens instead of 1,100-1,800.
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 2 and report["rollouts"] == 4 and report["completion"] == "whole"
    assert report["roles"] == ["retriever", "evolver"] and report["failures"] == 0
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
        assert -1.0 <= r["outcome_channel"] <= 1.2 and not r["errors"]
        assert r["sid_valid"] and isinstance(r["retrieved"], bool)  # dynamics flags
        assert r["sid_match"] == (r["sid_agreement"] == 1.0)
        assert r["answered"] == (r["outcome_channel"] > 0)  # GSM8K scores 0/1, Eq. 4
        if r["role"] == "evolver":
            assert r["operation"] in (0.0, 1.0) and 0.0 <= r["localization"] <= 1.0
    # Whole turns: SID (trained), the lookup as the text turn's prompt (masked), then the
    # policy's own rewrite / decision (trained), token span by token span.
    completions = [
        (ids, mask, out_["tokenizer"])
        for out_ in rollout_outputs
        for ids, mask in zip(out_["completion_ids"], out_["env_mask"], strict=True)
    ]
    assert len(completions) == 4
    # --constrained reports the sampled tokens' log-probabilities too (issue 37: it gave None,
    # which TRL's vLLM importance-sampling correction subtracts from): one per token, the SID
    # turn's included, <= 0, and 0.0 exactly on the masked lookup tokens.
    for out_ in rollout_outputs:
        for ids, mask, logps in zip(
            out_["completion_ids"], out_["env_mask"], out_["logprobs"], strict=True
        ):
            assert len(logps) == len(ids)
            assert all(lp <= 0 and math.isfinite(lp) for lp in logps)
            assert any(lp < 0 for lp, m in zip(logps, mask, strict=True) if m)
            assert all(lp == 0.0 for lp, m in zip(logps, mask, strict=True) if not m)
    for (ids, mask, tok), row in zip(completions, rollouts, strict=True):
        assert len(mask) == len(ids)
        runs = _runs(mask)
        assert [v for v, _, _ in runs] == [1, 0, 1], row["turns"]
        (_, s0, e0), (_, s1, e1), (_, s2, e2) = runs
        sid_text = tok.decode(ids[s0:e0], skip_special_tokens=True)
        env_text = tok.decode(ids[s1:e1])
        reply_text = tok.decode(ids[s2:e2], skip_special_tokens=True)
        assert sid_text == row["completion"] and DEFAULT_SPEC.is_valid(sid_text.strip())
        assert "memory_lookup results" in env_text and "<tool_response>" in env_text
        assert env_text.count("<retrieved_memory sid=") == 1  # --memory-k 1
        assert row["completion"].strip() in env_text  # the lookup call names the SID
        parts = [p["part"] for p in row["turns"]]
        want = "rewrite" if row["role"] == "retriever" else "decision"
        assert parts == ["sid", "lookup", want]
        assert [p["trained"] for p in row["turns"]] == [True, False, True]
        assert row["turns"][1]["text"] == env_text and row["turns"][2]["text"] == reply_text
        assert "memory_lookup results" not in reply_text
        if row["role"] == "retriever" and row["support_source"] == "rewrite":
            assert row["support"] in reply_text and row["gate_reason"] is None
        elif row["role"] == "retriever":
            # the gate refused the policy's rewrite: the planner got the entry read (or
            # nothing), and the junk turn earns no strategy reward
            assert row["support_source"] in ("entry", "none") and row["strategy_judge"] == 0.0
            assert row["support"] in env_text or row["support"] == NO_MEMORY_ANSWER
            assert row["gate_reason"] or row["support_source"] == "none"
    # TRL's advantages are the per-channel normalised ones (groups of G = 2, one per step).
    for step, adv in enumerate(report["advantages"]):
        group = rollouts[2 * step : 2 * step + 2]
        expected = channel_advantages(
            [r["process_channel"] for r in group], [r["outcome_channel"] for r in group], 2
        )
        assert np.allclose(adv, expected, atol=1e-3)
    # The weights moved; the input bank was never written; the policy loads and writes SIDs.
    assert not np.array_equal(_weights(out)[PROBE], start_probe)
    assert [e.model_dump() for e in open_bank(seed_bank_url).events()] == events_before
    assert not (out / "start").exists()
    assert open(report["files"]["plot"], "rb").read(4) == b"\x89PNG"
    code = main([
        "sid", "generate", "--bank", seed_bank_url, "--model", f"local:{out}", "--beam", "2",
        "--addresser", "generative",
        "--query", "Tom has 3 apples and buys 4 more. How many now?", "--json",
    ])  # fmt: skip
    assert code == 0
    sids = [c["sid"] for c in json.loads(capsys.readouterr().out)]
    assert len(sids) == 2 and all(DEFAULT_SPEC.is_valid(s) for s in sids)


@pytest.mark.slow
def test_sid_only_grpo_trains_the_sid_turn(
    seed_bank_url, tmp_path, capsys, rollout_outputs, start_probe
) -> None:
    out = tmp_path / "grpo-sid"
    code = main([
        "train", "grpo", "--bank", seed_bank_url, "--limit", "1", "--train-steps", "1",
        "--role", "evolver", "--completion", "sid", "--constrained", "--no-judge",
        "--max-new-tokens", "16", "--out", str(out), "--json",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["completion"] == "sid" and report["steps"] == 1
    (returned,) = rollout_outputs
    assert "env_mask" not in returned
    for ids in returned["completion_ids"]:  # L SID tokens and the end token, nothing else
        assert len(ids) == DEFAULT_SPEC.levels + 1 and ids[-1] == returned["tokenizer"].eos_token_id
    rows = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert all([p["part"] for p in r["turns"]] == ["sid"] for r in rows)
    # The evolver's r_loc is continuous, so the group's advantages are not all 0 and the
    # weights must move (a retriever group without the judge often ties).
    assert any(a != 0.0 for a in report["advantages"][0])
    assert not np.array_equal(_weights(out)[PROBE], start_probe)


@pytest.mark.slow
def test_too_many_failures_stop_the_run_and_keep_what_it_logged(seed_bank_url, tmp_path) -> None:
    """Issue 18 item 5: a failing judge stops the run; the log and a report stay behind."""
    from tests.fakes import RoutingChat

    chat = RoutingChat(judge_error="judge server down")
    out = tmp_path / "grpo-fail"
    with pytest.raises(TooManyFailures, match=r"1 GRPO failures.*judge server down") as err:
        from genmem.training.grpo import run_grpo

        run_grpo(
            seed_bank_url,
            GSM8KEnvironment(calculator=False),
            out,
            preset=load_preset("cpu"),
            chat_model=chat,
            roles=("retriever",),
            limit=1,
            max_steps=1,
            rollout=RolloutConfig(
                completion="sid", constrained=True, max_new_tokens=16, max_failures=0
            ),
            progress=False,
        )
    assert err.value.failures == 1 and err.value.limit == 0
    rows = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["strategy_judge"] is None and rows[0]["errors"]
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and "judge server down" in run["error"]
    report = json.loads((out / "report.json").read_text())
    assert report["failures"] == 1 and report["rollouts"] == 1
    assert not (out / "start").exists()
