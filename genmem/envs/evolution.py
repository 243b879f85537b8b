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
folder continues where it stopped.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from genmem.envs.base import Environment, Task
from genmem.envs.bundled import append_jsonl, jsonl_rows
from genmem.envs.evolution_stats import BlockOperations

__all__ = [
    "EVOLVE_METHODS",
    "CheckpointScore",
    "EvolveConfig",
    "EvolveMethod",
    "EvolveSummary",
    "ProbeRecord",
    "StreamRecord",
    "check_evolve_methods",
    "run_evolution",
    "summary_markdown",
    "working_copy",
]

EvolveMethod = Literal["sid", "greedy", "frozen", "tfidf", "dense", "none"]
EVOLVE_METHODS: tuple[EvolveMethod, ...] = ("sid", "greedy", "frozen", "tfidf", "dense", "none")
_ABLATION = {
    "sid": "full",
    "frozen": "w/o MemEvolver (frozen bank)",
    "tfidf": "TF-IDF + evolution",
    "dense": "dense + evolution",
    "none": "w/o MemRetriever (no memory)",
    "greedy": "greedy SID decoding (no beam)",
}


def check_evolve_methods(methods: Sequence[str] | str) -> list[EvolveMethod]:
    """Parse ``"sid,frozen"`` or a list into known, distinct methods (ValueError otherwise)."""
    from genmem.envs.methods import check_methods

    return check_methods(methods, EVOLVE_METHODS)


class EvolveConfig(BaseModel):
    """The schedule, the probe methods and the budgets of an evolution run."""

    model_config = ConfigDict(extra="forbid")

    blocks: int = Field(ge=1, description="Stream blocks; a probe follows each.")
    block_size: int = Field(ge=1, description="Stream queries per block.")
    probe_size: int = Field(ge=1, description="Probe queries, sampled once, disjoint from it.")
    methods: list[EvolveMethod] = Field(default_factory=lambda: ["sid", "frozen", "tfidf", "dense"])
    model: str = Field(default="local", description="Chat model spec for every role.")
    candidates: int = Field(default=8, ge=1, le=50, description="Candidate budget per lookup.")
    rerank: bool = Field(default=True, description="Rerank candidates against the task.")
    allowed: Literal["all", "occupied", "prefix"] = "occupied"
    memory_k: int = Field(default=5, ge=1, le=50)
    max_steps: int = Field(default=3, ge=1)
    max_new_tokens: int | None = Field(default=None, ge=1)
    seed: int = Field(default=0, ge=0, description="Seed of the probe sample.")
    rerun_controls: bool = Field(
        default=False,
        description="Run the frozen and no-memory controls at every checkpoint even when the "
        "model decodes greedily (otherwise their unchanged t0 runs are reused).",
    )

    @field_validator("methods", mode="before")
    @classmethod
    def _methods(cls, value: Any) -> list[EvolveMethod]:
        return check_evolve_methods(value)


class StreamRecord(BaseModel):
    """One stream query: what it read, how it scored, what it wrote."""

    index: int
    block: int
    id: str
    score: float | None = None
    success: bool = False
    sid: str | None = None
    retrieved: list[str] = Field(default_factory=list)
    update: dict[str, Any] | None = None
    update_sid: str | None = None
    evolve_error: dict[str, Any] | None = None
    seconds: float = 0.0
    error: str | None = None


class ProbeRecord(BaseModel):
    """One read-only probe run of one method at one checkpoint."""

    checkpoint: int
    method: str
    id: str
    score: float = 0.0
    success: bool = False
    metrics: dict[str, float] = Field(default_factory=dict)
    sid: str | None = None
    candidates: list[str] = Field(default_factory=list)
    ranked: list[str] = Field(default_factory=list)
    retrieved: list[str] = Field(default_factory=list)
    hits: dict[str, bool] | None = None
    seconds: float = 0.0
    error: str | None = None
    reused_from: str | None = Field(
        default=None,
        description="'t<c>/<method>' when this row repeats a run with the same inputs (a greedy "
        "model on the same snapshot) instead of running again; seconds is then 0.",
    )


class CheckpointScore(BaseModel):
    """One method's probe result at one checkpoint."""

    checkpoint: int
    processed: int = Field(description="Stream queries processed before this probe.")
    method: str
    n: int
    score: float
    success_rate: float
    candidate_hit: float | None = None
    hit_at_1: float | None = None
    hit_at_5: float | None = None
    errors: int = 0
    reused: int = Field(default=0, description="Rows that repeat an earlier run's result.")


