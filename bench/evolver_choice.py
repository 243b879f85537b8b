"""Benchmark: which rule MemEvolver's model should choose a writer's candidate by (``mean``,
``sum`` or ``calibrated`` log-probability of each label as its reply), judged by code on
training games.

Situations come from ``cooking-train`` games only. A slot holds a stored procedure: game i's
seed entry (``full``: its won walkthrough and losing plays) or what a play that stopped halfway
through game i leaves (``half``). A run of game i+1 gives the new procedure: its won walkthrough
(``won``), a play stopped halfway (``half``) or one that loses (``lost``). The template writer
builds the candidates (retain, replace, merge), and MemEvolver's real graph, prompts and the
default model choose (one bank per situation, the slot addressed directly; the model is asked
once and every rule is computed from the same log-probabilities). ``writer`` is the rule that
asks no model (merge, else retain: ``writer_pick``).

The criterion: each candidate's prior alone over the walkthroughs of other training games
(``--replay``, never a situation's game), counted as steps ranked first
(:func:`genmem.envs.cooking_experience.prior_ranks_first`). A pick is right when no candidate
ranks more. Reported per rule: right picks with a 95 % bootstrap interval over situations,
what it picked, and the paired difference against ``mean`` (the current default)::

    python bench/evolver_choice.py --games 12 --replay 8
    python bench/evolver_choice.py --games 4 --replay 4 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

RULES = ("mean", "sum", "calibrated", "writer")


class _Slot:
    """The addressing policy of a one-entry bank: always its slot (the address is not what is
    measured here; the choice is)."""

    def __init__(self, sid: str, spec: Any) -> None:
        self.sid, self.spec, self.addresser = sid, spec, "fixed"

    def generate(self, context: str, k: int = 1) -> list[Any]:
        from genmem.policies.types import SIDCandidate

        return [SIDCandidate(sid=self.sid, score=0.0)]

    def generate_batch(self, contexts: list[str], k: int = 1) -> list[list[Any]]:
        return [self.generate(c, k) for c in contexts]


def _trajectory(game_file: Path, intro: str, commands: list[str]) -> dict[str, Any]:
    """A StackPlanner trajectory of the interactor playing ``commands`` through the game tools."""
    from genmem.envs.textworld_env import GameEpisode, TextWorldGame, game_tools
    from genmem.graph.trajectory import StepRecord, Trajectory

    episode = GameEpisode(TextWorldGame(game_file), max_steps=50, tool_prefix="tw")
    reset, step = game_tools(lambda: episode, prefix="tw", game="cooking")
    calls = [(reset, {})] + [(step, {"command": c}) for c in commands]
    steps = []
    try:
        for tool, args in calls:
            text = tool.invoke({"type": "tool_call", "id": "c", "name": tool.name, "args": args})
            steps.append(
                StepRecord(
                    step=len(steps),
                    agent="interactor",
                    action="tool",
                    arguments={"tool": tool.name, "args": args},
                    observation=str(text.content),
                )
            )
            if episode.done or "*** You lost" in str(text.content):
                break
    finally:
        episode.close()
    return Trajectory(query=intro, steps=steps, answer="", status="finished").model_dump()


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    from genmem.envs.cooking import CookingConfig, load_cooking_games
    from genmem.envs.cooking_experience import (
        CookingExperienceError,
        cooking_experience,
        cooking_seed_row,
        cooking_writer,
        losing_variants,
        parse_procedure,
        prior_ranks_first,
        walkthrough_views,
    )
    from genmem.envs.stats import mean_interval, paired_difference
    from genmem.graph.evolver import EvolverConfig, build_evolver_graph
    from genmem.memory.sid import DEFAULT_SPEC, SID
    from genmem.memory.sqlite_store import SQLiteBankStore
    from genmem.policies.chat_local import ChatLocal
    from genmem.policies.choice_scoring import rank_scores
    from genmem.policies.experience_writer import writer_pick

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=12, help="situation games (default 12)")
    p.add_argument("--replay", type=int, default=8, help="games the criterion replays (8)")
    p.add_argument("--out", type=Path, help="write every situation's record here (JSONL)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.games < 2 or args.replay < 1:
        p.error("--games needs at least 2 and --replay at least 1")
    started = time.perf_counter()
    config = CookingConfig(split="train", n_games=max(48, args.games + args.replay))
    games = load_cooking_games(config)
    folder = config.games_dir()
    replay = [walkthrough_views(folder / r.file, r.walkthrough) for r in games[-args.replay :]]
    replay_steps = sum(len(v) for v in replay)

    def worth(payload: str) -> int:
        return sum(prior_ranks_first(parse_procedure(payload), views) for views in replay)

    logged: list[list[Any]] = []

    class Recording(ChatLocal):  # the default model; every label scoring is kept
        def choice_logprobs(self, messages: Any, choices: Any) -> Any:
            out = super().choice_logprobs(messages, choices)
            logged.append(list(out))
            return out

    chat = Recording()
    writer = cooking_writer()
    sid = str(SID((0, 0, 0, 0)))
    generator = _Slot(sid, DEFAULT_SPEC)
    graph = build_evolver_graph(
        chat,
        sid_generator=generator,
        config=EvolverConfig(writer=writer, choice_rule="calibrated", gate=None),
    ).compile()

    def half(record: Any) -> list[str]:
        return record.walkthrough[: max(3, len(record.walkthrough) // 2)]

    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="genmem-evolver-choice-") as tmp:
        for i in range(args.games):
            a, b = games[i], games[(i + 1) % args.games]
            fa, fb = folder / a.file, folder / b.file
            row = cooking_seed_row(a, fa)
            stored_by = {"full": cooking_experience(row["question"], row["answer"])}
            half_text = writer.distil(a.intro, _trajectory(fa, a.intro, half(a)), None)
            if half_text:
                stored_by["half"] = half_text
            lost = losing_variants(b.walkthrough)
            runs = {"won": b.walkthrough, "half": half(b), **({"lost": lost[0]} if lost else {})}
            for stored_kind, stored in stored_by.items():
                for run_kind in ("won", "half") if stored_kind == "full" else ("won", "lost"):
                    if run_kind not in runs:
                        continue
                    trajectory = _trajectory(fb, b.intro, runs[run_kind])
                    new = writer.distil(b.intro, trajectory, None)
                    if not new:
                        continue
                    candidates = writer.candidates(new, stored)
                    if len(candidates) < 2:
                        continue
                    try:
                        criterion = [worth(c.payload) for c in candidates]
                    except CookingExperienceError:
                        continue
                    bank = SQLiteBankStore(Path(tmp) / f"{i}-{stored_kind}-{run_kind}.db")
                    name = "choice"
                    bank.create_bank(name, spec=DEFAULT_SPEC, codebook_hash="0" * 64).insert(
                        SID((0, 0, 0, 0)), stored
                    )
                    url = f"sqlite:///{tmp}/{i}-{stored_kind}-{run_kind}.db?bank={name}"
                    logged.clear()
                    outcome = {"won": "success", "lost": "failure"}.get(run_kind)
                    out = graph.invoke(
                        {"query": b.intro, "trajectory": trajectory, "outcome": outcome},
                        context={"bank_url": url},
                    )
                    labels = [c.label for c in candidates]
                    if out["write_choice"] is None or len(logged) != 2:
                        raise RuntimeError(f"situation {i} {stored_kind}/{run_kind}: no choice")
                    base, given = logged  # the stateless request is scored first
                    picks = {}
                    for rule in RULES[:3]:
                        scores = rank_scores(rule, given, base if rule == "calibrated" else None)
                        picks[rule] = labels[max(range(len(labels)), key=lambda k: scores[k])]
                    picks["writer"] = labels[writer_pick(candidates)]  # no model
                    best = max(criterion)
                    records.append(
                        {
                            "game": i,
                            "stored": stored_kind,
                            "run": run_kind,
                            "labels": labels,
                            "criterion": dict(zip(labels, criterion, strict=True)),
                            "right": [
                                lab for lab, c in zip(labels, criterion, strict=True) if c == best
                            ],
                            "logprob": {lab: g.total for lab, g in zip(labels, given, strict=True)},
                            "stateless": {
                                lab: g.total for lab, g in zip(labels, base, strict=True)
                            },
                            "tokens": {lab: g.tokens for lab, g in zip(labels, given, strict=True)},
                            "picks": picks,
                        }
                    )
                    if args.out:
                        with args.out.open("a") as f:
                            f.write(json.dumps(records[-1]) + "\n")
    n = len(records)
    report: dict[str, Any] = {
        "situations": n,
        "games": args.games,
        "replay_games": args.replay,
        "replay_steps": replay_steps,
        "seconds": round(time.perf_counter() - started, 1),
        "right_labels": dict(Counter(lab for r in records for lab in r["right"])),
        "rules": {},
    }
    if n == 0:
        print(json.dumps(report) if args.json else "no situation with two candidates")
        return 1
    right = {  # situation -> 1 when the rule's pick is among the right candidates
        rule: {k: float(r["picks"][rule] in r["right"]) for k, r in enumerate(records)}
        for rule in RULES
    }
    for rule in RULES:
        share = mean_interval(right[rule].values())
        paired = paired_difference(right[rule], right["mean"])
        assert share is not None and paired is not None  # n > 0
        report["rules"][rule] = {
            "right": int(sum(right[rule].values())),
            "share": round(share.mean, 3),
            "ci95": [round(share.ci[0], 3), round(share.ci[1], 3)],
            "minus_mean": round(paired.diff, 3),
            "minus_mean_ci95": [round(paired.ci[0], 3), round(paired.ci[1], 3)],
            "picked": dict(Counter(r["picks"][rule] for r in records)),
        }
    always = {
        lab: sum(lab in r["right"] for r in records) for lab in ("retain", "replace", "merge")
    }
    report["always"] = always
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"{n} situations from {args.games} cooking-train games; criterion: steps ranked first by "
        f"the prior alone over {args.replay} other games' walkthroughs ({replay_steps} steps); "
        f"{report['seconds']} s"
    )
    print(f"right labels (ties: several): {report['right_labels']}")
    print(f"a fixed label is right: {always}")
    for rule, r in report["rules"].items():
        print(
            f"{rule:10s} right {r['right']}/{n} ({r['share']:.0%}, 95% {r['ci95'][0]:.0%}-"
            f"{r['ci95'][1]:.0%}); minus mean {r['minus_mean']:+.0%} "
            f"[{r['minus_mean_ci95'][0]:+.0%}, {r['minus_mean_ci95'][1]:+.0%}]; "
            f"picked {r['picked']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
