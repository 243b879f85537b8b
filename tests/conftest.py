"""Shared fixtures: one parametrised ``store`` / ``bank`` fixture runs the bank suite on every
backend."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from genmem.memory.bank import Bank
from genmem.memory.sid import DEFAULT_SPEC
from genmem.memory.store import BankStore

TEST_HASH = "0" * 64


def _sqlite_file(tmp_path) -> BankStore:
    from genmem.memory.sqlite_store import SQLiteBankStore

    return SQLiteBankStore(tmp_path / "bank.db")


def _sqlite_memory(tmp_path) -> BankStore:
    from genmem.memory.sqlite_store import SQLiteBankStore

    return SQLiteBankStore(":memory:")


# Every backend the shared suite runs on: name -> factory(tmp_path) -> a fresh, empty store.
BACKENDS = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path) -> Iterator[BankStore]:
    """A fresh, empty store of each backend."""
    s = BACKENDS[request.param](tmp_path)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def bank(store: BankStore) -> Bank:
    """An empty default-spec bank in a fresh store of each backend."""
    return store.create_bank("default", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
