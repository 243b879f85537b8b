"""The closed loop's chat roles against a real `genmem serve` (transformers serve, the default
model) through the ``vllm:`` spec it prints: retriever rewrite, StackPlanner, MemEvolver. That
server ignores JSON schemas, so the roles fall back to the text protocol, say so once, and
nothing crashes; the cold start's attempts, assessments and extractions run there too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import warnings

import pytest

from genmem.cli import main
from genmem.envs.bundled import gsm8k_seed_experiences
from genmem.memory.location import open_store
from genmem.memory.sid import DEFAULT_SPEC
from genmem.policies.server_chat import TextProtocolWarning
from tests.conftest import TEST_HASH


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> str:
    """The spec of a `genmem serve` of the default model on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("serve") / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "genmem.cli", "serve", "--port", str(port), "--json",
         "--log", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    yield json.loads(line)["spec"]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0


@pytest.mark.slow
def test_the_server_listens_on_loopback_only(served) -> None:
    from urllib.parse import urlsplit

    from tests._sockets import listening_hosts, loopback_only

    port = urlsplit(served.split("vllm:", 1)[1].split("#")[0]).port
    assert loopback_only(port), listening_hosts(port)  # no --host given: the default


@pytest.mark.slow
def test_closed_loop_roles_run_on_the_server(served, seed_bank_url, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    with pytest.warns(TextProtocolWarning) as said:
        code = main([
            "run", "--bank", seed_bank_url, "--bench", "gsm8k-test", "--limit", "1",
            "--model", served, "--max-steps", "1", "--max-new-tokens", "48",
            "--out", str(out), "--json",
        ])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    (record,) = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert summary["errors"] == 0 and record.get("error") is None, record.get("error")
    assert record["sid"] and record["support"] is not None  # the retriever read and rewrote
    assert record["update"] is not None or record["evolve_error"] is not None  # MemEvolver ran
    # Each feature the roles asked for and the server ignored was said once, not per call.
    messages = [str(w.message) for w in said]
    assert len(messages) == len(set(messages)) and any("JSON schemas" in m for m in messages)
    assert all(served.split("vllm:", 1)[1] in m for m in messages)


@pytest.mark.slow
def test_coldstart_stages_run_on_the_server(served, tmp_path, capsys) -> None:
    exp = tmp_path / "exp.jsonl"
    exp.write_text("".join(json.dumps(r) + "\n" for r in gsm8k_seed_experiences(limit=60)))
    cb = tmp_path / "cb"
    fit = ["codebook", "fit", "--input", str(exp), "--sizes", "4,2", "--out", str(cb), "--json"]
    assert main(fit) == 0
    capsys.readouterr()
    out = tmp_path / "cold"
    # the fallback is said once per server and process: the closed-loop test may have said it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TextProtocolWarning)
        code = main([
            "bank", "coldstart", "--bench", "gsm8k-train", "--limit", "1", "--attempts", "1",
            "--max-steps", "1", "--max-new-tokens", "48", "--max-records", "1", "--retries", "0",
            "--merge", "concat", "--codebook", str(cb), "--model", served,
            "--bank", f"sqlite:///{tmp_path}/cold.db?bank=cold", "--out", str(out), "--json",
        ])  # fmt: skip
    rows = {
        name: [json.loads(x) for x in (out / name).read_text().splitlines()]
        for name in ("attempts.jsonl", "assessments.jsonl", "experiences.jsonl", "failures.jsonl")
        if (out / name).is_file()
    }
    (attempt,) = rows["attempts.jsonl"]
    assert attempt["error"] is None and attempt["trajectory"], attempt["error"]
    # each model stage either produced its record or logged why not; none crashed the run
    stages = {f["stage"] for f in rows.get("failures.jsonl", [])}
    assert rows.get("assessments.jsonl") or stages & {"summary", "assess", "assessment"}
    assert rows.get("experiences.jsonl") or stages & {"extract", "extraction"}
    if rows.get("experiences.jsonl"):
        assert code == 0 and json.loads(capsys.readouterr().out)["entries"] >= 1
    else:
        assert code == 1 and "no experience was extracted" in capsys.readouterr().err


@pytest.mark.slow
def test_grpo_rollouts_run_concurrently_on_the_server(
    served, seed_bank_url, tmp_path, capsys
) -> None:
    """GRPO's graph (planner, rewrite, decision) on the server, two rollouts at a time."""
    from genmem.envs.pool import ConcurrencyWarning

    out = tmp_path / "grpo"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        code = main([
            "train", "grpo", "--bank", seed_bank_url, "--limit", "1", "--train-steps", "1",
            "--role", "evolver", "--completion", "sid", "--constrained", "--no-judge",
            "--planner-model", served, "--concurrency", "2", "--max-new-tokens", "24",
            "--out", str(out), "--json",
        ])  # fmt: skip
    assert code == 0
    assert not [w for w in said if issubclass(w.category, ConcurrencyWarning)]
    report = json.loads(capsys.readouterr().out)
    rows = [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
    assert report["steps"] == 1 and report["failures"] == 0
    assert len(rows) == report["rollouts"] >= 2 and not any(r["errors"] for r in rows)
    # Each rollout's decision names its own SID: an op that fits that slot, or no write at all.
    assert all(r["sid_valid"] and r["op"] in (None, "insert", "revise", "retain") for r in rows)


_EVOLVE = ["--blocks", "1", "--block-size", "1", "--probe-size", "1"]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--bench", "gsm8k-test", "--bank", "sqlite:///{tmp}/b.db"],
        ["eval", "--bench", "gsm8k-test"],
        ["evolve", "--bench", "gsm8k-test", "--bank", "sqlite:///{tmp}/b.db", *_EVOLVE],
    ],
    ids=lambda argv: argv[0],
)
def test_sid_model_must_be_a_local_policy(tmp_path, capsys, argv: list[str]) -> None:
    url = f"sqlite:///{tmp_path}/b.db"
    open_store(url).create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    out = tmp_path / "out"
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main([*argv, "--sid-model", "quantizer", "--out", str(out)]) == 2
    assert "use local or local:DIR" in capsys.readouterr().err
    assert not out.exists()
