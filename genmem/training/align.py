"""Stage 1, SID alignment pretraining: SFT on the five text <-> SID mappings (Eq. 5-6).

``run_align`` loads a private float32 copy of the starting policy, adds the bank's SID tokens as
normal tokens (embeddings resized and initialised, see :mod:`genmem.policies.sid_tokens`),
builds the weighted mix of :mod:`genmem.training.align_data`, measures prefix accuracy at
top-1/5/50 on held-out and on trained queries, trains with TRL's ``SFTTrainer`` (loss on the
completion only: the SID for forward mappings, the text for reverse ones; AdamW, cosine
schedule), measures again and writes a policy directory that ``--model local:DIR`` loads.

The preset says what trains (every weight, or LoRA adapters plus the SID rows, see
:mod:`genmem.training.adapters`). A long run goes in pieces (:class:`~genmem.training.sft.Pieces`):
each piece writes a checkpoint and a usable policy, ``resume`` continues the same schedule, and
with ``curve_every`` a learning curve (:mod:`genmem.training.curve`) grows as it trains, starting
from the untrained policy's point at step 0.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from genmem.policies.local import Alignment, load_policy, outside_zero3, save_policy
from genmem.policies.policy_dir import write_info
from genmem.training.adapters import merge_adapter
from genmem.training.align_data import (
    AlignDataConfig,
    QueryPair,
    alignment_data,
    entry_sources,
    model_describer,
    with_queries,
)
from genmem.training.config import TrainConfig, partitions, training_device
from genmem.training.curve import CurvePoint, append_point, curve_callback, split_point
from genmem.training.policy_io import (
    START_DIR,
    TrainingRun,
    join_run,
    load_started,
    load_trainable,
    write_policy,
    zero3,
)
from genmem.training.sft import Pieces, logged_losses, sft_arguments, sft_train
from genmem.training.sid_eval import PrefixAccuracy, prefix_accuracy

__all__ = ["AlignReport", "run_align"]


class AlignReport(BaseModel):
    """What an alignment run did and measured."""

    out: str
    preset: str
    entries: int
    examples: int
    counts: dict[str, int]
    withheld: dict[str, int] = Field(
        default_factory=dict, description="Examples left out for carrying a held-out query."
    )
    adapter: str = Field(default="full", description="What trained: 'full' or 'lora'.")
    steps: int = Field(description="Optimiser steps done, all pieces.")
    piece_steps: int = Field(default=0, description="Steps this piece did.")
    complete: bool = Field(default=True, description="False: paused; --resume continues.")
    resumed_from: str | None = None
    seconds: float = Field(description="Training seconds of this piece.")
    steps_per_second: float
    examples_per_second: float = 0.0
    train_loss: float | None
    losses: list[float] = Field(description="Logged training loss, in step order.")
    loss_steps: list[int] = Field(default_factory=list, description="Step of each loss.")
    heldout: int = Field(description="Held-out query pairs scored.")
    before: dict[str, PrefixAccuracy] = Field(description="'heldout' / 'trained' -> accuracy.")
    after: dict[str, PrefixAccuracy] = Field(description="Empty when the run paused.")
    files: dict[str, str]


def _score(
    policy: Any, spec: Any, pairs: dict[str, list[dict[str, str]]], ks: list[int], progress: bool
) -> dict[str, PrefixAccuracy]:
    policy.model.eval()
    return {
        name: prefix_accuracy(policy, spec, p, ks, progress=progress, desc=f"accuracy ({name})")
        for name, p in pairs.items()
        if p
    }


def _sources(bank: Any, describer: str | None, progress: bool) -> list[Any]:
    """The bank's entry sources; descriptions written by the ``describer`` chat model if given."""
    if describer is None:
        return entry_sources(bank)
    from tqdm.auto import tqdm

    from genmem.policies.backends import capped_chat_model

    describe = model_describer(capped_chat_model(describer, 48, temperature=0.0))
    bar = tqdm(total=bank.stats().entries, desc="descriptions", unit="entry", disable=not progress)

    def counted(payload: str) -> str:
        bar.update(1)
        return describe(payload)

    with bar:
        return entry_sources(bank, counted)


