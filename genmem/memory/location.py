"""Open a store or a bank from its URL (the URL forms: :mod:`genmem.memory.bank_url`).

Any URL may name the bank inside the store with the query parameter ``bank``:
``sqlite:///banks.db?bank=hotpotqa``. Without it the bank id is ``default``. An explicit
``bank_id=`` argument wins over the URL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from genmem.errors import BankNotFound, InvalidBankURL
from genmem.memory.bank_url import DEFAULT_BANK_ID, BankURL, parse_bank_url
from genmem.memory.sid import SIDSpec
from genmem.memory.store import BankStore, check_bank_id

if TYPE_CHECKING:
    from genmem.memory.bank import Bank
    from genmem.memory.rqkmeans import Codebooks

__all__ = [
    "DEFAULT_BANK_ID",
    "BankURL",
    "new_sqlite_file",
    "open_bank",
    "open_store",
    "parse_bank_url",
]


def open_store(url: str | BankURL) -> BankStore:
    """Open the store a URL names (creating a SQLite file if needed)."""
    parsed = url if isinstance(url, BankURL) else parse_bank_url(url)
    try:
        store = _store_for(parsed)
    except sqlite3.DatabaseError as exc:  # a directory, another kind of file, no access
        raise InvalidBankURL(
            f"{parsed.location} cannot be opened as a SQLite bank file ({exc})", url=parsed.url
        ) from None
    store.url = _redact(parsed.url.split("?")[0])
    return store


def _store_for(parsed: BankURL) -> BankStore:
    if parsed.scheme == "sqlite":
        from genmem.memory.sqlite_store import SQLiteBankStore

        return SQLiteBankStore(parsed.location)
    if parsed.scheme == "postgresql":
        from genmem.memory.postgres_store import PostgresBankStore

        return PostgresBankStore.from_conn_string(parsed.location)
    from genmem.memory.langgraph_store import LangGraphBankStore

    return LangGraphBankStore.from_url(parsed)


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def new_sqlite_file(parsed: BankURL) -> bool:
    """Whether ``parsed`` names a SQLite file that does not exist yet (opening would make it)."""
    if parsed.scheme not in ("sqlite", "langgraph+sqlite") or parsed.location == ":memory:":
        return False
    return not Path(parsed.location).exists()


def open_bank(
    url: str,
    *,
    bank_id: str | None = None,
    codebooks: Codebooks | None = None,
    create: bool = False,
    spec: SIDSpec | None = None,
) -> Bank:
    """Open the bank a URL names; with ``create=True`` make it from ``codebooks`` if absent.

    Args:
        url: ``sqlite:///path.db?bank=ID``, ``postgresql://...?bank=ID`` or
            ``langgraph+sqlite:///path.db?bank=ID``.
        bank_id: The bank inside the store (overrides the URL's ``bank``).
        codebooks: The codebooks the bank must have been built with (checked by hash).
        create: Make an empty bank from ``codebooks`` when there is none.
        spec: The SID sizes the bank must have.

    Returns:
        The open bank.

    Raises:
        InvalidBankURL: a URL that names no store, or ``create`` without codebooks.
        BankNotFound: no such bank (a SQLite file is never created to find that out).
        CodebookMismatch: the bank was built with other codebooks.
    """
    parsed = parse_bank_url(url)
    target = check_bank_id(bank_id) if bank_id is not None else parsed.bank_id
    if not create and new_sqlite_file(parsed):
        # Opening would create an empty database file: refuse without touching the disk.
        raise BankNotFound(
            f"no bank {target!r}: {parsed.location} does not exist; build one with `genmem bank "
            "build` (or open_bank(..., create=True))",
            bank_id=target,
        )
    store = open_store(parsed)
    if create:
        if codebooks is None:
            raise InvalidBankURL("create=True needs the codebooks the bank is built with", url=url)
        return store.create_bank(
            target, spec=codebooks.spec, codebook_hash=codebooks.hash, exist_ok=True
        )
    bank = store.bank(target)
    if codebooks is not None:
        bank.check_codebook(codebooks)
    if spec is not None and spec != bank.spec:
        raise InvalidBankURL(f"bank {target!r} has sizes {bank.spec}, not {spec}", url=url)
    return bank
