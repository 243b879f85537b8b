"""`resolve_bank`'s cache of banks opened by URL: bounded, least recently used closed, closable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.tools.lookup import MAX_RESOLVED_BANKS, close_resolved_banks, resolve_bank
from tests.conftest import TEST_HASH

A = "<SID_L1_3><SID_L2_0><SID_L3_7><SID_L4_1>"


class _Runtime:
    """What a tool runtime offers resolve_bank: a config naming the bank by URL."""

    def __init__(self, url: str) -> None:
        self.context: dict[str, Any] = {}
        self.store = None
        self.config = {"configurable": {"bank_url": url}}


def _bank_urls(directory: Path, n: int) -> list[str]:
    urls = []
    for i in range(n):
        path = directory / f"b{i}.db"
        store = SQLiteBankStore(path)
        store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH).insert(A, f"entry {i}")
        store.close()
        urls.append(f"sqlite:///{path}?bank=b")
    return urls


def _open_files(directory: Path) -> set[str]:
    """The bank files under ``directory`` this process holds open (WAL and SHM count as theirs)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            found.add(target.removesuffix(" (deleted)").removesuffix("-wal").removesuffix("-shm"))
    return found


@pytest.fixture(autouse=True)
def _empty_cache():
    close_resolved_banks()
    yield
    close_resolved_banks()


def test_cache_keeps_at_most_the_bound_open_and_closes_what_it_drops(tmp_path) -> None:
    urls = _bank_urls(tmp_path, 3 * MAX_RESOLVED_BANKS)
    for url in urls:
        bank = resolve_bank(_Runtime(url))
        assert bank.get(A) is not None  # a real read: the store holds a connection now
    held = _open_files(tmp_path)
    assert len(held) <= MAX_RESOLVED_BANKS
    # The most recently used ones are the ones kept.
    assert held == {str(tmp_path / f"b{i}.db") for i in range(2 * MAX_RESOLVED_BANKS, len(urls))}


def test_a_bank_in_use_stays_cached(tmp_path) -> None:
    urls = _bank_urls(tmp_path, MAX_RESOLVED_BANKS + 2)
    first = resolve_bank(_Runtime(urls[0]))
    for url in urls[1:]:
        assert resolve_bank(_Runtime(urls[0])) is first  # used again: moved to the back
        resolve_bank(_Runtime(url)).get(A)
    assert resolve_bank(_Runtime(urls[0])) is first


def test_close_resolved_banks_closes_one_or_all(tmp_path) -> None:
    urls = _bank_urls(tmp_path, 3)
    for url in urls:
        resolve_bank(_Runtime(url)).get(A)
    assert len(_open_files(tmp_path)) == 3
    assert close_resolved_banks(urls[0]) == 1
    assert close_resolved_banks(urls[0]) == 0
    assert _open_files(tmp_path) == {str(tmp_path / "b1.db"), str(tmp_path / "b2.db")}
    assert close_resolved_banks() == 2
    assert _open_files(tmp_path) == set()
    # A closed bank opens again on the next call.
    assert resolve_bank(_Runtime(urls[0])).get(A).payload == "entry 0"
