"""A PostgreSQL server for the tests: the one ``GENMEM_TEST_POSTGRES_URL`` names, or a throwaway.

Without the variable, the first test that needs PostgreSQL starts a private server from
Debian's binaries (``/usr/lib/postgresql/*/bin``) in a temporary directory, on a free port of
127.0.0.1, with durability switched off for speed; :func:`stop` removes it at the end of the
session. Root cannot run ``postgres``, so as root the server runs as the ``postgres`` user.
No binaries: the tests skip, except under ``CI=true``, where they fail (CI must run the suite
against a real server; ``.ci/postgres.sh`` installs one).

Each test gets a fresh schema (:func:`fresh_schema`), selected through ``search_path``; schemas
are dropped at the end of the session. ``fresh_schema(icu=True)`` puts the schema in a second
database whose default collation is ICU ``en-US`` (created once, kept on an external server), as
most managed servers are configured: there ``'00003.00001.' < '00003.~'`` is false, so code that
relies on byte order of text fails there and passes on the throwaway server's C database.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

ENV_URL = "GENMEM_TEST_POSTGRES_URL"
ICU_DATABASE = "genmem_test_icu"

_lock = threading.Lock()
_state: dict[str, Any] = {
    "url": None,
    "error": None,
    "server": None,
    "schemas": [],
    "icu_url": None,
    "icu_error": None,
}


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version_key)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _version_key(path: str) -> float:
    try:
        return float(Path(path).parts[-3])
    except ValueError:
        return 0.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    """Root may not run postgres; run it as the ``postgres`` OS user instead."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


def _run(*cmd: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _as_server_user([str(c) for c in cmd]),
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )


class Throwaway:
    """A private PostgreSQL server from Debian's binaries in a temporary directory, on a free
    port of 127.0.0.1; ``durable=False`` switches fsync and synchronous commit off for speed.

    Used by the tests (one per session) and by ``bench/stress.py`` (durable, for its figures).
    """

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.root: Path | None = None
        self.bindir: Path | None = None
        self.url: str | None = None
        self._opts = ""

    def start(self) -> str:
        """Start the server; its URL (``postgresql://postgres@127.0.0.1:PORT/postgres``)."""
        bindir = _binaries()
        if bindir is None:
            raise RuntimeError(
                f"no PostgreSQL server binaries (initdb) found and {ENV_URL} is not set; install "
                "them (`bash .ci/postgres.sh`, i.e. apt-get install postgresql) or point "
                f"{ENV_URL} at a server"
            )
        root = Path(tempfile.mkdtemp(prefix="genmem-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, "postgres", "postgres")
        data, port = root / "data", _free_port()
        opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        if not self.durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self._opts = opts
        try:
            _run(bindir / "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8")
            _run(bindir / "pg_ctl", "-D", data, "-o", opts, "-l", root / "log", "-w", "start")
        except subprocess.CalledProcessError as exc:
            log = root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"could not start PostgreSQL: {exc.stderr or exc}\n{tail}") from exc
        self.root, self.bindir = root, bindir
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        return self.url

    def restart(self) -> None:
        """Restart the running server (``fast``: open sessions are cut, as in a failover)."""
        assert self.root is not None and self.bindir is not None, "start() it first"
        data, log = self.root / "data", self.root / "log"
        _run(self.bindir / "pg_ctl", "-D", data, "-m", "fast", "-o", self._opts, "-l", log, "-w",
             "restart")  # fmt: skip

    def stop(self) -> None:
        """Stop the server and remove its directory (nothing if it never started)."""
        if self.root is None or self.bindir is None:
            return
        try:
            _run(self.bindir / "pg_ctl", "-D", self.root / "data", "-m", "immediate", "stop")
        except subprocess.SubprocessError:
            pass  # already gone; the directory goes anyway
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = self.bindir = self.url = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _start() -> str:
    server = Throwaway()
    url = server.start()
    _state["server"] = server
    return url


def server_url() -> str:
    """The test server's URL, starting it on first use (skips, or fails under CI, without one)."""
    with _lock:
        if _state["url"] is None and _state["error"] is None:
            try:
                _state["url"] = os.environ.get(ENV_URL) or _start()
            except (RuntimeError, OSError, LookupError, subprocess.SubprocessError) as exc:
                _state["error"] = str(exc)
    if _state["error"] is not None:
        _unavailable(f"PostgreSQL unavailable: {_state['error']}")
    return _state["url"]


def _unavailable(reason: str) -> None:
    """Skip, or fail under ``CI=true``: CI must run the PostgreSQL suite, never skip it."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must test against PostgreSQL: {reason}", pytrace=False)
    pytest.skip(reason)


def icu_url() -> str:
    """The URL of the test server's database with an ICU ``en-US`` default collation."""
    import psycopg

    url = server_url()
    with _lock:
        if _state["icu_url"] is None and _state["icu_error"] is None:
            try:
                _state["icu_url"] = _icu_database(url)
            except (psycopg.Error, RuntimeError) as exc:
                _state["icu_error"] = f"{type(exc).__name__}: {exc}"
    if _state["icu_error"] is not None:
        _unavailable(
            "no ICU en-US database on the test server (needs PostgreSQL 15+ built with ICU): "
            + _state["icu_error"]
        )
    return _state["icu_url"]


def _icu_database(url: str) -> str:
    import psycopg
    from psycopg.conninfo import make_conninfo

    with psycopg.connect(url, autocommit=True) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (ICU_DATABASE,)
        ).fetchone()
        if exists is None:
            # LOCALE_PROVIDER needs PostgreSQL 15 and a server built with ICU (Debian's is).
            try:
                conn.execute(
                    f"CREATE DATABASE {ICU_DATABASE} TEMPLATE template0 ENCODING 'UTF8' "
                    "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"
                )
            except psycopg.errors.DuplicateDatabase:
                pass  # another test process created it first
    icu = make_conninfo(url, dbname=ICU_DATABASE)
    with psycopg.connect(icu, autocommit=True) as conn:
        # Prove the database really orders text the way that breaks byte-order assumptions.
        byte_order = conn.execute("SELECT '00003.00001.' < '00003.~'").fetchone()[0]
    if byte_order:
        raise RuntimeError(f"database {ICU_DATABASE!r} compares text byte-wise, not as ICU en-US")
    return icu


