"""What a finished evolution run's files become: scores with intervals, pairs, plots, summary.

:func:`summarise` reads one run's ``stream.jsonl`` and ``probes.jsonl`` (the records, not what
is in memory, so a resumed run summarises everything it did), its bank's event log and
snapshots, and writes ``summary.json`` / ``summary.md``, the per-block logs and the plots;
:func:`pool` does the same over the runs of several decoding seeds. The statistics themselves
are in :mod:`genmem.experiments.evolution_stats`, the Markdown in
:mod:`genmem.experiments.evolution_report`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from genmem.envs.base import Environment, Task
from genmem.envs.bundled import jsonl_rows
from genmem.envs.stats import IntervalConfig
from genmem.experiments.evolution_config import (
    ABLATION,
    EvolveConfig,
    EvolveSummary,
    PooledEvolveSummary,
    StreamRecord,
)
from genmem.experiments.evolution_report import summary_markdown
from genmem.experiments.evolution_runner import EvolveRunner
from genmem.experiments.evolution_stats import (
    BlockOperations,
    CheckpointPair,
    CheckpointScore,
    ProbeRecord,
    checkpoint_scores,
    paired_checkpoints,
)

__all__ = ["pool", "summarise"]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _block_logs(
    work: Any, config: EvolveConfig, stream: list[StreamRecord], out: Path
) -> tuple[list[BlockOperations], dict[str, int], list[tuple[int, str, str]]]:
    """Operations per block (written to ``logs/block<c>.jsonl``), events per SID, writes."""
    from genmem.experiments.evolution_stats import block_operations

    seqs = {b.bank_id.rsplit("@t", 1)[1]: b.snapshot_seq or 0 for b in work.snapshots()}
    history: dict[str, dict[int, str]] = {}

    def payload(sid: str, version: int | None) -> str:
        if version is None:
            return ""
        if sid not in history:
            history[sid] = {v.version: ("" if v.deleted else v.payload) for v in work.history(sid)}
        return history[sid].get(version, "")

    blocks, counts = [], {}
    index_of = {r.update.get("seq"): r.index for r in stream if r.update}
    writes = []
    for c in range(1, config.blocks + 1):
        lo, hi = seqs.get(str(c - 1), 0), seqs.get(str(c), 0)
        events = [e for e in work.events(after_seq=lo) if e.seq <= hi]
        with (out / "logs" / f"block{c}.jsonl").open("w", encoding="utf-8") as fh:
            for e in events:
                fh.write(e.model_dump_json() + "\n")
        pairs = [
            (payload(e.sid, e.version_before), payload(e.sid, e.version_after))
            for e in events
            if e.outcome in ("revised", "deleted")
        ]
        queries = sum(1 for r in stream if r.block == c)
        blocks.append(block_operations(c, max(queries, len(events)), events, pairs))
        for e in events:
            counts[e.sid] = counts.get(e.sid, 0) + 1
            writes.append((index_of.get(e.seq, -1), e.sid, e.outcome))
    return blocks, counts, writes


def _invariance(
    runner: EvolveRunner, config: EvolveConfig, probe: list[Task], first: Any, last: Any
) -> dict[str, Any]:
    """Addresses before vs after the stream: SID generation, and each baseline's top-1."""
    from genmem.experiments.methods import PayloadAddresser
    from genmem.graph.addressing import local_generator
    from genmem.policies.prompts import retriever_user_message

    contexts = [retriever_user_message(t.query) for t in probe]
    result: dict[str, Any] = {"queries": len(contexts)}
    # "all": the policy's own addresses, which nothing in the bank can move; the run's setting
    # ("occupied" by default) also follows the occupied set, which inserts (not revisions) grow.
    for allowed in dict.fromkeys(("all", config.allowed)):
        key = f"sid_{allowed}"
        setting = SimpleNamespace(allowed=allowed)
        try:
            before = local_generator(runner.chat, "MemRetriever")(first, setting)
            after = local_generator(runner.chat, "MemRetriever")(last, setting)
        except TypeError as exc:  # a served model: no local decoder to ask
            result[key] = {"skipped": str(exc)}
            continue
        k = config.candidates
        a = [[c.sid for c in cands] for cands in before.generate_batch(contexts, k)]
        b = [[c.sid for c in cands] for cands in after.generate_batch(contexts, k)]
        same = [x == y for x, y in zip(a, b, strict=True)]
        result[key] = {
            "identical_fraction": _mean([float(x) for x in same]),
            "changed_ids": [t.id for t, x in zip(probe, same, strict=True) if not x],
        }
    for kind in ("tfidf", "dense"):
        if kind not in config.methods:
            continue
        tops = []
        for bank in (first, last):
            ranked = PayloadAddresser(bank, kind).generate_batch(contexts, 1)  # type: ignore[arg-type]
            tops.append([r[0].sid if r else None for r in ranked])
        changed = [x != y for x, y in zip(tops[0], tops[1], strict=True)]
        result[kind] = {"top1_changed_fraction": _mean([float(c) for c in changed])}
    return result


