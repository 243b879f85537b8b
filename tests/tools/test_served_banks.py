"""The server's bank rules (genmem.tools.served_banks), the per-user store namespaces and the
token check of genmem.served_auth, without a server (tests/graph/test_tenants.py runs one)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from langgraph.store.memory import InMemoryStore

from genmem.errors import BankAccessDenied, GenMemError, InvalidBankURL
from genmem.memory.langgraph_store import LangGraphBankStore
from genmem.memory.location import open_bank
from genmem.memory.sid import DEFAULT_SPEC
from genmem.served_auth import TOKENS_ENV, user_for_token
from genmem.tools.lookup import close_resolved_banks, resolve_bank
from genmem.tools.served_banks import (
    SERVICE_TOKEN_ENV,
    ServedBanks,
    choose_served_bank,
    served_banks,
    served_user,
)
from tests.conftest import TEST_HASH
from tests.graph._banks import A


@dataclass
class _User:
    identity: str


@dataclass
class _Codebooks:
    hash: str
    spec = DEFAULT_SPEC


@pytest.fixture
def rules(tmp_path: Path) -> ServedBanks:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path)
    return served_banks(
        {
            "GENMEM_BANKS": json.dumps(
                {"gsm": "sqlite:////srv/gsm.db", "team": {"url": "memory://t", "users": ["al"]}}
            ),
            "GENMEM_CLIENT_BANK_URLS": "1",
            "GENMEM_BANK_ROOT": str(tmp_path / "root"),
            "GENMEM_BANK_HOSTS": "db.internal",
        }
    )


def test_nothing_set_means_the_store_only_and_no_urls() -> None:
    rules = served_banks({})
    choice = choose_served_bank(url=None, bank_id="notes", user="al", has_store=True, rules=rules)
    assert (choice.url, choice.bank_id, choice.owner) == (None, "notes", "al")
    with pytest.raises(BankAccessDenied, match="does not open bank URLs"):
        choose_served_bank(
            url="sqlite:///x.db", bank_id=None, user=None, has_store=True, rules=rules
        )
    with pytest.raises(BankAccessDenied, match="no store"):
        choose_served_bank(url=None, bank_id="notes", user=None, has_store=False, rules=rules)


def test_served_banks_by_id_and_their_users(rules: ServedBanks) -> None:
    gsm = choose_served_bank(url=None, bank_id="gsm", user=None, has_store=True, rules=rules)
    assert gsm.url == "sqlite:////srv/gsm.db?bank=gsm"  # the id names the bank in the file
    team = choose_served_bank(url=None, bank_id="team", user="al", has_store=True, rules=rules)
    assert team.url == "memory://t?bank=team"
    for user in ("bo", None):
        with pytest.raises(BankAccessDenied, match="not served"):
            choose_served_bank(url=None, bank_id="team", user=user, has_store=True, rules=rules)


@pytest.mark.parametrize(
    ("url", "user", "allowed"),
    [
        ("sqlite:///a.db?bank=x", None, "root/a.db"),
        ("sqlite:///a.db?bank=x", "al", "root/al/a.db"),
        ("sqlite:///../a.db", None, None),
        ("sqlite:///al/../../a.db", "al", None),
        ("sqlite:///out/a.db", None, None),  # a symlink out of the root
        ("sqlite:////etc/passwd.db", None, None),
        ("langgraph+sqlite:///s.db?owner=bo", "al", "root/al/s.db"),
        ("postgresql://u:pw@db.internal/x", None, "postgresql"),
        ("postgresql://u:pw@db.internal:6543/x", None, "postgresql"),
        ("postgresql://u:pw@db.internal/x", "al", None),  # users: by id only
        ("postgresql://u:pw@evil.example/x", None, None),
        ("postgresql://u@db.internal/x?host=evil.example", None, None),
        ("postgresql://u@db.internal,evil.example/x", None, None),
        ("memory://shared", None, "memory"),
        ("memory://shared", "al", None),
    ],
)
def test_client_urls_only_within_the_root_and_hosts(
    rules: ServedBanks, tmp_path: Path, url: str, user: str | None, allowed: str | None
) -> None:
    if allowed is None:
        with pytest.raises(BankAccessDenied) as err:
            choose_served_bank(url=url, bank_id=None, user=user, has_store=True, rules=rules)
        assert "pw" not in str(err.value.requested)
        return
    choice = choose_served_bank(url=url, bank_id=None, user=user, has_store=True, rules=rules)
    assert choice.url is not None
    if allowed.startswith("root"):
        assert choice.url.split(":///", 1)[1].split("?")[0] == str(tmp_path / allowed)
    else:
        assert choice.url.startswith(allowed)
    assert list((tmp_path / "root").iterdir()) == [tmp_path / "root" / "out"]  # nothing made


def test_bad_settings_are_refused_with_the_variable_named() -> None:
    for env in (
        {"GENMEM_BANKS": "{not json"},
        {"GENMEM_BANKS": "/no/such/file.yaml"},
        {"GENMEM_BANKS": '{"x": "ftp://nowhere"}'},
        {"GENMEM_BANKS": '{"x": {"url": "memory://", "admins": []}}'},
        {"GENMEM_CLIENT_BANK_URLS": "maybe"},
    ):
        with pytest.raises(GenMemError, match="GENMEM_"):
            served_banks(env)


def test_only_the_servers_user_object_counts() -> None:
    assert served_user({"langgraph_auth_user": _User("al")}) == "al"
    for forged in ({"identity": "al"}, "al", None, _User("")):
        assert served_user({"langgraph_auth_user": forged}) is None


def test_a_served_run_resolves_by_the_rules_and_opens_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GENMEM_CLIENT_BANK_URLS", raising=False)
    outside = tmp_path / "bank.db"
    bank = open_bank(f"sqlite:///{outside}?bank=b", codebooks=_Codebooks(TEST_HASH), create=True)
    bank.store.close()
    store = InMemoryStore()
    for owner in ("al", "bo"):
        LangGraphBankStore(store, owner=owner).create_bank(
            "notes", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH
        ).insert(A, f"{owner}'s note about units and rates")

    def runtime(context: dict[str, object], user: str | None) -> SimpleNamespace:
        configurable = {"graph_id": "bank_lookup", "langgraph_auth_user": user and _User(user)}
        return SimpleNamespace(context=context, config={"configurable": configurable}, store=store)

    found = resolve_bank(runtime({"bank_id": "notes"}, "bo"))  # type: ignore[arg-type]
    assert found.get(A).payload.startswith("bo's")
    with pytest.raises(BankAccessDenied):
        resolve_bank(runtime({"bank_url": f"sqlite:///{outside}?bank=b"}, "bo"))  # type: ignore[arg-type]
    # The same URL outside a server run (a library caller's own process) opens as asked.
    mine = resolve_bank(SimpleNamespace(context={"bank_url": f"sqlite:///{outside}?bank=b"}))  # type: ignore[arg-type]
    assert mine.bank_id == "b"
    close_resolved_banks()


def test_owners_banks_are_apart_in_one_store() -> None:
    store = InMemoryStore()
    al, bo, shared = (LangGraphBankStore(store, owner=o) for o in ("al", "bo", None))
    al.create_bank("notes", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH).insert(A, "al's rate note")
    assert [b.bank_id for b in al.list_banks()] == ["notes"]
    assert bo.list_banks() == [] and shared.list_banks() == []
    bo.create_bank("notes", spec=DEFAULT_SPEC, codebook_hash=TEST_HASH)
    assert bo.bank("notes").get(A) is None
    assert {ns[:3] for ns in store.list_namespaces()} == {
        ("genmem", "user", "al"),
        ("genmem", "user", "bo"),
    }
    with pytest.raises(InvalidBankURL, match="owner"):
        open_bank("sqlite:///x.db?owner=al")


def test_tokens_name_users_and_only_the_service_token_speaks_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKENS_ENV, json.dumps({"t-al": "al", "t-bo": "bo"}))
    monkeypatch.setenv(SERVICE_TOKEN_ENV, "t-service")
    assert user_for_token("t-al") == "al"
    assert user_for_token("t-bo", on_behalf="al") == "bo"
    assert user_for_token("t-service", on_behalf="al") == "al"
    assert user_for_token("t-service") is None
    assert user_for_token("t-mallory") is None and user_for_token("") is None
    assert os.environ[SERVICE_TOKEN_ENV] == "t-service"
