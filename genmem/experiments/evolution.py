"""Online self-evolution: the paper's protocol (section 4.3, appendix D.3) through the graph.

Weights, encoder and codebooks stay frozen. A held-out stream runs in a fixed order, split
into blocks; each query is retrieved -> executed -> scored (the reference is used for the score
only and never reaches MemEvolver) -> evolved, and its update is applied before the next query.
The stream is driven by the SID method on a working copy of the input bank (the input is never
written). After each block the bank is snapshotted (``bank@t<c>``, read-only, also exported as
JSONL with the block's operation log) and a fixed probe set, disjoint from the stream, is run
read-only by every method on the same snapshot:

- ``sid``: SID generation with the run's beam and reranker (the full system);
- ``greedy``: SID generation with one candidate and no reranker;
- ``frozen``: SID generation on the ``t0`` snapshot, the bank before any write;
- ``tfidf`` / ``dense``: content-coupled retrievers whose index is rebuilt from the snapshot's
  payloads at every checkpoint;
- ``none``: no memory.

So the SID method and the baselines see the same bank evolution; only addressing differs. Every
stream query and probe run appends one JSON line as it finishes, and a rerun into the same
folder continues where it stopped. With ``concurrency`` > 1 the probe runs of a checkpoint go
that many at once (lines land as they finish); the stream always runs one query after another,
each update applied before the next query.

Every probe mean counts a run that errored as a failure (score 0, no hit) and comes with a
bootstrap interval over probe tasks; ``sid`` minus ``frozen`` is paired by probe task at each
checkpoint (:mod:`genmem.experiments.evolution_stats`). With ``seeds > 1`` and a sampling model, the
whole run (stream and probes) is repeated once per decoding seed in ``seed<s>/`` and the probe
results are pooled: a task's value is the mean over its seeds, and the bootstrap resamples tasks
with their seeds kept together. Each run seeds the local model's sampler from (seed, phase,
task), so a repeat and a resumed run draw the same samples and the methods probed at one
checkpoint share a task's random stream; a greedy model decodes the same whatever the seed, so
it runs once. A served model samples with its server's own randomness: the seeds then label
the repeats but do not fix them.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from genmem.envs.base import Environment, Task
from genmem.envs.bundled import append_jsonl, jsonl_rows
from genmem.envs.pool import run_tasks, task_workers
from genmem.envs.stats import DEFAULT_INTERVALS, IntervalConfig
from genmem.experiments.evolution_config import (
    EVOLVE_METHODS,
    EvolveConfig,
    EvolveMethod,
    EvolveSummary,
    PooledEvolveSummary,
    StreamRecord,
    check_evolve_methods,
)
from genmem.experiments.evolution_report import summary_markdown
from genmem.experiments.evolution_runner import EvolveRunner
from genmem.experiments.evolution_stats import (
    CheckpointPair,
    CheckpointScore,
    ProbeRecord,
)
from genmem.memory.bank_copy import copy_bank_file, working_copy

__all__ = [
    "EVOLVE_METHODS",
    "CheckpointPair",
    "CheckpointScore",
    "EvolveConfig",
    "EvolveMethod",
    "EvolveSummary",
    "PooledEvolveSummary",
    "ProbeRecord",
    "StreamRecord",
    "check_evolve_methods",
    "run_evolution",
    "summary_markdown",
]


def _split(tasks: list[Task], config: EvolveConfig, out: Path) -> tuple[list[Task], list[Task]]:
    """The probe set (sampled once) and the stream (file order, probe tasks left out)."""
    need = config.probe_size + config.blocks * config.block_size
    if len(tasks) < need:
        raise ValueError(
            f"{len(tasks)} tasks, but {config.probe_size} probe + {config.blocks} x "
            f"{config.block_size} stream queries need {need}"
        )
    path = out / "split.json"
    by_id = {t.id: t for t in tasks}
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        missing = [i for i in saved["probe"] + saved["stream"] if i not in by_id]
        if missing:
            raise ValueError(f"{path} names tasks this data lacks ({missing[:3]}); use a new --out")
        return [by_id[i] for i in saved["probe"]], [by_id[i] for i in saved["stream"]]
    picked = set(random.Random(config.seed).sample(range(len(tasks)), config.probe_size))
    probe = [t for i, t in enumerate(tasks) if i in picked]
    stream = [t for i, t in enumerate(tasks) if i not in picked][
        : config.blocks * config.block_size
    ]
    data = {"probe": [t.id for t in probe], "stream": [t.id for t in stream]}
    _write_whole(path, lambda tmp: tmp.write_text(json.dumps(data, indent=1) + "\n"))
    return probe, stream


def _write_whole(path: Path, write: Any) -> None:
    """Write ``path`` through ``write(tmp)`` and a rename, so a kill leaves all of it or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _keep_before(out: Path, i: int) -> Path:
    """A copy of the working bank as it is before stream query ``i`` writes to it."""
    before = out / f"bank.before-{i}.db"
    copy_bank_file(out / "bank.db", before)
    return before


