"""The store a LangGraph server gives its graphs, opened from a bank URL: the custom-store hook.

``langgraph dev`` and the LangGraph server give every graph compiled without a store of its own
the server's store (a node parameter annotated ``BaseStore``, ``runtime.store``, a tool's
``ToolRuntime``); GenMem's graphs then keep their bank there (run context ``bank_id``, no
``bank_url``). By default that store lives inside the server. To put it where GenMem's command
line can reach it too (build or import a bank, then serve it; browse it with the explorer), point
the server's documented custom-store setting at :func:`store` in ``langgraph.json``::

    "store": {"path": "genmem.memory.server_store.store"}

(the server imports ``module.attribute`` paths as well as ``./file.py:attribute`` ones), and
name the store in the server's environment, with the URL form the CLI uses for it::

    GENMEM_SERVER_STORE=langgraph+sqlite:///banks/store.db       # one machine (langgraph dev)
    GENMEM_SERVER_STORE=langgraph+postgresql://user:pw@host/db   # a server with PostgreSQL

The server opens the async twin of the store the URL names (``AsyncSqliteStore``,
``AsyncPostgresStore``) on its own event loop, runs its migrations, and closes it at shutdown;
``genmem bank ... --bank langgraph+sqlite:///banks/store.db?bank=NAME`` opens the same data with
the sync store. The two are separate processes: write a bank from one of them at a time (the
LangGraph adapter serialises writers within a process only).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langgraph.store.base import BaseStore

from genmem.errors import InvalidBankURL
from genmem.memory.bank_url import parse_bank_url

__all__ = ["SERVER_STORE_ENV", "open_server_store", "store"]

SERVER_STORE_ENV = "GENMEM_SERVER_STORE"
"""The environment variable that names the server's store (a ``langgraph+...`` bank URL)."""

_FORMS = "langgraph+sqlite:///path.db or langgraph+postgresql://user@host/db"


@asynccontextmanager
async def open_server_store(url: str) -> AsyncIterator[BaseStore]:
    """The async LangGraph store a ``langgraph+sqlite`` or ``langgraph+postgresql`` URL names."""
    parsed = parse_bank_url(url)
    if parsed.scheme == "langgraph+sqlite":
        from langgraph.store.sqlite.aio import AsyncSqliteStore

        path = parsed.location
        if path == ":memory:":
            raise InvalidBankURL(
                f"{url!r} names a private in-memory database, which nothing outside the server "
                f"could reach; give a file: {_FORMS}",
                url=url,
            )
        Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        async with AsyncSqliteStore.from_conn_string(path) as sqlite_store:
            # The CLI reads beside the server: WAL lets it, as the sync adapter's file does.
            await sqlite_store.conn.execute("PRAGMA journal_mode = WAL")
            await sqlite_store.setup()
            yield sqlite_store
        return
    if parsed.scheme == "langgraph+postgresql":
        from genmem.memory.postgres_store import import_psycopg

        import_psycopg()  # says how to install the driver when it is missing
        from langgraph.store.postgres.aio import AsyncPostgresStore

        async with AsyncPostgresStore.from_conn_string(parsed.location) as pg_store:
            await pg_store.setup()
            yield pg_store
        return
    raise InvalidBankURL(
        f"the server's store must be a LangGraph store both the server and the CLI can open, "
        f"not {url!r}; use {_FORMS}",
        url=url,
    )


@asynccontextmanager
async def store() -> AsyncIterator[BaseStore]:
    """The store ``$GENMEM_SERVER_STORE`` names, for ``langgraph.json``'s ``store.path``."""
    url = os.environ.get(SERVER_STORE_ENV, "").strip()
    if not url:
        raise InvalidBankURL(
            f"langgraph.json points the server's store at genmem.memory.server_store.store, but "
            f"${SERVER_STORE_ENV} is not set; set it to {_FORMS}",
            url="",
        )
    async with open_server_store(url) as opened:
        yield opened
