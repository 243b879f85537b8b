"""The closed loop's chat roles against a real `genmem serve` (transformers serve, the default
model) through the ``vllm:`` spec it prints: retriever rewrite, StackPlanner, MemEvolver. That
server ignores JSON schemas, so the roles fall back to the text protocol, say so once, and
nothing crashes. (The cold start through a server is not covered yet: issue 20.)"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from genmem.cli import main
from genmem.policies.server_chat import TextProtocolWarning


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
