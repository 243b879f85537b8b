"""Benchmark: GSM8K queries through `genmem run` against `genmem serve`, one at a time vs N at once.

Starts the OpenAI-compatible server for the default model (transformers serve, continuous
batching), builds a throw-away copy of the GSM8K reference seed bank, then runs the same tasks
through ``genmem run --mode read_only --model <served spec>`` twice in this process: with
``--concurrency 1`` and with ``--concurrency N``, each into a fresh folder. SIDs are decoded by
the embedded policy in this process (one call at a time under its lock); every chat call goes to
the server. One task runs first, untimed, so both timed runs find the server and the SID policy
warm. Prints tasks/s of each run and their ratio (``speedup``); progress goes to stderr.

A CPU server answering N requests at once takes about N times as long for each, past the
client's default request timeout (120 s, then two retries whose abandoned requests the server
still computes): the bench gives the served chat model ``--timeout`` seconds (900) instead::

    python bench/concurrency.py                      # 16 tasks, concurrency 8, 64 tokens
    python bench/concurrency.py --tasks 2 --concurrency 2 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from genmem.cli import main as genmem
from genmem.experiments.seed_bank import SeedBankConfig, build_seed_bank
from genmem.memory.bank_copy import copy_bank_file
from genmem.policies.server import ServeConfig, start_server

SEED_BANK = SeedBankConfig(distill="reference", size=300, fit_size=300)
"""The bank the queries read: reference digests of 300 training problems (cached once)."""


def _say(message: str) -> None:
    print(f"[concurrency] {message}", file=sys.stderr, flush=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _bank(folder: Path) -> str:
    """A private copy of the cached seed bank in ``folder``; its URL."""
    seed = build_seed_bank(SEED_BANK)
    target = folder / "bank.db"
    copy_bank_file(Path(seed.dir) / "seed.db", target)
    return f"sqlite:///{target}?bank={seed.bank_id}"


@contextlib.contextmanager
def _client_timeout(seconds: float) -> Iterator[None]:
    """Served chat models built inside the block wait ``seconds`` for a reply."""
    from genmem.policies.vllm import TIMEOUT_ENV

    old = os.environ.get(TIMEOUT_ENV)
    os.environ[TIMEOUT_ENV] = str(seconds)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(TIMEOUT_ENV, None)
        else:
            os.environ[TIMEOUT_ENV] = old


def _run(spec: str, bank: str, out: Path, args: argparse.Namespace, *, tasks: int, n: int) -> dict:
    """One ``genmem run`` of the first ``tasks`` test problems with concurrency ``n``."""
    argv = [
        "run", "--bench", "gsm8k-test", "--limit", str(tasks), "--mode", "read_only",
        "--bank", bank, "--model", spec, "--max-steps", str(args.max_steps),
        "--max-new-tokens", str(args.max_new_tokens), "--concurrency", str(n), "--out", str(out),
    ]  # fmt: skip
    load = os.getloadavg()[0]
    started = time.perf_counter()
    # Its table is progress here: stdout is kept for the result.
    with contextlib.redirect_stdout(sys.stderr), _client_timeout(args.timeout):
        code = genmem(argv)
    seconds = time.perf_counter() - started
    if code != 0:
        raise SystemExit(f"genmem run exited {code}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {
        "concurrency": n,
        "tasks": tasks,
        "seconds": round(seconds, 2),
        "load_1min": [round(load, 2), round(os.getloadavg()[0], 2)],
        "tasks_per_s": round(tasks / seconds, 4),
        "errors": summary["errors"],
        "first_error": next((r["error"][:300] for r in rows if r.get("error")), None),
        "accuracy": summary["accuracy"],
        "answers": {r["id"]: r.get("answer") for r in rows},
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Serve the default model, run the tasks at concurrency 1 and N; the figures."""
    with tempfile.TemporaryDirectory(prefix="genmem-bench-concurrency-") as tmp:
        folder = Path(tmp)
        _say("building the bank copy")
        bank = _bank(folder)
        _say("starting genmem serve (default model, continuous batching)")
        config = ServeConfig(model="local", port=_free_port())
        with start_server(config, folder / "server.log") as server:
            _say(f"serving {server.spec}; one untimed warm-up task")
            _run(server.spec, bank, folder / "warmup", args, tasks=1, n=1)
            runs = []
            for n in (1, args.concurrency):
                _say(f"{args.tasks} tasks at concurrency {n}")
                runs.append(_run(server.spec, bank, folder / f"c{n}", args, tasks=args.tasks, n=n))
    one, many = runs
    same = sum(one["answers"].get(k) == v for k, v in many["answers"].items())
    for run in runs:
        run.pop("answers")
    return {
        "model": "local (SmolLM2-135M-Instruct, float32) via genmem serve",
        "tasks": args.tasks,
        "max_new_tokens": args.max_new_tokens,
        "max_steps": args.max_steps,
        "timeout": args.timeout,
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "sequential": one,
        "concurrent": many,
        "tasks_per_s": one["tasks_per_s"],
        "concurrent_tasks_per_s": many["tasks_per_s"],
        "speedup": round(many["tasks_per_s"] / one["tasks_per_s"], 3),
        "same_answers": same,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse flags, measure, print."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--tasks", type=int, default=16, help="GSM8K test problems per run (16)")
    p.add_argument("--concurrency", type=int, default=8, help="tasks at once, second run (8)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="reply cap of every call (64)")
    p.add_argument("--max-steps", type=int, default=1, help="StackPlanner steps per task (1)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per request (900)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if min(args.tasks, args.concurrency, args.max_new_tokens, args.max_steps, args.timeout) < 1:
        p.error("--tasks, --concurrency, --max-new-tokens, --max-steps and --timeout must be >= 1")
    result = measure(args)
    if args.json:
        print(json.dumps(result))
    else:
        one, many = result["sequential"], result["concurrent"]
        print(
            f"{result['tasks']} GSM8K tasks, {result['max_new_tokens']} tokens per reply: "
            f"concurrency 1 {one['tasks_per_s']:.3f} tasks/s ({one['seconds']:.0f} s), "
            f"concurrency {many['concurrency']} {many['tasks_per_s']:.3f} tasks/s "
            f"({many['seconds']:.0f} s): speedup {result['speedup']:.2f}x; "
            f"{result['same_answers']}/{result['tasks']} answers alike"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