class EvolveSummary(BaseModel):
    """Everything ``summary.json`` holds."""

    bench: str
    config: EvolveConfig
    input_bank: str
    work_bank: str
    probe_ids: list[str]
    stream_ids: list[str]
    checkpoints: list[CheckpointScore]
    blocks: list[BlockOperations]
    stream_score_per_block: list[float | None]
    invariance: dict[str, Any]
    concentration: dict[str, float]
    ablation: dict[str, float | None]
    snapshots: list[str]
    files: dict[str, str]
    seconds: float


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
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return probe, stream


def working_copy(bank_url: str, out: Path) -> str:
    """A working copy of the input bank in ``out/bank.db`` (made once); its URL."""
    from genmem.envs.seed_bank import copy_bank_file
    from genmem.memory.bank import import_bank
    from genmem.memory.location import open_bank, open_store, parse_bank_url

    loc = parse_bank_url(bank_url)
    target = (out / "bank.db").resolve()
    url = f"sqlite:///{target}?bank={loc.bank_id}"
    if target.exists():
        return url
    if loc.scheme == "sqlite":
        source = Path(loc.location).resolve()
        if source == target:
            raise ValueError(f"--bank is {source}, the run's own working copy; use another --out")
        copy_bank_file(source, target)
        return url
    exported = out / "input-bank.jsonl"
    open_bank(bank_url).export_jsonl(exported)
    import_bank(open_store(f"sqlite:///{target}"), exported, bank_id=loc.bank_id)
    return url


class _Runner:
    """Compiled graphs per method, and one task run through one of them."""

    def __init__(self, env: Environment, config: EvolveConfig, chat: Any) -> None:
        self.env = env
        self.config = config
        self.chat = chat
        self.tools = env.tools()
        self.current: dict[str, Task] = {}
        self.graphs: dict[str, Any] = {}

    def graph(self, method: str) -> Any:
        """The compiled ``genmem`` graph of ``method`` (``sid`` drives the stream)."""
        from genmem.envs.methods import method_generator
        from genmem.graph.loop import build_genmem_graph
        from genmem.graph.retriever import RetrieverConfig
        from genmem.graph.stack import StackBudget
        from genmem.graph.stackplanner import StackPlannerConfig

        key = "sid" if method == "frozen" else method
        if key not in self.graphs:
            cfg = self.config
            greedy = key == "greedy"
            beam = 1 if greedy else cfg.candidates
            self.graphs[key] = build_genmem_graph(
                self.chat,
                sid_generator=method_generator(key) if key in ("tfidf", "dense") else None,
                retriever_config=RetrieverConfig(
                    beam=beam, rerank=cfg.rerank and beam > 1, allowed=cfg.allowed
                ),
                planner_config=StackPlannerConfig(budget=StackBudget(max_steps=cfg.max_steps)),
                solver_tools=self.tools.solver,
                research_tools=self.tools.research,
                interactor_tools=self.tools.interactor,
                scorer=lambda answer, reference: self.env.score(self.current["task"], answer).score,
                # Only an environment's own verdict may reach MemEvolver, never the score.
                observer=self._observe if self.env.outcome_observable else None,
            ).compile()
        return self.graphs[key]

    def _observe(self, answer: str | None) -> str | None:
        return self.env.signal(self.env.score(self.current["task"], answer))

    def run(self, method: str, task: Task, mode: str, bank_url: str | None) -> dict[str, Any]:
        """One run of ``task``; the final state plus ``outcome`` (or ``error``) and ``seconds``."""
        started = time.perf_counter()
        self.current["task"] = task
        context: dict[str, Any] = {"max_steps": self.config.max_steps}
        if bank_url is not None:
            context |= {"bank_url": bank_url, "memory_k": self.config.memory_k}
        try:
            self.env.start(task)
            try:
                payload = {"query": task.query, "mode": mode, "reference": task.reference}
                state = dict(self.graph(method).invoke(payload, context=context))
                state["outcome_"] = self.env.score(task, state.get("answer"))
            finally:
                self.env.finish(task)
        except Exception as exc:  # one failing run must not lose the experiment
            state = {"error": repr(exc)}
        state["seconds"] = round(time.perf_counter() - started, 2)
        return state


def _hits(state: Mapping[str, Any], reference: str | None, spec: Any) -> dict[str, bool] | None:
    """Candidate hit, hit@1 and hit@5 of one probe run (None without a reference SID)."""
    if reference is None or not state.get("candidates"):
        return (
            None
            if reference is None
            else {"candidate_hit": False, "hit_at_1": False, "hit_at_5": False}
        )
    from genmem.policies.rerank import retrieval_hits
    from genmem.policies.types import SIDCandidate

    cands = [SIDCandidate(sid=s, score=0.0) for s in state["candidates"]]
    ranked = [SIDCandidate(sid=s, score=0.0) for s in state.get("ranked") or state["candidates"]]
    h = retrieval_hits(cands, ranked, reference, spec=spec)
    return {"candidate_hit": h.candidate_hit, "hit_at_1": h.hit_at_1, "hit_at_5": h.hit_at_5}


