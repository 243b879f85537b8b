"""Two users on one real ``langgraph dev`` with ``langgraph.tenants.json``: each reaches only
their own banks, threads and store items, and no run opens a path or host the server did not
choose.

The server runs the default rules (no ``GENMEM_CLIENT_BANK_URLS``), GenMem's authentication
(``genmem/served_auth.py``, tokens from ``GENMEM_AUTH_TOKENS``) and a store file that the test
seeds beforehand through the CLI's URL with ``?owner=``: alice and bob each hold a bank called
``notes`` at the same SID with different text. A served SQLite bank, ``team``, is listed for
alice only. Only the two bank graphs run (no model): the test costs the server's start.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_sync_client
from langgraph_sdk.client import SyncLangGraphClient

import tests.graph.test_langgraph_dev as dev
from genmem.memory.location import open_bank
from genmem.memory.server_store import SERVER_STORE_ENV
from genmem.memory.sid import DEFAULT_SPEC
from genmem.served_auth import TOKENS_ENV
from genmem.tools.served_banks import SERVED_BANKS_ENV, SERVICE_TOKEN_ENV
from tests._sockets import untouched_port
from tests.conftest import TEST_HASH
from tests.graph._banks import A

pytestmark = [pytest.mark.slow, pytest.mark.integration]

GRAPHS = ("bank_lookup", "bank_update")
TOKENS = {"token-alice": "alice", "token-bob": "bob"}
TEXT = {
    "alice": "Alice's note: for rate problems, find the amount per unit first, then scale it.",
    "bob": "Bob's note: for percentages, turn the percentage into a fraction before multiplying.",
}
SERVICE = "service-token-of-the-test-server"
TEAM = "Team note: check the units of the answer against the units the question asks for."


@dataclass
class _Codebooks:
    hash: str
    spec = DEFAULT_SPEC


@dataclass
class Served:
    url: str
    store: str
    team: str
    outside: Path


def _tenants_config(directory: Path) -> Path:
    """``langgraph.tenants.json``'s two bank graphs and auth, absolute, with the file store."""
    repo = json.loads((dev.REPO / "langgraph.tenants.json").read_text(encoding="utf-8"))

    def absolute(spec: str) -> str:
        path, _, variable = spec.partition(":")
        return f"{(dev.REPO / path).resolve()}:{variable}"

    config = {
        "dependencies": [str(dev.REPO)],
        "graphs": {name: absolute(repo["graphs"][name]) for name in GRAPHS},
        "auth": {"path": absolute(repo["auth"]["path"])},
        "store": {"path": "genmem.memory.server_store.store"},
        "python_version": repo["python_version"],
    }
    out = directory / "langgraph.json"
    out.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return out


def _bank(url: str, text: str) -> None:
    bank = open_bank(url, codebooks=_Codebooks(TEST_HASH), create=True)
    bank.insert(A, text)
    bank.store.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The server, after seeding each user's ``notes`` and the served ``team`` bank."""
    executable = dev._langgraph_executable()
    if executable is None:
        pytest.skip("the `langgraph` executable (langgraph-cli[inmem]) is not installed")
    data = tmp_path_factory.mktemp("tenants")
    store = f"langgraph+sqlite:///{data / 'store.db'}"
    for user, text in TEXT.items():
        _bank(f"{store}?bank=notes&owner={user}", text)
    team = f"sqlite:///{data / 'team.db'}?bank=team"
    _bank(team, TEAM)
    banks = {"team": {"url": team, "users": ["alice"]}}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SERVER_STORE_ENV, store)
        patch.setenv(TOKENS_ENV, json.dumps(TOKENS))
        patch.setenv(SERVED_BANKS_ENV, json.dumps(banks))
        patch.setenv(SERVICE_TOKEN_ENV, SERVICE)
        patch.delenv("GENMEM_CLIENT_BANK_URLS", raising=False)
        patch.setattr(dev, "isolated_config", _tenants_config)
        server = dev.start_dev_server(tmp_path_factory.mktemp("dev_tenants"), executable=executable)
    try:
        yield Served(server.url, store, team, tmp_path_factory.mktemp("outside"))
    except BaseException:
        print(f"\n--- langgraph dev log ---\n{server.tail()}")
        raise
    finally:
        server.stop()