def summarise(
    env: Environment,
    config: EvolveConfig,
    out: Path,
    bank_url: str,
    work_url: str,
    probe: list[Task],
    stream_tasks: list[Task],
    snap_urls: dict[int, str],
    started: float,
    runner: EvolveRunner,
    intervals: IntervalConfig,
    note: str | None,
) -> EvolveSummary:
    """Scores per checkpoint, operations per block, invariance, plots and ``summary.json``."""
    from genmem.experiments import evolution_plots as plots
    from genmem.experiments.evolution_stats import top_share
    from genmem.memory.location import open_bank

    work = open_bank(work_url)
    stream = [StreamRecord.model_validate(r) for r in jsonl_rows(out / "stream.jsonl")]
    probes = [ProbeRecord.model_validate(r) for r in jsonl_rows(out / "probes.jsonl")]
    checkpoints, paired = _probe_stats(config, probes, work.spec.levels, intervals)
    blocks, counts, writes = _block_logs(work, config, stream, out)
    first, last = open_bank(snap_urls[0]), open_bank(snap_urls[config.blocks])
    invariance = _invariance(runner, config, probe, first, last)
    reads = [(r.index, sid) for r in stream for sid in r.retrieved[:1]]
    files = _probe_plots(config, checkpoints, paired, out) | {
        "sid_lineage": plots.plot_sid_lineage(reads, writes, out / "sid_lineage.png"),
        "update_concentration": plots.plot_update_concentration(
            counts, out / "update_concentration.png"
        ),
        "operation_mix": plots.plot_operation_mix(blocks, out / "operation_mix.png"),
        "edit_distance": plots.plot_edit_distance(blocks, out / "edit_distance.png"),
    }
    summary = EvolveSummary(
        bench=env.name,
        config=config,
        input_bank=bank_url,
        work_bank=work_url,
        probe_ids=[t.id for t in probe],
        stream_ids=[t.id for t in stream_tasks],
        checkpoints=checkpoints,
        paired=paired,
        blocks=blocks,
        stream_score_per_block=_stream_means(stream, config.blocks),
        invariance=invariance,
        concentration={
            "active_sids": float(len(counts)),
            "events": float(sum(counts.values())),
            "top20_share": top_share(counts, 0.2),
        },
        ablation=_ablation(config, checkpoints),
        snapshots=[snap_urls[c] for c in sorted(snap_urls)],
        files={k: str(v) for k, v in files.items()}
        | {k: str(out / k) for k in ("stream.jsonl", "probes.jsonl", "logs", "snapshots")},
        seconds=round(time.perf_counter() - started, 1),
        intervals=intervals,
        note=note,
    )
    _write_summary(out, summary)
    return summary


