"""A bank writer in a child process, for the tests of writers in several processes and crashes.

The child opens the bank a URL names (any backend) and revises the given SIDs round-robin,
printing the index of each committed write, so a test can count progress or kill it mid-run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_SCRIPT = """
import sys
import time
from genmem.memory.location import open_bank
url, writer, n, sids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
bank = open_bank(url)
for i in range(n):
    bank.revise(sids[i % len(sids)], f"p{writer} r{i}", actor=f"p{writer}")
    print(i, flush=True)
"""


def spawn_writer(
    url: str, writer: int, n: int, sids: Sequence[str], **popen: Any
) -> subprocess.Popen[bytes]:
    """Start a process that makes ``n`` revisions ``"p<writer> r<i>"`` to the bank at ``url``."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = [sys.executable, "-c", _SCRIPT, url, str(writer), str(n), *sids]
    return subprocess.Popen(argv, env=env, **popen)


def kill_after(url: str, writes: int, sids: Sequence[str], timeout_s: float = 60.0) -> int:
    """Run one writer until it has committed ``writes`` revisions, SIGKILL it, return the count."""
    proc = spawn_writer(url, 0, 10**9, sids, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout_s
    done = 0
    try:
        while done < writes and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer died: {proc.stderr.read().decode()}")
            done = int(line) + 1
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    return done
