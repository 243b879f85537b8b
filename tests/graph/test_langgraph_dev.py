"""End to end through a real ``langgraph dev`` server: the served graphs, driven by the SDK.

One server serves the module: the repo's ``langgraph.json`` with its paths made absolute, run
from a fresh directory. ``langgraph dev`` keeps its runs in ``.langgraph_api/`` under its working
directory and, on start, resumes any run a previous server left pending there; from the repo root
a stale run would queue ahead of these tests (the dev server runs one at a time).

The graphs run on the real embedded default model; the bank is a real SQLite bank seeded with
worked GSM8K solutions and named per run in the run context, as a client would name it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

from genmem.envs.bundled import gsm8k_seed_experiences, read_gsm8k
from genmem.envs.gsm8k import GSM8K_TEST, gold_number
from genmem.memory.location import open_bank
from genmem.memory.records import Event
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.tools.served_banks import BANK_ROOT_ENV, CLIENT_URLS_ENV
from tests.conftest import TEST_HASH

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
SERVED = {
    "genmem",
    "genmem_background",
    "mem_evolver_job",
    "genmem_gsm8k",
    "stackplanner",
    "mem_retriever",
    "mem_evolver",
    "bank_lookup",
    "sid_fuse",
    "sid_decompose",
}
STARTUP_S = 120.0
STOP_S = 30.0
RUN_TIMEOUT_S = 3600.0
"""Read timeout of one SDK call: a run on the real model on two shared cores takes minutes."""


def _langgraph_executable() -> str | None:
    beside = Path(sys.executable).parent / "langgraph"
    return str(beside) if beside.is_file() else shutil.which("langgraph")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class DevServer:
    """A running ``langgraph dev`` process, its URL and its log file."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 80) -> str:
        """The last lines the server wrote (stdout and stderr together)."""
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Terminate the server's process group; kill it if it does not exit in time."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=STOP_S)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_S)


def isolated_config(directory: Path) -> Path:
    """The repo's ``langgraph.json`` with absolute paths, written into ``directory``."""
    config = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))

    def absolute(path: str) -> str:
        return str((REPO / path).resolve()) if path.startswith(".") else path

    def absolute_spec(spec: str) -> str:  # "./path/module.py:variable"
        path, _, variable = spec.partition(":")
        return f"{absolute(path)}:{variable}"

    config["dependencies"] = [absolute(d) for d in config.get("dependencies", [])]
    config["graphs"] = {name: absolute_spec(spec) for name, spec in config["graphs"].items()}
    out = directory / "langgraph.json"
    out.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out


def start_dev_server(directory: Path, *, executable: str) -> DevServer:
    """Start ``langgraph dev`` in ``directory`` on the repo's graphs; wait until ``/ok`` answers."""
    port = _free_port()
    config = isolated_config(directory)
    log = directory / "server.log"
    env = {
        **os.environ,  # GENMEM_CACHE (where the converted default model lives) passes through
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        # The server shares the cores with the test workers: give it one worker's share.
        "OMP_NUM_THREADS": str(torch.get_num_threads()),
        "MKL_NUM_THREADS": str(torch.get_num_threads()),
    }
    cmd = [executable, "dev", "--no-browser", "--no-reload", "--config", str(config)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*cmd, "--port", str(port)],  # no --host: its default must be loopback
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stopping it stops its children
        )
    server = DevServer(f"http://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"langgraph dev exited with code {process.returncode} before serving; "
                f"log tail:\n{server.tail()}"
            )
        try:
            if httpx.get(f"{server.url}/ok", timeout=2.0).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.stop()
    pytest.fail(f"langgraph dev did not answer /ok within {STARTUP_S:.0f} s; log:\n{server.tail()}")


