"""Fixtures for policy tests: the real embedded model, loaded once per test session, and a bank."""

from __future__ import annotations

import pytest

from genmem.memory.bank import Bank
from genmem.memory.sid import DEFAULT_SPEC, SID
from genmem.memory.sqlite_store import SQLiteBankStore
from genmem.policies.local import LocalPolicy, load_policy
from tests.conftest import TEST_HASH


@pytest.fixture(scope="session")
def default_policy() -> LocalPolicy:
    """The embedded SmolLM2 (shared with every other user of the default in this process)."""
    return load_policy()


@pytest.fixture
def small_bank(tmp_path) -> Bank:
    """Five entries of the default spec, two of them under one level-3 parent."""
    store = SQLiteBankStore(tmp_path / "bank.db")
    bank = store.create_bank("b", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    for codes in [(0, 0, 0, 0), (0, 0, 0, 5), (5, 3, 2, 1), (47, 15, 7, 7), (5, 3, 6, 0)]:
        bank.insert(SID(codes), f"experience at {codes}")
    return bank
