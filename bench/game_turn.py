"""Benchmark: one game turn by ranking the valid commands against one written tool call.

For the opening state of each of the first N ``textworld-test`` games, the default local model
takes one turn twice in this process: the ranking interactor's (every valid command scored as the
whole reply, :mod:`genmem.policies.choice_scoring`) and the tool-calling interactor's (one reply
with the game tools bound, read as a Hermes tool call). Prints seconds per turn, their ratio, how
often each turn names a valid command, and how often it is the walkthrough's first command::

    python bench/game_turn.py              # 10 games
    python bench/game_turn.py --games 20 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print a table (or one JSON object with --json)."""
    from langchain_core.messages import HumanMessage, SystemMessage

    from genmem.envs.benches import BenchOptions, open_bench
    from genmem.graph.ranked_actor import ranking_prompt
    from genmem.policies.chat_local import ChatLocal
    from genmem.policies.prompts import SUBAGENT_PROMPTS

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=10, help="textworld-test games (default 10)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.games < 1:
        p.error("--games must be at least 1")
    env = open_bench("textworld-test", BenchOptions(games=max(args.games, 10)))
    chat = ChatLocal(max_new_tokens=64)
    reset, step = env.tools().interactor
    writer = chat.bind_tools([reset, step])
    rows = []
    for task in env.tasks(args.games):
        env.start(task)
        view = env.episode.view()
        commands = view["commands"]
        first = env.walkthrough(task)[0]
        started = time.perf_counter()
        prompt = ranking_prompt(task.query, view["observation"], commands, [], "")
        scores = chat.score_choices(prompt, commands)
        ranked = commands[max(range(len(commands)), key=scores.__getitem__)]
        rank_s = time.perf_counter() - started
        started = time.perf_counter()
        reply = writer.invoke(
            [SystemMessage(SUBAGENT_PROMPTS["interactor"]), HumanMessage(task.query)]
        )
        write_s = time.perf_counter() - started
        calls = [c for c in reply.tool_calls if c["name"] == step.name]
        written = str(calls[0]["args"].get("command", "")) if calls else ""
        env.finish(task)
        rows.append(
            {
                "game": task.id,
                "commands": len(commands),
                "rank_s": rank_s,
                "write_s": write_s,
                "rank_valid": ranked in commands,
                "write_valid": written in commands,
                "rank_first": ranked == first,
                "write_first": written == first,
            }
        )
    n = len(rows)
    keys = {
        "games": n,
        "rank_s_per_turn": statistics.median(r["rank_s"] for r in rows),
        "write_s_per_turn": statistics.median(r["write_s"] for r in rows),
        "rank_valid": sum(r["rank_valid"] for r in rows) / n,
        "write_valid": sum(r["write_valid"] for r in rows) / n,
        "rank_first_step": sum(r["rank_first"] for r in rows) / n,
        "write_first_step": sum(r["write_first"] for r in rows) / n,
    }
    keys["speedup"] = keys["write_s_per_turn"] / keys["rank_s_per_turn"]
    if args.json:
        print(json.dumps(keys | {"rows": rows}))
        return 0
    print(f"{n} opening turns, default model (medians)")
    print(f"{'turn':<10}{'s/turn':>8}{'valid':>8}{'walkthrough step 1':>20}")
    for kind in ("rank", "write"):
        print(
            f"{kind:<10}{keys[kind + '_s_per_turn']:>8.2f}{keys[kind + '_valid']:>8.0%}"
            f"{keys[kind + '_first_step']:>20.0%}"
        )
    print(f"ranking is {keys['speedup']:.1f}x faster per turn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
