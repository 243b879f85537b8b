"""A writer killed with SIGKILL at random moments: the bank must hold exactly what it committed.

:func:`kill_trials` runs ``trials`` times: start a writer process on the bank (this module run as
``python -m tests.memory._faults URL SEED``), let it write for a random time, ``kill -9`` it, then
open the bank and compare. The writer prints ``intent <n> <payload>`` before each write and
``done <n> <version>`` after the bank returned, so the parent knows which writes were committed
and which one (at most) was under way when the kill came. After every kill:

- the bank opens and :meth:`~genmem.memory.bank.Bank.check` finds nothing;
- every committed write is in the history, with its payload and version (``lost``);
- the history holds nothing else from the writer but, possibly, the one write under way
  (``phantoms``: writes that were never intended).

The writer inserts into empty slots, revises and deletes, on a few SIDs, with payloads no other
write has. Killing a process at a random moment lands anywhere: between writes, inside the
store's transaction, during the commit.

Used by ``tests/memory/test_stress.py`` (a few kills) and ``bench/stress.py`` (50 per backend).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.memory._stress import STRESS_SPEC, stress_sids, written_version

__all__ = ["FaultResult", "kill_trials"]


@dataclass
class FaultResult:
    """What the kills did and what the checks found (``lost``, ``phantoms``, ``problems`` must
    be 0)."""

    backend: str
    trials: int
    committed: int = 0
    """Writes the writers reported done, over all trials."""
    in_flight_kept: int = 0
    """Kills that came during a write which the bank then held (committed, not yet reported)."""
    in_flight_dropped: int = 0
    """Kills that came during a write which the bank did not hold (rolled back)."""
    lost: int = 0
    phantoms: int = 0
    problems: int = 0
    """What ``check()`` found, over all trials."""
    examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return asdict(self)


def _write_forever(url: str, seed: int) -> None:
    """The writer: mixed writes until killed, each announced before and reported after."""
    from genmem.errors import GenMemError
    from genmem.memory.location import open_bank

    bank = open_bank(url)
    rng = random.Random(seed)
    sids = stress_sids(4)
    print("ready", flush=True)
    n = 0
    while True:
        sid = rng.choice(sids)
        entry = bank.get(sid)
        text = "" if entry is not None and rng.random() < 0.15 else f"seed {seed} write {n}"
        print(f"intent {n} {sid} {text or '-'}", flush=True)
        try:
            if entry is None:
                result = bank.insert(sid, text, actor=f"k{seed}")
            else:
                result = bank.revise(sid, text, expected_version=entry.version, actor=f"k{seed}")
        except GenMemError as exc:
            print(f"refused {n} {type(exc).__name__}", flush=True)
        else:
            number = written_version(result.outcome, result.version_before, result.version_after)
            print(f"done {n} {number}", flush=True)
        n += 1


def _trial(url: str, seed: int, after: float, timeout: float) -> list[str]:
    """Run one writer, kill it ``after`` seconds past its start, return what it printed."""
    argv = [sys.executable, "-m", "tests.memory._faults", url, str(seed)]
    root = str(Path(__file__).resolve().parents[2])  # where ``tests`` imports from
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if ready.strip() != "ready":
            proc.kill()
            proc.wait(timeout)
            err.seek(0)
            raise RuntimeError(f"the writer did not start: {ready!r} {err.read()[-500:]}")
        time.sleep(after)
        os.kill(proc.pid, signal.SIGKILL)
        out = proc.stdout.read()  # the same buffered reader: nothing read past is lost
        proc.wait(timeout)
    return out.splitlines()


def kill_trials(
    url: str,
    *,
    trials: int = 50,
    seed: int = 0,
    max_after: float = 1.0,
    backend: str = "",
    timeout: float = 60.0,
) -> FaultResult:
    """``trials`` writers on the bank at ``url``, each killed within ``max_after`` seconds."""
    from genmem.memory.location import open_bank

    rng = random.Random(f"kill:{seed}")
    result = FaultResult(backend or url.split(":", 1)[0], trials)
    for trial in range(trials):
        writer = seed * 10_000 + trial
        lines = _trial(url, writer, rng.uniform(0.0, max_after), timeout)
        bank = open_bank(url)  # a fresh open, as after a crash
        problems = bank.check(raise_on_error=False)
        result.problems += len(problems)
        result.examples += problems[:2]
        _compare(bank, writer, lines, result)
    result.examples = result.examples[:5]
    return result


def _compare(bank: Any, writer: int, lines: list[str], result: FaultResult) -> None:
    """Count lost, phantom and in-flight writes of ``writer`` (what it printed) in ``bank``."""
    intents: dict[int, tuple[str, str]] = {}
    settled: dict[int, int | None] = {}  # done -> its version; refused -> None
    for line in lines:
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[0] == "intent":
            intents[int(parts[1])] = (parts[2], "" if parts[3] == "-" else parts[3])
        elif len(parts) == 3 and parts[0] in ("done", "refused"):
            settled[int(parts[1])] = int(parts[2]) if parts[0] == "done" else None
    actor = f"k{writer}"
    stored = {(v.sid, v.version): v for sid in stress_sids(4) for v in bank.history(sid)
              if v.actor == actor}  # fmt: skip
    done = {n: v for n, v in settled.items() if v is not None}
    result.committed += len(done)
    for n, version in done.items():
        sid, text = intents[n]
        found = stored.pop((sid, version), None)
        if found is None or found.payload != text or found.deleted != (text == ""):
            result.lost += 1
            result.examples.append(f"write {n} of {actor} ({sid} v{version}) is not stored")
    pending = [n for n in intents if n not in settled]
    if len(pending) > 1:
        result.problems += 1
        result.examples.append(f"{actor} printed {len(pending)} writes under way, not at most 1")
    if pending:
        sid, text = intents[pending[-1]]
        kept = [k for k, v in stored.items()
                if k[0] == sid and v.payload == text and v.deleted == (text == "")]  # fmt: skip
        for key in kept[:1]:
            stored.pop(key)
        result.in_flight_kept += bool(kept)
        result.in_flight_dropped += not kept
    result.phantoms += len(stored)
    result.examples += [f"{actor} left {sid} v{v} that it never wrote" for sid, v in stored]


if __name__ == "__main__":  # the writer of a trial
    if len(sys.argv) != 3:
        raise SystemExit(f"usage: python -m tests.memory._faults URL SEED (space {STRESS_SPEC})")
    _write_forever(sys.argv[1], int(sys.argv[2]))
