"""Bank URLs: parsing, opening, codebook checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from genmem.errors import BankNotFound, CodebookMismatch, InvalidBankURL
from genmem.memory.location import open_bank, open_store, parse_bank_url
from tests.conftest import TEST_HASH
from tests.fakes import FakeCodebooks


@pytest.mark.parametrize(
    ("url", "scheme", "location", "bank_id"),
    [
        ("sqlite:///rel/bank.db", "sqlite", "rel/bank.db", "default"),
        ("sqlite:////abs/bank.db", "sqlite", "/abs/bank.db", "default"),
        ("sqlite:///bank.db?bank=hotpot", "sqlite", "bank.db", "hotpot"),
        ("sqlite://", "sqlite", ":memory:", "default"),
        (
            "postgresql://u:p@localhost:5432/db?bank=x",
            "postgresql",
            "postgresql://u:p@localhost:5432/db",
            "x",
        ),
        (
            "postgres://localhost/db?sslmode=disable",
            "postgresql",
            "postgresql://localhost/db?sslmode=disable",
            "default",
        ),
        ("memory://", "memory", "", "default"),
        ("memory://shared?bank=b2", "memory", "shared", "b2"),
        ("langgraph+sqlite:///lg.db", "langgraph+sqlite", "lg.db", "default"),
    ],
)
def test_parse(url: str, scheme: str, location: str, bank_id: str) -> None:
    p = parse_bank_url(url)
    assert (p.scheme, p.location, p.bank_id) == (scheme, location, bank_id)


@pytest.mark.parametrize(
    "url",
    [
        "bank.db",
        "mysql://x/y",
        "sqlite://host/bank.db",
        "sqlite:///b.db?mode=ro",
        "sqlite:///b.db?bank=a&bank=b",
        "sqlite:///b.db?bank=bad id",
        "",
        None,
    ],
)
def test_bad_urls(url) -> None:
    with pytest.raises(InvalidBankURL):
        parse_bank_url(url)


def test_open_bank_creates_checks_and_refuses(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///sub/banks.db?bank=mine"
    with pytest.raises(BankNotFound, match="mine"):
        open_bank(url)
    bank = open_bank(url, codebooks=FakeCodebooks(TEST_HASH), create=True)
    assert (tmp_path / "sub" / "banks.db").is_file()
    assert bank.bank_id == "mine"
    bank.insert("<SID_L1_0><SID_L2_0><SID_L3_0><SID_L4_0>", "x")
    again = open_bank(url, codebooks=FakeCodebooks(TEST_HASH))
    assert again.stats().entries == 1
    with pytest.raises(CodebookMismatch):
        open_bank(url, codebooks=FakeCodebooks("f" * 64))
    with pytest.raises(CodebookMismatch):
        open_bank(url, codebooks=FakeCodebooks("f" * 64), create=True)
    assert open_bank(url, bank_id="mine").stats().entries == 1
    assert [b.bank_id for b in open_store(url).list_banks()] == ["mine"]