def run_evolution(
    env: Environment,
    config: EvolveConfig,
    *,
    bank_url: str,
    out: Path,
    chat: Any = None,
    reference_sids: Mapping[str, str] | None = None,
    progress: bool = True,
) -> EvolveSummary:
    """Run the online protocol over ``env``'s tasks; write records, snapshots, logs, summary.

    ``chat`` overrides ``config.model`` (tests); ``reference_sids`` maps probe task ids to the
    SID that should serve them, for Candidate Hit and Hit@1/5.

    Raises:
        ValueError: too few tasks for the schedule, or a bad bank (nothing is written to it).
    """
    from tqdm.auto import tqdm

    from genmem.memory.location import open_bank
    from genmem.policies.backends import capped_chat_model

    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(config.model_dump_json(indent=2) + "\n", encoding="utf-8")
    open_bank(bank_url)  # a bad URL or bank fails here, before any work
    probe, stream = _split(env.tasks(None), config, out)
    work_url = working_copy(bank_url, out)
    work = open_bank(work_url)
    runner = _Runner(env, config, chat or capped_chat_model(config.model, config.max_new_tokens))
    stream_path, probe_path = out / "stream.jsonl", out / "probes.jsonl"
    (out / "snapshots").mkdir(exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    streamed = {r["id"] for r in jsonl_rows(stream_path)}
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
                state = runner.run("sid", task, "evolve", work_url)
                append_jsonl(stream_path, _stream_record(i, c, task, state))
                bar.update(1)
        snap_urls[c] = _checkpoint(work, c, out)
        for method in config.methods:
            url = None if method == "none" else snap_urls[0 if method == "frozen" else c]
            for task in probe:
                if (c, method, task.id) in probed:
                    continue
                bar.set_postfix_str(f"t{c} {method} {task.id}")
                record = reuse.repeat(c, method, task.id) if reuse else None
                if record is None:
                    mode = "no_memory" if url is None else "read_only"
                    state = runner.run(method, task, mode, url)
                    record = _probe_record(c, method, task, state, refs, work.spec)
                    if reuse:
                        reuse.add(record)
                append_jsonl(probe_path, record)
                bar.update(1)
    bar.close()
    return _summarise(
        env, config, out, bank_url, work_url, probe, stream, snap_urls, started, runner
    )


def _repeatable(chat: Any, config: EvolveConfig) -> bool:
    """Whether a control's rerun would repeat its t0 run: a greedy model, unless told to rerun."""
    return not config.rerun_controls and getattr(chat, "temperature", None) == 0


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
    return ProbeRecord(
        checkpoint=c,
        method=method,
        id=task.id,
        score=0.0 if outcome is None else outcome.score,
        success=bool(outcome and outcome.success),
        metrics={} if outcome is None else outcome.metrics,
        sid=state.get("sid"),
        candidates=list(state.get("candidates") or []),
        ranked=list(state.get("ranked") or []),
        retrieved=[h.get("sid") for h in state.get("retrieved") or []],
        hits=None if method == "none" else _hits(state, refs.get(task.id), spec),
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
        snap.export_jsonl(export)
    url = f"sqlite:///{(out / 'bank.db').resolve()}?bank={snap_id}"
    return url


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _checkpoint_scores(config: EvolveConfig, probes: list[ProbeRecord]) -> list[CheckpointScore]:
    out = []
    for c in range(config.blocks + 1):
        for method in config.methods:
            rows = [p for p in probes if p.checkpoint == c and p.method == method]
            ok = [p for p in rows if p.error is None]
            hit_rows = [p.hits for p in ok if p.hits is not None]

            def rate(key: str, hit_rows: list[dict[str, bool]] = hit_rows) -> float | None:
                return _mean([float(h[key]) for h in hit_rows])

            out.append(
                CheckpointScore(
                    checkpoint=c,
                    processed=c * config.block_size,
                    method=method,
                    n=len(rows),
                    score=_mean([p.score for p in ok]) or 0.0,
                    success_rate=_mean([float(p.success) for p in ok]) or 0.0,
                    candidate_hit=rate("candidate_hit"),
                    hit_at_1=rate("hit_at_1"),
                    hit_at_5=rate("hit_at_5"),
                    errors=len(rows) - len(ok),
                    reused=sum(p.reused_from is not None for p in rows),
                )
            )
    return out


def _block_logs(
    work: Any, config: EvolveConfig, stream: list[StreamRecord], out: Path
) -> tuple[list[BlockOperations], dict[str, int], list[tuple[int, str, str]]]:
    """Operations per block (written to ``logs/block<c>.jsonl``), events per SID, writes."""
    from genmem.envs.evolution_stats import block_operations

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
    runner: _Runner, config: EvolveConfig, probe: list[Task], first: Any, last: Any
) -> dict[str, Any]:
    """Addresses before vs after the stream: SID generation, and each baseline's top-1."""
    from genmem.envs.methods import PayloadAddresser
    from genmem.graph._addressing import local_generator
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


def _summarise(
    env: Environment,
    config: EvolveConfig,
    out: Path,
    bank_url: str,
    work_url: str,
    probe: list[Task],
    stream_tasks: list[Task],
    snap_urls: dict[int, str],
    started: float,
    runner: _Runner,
) -> EvolveSummary:
    """Scores per checkpoint, operations per block, invariance, plots and ``summary.json``."""
    from genmem.envs import evolution_plots as plots
    from genmem.envs.evolution_stats import top_share
    from genmem.memory.location import open_bank

    work = open_bank(work_url)
    stream = [StreamRecord.model_validate(r) for r in jsonl_rows(out / "stream.jsonl")]
    probes = [ProbeRecord.model_validate(r) for r in jsonl_rows(out / "probes.jsonl")]
    checkpoints = _checkpoint_scores(config, probes)
    blocks, counts, writes = _block_logs(work, config, stream, out)
    per_block = [
        _mean([r.score for r in stream if r.block == c and r.score is not None])
        for c in range(1, config.blocks + 1)
    ]
    first, last = open_bank(snap_urls[0]), open_bank(snap_urls[config.blocks])
    invariance = _invariance(runner, config, probe, first, last)
    final = {s.method: s.score for s in checkpoints if s.checkpoint == config.blocks}
    curves = {
        m: [(s.processed, s.score) for s in checkpoints if s.method == m] for m in config.methods
    }
    reads = [(r.index, sid) for r in stream for sid in r.retrieved[:1]]
    files = {
        "probe_curves": plots.plot_probe_curves(curves, out / "probe_curves.png"),
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
        blocks=blocks,
        stream_score_per_block=per_block,
        invariance=invariance,
        concentration={
            "active_sids": float(len(counts)),
            "events": float(sum(counts.values())),
            "top20_share": top_share(counts, 0.2),
        },
        ablation={_ABLATION[m]: final.get(m) for m in config.methods},
        snapshots=[snap_urls[c] for c in sorted(snap_urls)],
        files={k: str(v) for k, v in files.items()}
        | {k: str(out / k) for k in ("stream.jsonl", "probes.jsonl", "logs", "snapshots")},
        seconds=round(time.perf_counter() - started, 1),
    )
    (out / "summary.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")
    return summary


def summary_markdown(summary: EvolveSummary) -> str:
    """The probe table (the paper's shape: methods x checkpoints) and the block operations."""
    cps = sorted({s.checkpoint for s in summary.checkpoints})
    head = "| method | metric | " + " | ".join(f"t={c}" for c in cps) + " |"
    lines = [f"## online evolution on {summary.bench}", "", head, "|---|---|" + "---|" * len(cps)]
    for method in summary.config.methods:
        rows = {s.checkpoint: s for s in summary.checkpoints if s.method == method}
        for label, key in (
            ("Cand. Hit", "candidate_hit"),
            ("Hit@1", "hit_at_1"),
            ("Hit@5", "hit_at_5"),
            ("task score", "score"),
        ):
            values = [getattr(rows[c], key) if c in rows else None for c in cps]
            if all(v is None for v in values):
                continue
            cells = ["-" if v is None else f"{100 * v:.1f}" for v in values]
            lines.append(f"| {method} | {label} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| block | queries | inserted | revised | retained | deleted | no write | "
        "mean edit distance |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for b in summary.blocks:
        edit = "-" if b.mean_edit_distance is None else f"{b.mean_edit_distance:.0f}"
        lines.append(
            f"| {b.block} | {b.queries} | {b.inserted} | {b.revised} | {b.retained} | "
            f"{b.deleted} | {b.no_write} | {edit} |"
        )
    reused = sorted({s.method for s in summary.checkpoints if s.reused})
    if reused:
        lines += [
            "",
            f"Greedy model: the {' and '.join(reused)} rows after their first run repeat it "
            "(same graph, task and snapshot; `reused_from` in probes.jsonl); "
            "`--rerun-controls` runs them again.",
        ]
    inv = summary.invariance
    lines += [
        "",
        f"Addressing invariance over {inv.get('queries')} probe queries: "
        + json.dumps({k: v for k, v in inv.items() if k != "queries"}),
        "",
    ]
    return "\n".join(lines)
