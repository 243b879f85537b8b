"""`genmem train mid`: bad input, then traces through the graph and 2 SFT steps on them."""

from __future__ import annotations

import json

import pytest

from genmem.cli import main
from genmem.memory.location import open_bank, parse_bank_url
from genmem.memory.sid import DEFAULT_SPEC
from tests.training._weights import assert_trained


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--keep", "all"], "invalid choice"),
        (["--role", "planner"], "invalid choice"),
        (["--model", "/no/policy"], "policy directory"),
        (["--data", "/no/tasks.jsonl"], "does not exist"),
        (["--teacher", "local:/no/teacher"], "not a model directory"),
    ],
)
def test_bad_input_exits_2(seed_bank_url, tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "out"
    argv = ["train", "mid", "--bank", seed_bank_url, "--out", str(out), *extra]
    if "choice" in message:  # argparse rejects these itself and exits
        with pytest.raises(SystemExit) as exc:
            main(argv)
        code = exc.value.code
    else:
        code = main(argv)
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def _mid(bank_url: str, out, role: str, capsys) -> tuple[dict, list[dict]]:
    """One role's mid-training on 1 task, 2 SFT steps; the report and the traces."""
    code = main([
        "train", "mid", "--bank", bank_url, "--role", role, "--keep", "valid", "--limit", "1",
        "--train-steps", "2", "--max-new-tokens", "40", "--out", str(out), "--json",
    ])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    traces = [json.loads(x) for x in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == report["traces"] == 1 and report["role"] == role
    assert report["kept"] == sum(t["kept"] for t in traces) == 1
    assert DEFAULT_SPEC.is_valid(traces[0]["sid"]) and traces[0]["valid"]
    assert report["examples"] == 2 and report["steps"] == 2 and len(report["losses"]) == 2
    assert json.loads((out / "genmem_policy.json").read_text())["notes"]["stage"] == "mid"
    assert (out / "mid.png").read_bytes()[:4] == b"\x89PNG"
    assert_trained(out, open_bank(bank_url))
    return report, traces


@pytest.mark.slow
def test_retriever_traces_then_two_sft_steps(seed_bank_url, tmp_path, capsys) -> None:
    events = [e.model_dump() for e in open_bank(seed_bank_url).events()]
    _, (trace,) = _mid(seed_bank_url, tmp_path / "mid", "retriever", capsys)
    assert trace["support"].strip()
    assert [e.model_dump() for e in open_bank(seed_bank_url).events()] == events


@pytest.mark.slow
def test_evolver_traces_on_a_scratch_bank_then_two_sft_steps(
    seed_bank_url, tmp_path, capsys
) -> None:
    events = [e.model_dump() for e in open_bank(seed_bank_url).events()]
    out = tmp_path / "mid"
    _, (trace,) = _mid(seed_bank_url, out, "evolver", capsys)
    assert trace["decision"]["op"] in ("insert", "revise", "retain")
    assert trace["decision"]["sid"] == trace["sid"]
    # The decision was applied to a scratch copy that is gone; the work copy and input are intact.
    assert not (out / "scratch.db").exists()
    work = f"sqlite:///{out}/bank.db?bank={parse_bank_url(seed_bank_url).bank_id}"
    assert [e.model_dump() for e in open_bank(work).events()] == events
    assert [e.model_dump() for e in open_bank(seed_bank_url).events()] == events
