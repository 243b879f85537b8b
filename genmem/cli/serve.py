"""`genmem serve`: an OpenAI-compatible server for the default model or a policy directory."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from genmem.cli.common import emit
from genmem.cli.fields import add_field_flags, model_from_args
from genmem.policies.server import ServeConfig

__all__ = ["register"]

_FLAGS = ("model", "host", "port", "continuous_batching", "device", "dtype")
"""The fields of :class:`ServeConfig` that are flags (the rest keep their defaults)."""


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``genmem serve``."""
    p = sub.add_parser(
        "serve",
        help="serve a model over an OpenAI-compatible API on 127.0.0.1 (transformers serve)",
        description=(
            "Starts transformers' own server (chat and text completions, continuous batching) "
            "for --model, waits until it answers, prints the model spec the other commands take "
            "(--model vllm:http://127.0.0.1:PORT/v1#DIR) and serves until Ctrl-C. It ignores "
            "tool and JSON-schema requests; roles that use them get text. A bad model or a busy "
            "port: one line, exit 1."
        ),
    )
    add_field_flags(p, ServeConfig, _FLAGS)
    p.add_argument("--log", help="write the server's log here (default: a temporary file)")
    p.add_argument("--json", action="store_true", help="print one JSON object once it is up")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from genmem.policies.server import start_server

    config = model_from_args(ServeConfig, args, _FLAGS)
    server = start_server(config, Path(args.log) if args.log else None)
    # A SIGTERM (kill, a supervisor) stops the server as Ctrl-C does, never leaving it orphaned.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    info = {"spec": server.spec, "url": server.base_url, "model": server.model}
    emit(info | {"pid": server.process.pid}, as_json=args.json, text=f"{server.spec}")
    sys.stdout.flush()
    try:
        while server.process.poll() is None:
            time.sleep(0.5)
    finally:
        server.stop()
    return 0 if server.process.returncode in (0, -signal.SIGTERM) else 1
