"""The codebook ablations of the paper's appendices: 3 vs 4 levels, and the encoder prefix.

For each codebook shape (e.g. ``48x16x8x8`` against ``48x32x32``, the same 49,152 addresses)
and each encoding (with the experience prefix, or the plain text), one seed bank is built from
the same source rows (:func:`~genmem.experiments.seed_bank.build_seed_bank`, cached): codebooks
are fitted on the first rows only, and the rest are the held-out split. Each row of the table
reports

- codebook metrics on the fitting rows (utilisation per level, leaf utilisation, DUI,
  reconstruction error);
- the held-out rows' reconstruction error (quantised with codebooks that never saw them) and
  the share of their SIDs the fitting rows also use;
- the quantizer's retrieval hits: each source question addressed by the bank's quantizer
  (candidates among the bank's occupied SIDs, as ``genmem eval --pairs`` does by default), its
  own entry's SID as the reference, Hit@1 / Hit@5 with bootstrap intervals, over all questions
  and over the held-out ones alone.

With :class:`~genmem.experiments.codebook_policy.CodebookPolicyConfig` it also aligns a policy per
bank and scores it on the held-out questions of its alignment (the same questions in every
row), and scores tasks through the graph with each bank's addresser
(:mod:`genmem.experiments.codebook_policy`); ``paired`` holds the row-against-row differences.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from genmem.envs.stats import DEFAULT_INTERVALS, IntervalConfig, PairedDiff
from genmem.experiments.codebook_policy import (
    AlignedHits,
    CodebookPolicyConfig,
    Rate,
    TaskScores,
    paired_rows,
    rate,
)
from genmem.experiments.seed_bank import (
    DEFAULT_DISTILL,
    DEFAULT_SEED_SIZE,
    DEFAULT_SOURCE,
    SeedBankConfig,
)
from genmem.policies.baselines import DEFAULT_K

__all__ = ["AblationConfig", "AblationReport", "AblationRow", "run_codebook_ablation"]


class AblationConfig(BaseModel):
    """Which banks the ablation builds and how it scores them.

    Each field's description is the help of its ``genmem experiment codebooks`` flag."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(
        default=DEFAULT_SOURCE,
        description="Where the rows come from (as genmem bank seed --source).",
    )
    distill: str = Field(
        default=DEFAULT_DISTILL,
        description="Who writes the entries (as genmem bank seed --distill).",
    )
    size: int = Field(default=DEFAULT_SEED_SIZE, ge=1, description="Source rows per bank.")
    heldout: float = Field(default=0.2, description="Share of rows kept out of the fit.")
    configs: tuple[tuple[int, ...], ...] = Field(
        default=((48, 16, 8, 8), (48, 32, 32)),
        description="Codebook shapes compared (the defaults have equal capacity).",
    )
    prefixes: tuple[bool, ...] = Field(
        default=(True, False),
        description="Encode with the experience prefix (True), as plain text (False), or both.",
    )
    candidates: int = Field(default=DEFAULT_K, description="Addresser candidates per query.")
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> AblationConfig:
        if not 0.0 < self.heldout < 1.0:
            raise ValueError(f"heldout={self.heldout}: use a share in (0, 1)")
        if not self.configs or not self.prefixes:
            raise ValueError("name at least one codebook shape and one encoding")
        if self.candidates < 5:
            raise ValueError(f"candidates={self.candidates}: Hit@5 needs at least 5")
        if self.distill == "model":
            raise ValueError(
                "distill=model: the ablation rebuilds each bank from its writer's texts; use "
                "reference, procedure or abstract"
            )
        for sizes in self.configs:  # every bank's settings, checked before the first is built
            try:
                _seed_config(self, sizes, True)
            except ValidationError as exc:  # its own words, not a nested report
                raise ValueError(
                    "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in exc.errors())
                ) from None
        return self

    @property
    def fit_size(self) -> int:
        """Rows the codebooks are fitted on (the first ones)."""
        return self.size - round(self.heldout * self.size)