def fresh_schema(*, icu: bool = False) -> str:
    """A conninfo for a new, empty schema on the test server (dropped by :func:`stop`).

    ``icu=True``: in the database whose default collation is ICU ``en-US``.
    """
    import psycopg
    from psycopg.conninfo import make_conninfo

    url = icu_url() if icu else server_url()
    name = f"genmem_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    _state["schemas"].append((url, name))
    # '-cNAME=VALUE' without a space: location.py re-encodes a URL's query with '+' for spaces,
    # which libpq does not decode.
    return make_conninfo(url, options=f"-csearch_path={name}")


def as_url(conninfo: str, scheme: str = "postgresql", bank: str = "default") -> str:
    """A bank URL (``scheme://user:pw@host:port/db?options=...&bank=...``) for a conninfo."""
    from urllib.parse import quote

    from psycopg.conninfo import conninfo_to_dict

    p = {k: quote(str(v), safe="") for k, v in conninfo_to_dict(conninfo).items()}
    auth = p.get("user", "") + (f":{p['password']}" if "password" in p else "")
    netloc = (
        (f"{auth}@" if auth else "") + p.get("host", "") + (f":{p['port']}" if "port" in p else "")
    )
    query = f"options={p['options']}&" if "options" in p else ""
    return f"{scheme}://{netloc}/{p.get('dbname', '')}?{query}bank={bank}"


def stop() -> None:
    """Drop the test schemas and stop the throwaway server, if any was started."""
    schemas, _state["schemas"] = _state["schemas"], []
    if schemas and _state["url"] and _state["server"] is None:  # an external server: clean up
        import psycopg

        for url in dict.fromkeys(u for u, _ in schemas):
            with psycopg.connect(url, autocommit=True) as conn:
                for name in (n for u, n in schemas if u == url):
                    conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    if _state["server"] is not None:
        _state["server"].stop()
    _state.update(url=None, error=None, server=None, icu_url=None, icu_error=None)