def _client(served: Served, token: str | None) -> SyncLangGraphClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return get_sync_client(url=served.url, api_key=None, headers=headers, timeout=120.0)


@pytest.fixture(scope="module")
def alice(served: Served) -> Iterator[SyncLangGraphClient]:
    with _client(served, "token-alice") as sdk:
        yield sdk


@pytest.fixture(scope="module")
def bob(served: Served) -> Iterator[SyncLangGraphClient]:
    with _client(served, "token-bob") as sdk:
        yield sdk


def _lookup(client: SyncLangGraphClient, context: dict[str, Any]) -> Any:
    return client.runs.wait(
        None, "bank_lookup", input={"sid_list": [str(A)]}, context=context, raise_error=False
    )


def _payloads(url: str) -> list[str]:
    bank = open_bank(url)
    try:
        return [v.payload for v in bank.history(A)]
    finally:
        bank.store.close()


def _error(out: Any) -> str:
    """The error type of a run that raised (the server keeps the message to itself)."""
    assert isinstance(out, dict) and "__error__" in out, out
    return str(out["__error__"].get("error"))


def test_requests_without_a_known_token_get_401(served: Served) -> None:
    for token in (None, "token-mallory"):
        with _client(served, token) as anonymous, pytest.raises(httpx.HTTPStatusError) as err:
            anonymous.assistants.search()
        assert err.value.response.status_code == 401


def test_the_same_bank_id_is_each_users_own_bank(
    served: Served, alice: SyncLangGraphClient, bob: SyncLangGraphClient
) -> None:
    for client, user in ((alice, "alice"), (bob, "bob")):
        (result,) = _lookup(client, {"bank_id": "notes"})["results"]
        assert result["exact"] and result["hits"][0]["payload"] == TEXT[user]

    new = "Bob's note, revised: write the percentage as a fraction, then multiply by the whole."
    update = {"op": "revise", "sid": str(A), "payload": new, "expected_version": 1}
    out: Any = bob.runs.wait(
        None, "bank_update", input={"update": update}, context={"bank_id": "notes"}
    )
    assert out["error"] is None and out["result"]["outcome"] == "revised", out
    (result,) = _lookup(alice, {"bank_id": "notes"})["results"]
    assert result["hits"][0]["payload"] == TEXT["alice"]
    assert _payloads(f"{served.store}?bank=notes&owner=alice") == [TEXT["alice"]]
    assert _payloads(f"{served.store}?bank=notes&owner=bob") == [TEXT["bob"], new]


def test_a_served_bank_opens_only_for_the_users_it_lists(
    served: Served, alice: SyncLangGraphClient, bob: SyncLangGraphClient
) -> None:
    (result,) = _lookup(alice, {"bank_id": "team"})["results"]
    assert result["hits"][0]["payload"] == TEAM
    assert _error(_lookup(bob, {"bank_id": "team"})) == "BankAccessDenied"
    update = {"op": "revise", "sid": str(A), "payload": "bob was here", "expected_version": 1}
    out = bob.runs.wait(None, "bank_update", input={"update": update}, context={"bank_id": "team"})
    assert out["result"] is None and "not served to user 'bob'" in out["error"]
    assert _payloads(served.team) == [TEAM]


def test_paths_and_hosts_a_run_names_are_refused_before_anything_opens(
    served: Served, bob: SyncLangGraphClient
) -> None:
    target = served.outside / "new.db"
    link = served.outside / "link"
    link.symlink_to(Path(served.store.split(":///", 1)[1]).parent)
    with untouched_port() as port:
        urls = [
            f"sqlite:///{target}?bank=x",  # a new file outside any root
            served.team,  # alice's served bank, by its path
            f"sqlite:///{link}/team.db?bank=team",  # the same, through a symlink
            f"{served.store}?bank=notes&owner=alice",  # alice's bank, through the store file
            f"postgresql://bob:pw@127.0.0.1:{port}/db?bank=x",  # a host nobody allowed
            "memory://shared?bank=notes",
        ]
        for url in urls:
            for key in ("bank_url", "bank"):
                assert _error(_lookup(bob, {key: url})) == "BankAccessDenied", url
    assert sorted(p.name for p in served.outside.iterdir()) == ["link"]
    assert _payloads(served.team) == [TEAM]
    assert _payloads(f"{served.store}?bank=notes&owner=alice") == [TEXT["alice"]]


