"""Which bank a run may open when a LangGraph server runs it: the server decides, not the client.

In your own process a graph opens whatever bank its caller names (``context={"bank": bank}`` or
``{"bank_url": ...}``): the caller is you. Under a LangGraph server (``langgraph dev``, a
deployment) the caller is any client that can reach the server, so a GenMem node or tool that runs
there resolves its bank through the rules below, read from the **server's** environment:

- A run picks a bank **by id** (``bank_id`` in its context), never by location. The id is looked
  up in the served banks, ``GENMEM_BANKS``: a JSON object (or the path of a JSON or YAML file
  holding one) from bank id to a bank URL, or to ``{"url": ..., "users": [...]}`` to name the
  users who may open it (no ``users``: every caller). An id not listed there is a bank in the
  server's own LangGraph store; when the server authenticates users, each user has their own
  banks there (:func:`genmem.memory.langgraph_store.owner_root`) and never sees another's.
- A run that names a URL (``bank_url``) is refused with :class:`~genmem.errors.BankAccessDenied`
  before anything is opened, unless the operator opts in with ``GENMEM_CLIENT_BANK_URLS=1``.
  Even then: a SQLite file (``sqlite:``, ``langgraph+sqlite:``) must resolve, symlinks followed,
  inside ``GENMEM_BANK_ROOT`` (inside ``GENMEM_BANK_ROOT/<user>`` for an authenticated user); a
  PostgreSQL URL must name a host listed in ``GENMEM_BANK_HOSTS`` (comma-separated ``host`` or
  ``host:port``) and is refused for authenticated users; ``memory://`` (a store shared by the whole
  server process) is refused for authenticated users.

What the opt-in gives up: a client then chooses files and hosts within those bounds, so anyone
who can reach the server can read and write every bank file under the root (their own folder,
with authentication) and connect to the listed hosts with credentials they know.

A run counts as served when its config carries the ``graph_id`` the LangGraph server puts in
every run's ``configurable``; its user is the server's authenticated user object there
(``langgraph_auth_user``: a client's JSON cannot forge one, it can only be a dict).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from genmem.errors import BankAccessDenied, GenMemError, InvalidBankURL
from genmem.memory.bank_url import BankURL, parse_bank_url

__all__ = [
    "BANK_HOSTS_ENV",
    "BANK_ROOT_ENV",
    "CLIENT_URLS_ENV",
    "ON_BEHALF_HEADER",
    "SERVED_BANKS_ENV",
    "SERVICE_TOKEN_ENV",
    "ServedBank",
    "ServedBanks",
    "ServedChoice",
    "choose_served_bank",
    "is_served_run",
    "on_behalf_headers",
    "served_banks",
    "served_user",
    "service_token",
]

SERVED_BANKS_ENV = "GENMEM_BANKS"
"""The served banks: JSON (or a JSON/YAML file's path) from bank id to URL or ``{url, users}``."""
CLIENT_URLS_ENV = "GENMEM_CLIENT_BANK_URLS"
"""``1``/``true``/``on``/``yes``: accept a bank URL a run names (within the root and hosts)."""
BANK_ROOT_ENV = "GENMEM_BANK_ROOT"
"""The folder a run's SQLite bank URL must lie in (with ``GENMEM_CLIENT_BANK_URLS``)."""
BANK_HOSTS_ENV = "GENMEM_BANK_HOSTS"
"""PostgreSQL hosts a run's bank URL may name (with ``GENMEM_CLIENT_BANK_URLS``)."""

SERVICE_TOKEN_ENV = "GENMEM_SERVICE_TOKEN"
"""The server's own credential for the runs it starts for a user (background updates). Set it
in every server process of a deployment; one ``langgraph dev`` process makes one up itself."""
ON_BEHALF_HEADER = "x-genmem-on-behalf-of"
"""The header naming the user a server-started run belongs to (honoured with the service token
only)."""

_TRUE = {"1", "true", "on", "yes"}
_FALSE = {"", "0", "false", "off", "no"}
_SAFE_DIR = re.compile(r"^[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*$")


class ServedBank(BaseModel):
    """One bank the server serves by id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(description="Where the bank is (any bank URL form).")
    users: tuple[str, ...] | None = Field(
        default=None,
        description="The authenticated users who may open it; None: every caller.",
    )


class ServedBanks(BaseModel):
    """The server's bank rules, read from its environment (:func:`served_banks`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    banks: dict[str, ServedBank] = Field(default_factory=dict)
    client_urls: bool = False
    root: Path | None = None
    hosts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ServedChoice:
    """Where a served run's bank is: a URL to open, or a bank id in the server's store."""

    url: str | None
    """A bank URL (a served bank, or a client URL the rules accepted); None: the store."""
    bank_id: str
    """The bank id (inside the URL's store, or inside the server's store)."""
    owner: str | None
    """For a store bank: whose banks it is among (the authenticated user; None: shared)."""


def _flag(value: str, name: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise GenMemError(f"${name}={value!r}: expected 1/true/on/yes or 0/false/off/no")


def _banks_value(text: str) -> Any:
    """The served-banks mapping from inline JSON or from a JSON/YAML file's path."""
    stripped = text.strip()
    if stripped.startswith("{"):
        return json.loads(stripped)
    path = Path(stripped).expanduser()
    if not path.is_file():
        raise GenMemError(
            f"${SERVED_BANKS_ENV}={text!r} is neither a JSON object nor a file: give "
            '\'{"gsm": "sqlite:////srv/banks/gsm.db?bank=gsm"}\' or the path of a JSON/YAML file'
        )
    body = path.read_text(encoding="utf-8")
    return json.loads(body) if path.suffix == ".json" else yaml.safe_load(body)


def served_banks(environ: Mapping[str, str] | None = None) -> ServedBanks:
    """The server's bank rules from ``environ`` (default: this process's environment).

    Args:
        environ: The environment to read (``os.environ`` when None).

    Returns:
        The rules; with nothing set: no served banks, the store only, no client URLs.

    Raises:
        GenMemError: a setting that does not parse (the server refuses to guess).
    """
    env = os.environ if environ is None else environ
    return _parse(
        env.get(SERVED_BANKS_ENV, ""),
        env.get(CLIENT_URLS_ENV, ""),
        env.get(BANK_ROOT_ENV, ""),
        env.get(BANK_HOSTS_ENV, ""),
    )


@lru_cache(maxsize=8)
def _parse(banks: str, client_urls: str, root: str, hosts: str) -> ServedBanks:
    raw: Any = {}
    if banks.strip():
        try:
            raw = _banks_value(banks)
        except (ValueError, yaml.YAMLError, OSError) as exc:
            raise GenMemError(f"${SERVED_BANKS_ENV} cannot be read: {exc}") from None
    if not isinstance(raw, dict):
        raise GenMemError(f"${SERVED_BANKS_ENV} must map bank ids to URLs, got {type(raw)}")
    entries = {k: {"url": v} if isinstance(v, str) else v for k, v in raw.items()}
    for bank_id, entry in entries.items():
        url = entry.get("url") if isinstance(entry, dict) else None
        if isinstance(url, str):
            try:
                parse_bank_url(url)
            except InvalidBankURL as exc:
                raise GenMemError(f"${SERVED_BANKS_ENV}, bank {bank_id!r}: {exc}") from None
            named = {k for k, _ in parse_qsl(urlsplit(url).query, keep_blank_values=True)}
            if "bank" not in named:  # the URL's bank defaults to the id runs name
                entry["url"] = _with_bank(url, str(bank_id))
    try:
        return ServedBanks(
            banks=entries,
            client_urls=_flag(client_urls, CLIENT_URLS_ENV),
            root=Path(root).expanduser().resolve() if root.strip() else None,
            hosts=frozenset(h.strip().lower() for h in hosts.split(",") if h.strip()),
        )
    except ValidationError as exc:
        raise GenMemError(f"${SERVED_BANKS_ENV}: {exc}") from None


def _with_bank(url: str, bank_id: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}bank={bank_id}"


def service_token() -> str:
    """The server's own credential (``$GENMEM_SERVICE_TOKEN``; made up once per process when
    unset, and kept in the environment so this process's authentication handler agrees)."""
    token = os.environ.get(SERVICE_TOKEN_ENV, "")
    if not token:
        import secrets

        token = os.environ.setdefault(SERVICE_TOKEN_ENV, secrets.token_urlsafe(32))
    return token


def on_behalf_headers(user: str | None) -> dict[str, str]:
    """Headers for a request the server makes to itself for ``user`` (none without a user)."""
    if user is None:
        return {}
    return {"Authorization": f"Bearer {service_token()}", ON_BEHALF_HEADER: user}


def is_served_run(configurable: Mapping[str, Any] | None) -> bool:
    """Whether a run's ``configurable`` is one the LangGraph server made (it names the graph)."""
    return bool(configurable) and configurable.get("graph_id") is not None  # type: ignore[union-attr]


def served_user(configurable: Mapping[str, Any] | None) -> str | None:
    """The user the LangGraph server authenticated for this run, or None (no authentication).

    Only the server's own user object counts: a dict or a string (what a client's JSON context
    could carry into ``configurable``) is ignored, and so is an empty identity.
    """
    user = (configurable or {}).get("langgraph_auth_user")
    if user is None or isinstance(user, (dict, str, bytes, list)):
        return None
    try:
        identity = user.identity
    except (AttributeError, NotImplementedError):
        return None
    return identity if isinstance(identity, str) and identity.strip() else None


def choose_served_bank(
    *,
    url: str | None,
    bank_id: str | None,
    user: str | None,
    has_store: bool,
    rules: ServedBanks | None = None,
) -> ServedChoice:
    """Where a served run's bank is, by the server's rules; refuses before opening anything.

    Args:
        url: The bank URL the run names (``bank_url``), if any.
        bank_id: The bank id the run names (``bank_id``), or the caller's default.
        user: The authenticated user (:func:`served_user`), or None.
        has_store: Whether the server gave the run a LangGraph store.
        rules: The server's rules (default: :func:`served_banks` of this process).

    Returns:
        A served bank's URL, an accepted client URL (its path resolved), or a store bank id.

    Raises:
        BankAccessDenied: a URL without the opt-in or outside its bounds, a served bank the
            user is not listed for, no store and no served bank of that id.
        InvalidBankURL: a URL that does not parse.
    """
    rules = served_banks() if rules is None else rules
    if url:
        return ServedChoice(_client_url(str(url), user, rules), parse_bank_url(url).bank_id, None)
    bank_id = bank_id or "default"
    served = rules.banks.get(bank_id)
    if served is not None:
        if served.users is not None and (user is None or user not in served.users):
            raise BankAccessDenied(
                f"bank {bank_id!r} is not served to {_who(user)} on this server",
                requested=bank_id,
                user=user,
            )
        return ServedChoice(served.url, parse_bank_url(served.url).bank_id, None)
    if has_store:
        return ServedChoice(None, bank_id, user)
    raise BankAccessDenied(
        f"this server has no store and serves no bank {bank_id!r}; it serves: "
        f"{sorted(_visible(rules, user)) or 'none'} (the operator lists banks in "
        f"${SERVED_BANKS_ENV})",
        requested=bank_id,
        user=user,
    )


def _who(user: str | None) -> str:
    return "an unauthenticated caller" if user is None else f"user {user!r}"


def _visible(rules: ServedBanks, user: str | None) -> list[str]:
    return [k for k, v in rules.banks.items() if v.users is None or user in v.users]


def _client_url(url: str, user: str | None, rules: ServedBanks) -> str:
    """A client's bank URL if the rules accept it (a SQLite path made absolute and real)."""
    parsed = parse_bank_url(url)
    if not rules.client_urls:
        raise BankAccessDenied(
            "this server does not open bank URLs a run names: name a bank by id (bank_id) "
            f"among those it serves {sorted(_visible(rules, user))} or in its store. The operator "
            f"may opt in with ${CLIENT_URLS_ENV}=1 and ${BANK_ROOT_ENV}=<folder>",
            requested=_shown(parsed),
            user=user,
        )
    if parsed.scheme in ("sqlite", "langgraph+sqlite"):
        return _under_root(parsed, user, rules)
    if parsed.scheme in ("postgresql", "langgraph+postgresql"):
        if user is not None:
            raise BankAccessDenied(
                f"{_who(user)} may not name a PostgreSQL bank URL; pick a bank by id",
                requested=_shown(parsed),
                user=user,
            )
        host = _pg_host(parsed)
        if host not in rules.hosts and host.split(":")[0] not in rules.hosts:
            raise BankAccessDenied(
                f"PostgreSQL host {host!r} is not one this server connects to "
                f"(${BANK_HOSTS_ENV}: {sorted(rules.hosts) or 'none'})",
                requested=_shown(parsed),
                user=user,
            )
        return parsed.url
    if user is not None:  # memory://: one store for the whole server process
        raise BankAccessDenied(
            f"{_who(user)} may not name a {parsed.scheme}:// bank (shared by every user of the "
            "server); pick a bank by id",
            requested=_shown(parsed),
            user=user,
        )
    return parsed.url


def _user_dir(user: str) -> str:
    if _SAFE_DIR.match(user) and user not in (".", ".."):
        return user
    import hashlib

    return "u-" + hashlib.sha256(user.encode()).hexdigest()[:32]


def _under_root(parsed: BankURL, user: str | None, rules: ServedBanks) -> str:
    if rules.root is None:
        raise BankAccessDenied(
            f"this server takes no SQLite bank URL: ${BANK_ROOT_ENV} names no folder for them",
            requested=_shown(parsed),
            user=user,
        )
    root = rules.root if user is None else rules.root / _user_dir(user)
    if parsed.location == ":memory:":
        return parsed.url  # a private database of this call: nothing on disk
    path = Path(parsed.location).expanduser()
    try:
        real = Path(os.path.realpath(path if path.is_absolute() else root / path))
    except (UnicodeEncodeError, ValueError, OSError) as exc:  # a name no file system can hold
        raise BankAccessDenied(
            f"bank file {parsed.location!r} cannot be a path on this server ({type(exc).__name__})",
            requested=_shown(parsed),
            user=user,
        ) from None
    real_root = Path(os.path.realpath(root))
    if real != real_root and real_root not in real.parents:
        raise BankAccessDenied(
            f"bank file {parsed.location!r} is outside this server's bank folder"
            + ("" if user is None else f" for {_who(user)}"),
            requested=_shown(parsed),
            user=user,
        )
    return f"{parsed.scheme}:///{real}?bank={parsed.bank_id}"


def _pg_host(parsed: BankURL) -> str:
    """``host:port`` of a PostgreSQL URL; refuses the forms that could reach a second host."""
    parts = urlsplit(parsed.location)
    keys = {k.lower() for k, _ in parse_qsl(parts.query, keep_blank_values=True)}
    hostname = parts.hostname or ""
    if not parts.scheme.startswith("postgres") or "," in parts.netloc or not hostname:
        raise BankAccessDenied(
            "a PostgreSQL bank URL must name exactly one host (postgresql://user@host:port/db)",
            requested=_shown(parsed),
            user=None,
        )
    if keys & {"host", "hostaddr", "service", "passfile", "sslrootcert"}:
        raise BankAccessDenied(
            "a PostgreSQL bank URL may not set host, hostaddr or service in its query",
            requested=_shown(parsed),
            user=None,
        )
    return f"{hostname.lower()}:{parts.port or 5432}"


def _shown(parsed: BankURL) -> str:
    """The URL without its password (for errors and logs)."""
    parts = urlsplit(parsed.url)
    if parts.password is None:
        return parsed.url
    return parsed.url.replace(f":{parts.password}@", ":***@", 1)