def _undo_unrecorded_write(
    out: Path, work_url: str, stream: Sequence[Task], streamed: set[str]
) -> None:
    """Put the working bank back as it was before the first stream query that has no record.

    A run stopped after that query's update reached the bank but before its line reached
    ``stream.jsonl`` would otherwise apply the update twice on resume (the query runs again).
    Its copy from :func:`_keep_before` is the bank before the query; a copy left by an earlier,
    recorded query is stale and goes. A bank this process still holds open at that URL (a run
    interrupted in this process) is closed first: it would go on writing to the replaced file.
    """
    from genmem.tools.lookup import close_resolved_banks

    pending = next((i for i, t in enumerate(stream) if t.id not in streamed), None)
    for before in sorted(out.glob("bank.before-*.db")):
        if before.name == f"bank.before-{pending}.db":
            close_resolved_banks(work_url)
            copy_bank_file(before, out / "bank.db")
        before.unlink()


def _hits(
    state: Mapping[str, Any], reference: str | None, spec: Any
) -> tuple[dict[str, bool] | None, dict[str, int] | None]:
    """Candidate hit, hit@1/5 and prefix depths of one probe run (None without a reference)."""
    if reference is None:
        return None, None
    if not state.get("candidates"):
        return dict.fromkeys(("candidate_hit", "hit_at_1", "hit_at_5"), False), {
            "at_1": 0,
            "at_5": 0,
        }
    from genmem.policies.rerank import retrieval_hits
    from genmem.policies.types import SIDCandidate

    cands = [SIDCandidate(sid=s, score=0.0) for s in state["candidates"]]
    ranked = [SIDCandidate(sid=s, score=0.0) for s in state.get("ranked") or state["candidates"]]
    h = retrieval_hits(cands, ranked, reference, spec=spec)
    hits = {"candidate_hit": h.candidate_hit, "hit_at_1": h.hit_at_1, "hit_at_5": h.hit_at_5}
    return hits, {"at_1": h.depth_at_1, "at_5": h.depth_at_5}


def run_evolution(
    env: Environment,
    config: EvolveConfig,
    *,
    bank_url: str,
    out: Path,
    chat: Any = None,
    sid_generator: Any = None,
    reference_sids: Mapping[str, str] | None = None,
    progress: bool = True,
    intervals: IntervalConfig = DEFAULT_INTERVALS,
    concurrency: int = 1,
) -> EvolveSummary | PooledEvolveSummary:
    """Run the online protocol over ``env``'s tasks; write records, snapshots, logs, summary.

    ``chat`` overrides ``config.model`` and ``sid_generator`` the SID methods' own decoding
    (tests, trained policies); ``reference_sids`` maps probe task ids to the SID that should
    serve them, for Candidate Hit, Hit@1/5 and prefix hits. With ``config.seeds > 1`` and a
    sampling model the run is repeated per decoding seed in ``out/seed<s>`` and pooled.
    ``concurrency`` runs that many probe runs at once (one when the environment holds one
    episode at a time or the local model samples: a warning says so).

    Raises:
        ValueError: too few tasks for the schedule, or a bad bank (nothing is written to it).
    """
    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    started = time.perf_counter()
    open_bank(bank_url)  # a bad URL or bank fails here, before any work
    if chat is None:
        chat = capped_chat_model(
            config.model, config.max_new_tokens, temperature=config.temperature
        )
    kw = {"sid_generator": sid_generator, "reference_sids": reference_sids, "progress": progress}
    kw["workers"] = task_workers(concurrency, env, chat=chat, what="probe runs")
    if config.seeds == 1 or _greedy(chat):
        note = None
        if config.seeds > 1:
            note = (
                f"{config.seeds} seeds asked for, but the model decodes greedily (temperature "
                "0): every seed would decode the same run, so it ran once."
            )
        return _run_once(env, config, bank_url, out, chat, intervals, note=note, **kw)
    seeds = [config.decode_seed + i for i in range(config.seeds)]
    runs = {}
    for seed in seeds:
        one = config.model_copy(update={"seeds": 1, "decode_seed": seed})
        runs[seed] = _run_once(env, one, bank_url, out / f"seed{seed}", chat, intervals, **kw)
    from genmem.experiments.evolution_summary import pool

    return pool(env, config, out, runs, intervals, started)


