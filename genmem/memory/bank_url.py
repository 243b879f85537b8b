"""Bank locations as URLs: the forms a store can be named by, and their parser.

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
``bank_id=`` argument wins over the URL. A LangGraph store URL may also name the user whose banks
it means, ``?owner=alice`` (a server with authentication keeps each user's banks apart).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from genmem.errors import InvalidBankURL
from genmem.memory.backend import check_bank_id

__all__ = ["DEFAULT_BANK_ID", "BankURL", "parse_bank_url"]

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
    owner: str | None = None
    """LangGraph store URLs (``memory``, ``langgraph+...``): whose banks (``?owner=NAME``), as
    a LangGraph server with authentication keeps them per user; None: the shared banks."""


def parse_bank_url(url: str) -> BankURL:
    """Split a bank URL into scheme, location and bank id (InvalidBankURL on anything else)."""
    if not isinstance(url, str) or "://" not in url:
        raise InvalidBankURL(f"bank URL {url!r} has no scheme; use one of: {_FORMS}", url=str(url))
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed '[' of an IPv6 host
        raise InvalidBankURL(f"bank URL {url!r} cannot be read: {exc}", url=url) from None
    scheme = parts.scheme.lower()
    query = parse_qsl(parts.query, keep_blank_values=True)
    bank_ids = [v for k, v in query if k == "bank"]
    owners = [v for k, v in query if k == "owner"]
    others = [(k, v) for k, v in query if k not in ("bank", "owner")]
    if owners and (len(owners) > 1 or not owners[0].strip()):
        raise InvalidBankURL(f"bank URL {url!r}: give one non-empty ?owner=NAME", url=url)
    owner = owners[0] if owners else None
    if owner is not None and not (scheme == "memory" or scheme.startswith("langgraph+")):
        raise InvalidBankURL(
            f"bank URL {url!r}: ?owner= applies to LangGraph store URLs (memory://, "
            "langgraph+sqlite:///, langgraph+postgresql://) only",
            url=url,
        )
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
        return BankURL("memory", parts.netloc + parts.path, bank_id, url, owner)
    if scheme == "langgraph+sqlite":
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        return BankURL("langgraph+sqlite", path or ":memory:", bank_id, url, owner)
    if scheme in {"langgraph+postgresql", "langgraph+postgres"}:
        conn = urlunsplit(
            ("postgresql", parts.netloc, parts.path, urlencode(others, quote_via=quote), "")
        )
        return BankURL("langgraph+postgresql", conn, bank_id, url, owner)
    raise InvalidBankURL(
        f"unknown bank URL scheme {parts.scheme!r} in {url!r}; use {_FORMS}", url=url
    )
