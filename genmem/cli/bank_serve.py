"""`genmem bank serve`: the bank explorer, a local web page and JSON API over one bank."""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path

from genmem.cli.common import add_gate_argument, emit, fail, gate_config, positive_int
from genmem.explorer.config import ExplorerConfig

__all__ = ["register"]


def register(bsub: argparse._SubParsersAction, url_help: str) -> None:
    """Add ``genmem bank serve`` to the ``genmem bank`` sub-commands."""
    p = bsub.add_parser(
        "serve",
        help="browse a bank in a web page on 127.0.0.1: prefix tree, history, log, search",
        description=(
            "Serves the bank explorer until Ctrl-C: the SID prefix tree with counts and "
            "occupancy, each entry's version history with diffs, the event log with filters, "
            "search by SID prefix or by text (TF-IDF), codebook utilisation and, with --runs, "
            "an evolution run's plots and summary; every page also as JSON under /api. "
            "Read-only unless --allow-writes, which adds revise and delete through the write "
            "gate. Listens on loopback unless --host says otherwise. A bad bank or a busy port: "
            "one line, exit 1."
        ),
    )
    p.add_argument("--bank", required=True, help=url_help)
    p.add_argument(
        "--host", default=ExplorerConfig.host, help=f"interface (default {ExplorerConfig.host})"
    )
    p.add_argument("--port", type=positive_int, default=8765, help="port (default 8765)")
    p.add_argument(
        "--runs", metavar="DIR", help="an evolution run folder (genmem evolve --out) to show"
    )
    p.add_argument(
        "--allow-writes",
        action="store_true",
        help="let the page revise and delete entries (read-only by default)",
    )
    add_gate_argument(p)
    p.add_argument("--json", action="store_true", help="print one JSON object once it is up")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from genmem.explorer import LOOPBACK_HOSTS, create_app
    from genmem.explorer.runs import find_runs
    from genmem.memory.location import open_bank

    if args.runs is not None:
        find_runs(args.runs)  # a missing folder is one line now, not an error page later
    bank = open_bank(args.bank)
    config = ExplorerConfig(
        allow_writes=args.allow_writes,
        runs=Path(args.runs) if args.runs else None,
        gate=gate_config(args),
        host=args.host,
    )
    app = create_app(bank, config)
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", 1)
    url = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}/"
    info = {
        "url": url,
        "bank": bank.bank_id,
        "entries": app.state.view.entries,
        "allow_writes": config.allow_writes,
    }
    exposed = (
        "" if args.host in LOOPBACK_HOSTS else f" (reachable from other hosts via {args.host})"
    )
    mode = "writes allowed" if config.allow_writes else "read-only"
    emit(info, as_json=args.json, text=f"{url} ({mode}){exposed}; Ctrl-C stops")
    sys.stdout.flush()
    # SIGTERM (kill, a supervisor) stops the server as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[sock])
    finally:
        bank.store.close()
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket, so a busy port is one line before anything is served."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock
