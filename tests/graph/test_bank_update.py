"""The bank-update graph (validated writes for server clients), sync and async, and the server's
store hook that ``langgraph.json`` points at."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore

from genmem.errors import InvalidBankURL
from genmem.graph.bank_update import build_update_graph
from genmem.memory.langgraph_store import LangGraphBankStore
from genmem.memory.location import open_bank
from genmem.memory.server_store import SERVER_STORE_ENV, open_server_store, store
from genmem.memory.sid import DEFAULT_SPEC
from tests.conftest import TEST_HASH
from tests.graph._banks import A, one_entry_bank

OLD = "For rate problems, find the amount per unit first, then scale it."
NEW = "Rate problems: compute the unit price, scale it, and check the units of the answer."
REPO = Path(__file__).resolve().parents[2]


def _update(op: str, payload: str, **extra: Any) -> dict[str, Any]:
    return {"update": {"op": op, "sid": str(A), "payload": payload, **extra}}


@pytest.mark.parametrize("use_async", [False, True])
def test_writes_go_through_the_bank_and_its_gate(tmp_path, use_async: bool) -> None:
    url = one_entry_bank(tmp_path, OLD)
    app = build_update_graph().compile()
    context = {"bank_url": url, "actor": "client"}

    def run(inputs: dict[str, Any], ctx: dict[str, Any] = context) -> dict[str, Any]:
        if use_async:
            return asyncio.run(app.ainvoke(inputs, context=ctx))
        return app.invoke(inputs, context=ctx)

    out = run(_update("revise", NEW, expected_version=1))
    assert out["error"] is None and out["result"]["outcome"] == "revised"
    stale = run(_update("revise", OLD, expected_version=1))
    assert stale["result"] is None and "not the expected 1" in stale["error"]
    junk = run(_update("revise", "15 15 15 15 15 15 15"))
    assert (junk["result"]["outcome"], junk["result"]["reason"]) == ("rejected", "symbols")
    bad = run({"update": {"op": "move", "sid": str(A), "payload": NEW}})
    assert bad["result"] is None and "invalid update" in bad["error"]
    missing = run(_update("insert", NEW), {"bank_url": url.replace("bank=gsm", "bank=nope")})
    assert missing["result"] is None and "no bank 'nope'" in missing["error"]
    bank = open_bank(url)
    assert [v.payload for v in bank.history(A)] == [OLD, NEW]
    assert [(e.outcome, e.actor) for e in bank.events()] == [
        ("inserted", "api"),
        ("revised", "client"),
        ("rejected", "client"),
    ]


def test_langgraph_json_serves_bank_update() -> None:
    cfg = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))
    assert cfg["graphs"]["bank_update"] == "./genmem/served.py:bank_update"
    assert "store" not in cfg  # the server's own store unless a deployment sets store.path


def test_the_server_store_hook_opens_the_store_the_cli_url_names(tmp_path, monkeypatch) -> None:
    url = f"langgraph+sqlite:///{tmp_path}/store.db"
    monkeypatch.setenv(SERVER_STORE_ENV, url)

    async def serve() -> None:
        async with store() as opened:
            assert isinstance(opened, BaseStore)
            lg = LangGraphBankStore(opened)
            assert lg.native_async  # the async store, awaited on the server's loop
            await asyncio.to_thread(
                lg.create_bank, "gsm", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
            )
            bank = await lg.abank("gsm")
            assert (await bank.ainsert(A, OLD, actor="server")).outcome == "inserted"

    asyncio.run(serve())
    bank = open_bank(f"{url}?bank=gsm")  # what the CLI opens, with the sync store
    assert bank.get(A).payload == OLD and bank.get(A).actor == "server"
    bank.store.close()


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("sqlite:///x.db", "LangGraph store"),
        ("memory://", "LangGraph store"),
        ("langgraph+sqlite://", "in-memory"),
    ],
)
def test_the_server_store_must_be_one_the_cli_can_reach(url: str, match: str) -> None:
    async def serve() -> None:
        async with open_server_store(url):
            pass

    with pytest.raises(InvalidBankURL, match=match):
        asyncio.run(serve())


def test_the_hook_without_its_variable_says_what_to_set(monkeypatch) -> None:
    monkeypatch.delenv(SERVER_STORE_ENV, raising=False)

    async def serve() -> None:
        async with store():
            pass

    with pytest.raises(InvalidBankURL, match=SERVER_STORE_ENV):
        asyncio.run(serve())
