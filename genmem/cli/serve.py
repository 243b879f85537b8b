"""`genmem serve`: an OpenAI-compatible server for the default model or a policy directory."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from genmem.cli.common import emit, positive_int
from genmem.policies.backends import DEFAULT_MODEL_SPEC

__all__ = ["register"]


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
    p.add_argument("--model", default=DEFAULT_MODEL_SPEC, help="local (default), local:DIR or DIR")
    p.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    p.add_argument("--port", type=positive_int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--no-continuous-batching",
        dest="continuous_batching",
        action="store_false",
        help="answer one request at a time",
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:0, auto")
    p.add_argument("--dtype", default="float32", help="float32 (default), bfloat16, auto")
    p.add_argument("--log", help="write the server's log here (default: a temporary file)")
    p.add_argument("--json", action="store_true", help="print one JSON object once it is up")
    p.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from pathlib import Path

    from genmem.policies.server import ServeConfig, start_server

    config = ServeConfig(
        model=args.model,
        host=args.host,
        port=args.port,
        continuous_batching=args.continuous_batching,
        device=args.device,
        dtype=args.dtype,
    )
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
