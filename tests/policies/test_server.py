"""`genmem serve`: a real transformers server on loopback for the default model, driven through
the ``vllm:`` spec it prints; a busy port and a bad model get one line and exit 1."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from genmem.cli import main
from genmem.policies.backends import load_chat_model
from genmem.policies.server import ServeConfig, server_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_serve_answers_chat_requests_through_the_spec_it_prints(tmp_path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "genmem.cli", "serve", "--port", str(port), "--json",
         "--log", str(tmp_path / "server.log")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | {"OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        info = json.loads(line)
        assert info["spec"] == f"vllm:http://127.0.0.1:{port}/v1#{info['model']}"
        chat = load_chat_model(info["spec"], max_tokens=12)
        questions = [f"What is {n} plus 1? Reply with the number." for n in (2, 5)]
        with ThreadPoolExecutor(2) as pool:  # two at once: continuous batching serves both
            replies = list(pool.map(lambda q: chat.invoke(q).content, questions))
        assert all(isinstance(r, str) and r.strip() for r in replies)
        assert "CB: True" in (tmp_path / "server.log").read_text()  # batched, not one by one
        rss_kb = int(Path(f"/proc/{info['pid']}/status").read_text().split("VmRSS:")[1].split()[0])
        assert rss_kb < 4 * 2**20  # its KV cache is capped on CPU (the default took 10-13 GB)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    assert code == 0
    with pytest.raises(httpx.HTTPError):  # the server went with the command
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_busy_port_and_bad_model_exit_1_with_one_line(tmp_path, capsys) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
        err = capsys.readouterr().err.strip()
        assert f"127.0.0.1:{port}" in err and "--port" in err and len(err.splitlines()) == 1
    assert main(["serve", "--model", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "config.json" in err and len(err.splitlines()) == 1


def test_the_kv_cache_is_capped_on_cpu_and_left_to_the_server_on_a_gpu(tmp_path) -> None:
    cpu = server_command(ServeConfig(), tmp_path)
    assert cpu[cpu.index("--cb-max-memory-percent") + 1] == "0.03"
    assert "--cb-max-memory-percent" not in server_command(ServeConfig(device="cuda"), tmp_path)
    single = server_command(ServeConfig(continuous_batching=False), tmp_path)
    assert "--no-continuous-batching" in single and "--cb-max-memory-percent" not in single