@pytest.fixture(scope="module")
def bank_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder the server accepts client bank URLs under (this module's server opts in)."""
    return tmp_path_factory.mktemp("bank")


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory, bank_root: Path) -> Iterator[DevServer]:
    """One ``langgraph dev`` server for the module, always stopped afterwards.

    It opts in to bank URLs named by runs (``GENMEM_CLIENT_BANK_URLS``), under ``bank_root``:
    the local-development setting. ``tests/graph/test_tenants.py`` runs the default, which
    refuses them.
    """
    executable = _langgraph_executable()
    if executable is None:
        pytest.skip("the `langgraph` executable (langgraph-cli[inmem]) is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CLIENT_URLS_ENV, "1")
        patch.setenv(BANK_ROOT_ENV, str(bank_root))
        server = start_dev_server(tmp_path_factory.mktemp("langgraph_dev"), executable=executable)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _server_log_on_failure(request: pytest.FixtureRequest, dev_server: DevServer) -> Iterator[None]:
    """Print the server log's tail after a failed test: a graph error is explained there."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed > failed:
        print(f"\n--- langgraph dev log, last lines ({dev_server.log}) ---\n{dev_server.tail()}")


@pytest.fixture(scope="module")
def client(dev_server: DevServer) -> Iterator[SyncLangGraphClient]:
    """An SDK client for the server (no API key: the dev server needs none)."""
    with get_sync_client(url=dev_server.url, api_key=None, timeout=RUN_TIMEOUT_S) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def seeds() -> dict[str, str]:
    """Worked GSM8K solutions by SID: one under every level-1 code, so any SID has neighbours."""
    experiences = gsm8k_seed_experiences(limit=DEFAULT_SPEC.sizes[0])
    return {
        str(SID((i, i % 16, i % 8, (i // 8) % 8))): e["text"] for i, e in enumerate(experiences)
    }


@pytest.fixture(scope="module")
def bank_url(bank_root: Path, seeds: dict[str, str]) -> str:
    """A real SQLite bank holding the seed experiences, as the URL a run context names."""
    path = bank_root / "bank.db"
    store = SQLiteBankStore(path)
    try:
        bank = store.create_bank("gsm", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
        for sid, text in seeds.items():
            bank.insert(sid, text)
    finally:
        store.close()
    return f"sqlite:///{path}?bank=gsm"


@pytest.fixture(scope="module")
def problem() -> dict[str, str]:
    """The first GSM8K test problem and its gold number."""
    row = read_gsm8k(GSM8K_TEST, limit=1)[0]
    return {"question": row["question"], "gold": gold_number(row["answer"])}


def _bank_events(url: str) -> list[Event]:
    bank = open_bank(url)
    try:
        return bank.events()
    finally:
        bank.store.close()


def test_the_dev_server_listens_on_loopback_only(dev_server: DevServer) -> None:
    from urllib.parse import urlsplit

    from tests._sockets import listening_hosts, loopback_only

    port = urlsplit(dev_server.url).port
    assert port is not None and loopback_only(port), listening_hosts(port)


def test_all_graphs_are_served(client: SyncLangGraphClient) -> None:
    graphs = {a["graph_id"] for a in client.assistants.search(limit=100)}
    assert graphs >= SERVED, f"not served: {sorted(SERVED - graphs)}"


def test_the_opt_in_keeps_runs_inside_the_root_and_off_other_hosts(
    client: SyncLangGraphClient, bank_root: Path, tmp_path: Path
) -> None:
    """With ``GENMEM_CLIENT_BANK_URLS`` a run may name a bank file under the root only: a path
    outside it, a symlink out of it, a PostgreSQL host not listed are refused before anything is
    opened (no file appears, no connection arrives)."""
    from tests._sockets import untouched_port

    outside = tmp_path / "outside"
    outside.mkdir()
    link = bank_root / "link-out"
    link.symlink_to(outside)
    try:
        with untouched_port() as port:
            for url in (
                f"sqlite:///{outside}/new.db?bank=gsm",
                f"sqlite:///{bank_root}/../outside-too.db?bank=gsm",
                f"sqlite:///{link}/new.db?bank=gsm",
                f"postgresql://u:pw@127.0.0.1:{port}/db?bank=gsm",
            ):
                out: Any = client.runs.wait(
                    None,
                    "bank_lookup",
                    input={"sid_list": ["<SID_L1_0><SID_L2_0><SID_L3_0><SID_L4_0>"]},
                    context={"bank_url": url},
                    raise_error=False,
                )
                assert out["__error__"]["error"] == "BankAccessDenied", (url, out)
    finally:
        link.unlink()
    assert list(outside.iterdir()) == [] and not (bank_root.parent / "outside-too.db").exists()


def test_run_context_names_the_bank(
    client: SyncLangGraphClient, bank_url: str, seeds: dict[str, str]
) -> None:
    sid = next(iter(seeds))
    chunks = list(
        client.runs.stream(
            None,
            "bank_lookup",
            input={"sid_list": [sid]},
            context={"bank_url": bank_url, "memory_k": 2},
            stream_mode="updates",
        )
    )
    updates = [c.data for c in chunks if c.event == "updates"]
    assert [next(iter(u)) for u in updates] == ["lookup"]
    (result,) = updates[0]["lookup"]["results"]
    assert result["exact"] and result["hits"][0]["payload"] == seeds[sid]


def test_stream_shows_the_loop_nodes(
    client: SyncLangGraphClient, bank_url: str, problem: dict[str, str]
) -> None:
    before = len(_bank_events(bank_url))
    t0 = time.monotonic()
    chunks = list(
        client.runs.stream(
            None,
            "genmem",
            input={"query": problem["question"], "mode": "no_memory"},
            context={"bank_url": bank_url, "max_steps": 1},
            stream_mode="updates",
        )
    )
    print(f"\ngenmem no_memory run (max_steps=1) streamed in {time.monotonic() - t0:.0f} s")
    errors = [c.data for c in chunks if c.event == "error"]
    assert not errors, errors
    updates = [(name, u) for c in chunks if c.event == "updates" for name, u in c.data.items()]
    assert [name for name, _ in updates] == ["start", "execute", "assess"]
    execute = updates[1][1]
    assert [e["node"] for e in execute["events"]] == ["stackplanner"]
    assert execute["trajectory"]["query"] == problem["question"]
    assert len(_bank_events(bank_url)) == before


def test_closed_loop_run_reads_and_writes_the_named_bank(
    client: SyncLangGraphClient,
    bank_url: str,
    seeds: dict[str, str],
    problem: dict[str, str],
) -> None:
    before = _bank_events(bank_url)
    t0 = time.monotonic()
    out: Any = client.runs.wait(
        None,
        "genmem_gsm8k",
        input={"query": problem["question"], "reference": problem["gold"]},
        context={"bank_url": bank_url, "max_steps": 1},
    )
    print(f"\ngenmem_gsm8k evolve run (max_steps=1) finished in {time.monotonic() - t0:.0f} s")
    assert isinstance(out, dict) and "__error__" not in out, out
    print(
        f"answer={out.get('answer')!r} gold={problem['gold']} sid={out.get('sid')} "
        f"status={out.get('status')} score={out.get('score')} outcome={out.get('outcome')} "
        f"update={out.get('update')} "
        f"evolve_error={out.get('evolve_error')}"
    )

    # Assess: the served GSM8K scorer judged the answer against the gold number, and that
    # verdict stays out of the agents' reach (no outcome for MemEvolver).
    assert out["score"] in (0.0, 1.0)
    assert out["outcome"] is None

    # Execute: a real answer and a structured trajectory of the question asked.
    assert isinstance(out["answer"], str) and out["answer"].strip()
    trajectory = out["trajectory"]
    assert isinstance(trajectory, dict) and trajectory["query"] == problem["question"]
    assert isinstance(trajectory["steps"], list) and trajectory["steps"]

    # Retrieve: a valid SID, and hits that come from the bank the context named.
    DEFAULT_SPEC.parse(out["sid"])
    assert out["retrieved"], "every level-1 code is seeded, so any SID has neighbours"
    assert all(seeds.get(h["sid"]) == h["payload"] for h in out["retrieved"])
    assert isinstance(out["support"], str) and out["support"].strip()

    # The run's event log: retriever, planner, then the evolver's attempts.
    nodes = [e["node"] for e in out["events"]]
    assert nodes[:2] == ["mem_retriever", "stackplanner"]
    assert len(nodes) > 2 and set(nodes[2:]) == {"mem_evolver"}

    # Evolve: the bank's own log agrees with what the evolver reported.
    # The served default model decides under the slot's JSON schema, which admits only a valid
    # update of the slot it read: the write reaches the bank, which stores it or logs the write
    # gate's refusal (the untrained model often writes a bare number). Any other rejection is a
    # regression.
    after = _bank_events(bank_url)
    assert len(after) == len(before) + 1
    (new,) = after[len(before) :]
    assert new.actor == "mem_evolver"
    if out["update"] is None:
        error = out["evolve_error"]
        assert error["kind"] == "gated", error
        assert (new.outcome, new.reason) == ("rejected", error["gate_reason"])
        assert new.sid == out["events"][-1]["sid"] and f"event {new.seq}" in error["message"]
    else:
        assert out["evolve_error"] is None and out["events"][-1]["kind"] == "applied"
        assert new.sid == out["update"]["sid"] == out["update_sid"]
        assert new.seq == out["update"]["seq"]


def test_background_updates_start_as_server_runs(
    client: SyncLangGraphClient, dev_server: DevServer, bank_url: str, problem: dict[str, str]
) -> None:
    """The SDK path of ``evolve="background"`` with ``ServerBackground``, against the server.

    A graph built here (fake models: only its ``evolve`` node matters) starts its updates as
    delayed runs of the served ``mem_evolver_job``; a newer run of the thread cancels the
    pending one. An update the server cannot run is the server's failed run, and writes
    nothing. No run here reaches a model: the test costs seconds, not the minutes a served
    agent and a served MemEvolver take on the default model.
    """
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from genmem.graph.background_server import (
        ServerBackground,
        evolver_thread_id,
        start_server_update,
    )
    from genmem.graph.embed import add_memory
    from tests.fakes import FakeChat, FixedGenerator
    from tests.graph.test_embed import RETRIEVE

    before = len(_bank_events(bank_url))
    sid = SID((0, 0, 0, 0))  # the first seed's slot
    agent = create_agent(FakeChat(responses=[AIMessage("6"), AIMessage("6")]), tools=[])
    graph = add_memory(
        agent,
        model=FakeChat(responses=[RETRIEVE, RETRIEVE]),
        sid_generator=FixedGenerator([sid]),
        evolve="background",
        background=ServerBackground(url=dev_server.url, delay_s=3600),
    )
    app = graph.compile(checkpointer=InMemorySaver())
    run = {"configurable": {"thread_id": "agent-thread-1"}}
    ask = {"messages": [HumanMessage(problem["question"])]}
    first = app.invoke(ask, run, context={"bank_url": bank_url})
    second = app.invoke(ask, run, context={"bank_url": bank_url})
    evolve_thread = evolver_thread_id("agent-thread-1")
    for out in (first, second):
        assert out["messages"][-1].content == "6" and out["update"] is None, out
        assert out["evolve_error"] is None and out["events"][-1]["thread_id"] == evolve_thread
    assert second["events"][-1]["superseded"] == [first["evolve_job"]]
    assert client.runs.get(evolve_thread, first["evolve_job"])["status"] == "interrupted"
    pending = client.runs.get(evolve_thread, second["evolve_job"])
    assert pending["status"] == "pending" and pending["assistant_id"]
    assert pending["metadata"]["agent_thread_id"] == "agent-thread-1"
    client.runs.cancel(evolve_thread, second["evolve_job"], action="interrupt")

    # An update the evolver refuses to start (no trajectory) fails on the server, on record.
    cfg = ServerBackground(url=dev_server.url)
    bad = start_server_update(cfg, {"query": problem["question"]}, context={"bank_url": bank_url})
    client.runs.join(bad["thread_id"], bad["run_id"])
    assert client.runs.get(bad["thread_id"], bad["run_id"])["status"] == "error"
    assert len(_bank_events(bank_url)) == before