def pool(
    env: Environment,
    config: EvolveConfig,
    out: Path,
    runs: Mapping[int, EvolveSummary],
    intervals: IntervalConfig,
    started: float,
) -> PooledEvolveSummary:
    """One summary over the seeds' runs: probe results pooled by task, seeds kept together."""
    from genmem.memory.location import open_bank

    probes: list[ProbeRecord] = []
    stream: list[StreamRecord] = []
    for seed in runs:
        folder = out / f"seed{seed}"
        probes += [ProbeRecord.model_validate(r) for r in jsonl_rows(folder / "probes.jsonl")]
        stream += [StreamRecord.model_validate(r) for r in jsonl_rows(folder / "stream.jsonl")]
    first = next(iter(runs.values()))
    levels = open_bank(first.work_bank).spec.levels
    checkpoints, paired = _probe_stats(config, probes, levels, intervals)
    files = _probe_plots(config, checkpoints, paired, out)
    summary = PooledEvolveSummary(
        bench=env.name,
        config=config,
        decode_seeds=list(runs),
        seed_runs={str(s): str(out / f"seed{s}" / "summary.json") for s in runs},
        probe_ids=first.probe_ids,
        checkpoints=checkpoints,
        paired=paired,
        stream_score_per_block=_stream_means(stream, config.blocks),
        ablation=_ablation(config, checkpoints),
        files={k: str(v) for k, v in files.items()},
        seconds=round(time.perf_counter() - started, 1),
        intervals=intervals,
        note=(
            f"{len(runs)} runs, one per decoding seed ({', '.join(map(str, runs))}), each in "
            "seed<s>/ with its own stream, bank and snapshots; probe values are averaged over a "
            "task's seeds and the intervals resample tasks (seeds of a task kept together)."
        ),
    )
    _write_summary(out, summary)
    return summary


def _write_summary(out: Path, summary: EvolveSummary | PooledEvolveSummary) -> None:
    (out / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")


def _probe_stats(
    config: EvolveConfig, probes: list[ProbeRecord], levels: int, intervals: IntervalConfig
) -> tuple[list[CheckpointScore], list[CheckpointPair]]:
    """Probe means with intervals per method and checkpoint; sid minus frozen when both ran."""
    shape = {"checkpoints": config.blocks + 1, "block_size": config.block_size, "levels": levels}
    checkpoints = checkpoint_scores(probes, methods=config.methods, intervals=intervals, **shape)
    paired = []
    if "sid" in config.methods and "frozen" in config.methods:
        paired = paired_checkpoints(probes, intervals=intervals, **shape)
    return checkpoints, paired


def _probe_plots(
    config: EvolveConfig,
    checkpoints: list[CheckpointScore],
    paired: list[CheckpointPair],
    out: Path,
) -> dict[str, Path]:
    """The probe curves with interval bands and, when paired, the sid - frozen curve."""
    from genmem.experiments import evolution_plots as plots

    curves = {
        m: [
            (s.processed, s.score, *s.ci.get("score", (s.score, s.score)))
            for s in checkpoints
            if s.method == m
        ]
        for m in config.methods
    }
    files = {"probe_curves": plots.plot_probe_curves(curves, out / "probe_curves.png")}
    if paired:
        points = [(p.processed, p.paired["score"].diff, *p.paired["score"].ci) for p in paired]
        files["sid_minus_frozen"] = plots.plot_paired_difference(
            points, out / "sid_minus_frozen.png", label="sid - frozen"
        )
    return files


def _stream_means(stream: Sequence[StreamRecord], blocks: int) -> list[float | None]:
    """Mean stream score per block, a query that errored counting 0."""
    return [
        _mean([0.0 if r.score is None else r.score for r in stream if r.block == c])
        for c in range(1, blocks + 1)
    ]


def _ablation(config: EvolveConfig, checkpoints: list[CheckpointScore]) -> dict[str, float | None]:
    """The final probe score of each method, under the paper's ablation names."""
    final = {s.method: s.score for s in checkpoints if s.checkpoint == config.blocks}
    return {ABLATION[m]: final.get(m) for m in config.methods}