def _run_once(
    env: Environment,
    config: EvolveConfig,
    bank_url: str,
    out: Path,
    chat: Any,
    intervals: IntervalConfig,
    *,
    sid_generator: Any,
    reference_sids: Mapping[str, str] | None,
    progress: bool,
    workers: int = 1,
    note: str | None = None,
) -> EvolveSummary:
    """One run of the protocol with one decoding seed into ``out``."""
    from tqdm.auto import tqdm

    from genmem.memory.location import open_bank

    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    probe, stream = _split(env.tasks(None), config, out)
    from genmem.experiments.contamination import check_bank_is_clean

    check_bank_is_clean(open_bank(bank_url), [*probe, *stream])
    work_url = working_copy(bank_url, out)
    stream_path, probe_path = out / "stream.jsonl", out / "probes.jsonl"
    streamed = {r["id"] for r in jsonl_rows(stream_path)}
    _undo_unrecorded_write(
        out, work_url, stream, streamed
    )  # before anything opens the working copy
    work = open_bank(work_url)
    runner = EvolveRunner(env, config, chat, sid_generator)
    (out / "snapshots").mkdir(exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    probe_rows = [ProbeRecord.model_validate(r) for r in jsonl_rows(probe_path)]
    probed = {(r.checkpoint, r.method, r.id) for r in probe_rows}
    reuse = _ProbeReuse(probe_rows) if _repeatable(runner.chat, config) else None
    refs = dict(reference_sids or {})
    total = config.blocks * config.block_size + (config.blocks + 1) * len(probe) * len(
        config.methods
    )
    bar = tqdm(total=total, desc=f"evolve {env.name}", unit="run", disable=not progress)
    bar.update(len(streamed) + len(probed))
    snap_urls: dict[int, str] = {}
    for c in range(config.blocks + 1):
        if c > 0:
            block = stream[(c - 1) * config.block_size : c * config.block_size]
            for i, task in enumerate(block, (c - 1) * config.block_size):
                if task.id in streamed:
                    continue
                bar.set_postfix_str(f"stream {task.id}")
                before = _keep_before(out, i)
                state = runner.run("sid", task, "evolve", work_url, phase="stream")
                append_jsonl(stream_path, _stream_record(i, c, task, state))
                before.unlink()
                bar.update(1)
        snap_urls[c] = _checkpoint(work, c, out)

        def probe_one(item: tuple[str, Task], c: int = c) -> ProbeRecord:
            method, task = item
            record = reuse.repeat(c, method, task.id) if reuse else None
            if record is None:
                url = None if method == "none" else snap_urls[0 if method == "frozen" else c]
                mode = "no_memory" if url is None else "read_only"
                state = runner.run(method, task, mode, url, phase=f"t{c}")
                record = _probe_record(c, method, task, state, refs, work.spec)
                if reuse:
                    reuse.add(record)
            return record

        todo = [(m, t) for m in config.methods for t in probe if (c, m, t.id) not in probed]
        for record in _probes(probe_one, todo, c, reuse, workers):
            bar.set_postfix_str(f"t{c} {record.method} {record.id}")
            append_jsonl(probe_path, record)
            bar.update(1)
    bar.close()
    from genmem.experiments.evolution_summary import summarise

    return summarise(
        env, config, out, bank_url, work_url, probe, stream, snap_urls, started, runner,
        intervals, note,
    )  # fmt: skip


def _probes(
    probe_one: Any,
    todo: list[tuple[str, Task]],
    c: int,
    reuse: _ProbeReuse | None,
    workers: int,
) -> Iterator[ProbeRecord]:
    """The checkpoint's probe records, ``workers`` runs at once, each as it finishes.

    A run whose inputs another run of the list has (``frozen`` and ``sid`` at ``t0``) waits for
    that one and reuses it, as in order; one after another nothing needs to wait.
    """
    now, after = (todo, []) if reuse is None or workers == 1 else reuse.split(c, todo)
    for _, record in run_tasks(probe_one, now, concurrency=workers):
        yield record
    for item in after:
        yield probe_one(item)


def _greedy(chat: Any) -> bool:
    """Whether the model decodes greedily (an unknown sampling setting counts as sampling)."""
    return getattr(chat, "temperature", None) == 0


def _repeatable(chat: Any, config: EvolveConfig) -> bool:
    """Whether a control's rerun would repeat its t0 run: a greedy model, unless told to rerun."""
    return not config.rerun_controls and _greedy(chat)


class _ProbeReuse:
    """Probe runs by their inputs, so a control whose inputs did not change is not run again.

    A probe run's inputs are its graph, its task and the snapshot it reads: ``frozen`` reads
    ``t0`` through the ``sid`` graph at every checkpoint and ``none`` reads nothing, so with a
    greedy model their runs after the first repeat it exactly. Runs already in ``probes.jsonl``
    (a resumed run) count too.
    """

    def __init__(self, records: Sequence[ProbeRecord] = ()) -> None:
        self.done: dict[tuple[str, str, int | None], ProbeRecord] = {}
        for record in records:
            self.add(record)

    @staticmethod
    def _key(c: int, method: str, task_id: str) -> tuple[str, str, int | None]:
        graph = "sid" if method == "frozen" else method
        snapshot = None if method == "none" else 0 if method == "frozen" else c
        return graph, task_id, snapshot

    def split(
        self, c: int, items: Sequence[tuple[str, Task]]
    ) -> tuple[list[tuple[str, Task]], list[tuple[str, Task]]]:
        """``items`` of checkpoint ``c`` in two: runs to make now, and runs whose inputs an
        earlier run had (or one of the first list will have), to reuse it once it is done."""
        seen = set(self.done)
        now: list[tuple[str, Task]] = []
        after: list[tuple[str, Task]] = []
        for method, task in items:
            key = self._key(c, method, task.id)
            (after if key in seen else now).append((method, task))
            seen.add(key)
        return now, after

    def add(self, record: ProbeRecord) -> None:
        """Remember a run that really ran (a failed run is never reused)."""
        if record.reused_from is None and record.error is None:
            self.done.setdefault(self._key(record.checkpoint, record.method, record.id), record)

    def repeat(self, c: int, method: str, task_id: str) -> ProbeRecord | None:
        """The record of an earlier run with the same inputs, as this checkpoint's row."""
        earlier = self.done.get(self._key(c, method, task_id))
        if earlier is None:
            return None
        source = f"t{earlier.checkpoint}/{earlier.method}"
        return earlier.model_copy(
            update={"checkpoint": c, "method": method, "seconds": 0.0, "reused_from": source}
        )


def _stream_record(i: int, block: int, task: Task, state: Mapping[str, Any]) -> StreamRecord:
    outcome = state.get("outcome_")
    return StreamRecord(
        index=i,
        block=block,
        id=task.id,
        score=None if outcome is None else outcome.score,
        success=bool(outcome and outcome.success),
        sid=state.get("sid"),
        addresser=state.get("addresser"),
        retrieved=[h.get("sid") for h in state.get("retrieved") or []],
        update=state.get("update"),
        update_sid=state.get("update_sid"),
        evolve_error=state.get("evolve_error"),
        seconds=state["seconds"],
        error=state.get("error"),
    )


def _probe_record(
    c: int,
    method: str,
    task: Task,
    state: Mapping[str, Any],
    refs: Mapping[str, str],
    spec: Any,
) -> ProbeRecord:
    outcome = state.get("outcome_")
    hits, depth = (None, None) if method == "none" else _hits(state, refs.get(task.id), spec)
    return ProbeRecord(
        checkpoint=c,
        method=method,
        id=task.id,
        score=0.0 if outcome is None else outcome.score,
        success=bool(outcome and outcome.success),
        metrics={} if outcome is None else outcome.metrics,
        sid=state.get("sid"),
        addresser=state.get("addresser"),
        candidates=list(state.get("candidates") or []),
        ranked=list(state.get("ranked") or []),
        retrieved=[h.get("sid") for h in state.get("retrieved") or []],
        hits=hits,
        prefix_depth=depth,
        seconds=state["seconds"],
        error=state.get("error"),
    )


def _checkpoint(work: Any, c: int, out: Path) -> str:
    """Snapshot ``bank@t<c>`` (once), export it and its block's log; the snapshot's URL."""
    name = f"t{c}"
    snap_id = f"{work.bank_id}@{name}"
    if snap_id not in {b.bank_id for b in work.snapshots()}:
        work.snapshot(name)
    snap = work.store.bank(snap_id)
    export = out / "snapshots" / f"{name}.jsonl"
    if not export.exists():
        _write_whole(export, snap.export_jsonl)
    url = f"sqlite:///{(out / 'bank.db').resolve()}?bank={snap_id}"
    return url