def run_align(
    bank: Any,
    out: Path,
    *,
    preset: TrainConfig,
    model: str | None = None,
    max_steps: int | None = None,
    data: AlignDataConfig | None = None,
    eval_ks: tuple[int, ...] = (1, 5, 50),
    max_eval: int = 32,
    describer: str | None = None,
    queries: Sequence[QueryPair] = (),
    pieces: Pieces | None = None,
    curve_every: int = 0,
    progress: bool = True,
) -> AlignReport:
    """Train ``model`` (None: the embedded default) on ``bank``'s mappings; write it to ``out``.

    ``queries`` add (query -> entry) pairs to those the entries' metadata records, e.g. for a
    bank built from plain texts; ``data.heldout`` is the share of all queries kept out of
    training to measure the alignment (0: train on everything, measure nothing held out).

    Under a launcher every process calls it: the main process builds the data and scores the
    untrained policy, all of them train, the main one writes every file and scores the result.
    """
    pieces = pieces or Pieces()
    ranks, preset = join_run(preset)
    if ranks.launched and pieces.finish:
        raise ValueError("--finish merges a checkpoint in one process; run it without a launcher")
    run = TrainingRun.start(out, "align", preset, ranks)
    device = training_device(preset, ranks.local_rank)
    data_cfg = data or AlignDataConfig(seed=preset.seed)
    ks = sorted(set(eval_ks) | {1, 5})
    again = pieces.resume or pieces.finish

    def prepare(policy: Any) -> tuple[Any, dict[str, PrefixAccuracy]]:
        """The data mix and the untrained policy's accuracy (main process only)."""
        sources = _sources(bank, describer, progress)
        if queries:
            sources = with_queries(sources, queries, bank)
        mix = alignment_data(sources, policy.tokenizer, data_cfg)
        (out / "heldout_pairs.jsonl").write_text(
            "".join(json.dumps(p) + "\n" for p in mix.heldout), encoding="utf-8"
        )
        pairs = _eval_pairs(mix, max_eval)
        return mix, _before(policy, bank.spec, pairs, ks, out, again, progress)

    if ranks.launched:
        with ranks.main_first() as main:
            prepared = None
            if main:
                with outside_zero3():
                    start = load_trainable(model, bank, device)
                    prepared = prepare(start)
                    save_policy(start, out / START_DIR)
                    del start
        mix, before = ranks.broadcast(prepared)
        args = sft_arguments(preset, out, "align", max_steps, progress, pieces=pieces, started=True)
        policy = load_started(out, device, partitioned=partitions(preset))
    else:
        # on a GPU from the start, so the accuracy passes before, during and after run there
        policy = load_trainable(model, bank, device)
        mix, before = prepare(policy)
        args = sft_arguments(preset, out, "align", max_steps, progress, pieces=pieces)
    eval_pairs = _eval_pairs(mix, max_eval)
    callbacks = []
    if curve_every and not pieces.finish:
        if not pieces.resume and ranks.is_main:
            (out / "curve.jsonl").unlink(missing_ok=True)
            start_point = {name: split_point(acc) for name, acc in before.items()}
            zero = CurvePoint(step=0, seconds=0, loss=None, splits=start_point)
            append_point(out / "curve.jsonl", zero)
        callbacks.append(curve_callback(policy, bank.spec, eval_pairs, out, curve_every, ranks))
    pairs = [(x.prompt, x.completion) for x in mix.train]
    piece = sft_train(
        policy, pairs, preset, out, args,
        spec=bank.spec, pieces=pieces, callbacks=callbacks, ranks=ranks,
    )  # fmt: skip
    merge_adapter(policy)
    trainer, seconds = piece.trainer, piece.seconds
    scored = pieces.finish or not piece.paused
    loss_steps, losses = logged_losses(trainer)
    steps = int(trainer.state.global_step)
    first = int(piece.resumed_from.rsplit("-", 1)[-1]) if piece.resumed_from else 0
    notes = {"stage": "align", "counts": mix.counts, "adapter": preset.adapter}
    policy.info = _aligned(policy.info, bank, steps, len(mix.train), before)
    files = write_policy(policy, out, run, notes=notes, trainer=trainer, ranks=ranks)
    after: dict[str, PrefixAccuracy] = {}
    if scored and ranks.is_main:
        with _scorable(policy, out, trainer, device) as whole:
            after = _score(whole, bank.spec, eval_pairs, ks, progress)
        if after.get("heldout") is not None:
            policy.info = _aligned(policy.info, bank, steps, len(mix.train), after)
            write_info(out, policy.info)
    done = steps - first
    report = AlignReport(
        out=str(out),
        preset=preset.name,
        adapter=preset.adapter,
        entries=mix.entries,
        examples=len(mix.train),
        counts=mix.counts,
        withheld=mix.withheld,
        steps=steps,
        piece_steps=done,
        complete=not piece.paused,
        resumed_from=piece.resumed_from,
        seconds=round(seconds, 2),
        steps_per_second=round(done / seconds, 4) if seconds > 0 else 0.0,
        examples_per_second=(
            round(done * preset.stage_batch("align") / seconds, 4) if seconds else 0.0
        ),
        train_loss=sum(losses) / len(losses) if losses else None,
        losses=losses,
        loss_steps=loss_steps,
        heldout=len(eval_pairs["heldout"]),
        before=before,
        after=after,
        files=files,
    )
    if not ranks.is_main:
        return report
    if after:
        report.files.update(_plots(report, out))
    if curve_every:
        report.files["curve"] = str(out / "curve.jsonl")
        report.files["curve_plot"] = str(out / "curve.png")
    if ranks.launched:
        shutil.rmtree(out / START_DIR, ignore_errors=True)
    body = report.model_dump(mode="json")
    if piece.paused:
        run.pause(body)
    else:
        run.finish(body)
    return report


