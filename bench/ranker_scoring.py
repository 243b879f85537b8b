"""Benchmark: which scoring rule makes the ranker pick the winning command (teacher forcing).

Plays the walkthrough of the first N games of a bench (``cooking-train`` by default: settings are
chosen on training games, never on test games) and, at every state on the way, asks the default
local model for each offered command's log-probability after the ranking interactor's prompt
(the same prompt, offered commands and notes :class:`~genmem.graph.ranked_actor.RankedActor`
builds). Each rule ranks from the same numbers:

- ``mean``: log-probability per token (the rule before this bench);
- ``sum``: the whole command's log-probability;
- ``calibrated``: the sum minus the command's sum after the ranker's question with no state
  (one pass per distinct command, kept);
- ``calibrated-list``: the same, but the stateless prompt still lists the valid commands (one
  extra pass per turn; measured to see what the list alone explains).

With ``--teachers T`` (cooking benches), each rule is also measured with the action prior of a
procedure merged from T other training games (the games after the measured ones, never the
measured game itself) added at each ``--weights`` value
(:func:`~genmem.envs.cooking_experience.experience_prior`), and the prior alone.

A decision is right when the rule's first command is the walkthrough's next one. Prints each
rule's top-1 rate with a 95 % bootstrap interval over games (each game's rate is one value) and
each rule minus ``mean``, paired by game; also how often the right command is one of the
shortest (at most 3 tokens) and how each rule does on those::

    python bench/ranker_scoring.py                 # 20 cooking-train games
    python bench/ranker_scoring.py --games 40 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from typing import Any

RULES = ("mean", "sum", "calibrated", "calibrated-list")


def _argmax(scores: list[float]) -> int:
    return max(range(len(scores)), key=scores.__getitem__)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    import os

    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.envs.stats import mean_interval, paired_difference
    from genmem.graph.ranked_actor import offered_commands, ranking_prompt, stateless_prompt
    from genmem.policies.chat_local import ChatLocal
    from genmem.policies.choice_scoring import rank_scores

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", default="cooking-train", help="a game bench (default cooking-train)")
    p.add_argument("--games", type=int, default=20, help="games whose walkthroughs are read")
    p.add_argument("--seed", type=int, default=0, help="the game set's seed (default 0)")
    p.add_argument(
        "--teachers",
        type=int,
        default=5,
        help="training games whose procedures form "
        "the prior (cooking; 0: no prior arms; default 5)",
    )
    p.add_argument("--weights", default="0.5,1,2,5", help="prior weights (default 0.5,1,2,5)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    weights = [float(w) for w in args.weights.split(",") if w.strip()]
    if args.games < 1:
        p.error("--games must be at least 1")
    if args.bench.endswith("-test"):
        p.error("choose scoring on training or validation games, not on test games")
    cooking = args.bench.startswith("cooking") and args.teachers > 0
    n_load = args.games + (args.teachers if cooking and args.bench == "cooking-train" else 0)
    env = open_bench(args.bench, BenchOptions(games=n_load, seed=args.seed))
    prior_text = ""
    if cooking:
        from genmem.envs.cooking import CookingConfig, CookingEnvironment
        from genmem.envs.cooking_experience import (
            cooking_experience,
            cooking_seed_row,
            merge_procedures,
            parse_procedure,
        )

        teach = CookingEnvironment(CookingConfig(split="train", n_games=n_load, seed=args.seed))
        rows = (
            teach.games()[-args.teachers :]
            if args.bench == "cooking-train"
            else (teach.games()[: args.teachers])
        )
        folder = teach.config.games_dir()
        procs = [
            parse_procedure(cooking_experience(r["question"], r["answer"]))
            for r in (cooking_seed_row(g, folder / g.file) for g in rows)
        ]
        prior_text = merge_procedures(procs).render()
        arms = [f"{r}+prior*{w:g}" for r in ("mean", "sum") for w in weights] + ["prior"]
    else:
        arms = []
    chat = ChatLocal()
    stateless: dict[str, Any] = {}
    right: dict[str, dict[str, list[float]]] = {r: defaultdict(list) for r in (*RULES, *arms)}
    short_right: dict[str, list[float]] = defaultdict(list)
    decisions = short = 0
    started = time.perf_counter()
    from genmem.envs.cooking_experience import experience_prior

    for task in env.tasks(args.games):
        env.start(task)
        episode = env.episode
        tried: dict[str, set[str]] = {}
        result: dict[str, str] = {}
        played: list[str] = []
        for gold in env.walkthrough(task):
            view = episode.view()
            state = view["observation"]
            options = offered_commands(view["commands"], state, tried, result)
            if gold in options:
                prompt = ranking_prompt(
                    task.query, state, view["commands"], played, "", view["notes"]
                )
                given = chat.choice_logprobs(prompt, options)
                new = [c for c in options if c not in stateless]
                if new:
                    base = chat.choice_logprobs(stateless_prompt(), new)
                    stateless.update(zip(new, base, strict=True))
                listed = chat.choice_logprobs(stateless_prompt(view["commands"]), options)
                scores = {
                    "mean": rank_scores("mean", given),
                    "sum": rank_scores("sum", given),
                    "calibrated": rank_scores("calibrated", given, [stateless[c] for c in options]),
                    "calibrated-list": rank_scores("calibrated", given, listed),
                }
                if prior_text:
                    bonus = experience_prior(prior_text, options, view)
                    assert bonus is not None
                    for rule in ("mean", "sum"):
                        for w in weights:
                            scores[f"{rule}+prior*{w:g}"] = [
                                s + w * b for s, b in zip(scores[rule], bonus, strict=True)
                            ]
                    scores["prior"] = [b - 1e-6 * i for i, b in enumerate(bonus)]  # ties: first
                is_short = given[options.index(gold)].tokens <= 4  # 3 tokens + end of turn
                decisions += 1
                short += is_short
                for rule, s in scores.items():
                    hit = float(options[_argmax(s)] == gold)
                    right[rule][task.id].append(hit)
                    if is_short:
                        short_right[rule].append(hit)
            tried.setdefault(state, set()).add(gold)
            played.append(gold)
            episode.step(gold)
            result[gold] = episode.view()["observation"]
        env.finish(task)
        done = len(right["mean"])
        print(f"game {done}/{args.games}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    seconds = time.perf_counter() - started
    per_game = {r: {k: sum(v) / len(v) for k, v in right[r].items()} for r in (*RULES, *arms)}
    rows = {}
    for rule in (*RULES, *arms):
        est = mean_interval(per_game[rule].values())
        diff = paired_difference(per_game[rule], per_game["mean"]) if rule != "mean" else None
        flat = [h for v in right[rule].values() for h in v]
        rows[rule] = {
            "top1_per_game": est.mean if est else None,
            "ci": est.ci if est else None,
            "top1_all": sum(flat) / len(flat) if flat else None,
            "minus_mean": diff.diff if diff else None,
            "minus_mean_ci": diff.ci if diff else None,
            "short_top1": (
                sum(short_right[rule]) / len(short_right[rule]) if short_right[rule] else None
            ),
        }
    out = {
        "bench": args.bench,
        "games": args.games,
        "decisions": decisions,
        "short_decisions": short,
        "seconds": round(seconds, 1),
        "load": os.getloadavg()[0],
        "rules": rows,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"{args.bench}: {args.games} games, {decisions} decisions ({short} of them a command of "
        f"<= 3 tokens), {seconds:.0f} s, load {out['load']:.1f}"
    )
    print(f"{'rule':<16}{'top-1 (per game)':<26}{'minus mean, paired':<26}{'short cmds':<10}")
    for rule, r in rows.items():
        ci = r["ci"]
        top = f"{100 * r['top1_per_game']:.1f} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"
        if r["minus_mean"] is None:
            diff = "-"
        else:
            lo, hi = r["minus_mean_ci"]
            diff = f"{100 * r['minus_mean']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
        sh = "-" if r["short_top1"] is None else f"{100 * r['short_top1']:.0f}"
        print(f"{rule:<16}{top:<26}{diff:<26}{sh:<10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
