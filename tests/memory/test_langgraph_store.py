"""LangGraph BaseStore backend: URLs, the memory:// registry, wrapping a caller's store, threads."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore

from genmem.errors import BankNotFound, InvalidBankURL
from genmem.memory.langgraph_store import LangGraphBankStore, memory_store
from genmem.memory.location import BankURL, open_bank, open_store, parse_bank_url
from genmem.memory.sid import DEFAULT_SPEC
from tests.conftest import TEST_HASH
from tests.fakes import FakeCodebooks

A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"
B = "<SID_L1_40><SID_L2_15><SID_L3_0><SID_L4_7>"


def test_memory_urls_share_a_store_by_name() -> None:
    name = f"reg-{id(object())}"
    bank = open_bank(f"memory://{name}?bank=b", codebooks=FakeCodebooks(TEST_HASH), create=True)
    bank.insert(A, "shared")
    assert open_bank(f"memory://{name}?bank=b").get(A).payload == "shared"
    assert open_store(f"memory://{name}")._store is memory_store(name)
    with pytest.raises(BankNotFound):
        open_bank(f"memory://{name}-other?bank=b")


def test_langgraph_sqlite_url_persists(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = "langgraph+sqlite:///sub/lg.db?bank=mine"
    bank = open_bank(url, codebooks=FakeCodebooks(TEST_HASH), create=True)
    bank.insert(A, "on disk")
    bank.store.close()
    assert (tmp_path / "sub" / "lg.db").is_file()
    again = open_bank(url, codebooks=FakeCodebooks(TEST_HASH))
    assert again.get(A).payload == "on disk" and again.check() == []
    assert again.store.url == "langgraph+sqlite:///sub/lg.db"
    again.store.close()


def test_not_a_langgraph_url() -> None:
    with pytest.raises(InvalidBankURL):
        LangGraphBankStore.from_url(BankURL("sqlite", "x.db", "default", "sqlite:///x.db"))


def test_wraps_a_callers_store_beside_its_other_data() -> None:
    raw = InMemoryStore()
    raw.put(("users", "u1"), "prefs", {"theme": "dark"})
    store = LangGraphBankStore(raw)
    dotted = store.create_bank("team.alpha", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    plain = store.create_bank("team", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    dotted.insert(A, "alpha's")
    plain.insert(B, "team's")
    assert plain.get(A) is None and dotted.get(B) is None
    assert [e.sid for e in dotted.entries()] == [A]
    # The documented layout: readable with the plain BaseStore API.
    slot = raw.get(("genmem", "bank", "team:alpha", "slots"), "00003.00000.00007.00001.")
    assert slot is not None and slot.value["current"]["payload"] == "alpha's"
    assert raw.get(("genmem", "banks"), "team.alpha").value["bank_id"] == "team.alpha"
    assert raw.get(("users", "u1"), "prefs").value == {"theme": "dark"}
    store.close()  # a caller's store stays usable
    assert raw.get(("users", "u1"), "prefs") is not None
    with pytest.raises(TypeError):
        LangGraphBankStore({})  # type: ignore[arg-type]


def test_payloads_are_not_embedded_by_an_indexed_store() -> None:
    calls: list[int] = []

    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [[1.0, 0.0] for _ in texts]

    store = LangGraphBankStore(InMemoryStore(index={"dims": 2, "embed": embed}))
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(A, "text")
    bank.revise(A, "more text")
    assert calls == []


def test_events_page_and_counters_survive_import() -> None:
    store = LangGraphBankStore(InMemoryStore())
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    bank.insert(A, "1")
    for i in range(2, 8):
        bank.revise(A, str(i))
    assert [e.seq for e in bank.events(after_seq=2, limit=3)] == [3, 4, 5]
    assert bank.events(after_seq=7) == [] and bank.events(limit=0) == []
    assert [int(v.payload) for v in bank.history(A)] == list(range(1, 8))


def test_create_clears_leftovers_of_a_create_cut_short() -> None:
    raw = InMemoryStore()
    raw.put(("genmem", "bank", "b", "versions"), "junk", {"sid": "x"})
    raw.put(("genmem", "bank", "b", "meta"), "log", {"last_seq": 99})
    store = LangGraphBankStore(raw)
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    assert bank.stats().versions == 0 and bank.events() == []
    bank.insert(A, "fresh")
    assert [e.seq for e in bank.events()] == [1] and bank.check() == []


def test_two_adapters_over_one_store_share_the_write_lock() -> None:
    raw = InMemoryStore()
    LangGraphBankStore(raw).create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH).insert(
        A, "seed"
    )
    banks = [LangGraphBankStore(raw).bank("b") for _ in range(2)]
    writers, revisions = 6, 20

    def work(w: int) -> None:
        for i in range(revisions):
            banks[w % 2].revise(A, f"w{w} r{i}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history = banks[0].history(A)
    assert [v.version for v in history] == list(range(1, 1 + writers * revisions + 1))
    assert {v.payload for v in history[1:]} == {
        f"w{w} r{i}" for w in range(writers) for i in range(revisions)
    }
    assert banks[1].check() == []


@pytest.mark.integration
def test_langgraph_postgres_url() -> None:
    from tests import _postgres

    url = _postgres.as_url(_postgres.fresh_schema(), scheme="langgraph+postgresql", bank="pg")
    assert parse_bank_url(url).bank_id == "pg"
    bank = open_bank(url, codebooks=FakeCodebooks(TEST_HASH), create=True)
    bank.insert(A, "in PostgresStore")
    bank.store.close()
    again = open_bank(url)
    assert again.get(A).payload == "in PostgresStore" and again.check() == []
    again.store.close()