class AblationRow(BaseModel):
    """One codebook shape and encoding: its bank, codebook metrics and retrieval hits."""

    sizes: list[int]
    levels: int
    capacity: int
    prefix: bool = Field(description="Encoded with the experience prefix.")
    bank: str
    entries: int
    fit_n: int
    heldout_n: int
    utilization: list[float]
    leaf_utilization: float
    dui: float
    fit_mse_per_dim: float
    heldout_mse_per_dim: float
    heldout_leaf_share: float = Field(description="Held-out SIDs that fitting rows also use.")
    candidate_hit: Rate = Field(description="The entry among the quantizer's candidates.")
    hit_at_1: Rate
    hit_at_5: Rate
    heldout_hit_at_1: Rate
    heldout_hit_at_5: Rate
    questions: int
    heldout_questions: int
    label: str = Field(default="", description="Shape and encoding, e.g. 48x16x8x8-prefix.")
    aligned: AlignedHits | None = Field(default=None, description="With --align-steps.")
    tasks: TaskScores | None = Field(default=None, description="With --tasks.")


class AblationReport(BaseModel):
    """Every row, and how it was made."""

    source: str
    distill: str
    size: int
    heldout: float
    candidates: int
    rows: list[AblationRow]
    none_score: Rate | None = Field(default=None, description="The tasks without memory.")
    paired: dict[str, dict[str, PairedDiff]] = Field(
        default_factory=dict,
        description="'a - b' for every two rows: aligned Hit@5 per held-out question, and the "
        "task score per task.",
    )
    intervals: IntervalConfig = DEFAULT_INTERVALS


def _pairs(bank: Any, fit_size: int) -> list[tuple[dict[str, str], bool]]:
    """(each source question with its entry's SID, whether it was held out of the fit)."""
    from genmem.memory.build import source_query

    out = []
    for entry in bank.entries():
        for src in (entry.metadata or {}).get("sources", []):
            query = source_query(src)
            if query and "index" in src:
                pair = {"query": query, "reference_sid": str(entry.sid)}
                out.append((pair, int(src["index"]) >= fit_size))
    return out


def _row(cfg: AblationConfig, sizes: tuple[int, ...], prefix: bool, progress: bool) -> AblationRow:
    from genmem.experiments.retrieval_eval import evaluate_retrieval, sid_ranker
    from genmem.experiments.seed_bank import build_seed_bank, seed_texts
    from genmem.memory.encoders import encode_for_codebook
    from genmem.memory.location import open_bank
    from genmem.memory.metrics import codebook_metrics
    from genmem.memory.rqkmeans import Codebooks
    from genmem.memory.search import heldout_scores
    from genmem.policies.addressing import bank_quantizer

    settings = _seed_config(cfg, sizes, prefix)
    seed = build_seed_bank(settings, progress=progress)
    bank = open_bank(seed.url)
    codebooks = Codebooks.load(seed.codebook_dir)
    texts = seed_texts(settings)
    x = encode_for_codebook(codebooks, texts)
    fit, held = x[: cfg.fit_size], x[cfg.fit_size :]
    codes = codebooks.quantize(fit)
    metrics = codebook_metrics(codes, codebooks.spec, embeddings=fit, codebooks=codebooks)
    scores = heldout_scores(codebooks, codes, held)
    pairs = _pairs(bank, cfg.fit_size)
    rank = sid_ranker(bank_quantizer(bank, "occupied"))  # candidates among the bank's entries
    report = evaluate_retrieval(
        [p for p, _ in pairs], rank, cfg.candidates, spec=bank.spec, progress=progress
    )
    held_out = [r for r, (_, h) in zip(report.per_query, pairs, strict=True) if h]
    intervals = DEFAULT_INTERVALS
    return AblationRow(
        sizes=list(sizes),
        levels=len(sizes),
        capacity=codebooks.spec.capacity,
        prefix=prefix,
        bank=seed.url,
        entries=seed.entries,
        fit_n=len(fit),
        heldout_n=len(held),
        utilization=metrics.utilization,
        leaf_utilization=metrics.leaf_utilization,
        dui=metrics.dui,
        fit_mse_per_dim=metrics.recon_mse_per_dim or 0.0,
        heldout_mse_per_dim=float(scores["heldout_mse_per_dim"]),  # type: ignore[arg-type]
        heldout_leaf_share=float(scores["heldout_leaf_utilization"]),  # type: ignore[arg-type]
        candidate_hit=rate([r.candidate_hit for r in report.per_query], intervals),
        hit_at_1=rate([r.hit_at_1 for r in report.per_query], intervals),
        hit_at_5=rate([r.hit_at_5 for r in report.per_query], intervals),
        heldout_hit_at_1=rate([r.hit_at_1 for r in held_out], intervals),
        heldout_hit_at_5=rate([r.hit_at_5 for r in held_out], intervals),
        questions=len(pairs),
        heldout_questions=len(held_out),
        label=f"{'x'.join(map(str, sizes))}-{'prefix' if prefix else 'plain'}",
    )