def _eval_pairs(mix: Any, max_eval: int) -> dict[str, list[dict[str, str]]]:
    return {"heldout": mix.heldout[:max_eval], "trained": mix.trained_queries[:max_eval]}


def _aligned(
    info: Any, bank: Any, steps: int, examples: int, acc: dict[str, PrefixAccuracy]
) -> Any:
    """``info`` recording what the policy was aligned to, with its held-out accuracy."""
    held = acc.get("heldout")
    alignment = Alignment(
        bank_id=bank.bank_id,
        codebook_hash=bank.codebook_hash,
        steps=steps,
        examples=examples,
        heldout={} if held is None else held.model_dump(mode="json"),
        at=time.time(),
    )
    return info.model_copy(update={"alignment": alignment})


@contextlib.contextmanager
def _scorable(policy: Any, out: Path, trainer: Any, device: str) -> Iterator[Any]:
    """The trained policy whole on one process: itself, or under ZeRO-3 the saved copy."""
    if not zero3(trainer):
        yield policy
        return
    with outside_zero3():
        saved = load_policy(out, fresh=True, dtype="float32")
    if device != "cpu":
        saved.model.to(device)
    yield saved


def _before(
    policy: Any,
    spec: Any,
    pairs: dict[str, list[dict[str, str]]],
    ks: list[int],
    out: Path,
    resume: bool,
    progress: bool,
) -> dict[str, PrefixAccuracy]:
    """The untrained policy's accuracy: measured once, kept in ``before.json`` for later pieces."""
    from genmem.envs.bundled import replace_text

    path = out / "before.json"
    if resume and path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        return {name: PrefixAccuracy.model_validate(acc) for name, acc in saved.items()}
    before = _score(policy, spec, pairs, ks, progress)
    body = {name: acc.model_dump(mode="json") for name, acc in before.items()}
    replace_text(path, json.dumps(body) + "\n")  # a kill leaves all of it or none
    return before


def _plots(report: AlignReport, out: Path) -> dict[str, str]:
    """``alignment.png``: loss per step, and full-SID / level-1 accuracy before and after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    ax_loss.plot(report.loss_steps or range(1, len(report.losses) + 1), report.losses, marker=".")
    ax_loss.set(xlabel="step", ylabel="SFT loss", title="alignment loss")
    labels, befores, afters = [], [], []
    for split, acc in report.after.items():
        for k in acc.ks:
            for depth in (1, len(acc.prefix[k])):
                labels.append(f"{split} L1:{depth}@{k}")
                befores.append(report.before[split].prefix[k][depth - 1])
                afters.append(acc.prefix[k][depth - 1])
    xs = range(len(labels))
    ax_acc.bar([x - 0.2 for x in xs], befores, width=0.4, label="before")
    ax_acc.bar([x + 0.2 for x in xs], afters, width=0.4, label="after")
    ax_acc.set_xticks(list(xs), labels, fontsize=6, rotation=60, ha="right")
    ax_acc.set(ylim=(0, 1), ylabel="prefix accuracy", title="SID prefix accuracy")
    ax_acc.legend(fontsize=7)
    fig.tight_layout()
    path = out / "alignment.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"plot": str(path)}
