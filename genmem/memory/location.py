"""Bank locations as URLs, and the factories that open them.

=====================================  ==================================================
URL                                    store
=====================================  ==================================================
``sqlite:///relative/path.db``         SQLite file, path relative to the working directory
``sqlite:////absolute/path.db``        SQLite file, absolute path (SQLAlchemy's spelling)
``sqlite://`` or ``sqlite:///:memory:``  private in-memory SQLite database
``postgresql://user:pw@host:5432/db``  PostgreSQL (psycopg 3; ``pip install genmem[postgres]``)
``memory://`` or ``memory://NAME``     LangGraph ``InMemoryStore``, shared per process by NAME
``langgraph+sqlite:///path.db``        LangGraph ``SqliteStore`` in a file
``langgraph+postgresql://...``         LangGraph ``PostgresStore``
=====================================  ==================================================

Any URL may name the bank inside the store with the query parameter ``bank``:
``sqlite:///banks.db?bank=hotpotqa``. Without it the bank id is ``default``. An explicit
``bank_id=`` argument wins over the URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from genmem.errors import BankNotFound, InvalidBankURL
from genmem.memory.sid import SIDSpec
from genmem.memory.store import BankStore, check_bank_id

if TYPE_CHECKING:
    from genmem.memory.bank import Bank
    from genmem.memory.rqkmeans import Codebooks

__all__ = ["DEFAULT_BANK_ID", "BankURL", "open_bank", "open_store", "parse_bank_url"]

DEFAULT_BANK_ID = "default"

_FORMS = (
    "sqlite:///relative.db, sqlite:////absolute/path.db, postgresql://user@host/db, memory://, "
    "langgraph+sqlite:///path.db or langgraph+postgresql://...; add ?bank=NAME to pick a bank"
)


@dataclass(frozen=True)
class BankURL:
    """A parsed bank URL."""

    scheme: str
    """``sqlite``, ``postgresql``, ``memory``, ``langgraph+sqlite`` or ``langgraph+postgresql``."""
    location: str
    """File path, connection string or in-memory store name."""
    bank_id: str
    """The bank inside the store."""
    url: str
    """The URL as given."""


def parse_bank_url(url: str) -> BankURL:
    """Split a bank URL into scheme, location and bank id (InvalidBankURL on anything else)."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidBankURL(f"bank URL {url!r} has no scheme; use one of: {_FORMS}", url=str(url))
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = parse_qsl(parts.query, keep_blank_values=True)
    bank_ids = [v for k, v in query if k == "bank"]
    others = [(k, v) for k, v in query if k != "bank"]
    if len(bank_ids) > 1:
        raise InvalidBankURL(f"bank URL {url!r} names more than one bank", url=url)
    bank_id = bank_ids[0] if bank_ids else DEFAULT_BANK_ID
    try:
        check_bank_id(bank_id)
    except ValueError as exc:
        raise InvalidBankURL(f"bank URL {url!r}: {exc}", url=url) from None

    if scheme == "sqlite":
        if others:
            raise InvalidBankURL(f"sqlite URL {url!r} takes no query but ?bank=NAME", url=url)
        if parts.netloc:
            raise InvalidBankURL(
                f"sqlite URL {url!r} has a host part {parts.netloc!r}; write sqlite:///relative.db "
                "or sqlite:////absolute/path.db",
                url=url,
            )
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return BankURL("sqlite", path or ":memory:", bank_id, url)
    if scheme in {"postgresql", "postgres", "postgresql+psycopg"}:
        conn = urlunsplit(
            ("postgresql", parts.netloc, parts.path, urlencode(others, quote_via=quote), "")
        )
        return BankURL("postgresql", conn, bank_id, url)
    if scheme == "memory":
        return BankURL("memory", parts.netloc + parts.path, bank_id, url)
    if scheme == "langgraph+sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return BankURL("langgraph+sqlite", path or ":memory:", bank_id, url)
    if scheme in {"langgraph+postgresql", "langgraph+postgres"}:
        conn = urlunsplit(
            ("postgresql", parts.netloc, parts.path, urlencode(others, quote_via=quote), "")
        )
        return BankURL("langgraph+postgresql", conn, bank_id, url)
    raise InvalidBankURL(
        f"unknown bank URL scheme {parts.scheme!r} in {url!r}; use {_FORMS}", url=url
    )


def open_store(url: str | BankURL) -> BankStore:
    """Open the store a URL names (creating a SQLite file if needed)."""
    parsed = url if isinstance(url, BankURL) else parse_bank_url(url)
    if parsed.scheme == "sqlite":
        from genmem.memory.sqlite_store import SQLiteBankStore

        store: BankStore = SQLiteBankStore(parsed.location)
    elif parsed.scheme == "postgresql":
        from genmem.memory.postgres_store import PostgresBankStore

        store = PostgresBankStore.from_conn_string(parsed.location)
    else:
        from genmem.memory.langgraph_store import LangGraphBankStore

        store = LangGraphBankStore.from_url(parsed)
    store.url = _redact(parsed.url.split("?")[0])
    return store


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def open_bank(
    url: str,
    *,
    bank_id: str | None = None,
    codebooks: Codebooks | None = None,
    create: bool = False,
    spec: SIDSpec | None = None,
) -> Bank:
    """Open the bank a URL names; with ``create=True`` make it from ``codebooks`` if absent.

    When ``codebooks`` are given, a bank built with other codebooks is refused
    (:class:`~genmem.errors.CodebookMismatch`).
    """
    parsed = parse_bank_url(url)
    target = check_bank_id(bank_id) if bank_id is not None else parsed.bank_id
    if not create and parsed.scheme in ("sqlite", "langgraph+sqlite"):
        path = parsed.location
        if path != ":memory:" and not Path(path).exists():
            # Opening would create an empty database file: refuse without touching the disk.
            raise BankNotFound(
                f"no bank {target!r}: {path} does not exist; build one with `genmem bank "
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