def test_the_store_api_reaches_only_the_callers_namespace(
    alice: SyncLangGraphClient, bob: SyncLangGraphClient
) -> None:
    theirs = ["genmem", "user", "alice", "bank", "notes", "slots"]
    for call in (
        lambda: bob.store.search_items(theirs),
        lambda: bob.store.get_item(["genmem", "user", "alice", "banks"], "notes"),
        lambda: bob.store.put_item(theirs, "x", {"current": "bob was here"}),
        lambda: bob.store.delete_item(["genmem", "user", "alice", "banks"], "notes"),
        lambda: bob.store.get_item(["genmem", "banks"], "notes"),
    ):
        with pytest.raises(httpx.HTTPStatusError) as err:
            call()
        assert err.value.response.status_code == 403
    everything = bob.store.search_items(["genmem"], limit=100)["items"]
    assert everything and all(i["namespace"][:3] == ["genmem", "user", "bob"] for i in everything)
    spaces = bob.store.list_namespaces(limit=100)["namespaces"]
    assert spaces and all(ns[:3] == ["genmem", "user", "bob"] for ns in spaces)
    (mine,) = alice.store.search_items(["genmem", "user", "alice", "banks"])["items"]
    assert mine["key"] == "notes"


def test_threads_and_their_runs_are_private(
    alice: SyncLangGraphClient, bob: SyncLangGraphClient
) -> None:
    thread = alice.threads.create()
    out: Any = alice.runs.wait(
        thread["thread_id"],
        "bank_lookup",
        input={"sid_list": [str(A)]},
        context={"bank_id": "notes"},
    )
    assert out["results"][0]["hits"][0]["payload"] == TEXT["alice"]
    with pytest.raises(httpx.HTTPStatusError) as err:
        bob.threads.get(thread["thread_id"])
    assert err.value.response.status_code == 404
    with pytest.raises(httpx.HTTPStatusError):
        bob.runs.wait(thread["thread_id"], "bank_lookup", input={"sid_list": [str(A)]})
    listed = [t["thread_id"] for t in bob.threads.search(limit=100)]
    assert thread["thread_id"] not in listed
    assert thread["thread_id"] in [t["thread_id"] for t in alice.threads.search(limit=100)]


def test_a_background_update_runs_on_behalf_of_its_user(
    served: Served,
    alice: SyncLangGraphClient,
    bob: SyncLangGraphClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``genmem_background``'s evolve node does for an authenticated user: the update run
    is started with the server's own credential for that user, so it is theirs (delayed here,
    and cancelled: only who owns it matters)."""
    from genmem.graph.background_server import ServerBackground, start_server_update

    monkeypatch.setenv(SERVICE_TOKEN_ENV, SERVICE)  # this process plays the server's node
    cfg = ServerBackground(url=served.url, assistant_id="bank_lookup", delay_s=3600)
    ask = {"sid_list": [str(A)]}
    run = start_server_update(cfg, ask, context={"bank_id": "notes"}, thread_id="t", user="alice")
    mine = alice.runs.get(run["thread_id"], run["run_id"])
    assert mine["status"] == "pending"
    assert alice.threads.get(run["thread_id"])["metadata"]["owner"] == "alice"
    with pytest.raises(httpx.HTTPStatusError) as err:
        bob.runs.get(run["thread_id"], run["run_id"])
    assert err.value.response.status_code == 404
    alice.runs.cancel(run["thread_id"], run["run_id"], action="interrupt")
    with pytest.raises(httpx.HTTPStatusError) as err:  # no user: no credential
        start_server_update(cfg, ask, context={"bank_id": "notes"}, thread_id="t")
    assert err.value.response.status_code == 401
