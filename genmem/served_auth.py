"""Per-user isolation for the served graphs: LangGraph's own authentication and authorization.

``langgraph.tenants.json`` serves the same graphs as ``langgraph.json`` with this module's
:data:`auth` wired in (``"auth": {"path": "./genmem/served_auth.py:auth"}``). Then:

- **Who is calling**: every request carries ``Authorization: Bearer <token>``; the token table
  comes from the server's environment, ``GENMEM_AUTH_TOKENS``: a JSON object from token to user
  (or the path of a JSON or YAML file holding one). A request without a known token gets 401.
  This is the part a deployment replaces with its identity provider (verify a JWT, ask an OAuth
  server): what it returns, ``{"identity": ...}``, is all the rest relies on.
- **Their banks**: a run's GenMem nodes open banks in the server's store under the caller's own
  namespace, ``("genmem", "user", <identity>, ...)`` (:mod:`genmem.tools.served_banks`), so a
  bank id means "my bank of that name" and nobody can name another user's. Banks the operator
  serves by id (``GENMEM_BANKS``) may list the users who may open them.
- **Their threads and runs**: a thread (and a run's temporary thread) is stamped with its owner
  and every read, search, update, delete or run on it is filtered to that owner, so one user can
  neither see nor continue another's conversation. Assistants are readable by everyone (the
  served graphs); making, changing or deleting one is refused.
- **Their store items**: the server's store API (``client.store``) reaches only namespaces under
  the caller's own ``("genmem", "user", <identity>)``: listing, reading, writing or deleting
  anything else, other users' banks and the shared banks included, is refused.

Background updates (``genmem_background``) are runs the server starts for the user: they carry
the server's own credential, ``GENMEM_SERVICE_TOKEN``, and the user's identity, and only that
credential may speak for another identity.
"""

from __future__ import annotations

import hmac
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from langgraph_sdk import Auth

from genmem.memory.langgraph_store import owner_root
from genmem.tools.served_banks import ON_BEHALF_HEADER, service_token

__all__ = ["TOKENS_ENV", "auth", "user_for_token"]

TOKENS_ENV = "GENMEM_AUTH_TOKENS"
"""The token table: JSON ``{"<token>": "<user>"}`` or the path of a JSON/YAML file holding it."""

auth = Auth()


@lru_cache(maxsize=4)
def _table(text: str) -> dict[str, str]:
    stripped = text.strip()
    if not stripped:
        return {}
    if stripped.startswith("{"):
        raw: Any = json.loads(stripped)
    else:
        path = Path(stripped).expanduser()
        body = path.read_text(encoding="utf-8")
        raw = json.loads(body) if path.suffix == ".json" else yaml.safe_load(body)
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and k and isinstance(v, str) and v.strip() for k, v in raw.items()
    ):
        raise ValueError(f"${TOKENS_ENV} must map non-empty tokens to non-empty user names")
    return dict(raw)


def user_for_token(token: str, on_behalf: str | None = None) -> str | None:
    """The user a bearer token stands for, or None.

    Args:
        token: The token from ``Authorization: Bearer <token>``.
        on_behalf: The ``x-genmem-on-behalf-of`` header: honoured only with the service token.

    Returns:
        The identity, or None for an unknown token.
    """
    if not token:
        return None
    if hmac.compare_digest(token.encode(), service_token().encode()):
        return on_behalf.strip() if on_behalf and on_behalf.strip() else None
    found = None
    for known, user in _table(os.environ.get(TOKENS_ENV, "")).items():
        if hmac.compare_digest(token.encode(), known.encode()):  # every entry: no timing clue
            found = user
    return found


def _header(headers: dict[bytes, bytes], name: str) -> str | None:
    value = headers.get(name.encode()) or headers.get(name.encode().title())
    return value.decode("latin-1") if value else None


@auth.authenticate
async def authenticate(
    authorization: str | None, headers: dict[bytes, bytes]
) -> Auth.types.MinimalUserDict:
    """``Authorization: Bearer <token>`` -> the user the token table names; else 401."""
    scheme, _, token = (authorization or "").partition(" ")
    user = None
    if scheme.lower() == "bearer":
        user = user_for_token(token.strip(), _header(headers, ON_BEHALF_HEADER))
    if user is None:
        raise Auth.exceptions.HTTPException(
            status_code=401, detail="unknown or missing bearer token"
        )
    return {"identity": user}


@auth.on
async def owner_only(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Threads, runs and crons: stamp new ones with their owner; see only your own."""
    owner = {"owner": ctx.user.identity}
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if metadata is None and ctx.action in ("create", "create_run"):
            metadata = value["metadata"] = {}
        if isinstance(metadata, dict):
            metadata.update(owner)
    return owner


@auth.on.assistants
async def assistants(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Assistants (the served graphs): everyone may read and search them; nobody may change them."""
    if ctx.action not in ("read", "search"):
        raise Auth.exceptions.HTTPException(
            status_code=403, detail="assistants are fixed on this server"
        )


@auth.on.store()
async def own_namespace(ctx: Auth.types.AuthContext, value: Any) -> None:
    """The store API reaches only the caller's own ``("genmem", "user", <identity>)`` items.

    A search or a namespace listing under a shorter prefix of it (or none) is narrowed to it;
    any other namespace is refused.
    """
    mine = owner_root(ctx.user.identity)
    namespace = tuple(value.get("namespace") or ())
    if ctx.action in ("search", "list_namespaces") and mine[: len(namespace)] == namespace:
        value["namespace"] = mine
        return
    if namespace[: len(mine)] != mine:
        raise Auth.exceptions.HTTPException(
            status_code=403, detail=f"this user's store namespaces start with {list(mine)}"
        )
