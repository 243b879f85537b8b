"""Tasks on a thread pool, each result handed back as it finishes (``--concurrency N``).

What runs at once is model calls: a served model (``genmem serve``, vLLM, a hosted API) answers
them in parallel, the embedded local model takes one at a time under its lock (safe, no faster).
The caller keeps everything else in its own thread: it writes each record as it comes back and
advances its progress bar, so files have one writer and a killed run leaves whole lines.

Two things must not run at once, and :func:`task_workers` turns them down to one worker with a
one-line warning: an environment whose ``start``/``finish`` hold one episode (a game, a shop:
:attr:`~genmem.envs.base.Environment.concurrent_tasks` is False), and a model that samples from
torch's global generator (the local model with a temperature), whose runs are seeded one by one
so a repeat or a resumed run draws the same samples.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from genmem.envs.base import Environment

__all__ = ["ConcurrencyWarning", "run_tasks", "samples_in_process", "task_workers"]

T = TypeVar("T")
R = TypeVar("R")


class ConcurrencyWarning(RuntimeWarning):
    """``--concurrency`` was turned down to 1 because the tasks cannot safely overlap."""


def run_tasks(
    fn: Callable[[T], R], items: Iterable[T], *, concurrency: int = 1
) -> Iterator[tuple[T, R]]:
    """Yield ``(item, fn(item))`` for every item, as each finishes, ``concurrency`` at a time.

    With one worker the items run here, in order, one after another. ``fn`` should turn a
    task's failure into that task's record; an exception it lets out (a fault) starts nothing
    new, lets the runs under way finish and be yielded, and is raised after them, as Ctrl-C
    (KeyboardInterrupt) is. A caller that stops iterating cancels what has not started.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency!r} must be >= 1")
    todo = list(items)
    if concurrency == 1 or len(todo) <= 1:
        for item in todo:
            yield item, fn(item)
        return
    from genmem.policies.local import import_transformers

    import_transformers()  # before the threads: its lazy first import is not thread-safe
    stop = threading.Event()

    def guarded(item: T) -> R:
        if stop.is_set():  # a fault in another worker, seen before this caller's loop saw it
            raise _NotStarted
        try:
            return fn(item)
        except BaseException:
            stop.set()
            raise

    # The workers never take a task on their own: this thread hands one out each time one
    # finishes. Ctrl-C reaches this thread only, and Python raises it here before it runs any
    # further code, so once it is pressed nothing new starts, however late this thread wakes.
    # (With every task queued at once an idle worker went on taking them meanwhile.)
    pool = ThreadPoolExecutor(min(concurrency, len(todo)), thread_name_prefix="genmem-task")
    queue = iter(todo)
    running: dict[Future[R], T] = {}
    error: BaseException | None = None

    def fill() -> None:
        """Hand the next tasks to the idle workers (none once stopping)."""
        for item in queue:
            running[pool.submit(guarded, item)] = item
            if stop.is_set() or len(running) >= concurrency:
                return

    try:
        while True:
            try:
                if not stop.is_set() and len(running) < concurrency:
                    fill()
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt as exc:  # Ctrl-C: keep what is running, start nothing
                if isinstance(error, KeyboardInterrupt):
                    raise  # a second Ctrl-C: stop waiting for the runs under way
                error = error or exc
                stop.set()
                continue
            for future in done:
                item = running.pop(future)
                exc = future.exception()
                if isinstance(exc, _NotStarted):
                    continue
                if exc is not None:
                    error = error or exc
                    continue
                if not stop.is_set():  # keep the workers busy while the caller takes this one
                    fill()
                yield item, future.result()
        if error is not None:
            raise error
    finally:
        stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


class _NotStarted(Exception):
    """A task skipped because the pool was stopping."""


def samples_in_process(chat: Any) -> bool:
    """Whether ``chat`` samples from torch's global generator (the local model, temperature > 0)."""
    from genmem.policies.chat_local import ChatLocal

    return isinstance(chat, ChatLocal) and chat.temperature > 0


def task_workers(
    concurrency: int,
    env: Environment | None = None,
    *,
    chat: Any = None,
    what: str = "tasks",
    blocked: str | None = None,
) -> int:
    """``concurrency``, or 1 with a :class:`ConcurrencyWarning` when ``what`` cannot overlap.

    They cannot when the caller says why (``blocked``), when ``env`` holds one episode at a
    time, or when ``chat`` samples in process (each run seeds torch's global generator, which
    concurrent runs would share).
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency!r} must be >= 1")
    if concurrency == 1:
        return 1
    why = blocked
    if why is None and env is not None and not env.concurrent_tasks:
        why = f"the {env.name} environment holds one episode at a time"
    if why is None and chat is not None and samples_in_process(chat):
        why = "the local model samples from torch's one seeded generator"
    if why is None:
        return concurrency
    warnings.warn(
        f"--concurrency {concurrency}: {what} run one at a time ({why})",
        ConcurrencyWarning,
        stacklevel=2,
    )
    return 1