def _seed_config(cfg: AblationConfig, sizes: tuple[int, ...], prefix: bool) -> SeedBankConfig:
    """The seed bank of one row: the same rows and fit split, one shape and encoding."""
    return SeedBankConfig(
        source=cfg.source,  # type: ignore[arg-type]
        distill=cfg.distill,  # type: ignore[arg-type]
        size=cfg.size,
        fit_size=cfg.fit_size,
        sizes=sizes,
        prefix=prefix,
        seed=cfg.seed,
    )


def run_codebook_ablation(
    cfg: AblationConfig,
    out: Path,
    *,
    policy: CodebookPolicyConfig | None = None,
    env: Any = None,
    progress: bool = True,
) -> AblationReport:
    """Build and score one bank per codebook shape and encoding; write ``codebooks.json``.

    ``policy`` adds an aligned policy per bank (``align_steps``) and task scores through the
    graph on ``env``'s first ``tasks`` tasks; alignments go to ``out/align/LABEL`` and
    evaluations to ``out/tasks/LABEL`` (and ``out/tasks/none``), each resumable.
    """
    policy = policy or CodebookPolicyConfig()
    if policy.tasks and env is None:
        raise ValueError("tasks to score need an environment (env)")
    rows = [_row(cfg, sizes, prefix, progress) for sizes in cfg.configs for prefix in cfg.prefixes]
    out.mkdir(parents=True, exist_ok=True)
    none = None
    if policy.tasks:
        from genmem.experiments.codebook_policy import none_scores

        none = none_scores(env, out / "tasks" / "none", policy, progress=progress)
    for row in rows:
        _extras(row, out, policy, env, none, progress)
    report = AblationReport(
        source=cfg.source,
        distill=cfg.distill,
        size=cfg.size,
        heldout=cfg.heldout,
        candidates=cfg.candidates,
        rows=rows,
        none_score=None if none is None else rate(list(none.values())),
        paired=paired_rows([(r.label, r.aligned, r.tasks) for r in rows]),
    )
    (out / "codebooks.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / "codebooks.md").write_text(ablation_table(report) + "\n", encoding="utf-8")
    return report


def _extras(
    row: AblationRow,
    out: Path,
    policy: CodebookPolicyConfig,
    env: Any,
    none: dict[str, float] | None,
    progress: bool,
) -> None:
    """Add the row's aligned hits and task scores, as ``policy`` asks."""
    from genmem.experiments.codebook_policy import align_and_score, score_tasks

    policy_dir = out / "align" / row.label
    if policy.align_steps:
        row.aligned = align_and_score(row.bank, policy_dir, policy, progress=progress)
    if none is not None:
        row.tasks = score_tasks(
            env,
            row.bank,
            out / "tasks" / row.label,
            policy,
            none,
            policy_dir=policy_dir if policy.align_steps else None,
            progress=progress,
        )


def ablation_table(report: AblationReport) -> str:
    """The report as one markdown table (rates in %, with their intervals), then the pairs."""
    from genmem.envs.stats import describe, format_interval

    def pct(rate: Rate | None) -> str:
        return "" if rate is None else format_interval(rate.rate, rate.ci)

    aligned = any(r.aligned for r in report.rows)
    tasks = any(r.tasks for r in report.rows)
    head = [
        "codebooks", "prefix", "entries", "leaf util. %", "DUI", "MSE/dim fit",
        "MSE/dim held-out", "cand. hit", "Hit@1", "Hit@5", "held-out Hit@1", "held-out Hit@5",
    ]  # fmt: skip
    if aligned:
        head += ["aligned Hit@1", "aligned Hit@5", "TF-IDF Hit@5", "aligned - TF-IDF",
                 "aligned reranked Hit@5", "TF-IDF reranked Hit@5", "aligned - TF-IDF reranked",
                 "quantizer reranked Hit@5"]  # fmt: skip
    if tasks:
        head += ["task score (sid)", "sid - none"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in report.rows:
        cells = [
            "x".join(map(str, r.sizes)), "yes" if r.prefix else "no", str(r.entries),
            f"{100 * r.leaf_utilization:.2f}", f"{r.dui:.3f}", f"{r.fit_mse_per_dim:.3e}",
            f"{r.heldout_mse_per_dim:.3e}", pct(r.candidate_hit), pct(r.hit_at_1),
            pct(r.hit_at_5), pct(r.heldout_hit_at_1), pct(r.heldout_hit_at_5),
        ]  # fmt: skip
        if aligned:
            a = r.aligned
            at5 = a.hit_at_5 if a else {}
            vs = a.vs_tfidf if a else {}
            cells += [
                pct(a and a.hit_at_1["sid"]), pct(at5.get("sid")), pct(at5.get("tfidf")),
                _diff(vs.get("sid - tfidf")), pct(at5.get("sid_reranked")),
                pct(at5.get("tfidf_reranked")), _diff(vs.get("sid_reranked - tfidf_reranked")),
                pct(at5.get("quantizer_reranked")),
            ]  # fmt: skip
        if tasks:
            t = r.tasks
            diff = t.vs_none if t else None
            cells += [pct(t and t.score) + (f" ({t.addresser})" if t else ""), _diff(diff)]
        lines.append("| " + " | ".join(cells) + " |")
    first = report.rows[0]
    lines += [
        "",
        f"{report.source} seed rows, {report.distill} entries; codebooks fitted on the first "
        f"{first.fit_n}, {first.heldout_n} held out; quantizer with {report.candidates} "
        f"candidates over {first.questions} questions ({first.heldout_questions} held out).",
    ]
    if aligned and first.aligned:
        lines.append(
            f"Aligned: one policy per bank, {first.aligned.steps} steps, scored on the "
            f"{first.aligned.heldout} questions its alignment held out (the same in every row)."
        )
    if tasks and first.tasks:
        lines.append(
            f"Tasks: {first.tasks.n} of {first.tasks.bench}; none scores "
            f"{pct(report.none_score)}; errored runs score 0."
        )
    for pair, diffs in report.paired.items():
        parts = [
            f"{name} {_diff(d)} (n={d.n}, {d.wins} wins, {d.losses} losses)"
            for name, d in diffs.items()
        ]
        lines.append(f"{pair}: " + "; ".join(parts))
    lines.append(describe(report.intervals))
    return "\n".join(lines)


def _diff(diff: PairedDiff | None) -> str:
    """A paired difference in points with its interval ("" for none)."""
    from genmem.envs.stats import format_interval

    return "" if diff is None else format_interval(diff.diff, diff.ci, signed=True)
