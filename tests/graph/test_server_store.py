"""A bank in the server's own store: ``langgraph dev`` with ``langgraph.json``'s ``store.path`` set
to :func:`genmem.memory.server_store.store`, driven through ``langgraph_sdk``.

The graphs are compiled without a store; the server injects its store, and with no ``bank_url``
in the run context they keep the bank there. The CLI's URL for the same store
(``langgraph+sqlite:///...``) creates the bank before the server starts and reads the server's
writes afterwards; the SDK's store API shows the same items from the server's side.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

import tests.graph.test_langgraph_dev as dev
from genmem.memory.location import open_bank
from genmem.memory.server_store import SERVER_STORE_ENV
from genmem.memory.sid import DEFAULT_SPEC
from tests.conftest import TEST_HASH
from tests.graph._banks import A

pytestmark = [pytest.mark.slow, pytest.mark.integration]

GRAPHS = ("bank_lookup", "bank_update")
OLD = "For rate problems, find the amount per unit first, then scale it."
NEW = "Rate problems: compute the unit price, scale it, and check the units of the answer."


@dataclass
class _Codebooks:
    hash: str
    spec = DEFAULT_SPEC


def _config_with_store(directory: Path) -> Path:
    """The repo's two bank graphs, with the server's store from GenMem's custom-store hook."""
    repo = json.loads((dev.REPO / "langgraph.json").read_text(encoding="utf-8"))
    graphs = {}
    for name in GRAPHS:
        path, _, variable = repo["graphs"][name].partition(":")
        graphs[name] = f"{(dev.REPO / path).resolve()}:{variable}"
    config = {
        "dependencies": [str(dev.REPO)],
        "graphs": graphs,
        "store": {"path": "genmem.memory.server_store.store"},
        "python_version": repo["python_version"],
    }
    out = directory / "langgraph.json"
    out.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A LangGraph SQLite store holding bank ``gsm`` with one entry, made by the CLI's URL."""
    path = tmp_path_factory.mktemp("server_store") / "store.db"
    bank = open_bank(
        f"langgraph+sqlite:///{path}?bank=gsm", codebooks=_Codebooks(TEST_HASH), create=True
    )
    bank.insert(A, OLD)
    bank.store.close()
    return f"langgraph+sqlite:///{path}"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[Any]:
    """``langgraph dev`` on the store at ``store_url``, and an SDK client for it."""
    executable = dev._langgraph_executable()
    if executable is None:
        pytest.skip("the `langgraph` executable (langgraph-cli[inmem]) is not installed")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SERVER_STORE_ENV, store_url)
        patch.setattr(dev, "isolated_config", _config_with_store)
        server = dev.start_dev_server(tmp_path_factory.mktemp("dev_store"), executable=executable)
    try:
        with get_sync_client(url=server.url, api_key=None, timeout=120.0) as sdk:
            yield sdk
    except BaseException:
        print(f"\n--- langgraph dev log ---\n{server.tail()}")
        raise
    finally:
        server.stop()


def test_served_graphs_write_and_read_the_bank_in_the_servers_store(
    client: SyncLangGraphClient, store_url: str
) -> None:
    context = {"bank_id": "gsm", "actor": "sdk-client"}
    update = {"op": "revise", "sid": str(A), "payload": NEW, "expected_version": 1}
    out: Any = client.runs.wait(None, "bank_update", input={"update": update}, context=context)
    assert out["error"] is None, out
    assert (out["result"]["outcome"], out["result"]["version_after"]) == ("revised", 2)

    out = client.runs.wait(None, "bank_lookup", input={"sid_list": [str(A)]}, context=context)
    (result,) = out["results"]
    assert result["exact"] and result["hits"][0]["payload"] == NEW

    # A refused write changes nothing: a stale version, then a payload the write gate refuses.
    out = client.runs.wait(None, "bank_update", input={"update": update}, context=context)
    assert out["result"] is None and "not the expected 1" in out["error"]
    junk = {"op": "revise", "sid": str(A), "payload": "15 15 15 15 15 15 15"}
    out = client.runs.wait(None, "bank_update", input={"update": junk}, context=context)
    assert (out["result"]["outcome"], out["result"]["reason"]) == ("rejected", "symbols")

    # The server's store API holds the bank's items ...
    item = client.store.get_item(["genmem", "bank", "gsm", "slots"], "00003.00000.00007.00001.")
    assert item is not None and item["value"]["current"]["payload"] == NEW
    banks = client.store.search_items(["genmem", "banks"])["items"]
    assert [b["key"] for b in banks] == ["gsm"]

    # ... and they are the same data the CLI's URL opens.
    bank = open_bank(f"{store_url}?bank=gsm")
    try:
        assert [v.payload for v in bank.history(A)] == [OLD, NEW]
        assert [(e.outcome, e.actor) for e in bank.events()] == [
            ("inserted", "api"),
            ("revised", "sdk-client"),
            ("rejected", "sdk-client"),
        ]
        assert bank.check() == []
    finally:
        bank.store.close()


def test_a_write_to_a_bank_the_store_lacks_names_the_ones_it_holds(
    client: SyncLangGraphClient,
) -> None:
    update = {"op": "insert", "sid": str(A), "payload": NEW}
    out: Any = client.runs.wait(
        None, "bank_update", input={"update": update}, context={"bank_id": "other"}
    )
    assert out["result"] is None
    assert "no bank 'other'" in out["error"] and "'gsm'" in out["error"]
