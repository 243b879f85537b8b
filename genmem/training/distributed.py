"""The processes of one training run: which one this is, and how they agree.

A stage launched by ``torchrun`` or ``accelerate launch`` runs once per process (one per GPU,
or two on a CPU for the tests). Everything a run writes into its ``--out`` folder has exactly
one writer, the main process; work that needs doing once (copying the bank, saving the starting
weights, scoring before training, running the no-memory baselines, collecting traces) is done
once, or split over the processes and gathered, and every process then holds the same inputs.

:func:`start_processes` joins the process group before the Trainer's arguments exist (they need
it for DeepSpeed's partitioned loading), and returns a :class:`Ranks` whose collectives every
process must call the same number of times. A single process (no launcher) gets a
:class:`Ranks` whose collectives return at once.

DeepSpeed on a CPU (``DS_ACCELERATOR=cpu``, the CI's ZeRO-3 runs): accelerate picks no process
group backend when no GPU is present, so it would count one process per rank; the group is
started here with gloo and the Trainer is told to use it (``use_configured_state``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from genmem.errors import RankFailed

__all__ = [
    "LAUNCH_HINT",
    "Ranks",
    "end_processes",
    "launched",
    "shard",
    "start_processes",
    "unshard",
]

T = TypeVar("T")

LAUNCH_HINT = (
    "torchrun --nproc_per_node N -m genmem.cli train ... (or accelerate launch --config_file "
    "genmem/training/configs/accelerate_zero3.yaml -m genmem.cli train ...)"
)


def launched() -> bool:
    """Whether a launcher (torchrun, accelerate launch, deepspeed) started this process."""
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


@dataclass(frozen=True)
class Ranks:
    """This process's place in the run, and collectives over all of its processes."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    launched: bool = False
    """Started by a launcher: the Trainer joins the process group started here."""

    @property
    def is_main(self) -> bool:
        """The process that writes every shared file."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """More than one process."""
        return self.world > 1

    def barrier(self) -> None:
        """Wait until every process gets here."""
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def gather(self, value: T) -> list[T]:
        """``value`` of every process, in rank order (every process gets the list)."""
        if not self.distributed:
            return [value]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, value)
        return out

    def broadcast(self, value: T) -> T:
        """The main process's ``value`` on every process (others pass anything, e.g. None)."""
        if not self.distributed:
            return value
        import torch.distributed as dist

        box = [value if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    @contextlib.contextmanager
    def main_first(self) -> Iterator[bool]:
        """Run the block on the main process while the others wait; yields ``is_main``.

        An error in the main process's block reaches every process as the same exception
        (the others raise it too instead of waiting on a process that has left).
        """
        error: BaseException | None = None
        if self.is_main:
            try:
                yield True
            except Exception as exc:
                error = exc
        else:
            yield False
        self.agree(error if self.is_main else None)
        if error is not None:
            raise error

    def agree(self, error: BaseException | None) -> None:
        """Raise the first process's error on every process; return when none had one.

        Call it on every process at the same point. An error that cannot be pickled reaches
        the others as :class:`RankFailed` naming it.
        """
        if not self.distributed:
            return
        errors = self.gather(_portable(error))
        first = next(((r, e) for r, e in enumerate(errors) if e is not None), None)
        if first is None:
            return
        rank, exc = first
        if rank != self.rank or error is None:
            raise exc
        # this process's own error: its caller raises the original (with its traceback)


def _portable(error: BaseException | None) -> BaseException | None:
    """``error`` if it survives pickling unchanged in type and text, else a RankFailed."""
    if error is None:
        return None
    try:
        back = pickle.loads(pickle.dumps(error))
        if type(back) is type(error) and str(back) == str(error):
            return error
    except Exception:  # an error whose pickle fails is described instead
        pass
    rank = int(os.environ.get("RANK", "0"))
    return RankFailed(f"process {rank} failed: {type(error).__name__}: {error}", rank=rank)


def shard(items: Sequence[T], ranks: Ranks) -> list[T]:
    """This process's share of ``items`` (every ``world``-th, from ``rank``)."""
    return list(items[ranks.rank :: ranks.world])


def unshard(parts: Sequence[Sequence[T]], total: int) -> list[T]:
    """The items :func:`shard` split over ``len(parts)`` processes, back in their first order."""
    world = len(parts)
    out: list[Any] = [None] * total
    for rank, part in enumerate(parts):
        for j, item in enumerate(part):
            out[rank + j * world] = item
    return out


def start_processes(*, deepspeed: bool, use_cpu: bool) -> Ranks:
    """Join the run's process group (when launched) and say which process this is.

    Raises:
        ValueError: DeepSpeed was asked for without a launcher (it needs one process per GPU).
    """
    if not launched():
        if deepspeed:
            raise ValueError(
                f"a DeepSpeed preset runs under a launcher, one process per GPU: {LAUNCH_HINT}"
            )
        return Ranks()
    from accelerate import PartialState
    from accelerate.state import AcceleratorState

    # A stage run before in this process left its Trainer's accelerator state (with its
    # DeepSpeed plugin); the next Trainer makes its own on the same process group.
    AcceleratorState._reset_state()
    if deepspeed:
        os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
        import torch

        # Without a GPU accelerate would pick no backend and count one process per rank.
        state = PartialState(**({} if torch.cuda.is_available() else {"backend": "gloo"}))
    else:
        state = PartialState(cpu=use_cpu)
    return Ranks(state.process_index, state.num_processes, state.local_process_index, True)


def end_processes() -> None:
    """Leave the process group (a launched process that exits without it can abort at exit)."""
    import sys

    if "torch.distributed" not in sys.modules:  # never joined one: no need to import torch
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
