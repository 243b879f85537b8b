"""Benchmark: scoring a game turn's valid commands, packed as a token trie vs one row each.

Plays the walkthrough of the first N ``textworld-test`` games and, at every state on the way,
scores all valid commands against the ranking interactor's prompt with the default local model
twice in this process, the two layouts taking turns state by state:

- ``batched`` (the reference, the only layout before issue 38): one right-padded row per command
  over copies of the prompt's key/value cache;
- ``packed`` (the default): every command in one row laid out as a token trie, each token seeing
  the prompt and its own earlier tokens through a 4D attention mask.

Each turn is timed twice per layout: ``cold`` (the prefix cache emptied first: the whole turn,
prompt included) and ``warm`` (the same prompt again: the prompt comes from the cache, so
almost only the commands' pass is left). Prints medians, the ratios and how often both layouts
pick the same command::

    python bench/choice_scoring.py                 # 4 games, their valid commands
    python bench/choice_scoring.py --commands 30   # every turn topped up to 30 commands
    python bench/choice_scoring.py --games 8 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any


def _turns(games: int, commands: int) -> list[tuple[list[Any], list[str]]]:
    """(ranking prompt, commands) at every state along the walkthroughs.

    ``commands`` > 0 tops each state's valid commands up to that many with commands valid in the
    other states (a workload of that size: the extra ones are real game commands, but not valid
    there).
    """
    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.graph.ranked_actor import ranking_prompt

    env = open_bench("textworld-test", BenchOptions(games=max(games, 10)))
    states = []
    for task in env.tasks(games):
        env.start(task)
        played: list[str] = []
        for command in env.walkthrough(task):
            view = env.episode.view()
            if view["done"] or not view["commands"]:
                break
            states.append((task.query, view["observation"], list(view["commands"]), list(played)))
            env.episode.step(command)
            played.append(command)
        env.finish(task)
    pool = list(dict.fromkeys(c for *_, valid, _ in states for c in valid))
    turns = []
    for query, observation, valid, played in states:
        extra = [c for c in pool if c not in valid][: max(0, commands - len(valid))]
        options = valid + extra
        turns.append((ranking_prompt(query, observation, options, played, ""), options))
    return turns


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    import torch
    from tqdm.auto import tqdm

    from genmem.policies.chat_local import to_chat_messages
    from genmem.policies.choice_scoring import score_choices
    from genmem.policies.local import load_policy
    from genmem.policies.sid_tree import supports_tree

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=4, help="textworld-test games (default 4)")
    p.add_argument(
        "--commands",
        type=int,
        default=0,
        help="top every turn up to this many commands with other states' (default 0: as is)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.games < 1 or args.commands < 0:
        p.error("--games must be at least 1 and --commands at least 0")
    turns = _turns(args.games, args.commands)
    policy = load_policy(None)
    template = policy.tokenizer.apply_chat_template

    layouts = ("batched", "packed")
    score_choices(policy, "warm up", ["look", "go north"])  # first-call costs out of the timing
    times: dict[str, dict[str, list[float]]] = {lay: {"cold": [], "warm": []} for lay in layouts}
    same, diffs, commands = 0, [], []
    for n, (messages, options) in enumerate(tqdm(turns, desc="turns", disable=args.json)):
        prompt = template(to_chat_messages(messages), add_generation_prompt=True, tokenize=False)
        scores = {}
        for lay in layouts if n % 2 == 0 else layouts[::-1]:
            assert policy.prefixes is not None
            policy.prefixes.clear()
            started = time.perf_counter()
            scores[lay] = score_choices(policy, prompt, options, layout=lay)
            times[lay]["cold"].append(time.perf_counter() - started)
            started = time.perf_counter()
            score_choices(policy, prompt, options, layout=lay)
            times[lay]["warm"].append(time.perf_counter() - started)
        best = {lay: max(range(len(options)), key=scores[lay].__getitem__) for lay in layouts}
        same += best["batched"] == best["packed"]
        diffs.append(max(abs(a - b) for a, b in zip(*scores.values(), strict=True)))
        commands.append(len(options))
    median = {
        lay: {k: statistics.median(v) * 1000 for k, v in t.items()} for lay, t in times.items()
    }
    device = str(policy.model.device)
    keys = {
        "device": device,
        "device_name": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu",
        "torch_threads": torch.get_num_threads(),
        "load_average": os.getloadavg()[0],
        "model": policy.info.base_model,
        "packed_used": supports_tree(policy.runner),
        "games": args.games,
        "topped_up_to": args.commands,
        "turns": len(turns),
        "mean_commands": statistics.mean(commands),
        "max_commands": max(commands),
        "ref_ms": median["batched"],
        "fast_ms": median["packed"],
        "speedup": median["batched"]["cold"] / median["packed"]["cold"],
        "speedup_candidates": median["batched"]["warm"] / median["packed"]["warm"],
        "choice_agreement": same / len(turns),
        "max_score_diff": max(diffs),
    }
    if args.json:
        print(json.dumps(keys))
        return 0
    print(
        f"{len(turns)} turns of {args.games} games ({keys['mean_commands']:.1f} commands on "
        f"average, at most {keys['max_commands']}"
        + (f", topped up to {args.commands}" if args.commands else "")
        + f"), {keys['model']} on {device}, "
        f"{keys['torch_threads']} torch threads, load {keys['load_average']:.1f}"
    )
    print(f"{'layout':<9}{'cold ms':>10}{'warm ms':>10}")
    for lay in layouts:
        print(f"{lay:<9}{median[lay]['cold']:>10.1f}{median[lay]['warm']:>10.1f}")
    print(
        f"packed is {keys['speedup']:.2f}x faster per turn ({keys['speedup_candidates']:.2f}x on "
        f"the commands' pass); same best command in {keys['choice_agreement']:.0%} of turns, "
        f"largest score difference {keys['max_score_diff']:.1e}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
